//! `elastree shell --index dist|dist-baseline --cluster ADDR` through the built binary, on a
//! local Redis Cluster on free ports (stopped when the test ends, also on failure), and the
//! errors for a missing, misplaced or unreachable `--cluster`. Needs `redis-server` and
//! `redis-cli` on PATH.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use elastree_dist::local::{ClusterSpec, LocalCluster};

mod common;
use common::run;

/// Runs a shell session, checks it succeeded with nothing on stderr, returns stdout.
fn session(args: &[&str], script: &str) -> String {
    let mut argv = vec!["shell"];
    argv.extend_from_slice(args);
    let out = run(&argv, script.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{argv:?}: {:?}\n{stderr}", out.status);
    assert!(stderr.is_empty(), "{argv:?}: unexpected stderr: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

fn lines(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A local cluster of 3 masters without replicas, removed when dropped.
fn cluster() -> LocalCluster {
    let mut cluster = LocalCluster::up(&ClusterSpec {
        masters: 3,
        replicas: 0,
        ..ClusterSpec::default()
    })
    .expect("start a local cluster (needs redis-server and redis-cli)");
    cluster.set_remove_on_drop(true);
    cluster
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
    let cluster = cluster();
    let seed = cluster.seed();
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
    // A port nothing listens on: bind one, then let it go.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    for kind in ["dist", "dist-baseline"] {
        let started = Instant::now();
        let out = run(&["shell", "--index", kind, "--cluster", &addr], b"get a\n");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{kind}: {stderr}");
        assert!(
            stderr.contains("cannot open") && stderr.contains(&addr),
            "{kind}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(out.stdout.is_empty());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{kind}: took {:?}",
            started.elapsed()
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
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn cluster_options_are_checked_against_the_kind() {
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
