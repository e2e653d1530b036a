//! The `elastree` command-line tool, as a library so that its pieces can be tested without
//! spawning the binary.
//!
//! * [`cli`]: the command-line arguments (clap) and the dispatch of each subcommand
//!   (`shell`, and `bench` and `repro` from elastree-bench);
//! * [`shell`]: the line protocol of `elastree shell`;
//! * [`cluster`]: `elastree cluster`, a local Redis Cluster for the distributed index.

pub mod cli;
pub mod cluster;
pub mod kind;
pub mod shell;
