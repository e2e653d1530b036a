//! Child processes with a deadline: a test that drives a binary (the shell, the CLI,
//! `redis-cli`) must fail with what the child printed, not hang, when the child never ends.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long [`output`] lets a child run: far above what any of the tests' children take.
pub const CHILD_LIMIT: Duration = Duration::from_secs(300);

/// Runs `command` with `input` on stdin and returns its exit status and output, killing it
/// and panicking with its command line and what it printed if it runs longer than
/// [`CHILD_LIMIT`].
pub fn output(command: &mut Command, input: &[u8]) -> Output {
    output_within(command, input, CHILD_LIMIT)
}

/// [`output`] with a limit of `limit`.
pub fn output_within(command: &mut Command, input: &[u8], limit: Duration) -> Output {
    let shown = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    // Feed stdin and drain stdout and stderr on their own threads, so a large script cannot
    // deadlock against a full pipe. The child may stop reading early (quit): ignore a
    // broken pipe.
    let feeder = thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Err(e) => panic!("waiting for {shown}: {e}"),
        }
    };
    // A grandchild that kept the pipes open must not hang the test either: give the drains
    // half a minute after the child is gone (they end at once when nothing holds the pipes).
    let drained = Instant::now() + Duration::from_secs(30);
    while !(feeder.is_finished() && stdout.is_finished() && stderr.is_finished())
        && Instant::now() < drained
    {
        thread::sleep(Duration::from_millis(5));
    }
    let joined = |h: thread::JoinHandle<Vec<u8>>| {
        if h.is_finished() {
            h.join().unwrap_or_default()
        } else {
            b"<the pipe is still held open by another process>".to_vec()
        }
    };
    let (stdout, stderr) = (joined(stdout), joined(stderr));
    match status {
        Some(status) => Output {
            status,
            stdout,
            stderr,
        },
        None => panic!(
            "{shown} did not finish within {limit:?} and was killed\n--- stdout (last 2000 \
             bytes):\n{}\n--- stderr (last 2000 bytes):\n{}",
            tail(&stdout),
            tail(&stderr)
        ),
    }
}

/// The last 2000 bytes of `bytes`, as text.
fn tail(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(2000)..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_of_a_quick_child() {
        let out = output(Command::new("sh").args(["-c", "cat; echo done >&2"]), b"hi");
        assert!(out.status.success());
        assert_eq!(out.stdout, b"hi");
        assert_eq!(out.stderr, b"done\n");
    }

    #[test]
    fn a_child_past_its_limit_is_killed_and_named() {
        let outcome = std::panic::catch_unwind(|| {
            output_within(
                Command::new("sh").args(["-c", "exec sleep 60"]),
                b"",
                Duration::from_millis(200),
            )
        });
        let message = *outcome
            .expect_err("the child outlives its limit")
            .downcast::<String>()
            .expect("a formatted panic message");
        assert!(
            message.contains("sleep 60") && message.contains("did not finish within 200ms"),
            "{message}"
        );
    }
}
