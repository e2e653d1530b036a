//! Asking one node of a local cluster: its CLUSTER NODES view and CLUSTER INFO state,
//! over a connection with connect and response timeouts.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::DistError;

/// How long to wait for a TCP connection to a node (a local node answers in microseconds;
/// a dead one refuses at once, a stopped one times out here).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);
/// How long to wait for a node's reply to one command.
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_millis(2000);

/// Which node id owns each slot range (inclusive), as one node sees it.
pub(super) type SlotOwners = BTreeMap<(u16, u16), String>;

/// One line of CLUSTER NODES.
#[derive(Debug, Clone)]
pub(super) struct ViewEntry {
    pub(super) id: String,
    pub(super) port: u16,
    pub(super) myself: bool,
    pub(super) is_master: bool,
    /// Flagged `fail` or `fail?` by the viewing node.
    pub(super) failed: bool,
    pub(super) handshake: bool,
    /// For a replica, its master's id.
    pub(super) master: Option<String>,
    /// Owned slot ranges, inclusive.
    pub(super) ranges: Vec<(u16, u16)>,
    pub(super) slots: usize,
}

/// Parses CLUSTER NODES: `<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent>
/// <pong-recv> <config-epoch> <link-state> <slot>...`, where a slot is `N`, `A-B`, or a
/// bracketed migration note (skipped).
pub(super) fn parse_nodes(text: &str) -> Vec<ViewEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            continue;
        }
        let port = fields[1]
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or(0);
        let flags: Vec<&str> = fields[2].split(',').collect();
        let ranges: Vec<(u16, u16)> = fields[8..]
            .iter()
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                None => s.parse().ok().map(|a| (a, a)),
            })
            .collect();
        let slots = ranges.iter().map(|&(a, b)| usize::from(b - a) + 1).sum();
        out.push(ViewEntry {
            id: fields[0].to_string(),
            port,
            myself: flags.contains(&"myself"),
            is_master: flags.contains(&"master"),
            failed: flags.iter().any(|f| *f == "fail" || *f == "fail?"),
            handshake: flags.contains(&"handshake") || flags.contains(&"noaddr"),
            master: (fields[3] != "-").then(|| fields[3].to_string()),
            ranges,
            slots,
        });
    }
    out
}

/// The value of `name:` in INFO output.
pub(super) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim)
    })
}

/// A node's `cluster_state` and its CLUSTER NODES view.
pub(super) fn query_node(port: u16) -> Result<(String, Vec<ViewEntry>), DistError> {
    let mut con = connect(port)?;
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut con)
        .map_err(|e| redis_error(port, e))?;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut con)
        .map_err(|e| redis_error(port, e))?;
    let state = info_field(&info, "cluster_state")
        .unwrap_or("unknown")
        .to_string();
    Ok((state, parse_nodes(&nodes)))
}

/// Runs one command on the node at `port`, with the connect and response timeouts.
pub(super) fn command<T: redis::FromRedisValue>(
    port: u16,
    cmd: &redis::Cmd,
) -> Result<T, DistError> {
    let mut con = connect(port)?;
    cmd.query(&mut con).map_err(|e| redis_error(port, e))
}

/// A connection to the node at `port` with the connect and response timeouts set.
pub(super) fn connect(port: u16) -> Result<redis::Connection, DistError> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .map_err(|e| redis_error(port, e))?;
    let con = client
        .get_connection_with_timeout(CONNECT_TIMEOUT)
        .map_err(|e| DistError::Unavailable(format!("node 127.0.0.1:{port}: {e}")))?;
    con.set_read_timeout(Some(RESPONSE_TIMEOUT))
        .and_then(|()| con.set_write_timeout(Some(RESPONSE_TIMEOUT)))
        .map_err(|e| redis_error(port, e))?;
    Ok(con)
}

pub(super) fn redis_error(port: u16, e: redis::RedisError) -> DistError {
    if e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        DistError::Unavailable(format!("node 127.0.0.1:{port}: {e}"))
    } else {
        DistError::Redis(format!("node 127.0.0.1:{port}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes() {
        let text = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [5461->-b2]
b2 127.0.0.1:7001@17001,host master - 0 0 2 connected 5461-10922 16000
c3 127.0.0.1:7003@17003 slave a1 0 0 1 connected
d4 127.0.0.1:7004@17004 master,fail - 0 0 3 disconnected
";
        let v = parse_nodes(text);
        assert_eq!(v.len(), 4);
        assert!(v[0].myself && v[0].is_master);
        assert_eq!((v[0].port, v[0].slots), (7000, 5461));
        assert_eq!(v[1].ranges, vec![(5461, 10922), (16000, 16000)]);
        assert_eq!(v[1].slots, 5463);
        assert_eq!(v[2].master.as_deref(), Some("a1"));
        assert!(!v[2].is_master);
        assert!(v[3].failed && v[3].slots == 0);
        assert_eq!(
            info_field("# Cluster\r\ncluster_state:ok\r\n", "cluster_state"),
            Some("ok")
        );
    }
}
