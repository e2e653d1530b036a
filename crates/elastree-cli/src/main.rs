//! The `elastree` binary: parses the command line and hands over to [`elastree_cli::cli`].

use std::process::ExitCode;

use clap::Parser;
use elastree_cli::cli::{run, Cli};

fn main() -> ExitCode {
    run(Cli::parse())
}
