//! `elastree cluster`: a local Redis Cluster for the distributed index, managed across
//! invocations through the state file in its directory (see [`elastree_dist::local`]).
//!
//! Exit codes: 0 on success, 2 when `redis-server` or `redis-cli` is missing or the
//! arguments are invalid, 1 for every other failure (a node that does not start, a cluster
//! that does not become healthy in time, no cluster in the directory).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use elastree_dist::error::DistError;
use elastree_dist::local::{ClusterSpec, LocalCluster};
use elastree_dist::{DistIndex, RouterOptions};

use crate::cli::EXIT_BAD_CONFIG;

/// The directory `elastree cluster` uses when `--dir` is not given.
pub const DEFAULT_DIR: &str = "elastree-cluster";

/// The first node's port when `--base-port` is not given (the usual Redis Cluster port).
pub const DEFAULT_BASE_PORT: u16 = 7000;

/// Arguments of `elastree cluster`.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// What to do with the local cluster.
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// The `elastree cluster` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum ClusterCommand {
    /// Start a local Redis Cluster (redis-server processes on 127.0.0.1) and wait until it
    /// is healthy; prints how to connect.
    Up(UpArgs),
    /// Print every node's port, PID, liveness, role, slots and master, and the cluster
    /// state.
    Status(DirArg),
    /// Start one more node, add it as a master and move a fair share of the slots (and
    /// their keys) to it; then rebalance every elastree index on the cluster (cut-off
    /// adapted, sub-trees spread over the masters).
    AddMaster(DirArg),
    /// Kill one node with SIGKILL (a crash) to try failover.
    Kill(KillArgs),
    /// Stop every node the cluster started (SIGTERM, then SIGKILL after 2 s).
    Down(DownArgs),
}

/// The cluster's directory, shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct DirArg {
    /// The cluster's directory: node configurations, data and logs, and the state file
    /// cluster.json that the other subcommands read.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
}

/// Arguments of `elastree cluster up`.
#[derive(Debug, Clone, Args)]
pub struct UpArgs {
    /// Masters that own hash slots (at least 3).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub masters: usize,

    /// Replicas per master (0 to 2); a replica takes over when its master fails.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub replicas: usize,

    /// The first node's port; the others follow consecutively (each also uses its port +
    /// 10000 for the cluster bus).
    #[arg(long, default_value_t = DEFAULT_BASE_PORT, value_name = "PORT")]
    pub base_port: u16,

    /// How long a node may be unreachable before its replica takes over, in milliseconds.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub node_timeout_ms: u64,

    /// How long to wait for the cluster to become healthy, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub wait: u64,

    /// The cluster's directory.
    #[command(flatten)]
    pub dir: DirArg,
}

/// Arguments of `elastree cluster kill`.
#[derive(Debug, Clone, Args)]
pub struct KillArgs {
    /// The port of the node to kill.
    #[arg(value_name = "PORT")]
    pub port: u16,

    /// After the kill, wait up to this many seconds for a replica to take over and the
    /// cluster to be healthy again (0: do not wait).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    pub wait: u64,

    /// The cluster's directory.
    #[command(flatten)]
    pub dir: DirArg,
}

/// Arguments of `elastree cluster down`.
#[derive(Debug, Clone, Args)]
pub struct DownArgs {
    /// Also delete the cluster's directory (data, logs); without it they are kept.
    #[arg(long)]
    pub purge: bool,

    /// The cluster's directory.
    #[command(flatten)]
    pub dir: DirArg,
}

/// Runs one `elastree cluster` subcommand; prints errors on stderr.
pub fn run(args: &ClusterArgs) -> ExitCode {
    let result = match &args.command {
        ClusterCommand::Up(a) => up(a),
        ClusterCommand::Status(a) => status(a),
        ClusterCommand::AddMaster(a) => add_master(a),
        ClusterCommand::Kill(a) => kill(a),
        ClusterCommand::Down(a) => down(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("elastree cluster: {err}");
            ExitCode::from(exit_code(&err))
        }
    }
}

/// 2 for a missing program or invalid arguments, 1 for everything else.
fn exit_code(err: &DistError) -> u8 {
    match err {
        DistError::Missing { .. } | DistError::Invalid(_) => EXIT_BAD_CONFIG,
        _ => 1,
    }
}

fn up(args: &UpArgs) -> Result<(), DistError> {
    let spec = ClusterSpec {
        masters: args.masters,
        replicas: args.replicas,
        dir: args.dir.dir.clone(),
        base_port: Some(args.base_port),
        node_timeout_ms: args.node_timeout_ms,
        ready_timeout_ms: args.wait.saturating_mul(1000),
    };
    let cluster = LocalCluster::up(&spec)?;
    let status = cluster.status()?;
    println!("{status}");
    let seed = cluster.seed();
    let port = seed.rsplit(':').next().unwrap_or_default();
    let dir = cluster.dir().display().to_string();
    println!();
    println!("cluster up in {dir}");
    println!("connect:   redis-cli -c -p {port}");
    println!("index:     elastree shell --index dist --cluster {seed}");
    println!("stop:      elastree cluster down --dir {dir}");
    Ok(())
}

fn status(args: &DirArg) -> Result<(), DistError> {
    let cluster = LocalCluster::open(&args.dir)?;
    println!("{}", cluster.status()?);
    Ok(())
}

fn add_master(args: &DirArg) -> Result<(), DistError> {
    let mut cluster = LocalCluster::open(&args.dir)?;
    let port = cluster.add_master()?;
    println!("{}", cluster.status()?);
    println!();
    println!("added master 127.0.0.1:{port}");
    // The paper's elastic scaling: every elastree index on the cluster adapts its cut-off
    // to the new number of masters and moves sub-trees onto the new one.
    let seeds: Vec<String> = cluster
        .ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    for (name, report) in DistIndex::rebalance_all(&seeds, RouterOptions::default())? {
        println!(
            "index {name}: {} -> {} sub-trees on {} masters (cut-off lowered under {}, {} moved), per master {:?}, imbalance {:.0}%",
            report.subtrees_before,
            report.subtrees_after,
            report.masters,
            report.lowered,
            report.moved,
            report.per_master.values().collect::<Vec<_>>(),
            report.imbalance() * 100.0
        );
    }
    Ok(())
}

fn kill(args: &KillArgs) -> Result<(), DistError> {
    let mut cluster = LocalCluster::open(&args.dir.dir)?;
    let pid = cluster.pid(args.port);
    cluster.kill(args.port)?;
    println!(
        "killed the node on port {} (pid {})",
        args.port,
        pid.unwrap_or_default()
    );
    if args.wait > 0 {
        cluster.wait_for_failover(Duration::from_secs(args.wait))?;
        println!("{}", cluster.status()?);
    }
    Ok(())
}

fn down(args: &DownArgs) -> Result<(), DistError> {
    let cluster = LocalCluster::open(&args.dir.dir)?;
    let ports = cluster.ports();
    let dir = cluster.dir().display().to_string();
    cluster.down_with(args.purge)?;
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    println!(
        "stopped the cluster in {dir} (ports {}){}",
        ports.join(" "),
        if args.purge {
            "; its directory is deleted"
        } else {
            "; its data and logs are kept"
        }
    );
    Ok(())
}
