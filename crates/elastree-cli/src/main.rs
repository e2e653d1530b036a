//! The `elastree` binary: parses the command line and hands over to [`elastree_cli::cli`].
//!
//! The counting allocator of elastree-bench is this binary's global allocator, so that
//! `elastree bench` and `elastree repro` can report the bytes per key an index allocates. It
//! forwards every call to the system allocator and only adds two relaxed atomic counters.

use std::process::ExitCode;

use clap::Parser;
use elastree_bench::alloc::CountingAlloc;
use elastree_cli::cli::{run, Cli};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn main() -> ExitCode {
    run(Cli::parse())
}
