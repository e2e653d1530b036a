//! A cluster that is gone: operations and new connections fail with the typed error once
//! their deadline has passed, and never hang.
//!
//! A test binary of its own: once the cluster is stopped its ports are free, and a cluster
//! another test of the same process started on them would answer the client. Here no other
//! test runs in the process, so none can.

mod cluster;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use elastree::Index;
use elastree_dist::{unavailable, DistError, DistIndex, DistOptions, RouterOptions};
use elastree_testkit::time_limit;

/// For a failure message: which of `ports` accept connections again (another process took
/// them, and the client may have reached it).
fn taken_again(ports: &[u16]) -> String {
    let taken: Vec<u16> = ports
        .iter()
        .copied()
        .filter(|&p| {
            TcpStream::connect_timeout(&([127, 0, 0, 1], p).into(), Duration::from_secs(1)).is_ok()
        })
        .collect();
    if taken.is_empty() {
        "no port of the stopped cluster accepts connections".into()
    } else {
        format!("ports {taken:?} of the stopped cluster accept connections again: another process took them")
    }
}

#[test]
fn a_stopped_cluster_gives_the_typed_error_within_the_timeout() {
    let _limit = time_limit();
    let cluster = cluster::start(3, 0);
    let seeds = cluster::seeds(&cluster);
    let ports = cluster.ports();
    let name = cluster::unique_name("down");
    let normal = cluster::options(&name, true, 16);
    // The client under test gives up after `timeout`; what it does before the stop has the
    // normal deadline, so a busy machine cannot fail that part.
    let timeout = Duration::from_secs(3);
    let options = DistOptions {
        router: RouterOptions {
            op_timeout: timeout,
            ..normal.router.clone()
        },
        ..normal.clone()
    };
    let setup = DistIndex::connect(&seeds, normal)
        .unwrap_or_else(|e| panic!("connect to index {name}: {e}"));
    setup
        .insert(b"before", 1)
        .unwrap_or_else(|e| panic!("insert of key \"before\": {e}"));
    drop(setup);
    // Its own deadline is short: on a busy machine its setup may time out, so that is
    // retried (the cluster is up and well).
    let index = cluster::retried("connecting the client under test", || {
        DistIndex::connect(&seeds, options.clone())
    });
    // It has connections to the cluster in its pool when the cluster goes.
    let before = cluster::retried("get of key \"before\" before the stop", || {
        index.get(b"before")
    });
    assert_eq!(before, Some(1), "get of key \"before\" before the stop");
    cluster
        .down_with(true)
        .unwrap_or_else(|e| panic!("stopping the cluster on ports {ports:?}: {e}"));
    // Not before the deadline (it retried), and soon after it, whatever the schedule: a
    // hang on a dead node never ends.
    let bound = timeout + cluster::PAST_DEADLINE;
    for what in ["insert of key \"after\"", "get of key \"before\""] {
        let started = Instant::now();
        let result = if what.starts_with("insert") {
            index.insert(b"after", 2).map(|_| ())
        } else {
            index.get(b"before").map(|_| ())
        };
        let took = started.elapsed();
        assert!(
            result.as_ref().is_err_and(|e| unavailable(e).is_some()),
            "{what} on the stopped cluster gave {result:?} after {took:?}, expected \
             Unavailable; {}",
            taken_again(&ports)
        );
        assert!(
            took >= timeout,
            "{what} on the stopped cluster retried until its deadline of {timeout:?}: it gave \
             up after {took:?}"
        );
        assert!(
            took < bound,
            "{what} on the stopped cluster returned the typed error within its deadline \
             and {:?} more = {bound:?}: it took {took:?}",
            cluster::PAST_DEADLINE
        );
    }
    let started = Instant::now();
    let refused = DistIndex::connect(&seeds, options);
    let took = started.elapsed();
    assert!(
        matches!(refused, Err(DistError::Unavailable(_))),
        "connect to the stopped cluster gave {refused:?} after {took:?}, expected Unavailable; {}",
        taken_again(&ports)
    );
    assert!(
        took >= timeout,
        "connect to the stopped cluster retried until its deadline of {timeout:?}: it gave up \
         after {took:?}"
    );
    assert!(
        took < bound,
        "connect to the stopped cluster returned the typed error within its deadline and {:?} \
         more = {bound:?}: it took {took:?}",
        cluster::PAST_DEADLINE
    );
}
