//! `elastree shell --index dist|dist-baseline --cluster ADDR` through the built binary, on a
//! local Redis Cluster on free ports (this test binary's shared cluster, removed when the
//! process ends, also on failure), and the errors for a missing, misplaced or unreachable
//! `--cluster`. Needs `redis-server` and `redis-cli` on PATH.

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use elastree_testkit::{cluster, time_limit};

mod common;
use common::run;

/// Runs a shell session, checks it succeeded with nothing on stderr, returns stdout.
fn session(args: &[&str], script: &str) -> String {
    let mut argv = vec!["shell"];
    argv.extend_from_slice(args);
    let out = run(&argv, script.as_bytes());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{argv:?}: {:?}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}",
        out.status
    );
    assert!(stderr.is_empty(), "{argv:?}: unexpected stderr: {stderr}");
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

fn lines(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

const SCRIPT: &str = "\
put apple 1
put banana 2
put cherry 3
put apple 4
get apple
get durian
scan b 5
rscan z 2
range apple cherry 10
del banana
del banana
len
check
";

fn expected() -> String {
    lines(&[
        "OK",
        "OK",
        "OK",
        "OK 1",
        "4",
        "NONE",
        "62616e616e61 2",
        "636865727279 3",
        "END",
        "636865727279 3",
        "62616e616e61 2",
        "END",
        "6170706c65 4",
        "62616e616e61 2",
        "END",
        "2",
        "NONE",
        "2",
        "OK",
    ])
}

#[test]
fn put_get_scan_del_on_both_distributed_kinds() {
    let _limit = time_limit();
    // Every index here has a name of this process's own, so the shared cluster is enough.
    let seed = cluster::shared().seed();
    for kind in ["dist", "dist-baseline"] {
        let name = format!("shelltest-{kind}-{}", std::process::id());
        let args = ["--index", kind, "--cluster", &seed, "--name", &name];
        assert_eq!(session(&args, SCRIPT), expected(), "{kind}");
        // A second session opens the same index and finds what the first left.
        assert_eq!(
            session(&args, "get apple\nget banana\nlen\n"),
            lines(&["4", "NONE", "2"]),
            "{kind}"
        );
    }
    // A non-unique distributed index keeps every tid of a key.
    let name = format!("shelltest-nonunique-{}", std::process::id());
    let args = [
        "--index",
        "dist",
        "--cluster",
        &seed,
        "--name",
        &name,
        "--non-unique",
        "--max-key-len",
        "8",
    ];
    assert_eq!(
        session(&args, "put k 5\nput k 2\nget k\ndel k 5\nget k\n"),
        lines(&["OK", "OK", "2 5", "5", "2"])
    );
    let out = session(&args, "put waytoolongkey 1\n");
    assert!(out.starts_with("ERR "), "{out}");
}

#[test]
fn an_unreachable_cluster_is_a_clear_error_within_seconds() {
    let _limit = time_limit();
    // A port nothing listens on and nothing else can take while the test runs: the local
    // end of an open connection (bound, not listening, so a connection to it is refused).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let held = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let addr = held.local_addr().unwrap().to_string();
    // The operation timeout is far longer than the bound on the whole run below: a shell
    // that retried until it instead of checking the address first cannot pass, however busy
    // the machine (starting the binary is inside the bound).
    let op_timeout = Duration::from_secs(120);
    let bound = op_timeout / 2;
    let timeout = op_timeout.as_secs().to_string();
    for kind in ["dist", "dist-baseline"] {
        let started = Instant::now();
        let out = run(
            &[
                "shell",
                "--index",
                kind,
                "--cluster",
                &addr,
                "--timeout",
                &timeout,
            ],
            b"get a\n",
        );
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let output = format!("--- stdout:\n{stdout}\n--- stderr:\n{stderr}");
        assert_eq!(out.status.code(), Some(2), "{kind}: {output}");
        assert!(
            stderr.contains("cannot open") && stderr.contains(&addr),
            "{kind}: {output}"
        );
        assert!(!stderr.contains("panicked"), "{kind}: {output}");
        assert!(out.stdout.is_empty(), "{kind}: {output}");
        assert!(
            took < bound,
            "{kind}: the refusal took {took:?} (operation timeout {op_timeout:?})"
        );
    }
    let out = run(
        &[
            "shell",
            "--index",
            "dist",
            "--cluster",
            "no-such-host.invalid:1",
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "no-such-host.invalid:1: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn cluster_options_are_checked_against_the_kind() {
    let _limit = time_limit();
    let cases: &[(&[&str], &str)] = &[
        (&["--index", "dist"], "needs --cluster"),
        (&["--index", "dist-baseline"], "needs --cluster"),
        (
            &["--index", "btree", "--cluster", "127.0.0.1:1"],
            "only for the distributed",
        ),
        (&["--name", "x"], "only for the distributed"),
        (
            &[
                "--index",
                "dist",
                "--cluster",
                "127.0.0.1:1",
                "--budget",
                "1M",
            ],
            "does not apply",
        ),
        (
            &[
                "--index",
                "dist",
                "--cluster",
                "127.0.0.1:1",
                "--timeout",
                "0",
            ],
            "--timeout",
        ),
    ];
    for (args, message) in cases {
        let mut argv = vec!["shell"];
        argv.extend_from_slice(args);
        let out = run(&argv, b"");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {stderr}");
        assert!(stderr.contains(message), "{argv:?}: {stderr}");
    }
}
