//! The command line of the benchmark, shared by `elastree-bench ...` and `elastree bench ...`.
//!
//! [`BenchArgs`] is a clap [`Args`] struct: a binary flattens it into its own parser and hands
//! the parsed value to [`run`], which measures, prints the table and writes the JSON lines and
//! the CSV file asked for. The binary must install [`crate::alloc::CountingAlloc`] as its
//! global allocator for the bytes-per-key figures of the allocator.
//!
//! Exit codes of [`run`]: 0 on success, 1 when a file cannot be written or a measurement
//! failed its result check, 2 on arguments that make no run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use clap::Args;

use crate::alloc;
use crate::cluster::LocalClusterGuard;
use crate::keys::KeySetKind;
use crate::output::to_file;
use crate::parse_count;
use crate::peers::{Budget, IndexSpec};
use crate::report;
use crate::workload::{RunConfig, Status, Workload, DEFAULT_SCAN_LEN};

pub use crate::EXIT_USAGE;

/// Keys per key set unless `--n` says otherwise.
pub const DEFAULT_N: usize = 1_000_000;
/// Keys per key set with `--quick`.
pub const QUICK_N: usize = 200_000;
/// Keys per key set unless `--n` says otherwise, in a run that names a distributed kind.
pub const DIST_N: usize = 100_000;
/// Keys per key set with `--quick`, in a run that names a distributed kind.
pub const DIST_QUICK_N: usize = 10_000;

/// The options of a benchmark run.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Indexes to measure, comma-separated, or `all`: elastree's kinds (btree) and the peers
    /// btreemap, bplustree, ferntree, congee, scc, skipmap, masstree, blart, sorted. The
    /// distributed kinds
    /// `dist` and `dist-baseline` run on a Redis Cluster (see --cluster) and are measured
    /// only when named, never as part of `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    pub index: Vec<String>,

    /// The Redis Cluster of the distributed kinds (`dist`, `dist-baseline`), as host:port of
    /// any node. Without it, a run that names a distributed kind starts a local cluster of 3
    /// masters with 1 replica each for the run (needs redis-server) and stops it at the end.
    #[arg(long, value_name = "ADDR")]
    pub cluster: Option<String>,

    /// Key sets, comma-separated, or `all` (every key set the benchmark can generate).
    #[arg(long, value_delimiter = ',', default_value = "rand64")]
    pub keys: Vec<String>,

    /// Keys per key set; suffixes K and M (decimal): 200K, 10M. Default 1M (200K with --quick);
    /// a run that names a distributed kind defaults to 100K (10K with --quick), since every
    /// operation of those is a network round trip.
    #[arg(long, value_parser = parse_count)]
    pub n: Option<usize>,

    /// Workloads, comma-separated: load, lookup, lookup-zipf, scan, scan-desc, delete,
    /// ycsb-a ... ycsb-f, mixed; the Bw-tree paper's mixes updates-P (P% blind updates, the
    /// rest lookups, uniform keys; P = 0, 1, 10, 50, 100) and scan-update-L (95% scans of L
    /// keys from uniform start keys, 5% Zipfian blind updates; L = 1, 10, ..., 1000000), with
    /// its scans read through cursors, a request of L keys at a time, each cursor kept for 16
    /// requests: cursor-update-L (physiological cursors where the index has them: the
    /// Bw-tree's) and logical-update-L (logical cursors: every request descends); or
    /// the groups `default` (load, lookup, lookup-zipf, scan, delete), `ycsb` (ycsb-a ...
    /// ycsb-f) and `all` (every workload but the paper's mixes). scan and scan-desc count keys
    /// per second, the rest operations. YCSB workloads and the mixes each run on their own
    /// index loaded with 95% of the keys; their inserts add the other 5%.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub workload: Vec<String>,

    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub threads: Vec<usize>,

    /// Repetitions of each measurement (median, min and max are reported). Default 3 (1 with
    /// --quick).
    #[arg(long)]
    pub repeat: Option<usize>,

    /// Also write one JSON object per row to this file (JSON lines).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Also write the rows to this CSV file (a header line, then the JSON lines' fields).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Seed of the key sets and operation streams.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Byte budget of the `elastic` index: bytes (64M, 1G) or bytes per key of the key set
    /// (12/key, the default: about half of what the B+-tree needs for random 8-byte keys,
    /// so the elastic tree has to compact).
    #[arg(long, value_name = "BYTES", default_value = "12/key")]
    pub budget: Budget,

    /// Keys per scan.
    #[arg(long, default_value_t = DEFAULT_SCAN_LEN)]
    pub scan_len: usize,

    /// A quick run: 200K keys and one repetition unless --n / --repeat say otherwise.
    #[arg(long)]
    pub quick: bool,
}

