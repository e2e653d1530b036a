//! Helpers shared by the tests that drive the built `elastree` binary.

use std::process::{Command, Output};

/// Runs `elastree ARGS` with `input` on stdin and returns what it did. A run that does not
/// end within [`elastree_testkit::process::CHILD_LIMIT`] is killed and fails the test with
/// its command line and output.
pub fn run(args: &[&str], input: &[u8]) -> Output {
    elastree_testkit::process::output(
        Command::new(env!("CARGO_BIN_EXE_elastree")).args(args),
        input,
    )
}
