//! `elastree-bench`: measures elastree's index kinds and the peer indexes side by side. The
//! same run is `elastree bench` (crates/elastree-cli); both hand over to
//! [`elastree_bench::cli::run`].
//!
//! ```text
//! cargo run --release -p elastree-bench -- --index btree,btreemap,congee --keys rand64 \
//!     --n 10M --workload load,lookup,scan,delete --threads 1,2 --json out.jsonl
//! ```

use std::process::ExitCode;

use clap::Parser;

use elastree_bench::alloc::CountingAlloc;
use elastree_bench::cli::{run, BenchArgs};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Measures elastree's index kinds and peer indexes side by side: throughput of load, lookup,
/// scan and delete on 1..N threads, and memory per key.
#[derive(Debug, Parser)]
#[command(name = "elastree-bench", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn main() -> ExitCode {
    run(&Cli::parse().args, "elastree-bench")
}