/// Parses a comma-separated selection where `all` stands for every item.
pub fn select<T: Copy>(
    names: &[String],
    all: &[T],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    select_groups(names, &[("all", all)], parse)
}

/// Parses a comma-separated selection where each group's name stands for its items.
pub fn select_groups<T: Copy>(
    names: &[String],
    groups: &[(&str, &[T])],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut chosen = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        match groups.iter().find(|(group, _)| *group == name) {
            Some((_, items)) => chosen.extend_from_slice(items),
            None => chosen.push(parse(name)?),
        }
    }
    if chosen.is_empty() {
        return Err("empty selection".to_string());
    }
    Ok(chosen)
}

fn dedup<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

impl BenchArgs {
    /// The run these arguments describe, or what is wrong with them.
    pub fn config(&self) -> Result<RunConfig, String> {
        let indexes = dedup(
            select(&self.index, &IndexSpec::all(), IndexSpec::from_str)
                .map_err(|e| format!("--index: {e}"))?,
        );
        let keysets = dedup(
            select(&self.keys, KeySetKind::ALL, KeySetKind::from_str)
                .map_err(|e| format!("--keys: {e}"))?,
        );
        for keys in &keysets {
            keys.available()
                .map_err(|e| format!("--keys {keys}: {e}"))?;
        }
        let workloads = dedup(
            select_groups(
                &self.workload,
                &[
                    ("all", Workload::ALL),
                    ("default", Workload::DEFAULT),
                    ("ycsb", Workload::YCSB),
                ],
                Workload::from_str,
            )
            .map_err(|e| format!("--workload: {e}"))?,
        );
        let distributed = indexes.iter().any(|spec| spec.is_distributed());
        let default_n = match (distributed, self.quick) {
            (false, false) => DEFAULT_N,
            (false, true) => QUICK_N,
            (true, false) => DIST_N,
            (true, true) => DIST_QUICK_N,
        };
        let cfg = RunConfig {
            indexes,
            keysets,
            n: self.n.unwrap_or(default_n),
            workloads,
            threads: dedup(self.threads.clone()),
            repeat: self.repeat.unwrap_or(if self.quick { 1 } else { 3 }),
            seed: self.seed,
            scan_len: self.scan_len,
            budget: self.budget,
            tuning: crate::peers::SeqTreeTuning::default(),
            cluster: self.cluster.clone(),
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// `elastree bench` / `elastree-bench`: measures, prints the table, writes the files asked
/// for. `program` prefixes error messages (`elastree bench`, `elastree-bench`).
pub fn run(args: &BenchArgs, program: &str) -> ExitCode {
    let mut cfg = match args.config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("{program}: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // The distributed kinds need a cluster: start a local one for the run if none was given.
    let mut local = None;
    if cfg.cluster.is_none() && cfg.indexes.iter().any(|spec| spec.is_distributed()) {
        println!(
            "{program}: starting a local Redis Cluster (3 masters, 1 replica each) for the \
             distributed kinds; it is stopped at the end (use --cluster ADDR for your own)"
        );
        match LocalClusterGuard::start(3, 1) {
            Ok(guard) => {
                println!("{program}: local cluster up at {}", guard.seed());
                cfg.cluster = Some(guard.seed());
                local = Some(guard);
            }
            Err(e) => {
                eprintln!("{program}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let code = run_config(&cfg, args, program);
    if let Some(guard) = local {
        match guard.stop() {
            Ok(()) => println!("{program}: stopped the local Redis Cluster"),
            Err(e) => eprintln!("{program}: {e}"),
        }
    }
    code
}

/// [`run`] once the configuration is known and its cluster (if any) is up.
fn run_config(cfg: &RunConfig, args: &BenchArgs, program: &str) -> ExitCode {
    crate::runner::warn_if_debug("cargo run --release -p elastree-cli -- bench");
    if !alloc::installed() {
        eprintln!(
            "warning: the counting allocator is not this program's global allocator; \
             no allocator bytes/key figures"
        );
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
    println!(
        "{program}: n={} seed={} repeat={} threads={:?} cores={cores} indexes={}",
        cfg.n,
        cfg.seed,
        cfg.repeat,
        cfg.threads,
        names.join(",")
    );

    let rows = crate::runner::measure(cfg);
    println!();
    print!("{}", report::render_table(&rows));
    let peak = rows.iter().filter_map(|m| m.peak_rss_bytes).max();
    if let Some(peak) = peak.or_else(alloc::peak_rss_bytes) {
        println!(
            "peak RSS (largest of any index's run): {:.0} MiB",
            peak as f64 / (1024.0 * 1024.0)
        );
    }

    let json = args.json.as_deref().map(|path| {
        (
            path,
            "JSON lines",
            to_file(path, |out| report::write_json_lines(&rows, out)),
        )
    });
    let csv = args.csv.as_deref().map(|path| {
        (
            path,
            "CSV",
            to_file(path, |out| report::write_csv(&rows, out)),
        )
    });
    for (path, what, written) in json.into_iter().chain(csv) {
        if let Err(e) = written {
            eprintln!("{program}: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {} rows ({what}) to {}", rows.len(), path.display());
    }
    if rows.iter().any(|m| matches!(m.status, Status::Failed(_))) {
        eprintln!("{program}: some measurements FAILED their result checks (see the table)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn parse(argv: &[&str]) -> BenchArgs {
        TestCli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn quick_defaults() {
        let cfg = parse(&["--quick"]).config().unwrap();
        assert_eq!((cfg.n, cfg.repeat), (QUICK_N, 1));
        let cfg = parse(&["--quick", "--n", "5K", "--repeat", "2"])
            .config()
            .unwrap();
        assert_eq!((cfg.n, cfg.repeat), (5_000, 2));
        let cfg = parse(&[]).config().unwrap();
        assert_eq!((cfg.n, cfg.repeat), (DEFAULT_N, 3));
    }

    #[test]
    fn selections_expand_all_and_dedup() {
        let cfg = parse(&["--index", "btree,btreemap,btree", "--keys", "all"])
            .config()
            .unwrap();
        let names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["btree", "btreemap"]);
        assert_eq!(cfg.keysets, KeySetKind::ALL);
        assert_eq!(cfg.workloads, Workload::DEFAULT);
        let cfg = parse(&["--workload", "ycsb,scan-desc,ycsb-a"])
            .config()
            .unwrap();
        let mut expected = Workload::YCSB.to_vec();
        expected.push(Workload::ScanDesc);
        assert_eq!(cfg.workloads, expected);
        let cfg = parse(&["--workload", "all"]).config().unwrap();
        assert_eq!(cfg.workloads, Workload::ALL);
        let cfg = parse(&["--workload", "default,ycsb-e"]).config().unwrap();
        assert_eq!(cfg.workloads.len(), Workload::DEFAULT.len() + 1);
    }

    #[test]
    fn distributed_kinds_are_named_only() {
        let cfg = parse(&["--quick"]).config().unwrap();
        assert!(cfg.indexes.iter().all(|spec| !spec.is_distributed()));
        let cfg = parse(&[
            "--quick",
            "--index",
            "dist,dist-baseline",
            "--cluster",
            "h:1",
        ])
        .config()
        .unwrap();
        let names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["dist", "dist-baseline"]);
        assert_eq!((cfg.n, cfg.cluster.as_deref()), (DIST_QUICK_N, Some("h:1")));
        let cfg = parse(&["--index", "btree,dist"]).config().unwrap();
        assert_eq!((cfg.n, cfg.cluster), (DIST_N, None));
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(parse(&["--index", "nope"]).config().is_err());
        assert!(parse(&["--keys", "nope"]).config().is_err());
        assert!(parse(&["--threads", "0"]).config().is_err());
        assert!(parse(&["--repeat", "0"]).config().is_err());
        assert!(parse(&["--n", "3"]).config().is_err());
    }
}
