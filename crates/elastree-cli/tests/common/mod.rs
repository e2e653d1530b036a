//! Helpers shared by the tests that drive the built `elastree` binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `elastree ARGS` with `input` on stdin and returns what it did.
pub fn run(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_elastree"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn elastree");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // Feed stdin from another thread so a large script cannot deadlock against stdout.
    let feeder = std::thread::spawn(move || {
        // The shell may legitimately stop reading early (quit); ignore a broken pipe.
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for elastree");
    feeder.join().unwrap();
    output
}
