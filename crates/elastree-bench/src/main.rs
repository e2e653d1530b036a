//! `elastree-bench`: measures elastree's index kinds and the peer indexes side by side.
//!
//! ```text
//! cargo run --release -p elastree-bench -- --index btree,btreemap,congee --keys rand64 \
//!     --n 10M --workload load,lookup,scan,delete --threads 1,2 --json out.jsonl
//! ```

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

use elastree_bench::alloc::{self, CountingAlloc};
use elastree_bench::keys::KeySetKind;
use elastree_bench::parse_count;
use elastree_bench::peers::IndexSpec;
use elastree_bench::report;
use elastree_bench::workload::{self, RunConfig, Status, Workload, DEFAULT_SCAN_LEN};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Keys per key set unless `--n` says otherwise.
const DEFAULT_N: usize = 1_000_000;
/// Keys per key set with `--quick`.
const QUICK_N: usize = 200_000;

/// Measures elastree's index kinds and peer indexes side by side: throughput of load, lookup,
/// scan and delete on 1..N threads, and memory per key.
#[derive(Debug, Parser)]
#[command(name = "elastree-bench", version, about, long_about = None)]
struct Cli {
    /// Indexes to measure, comma-separated, or `all`: elastree's kinds (btree) and the peers
    /// btreemap, bplustree, ferntree, congee, scc, skipmap, sorted.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    index: Vec<String>,

    /// Key sets, comma-separated, or `all`: rand64, mono64, email.
    #[arg(long, value_delimiter = ',', default_value = "rand64")]
    keys: Vec<String>,

    /// Keys per key set; suffixes K and M (decimal): 200K, 10M. Default 1M (200K with --quick).
    #[arg(long, value_parser = parse_count)]
    n: Option<usize>,

    /// Workloads, comma-separated, or `all`: load, lookup, scan, delete.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    workload: Vec<String>,

    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    threads: Vec<usize>,

    /// Repetitions of each measurement (median, min and max are reported). Default 3 (1 with
    /// --quick).
    #[arg(long)]
    repeat: Option<usize>,

    /// Also write one JSON object per row to this file (JSON lines).
    #[arg(long)]
    json: Option<PathBuf>,

    /// Seed of the key sets and operation streams.
    #[arg(long, default_value_t = 42)]
    seed: u64,

    /// Keys per scan.
    #[arg(long, default_value_t = DEFAULT_SCAN_LEN)]
    scan_len: usize,

    /// A quick run: 200K keys and one repetition unless --n / --repeat say otherwise.
    #[arg(long)]
    quick: bool,
}

/// Parses a comma-separated selection where `all` stands for every item.
fn select<T: Copy>(
    names: &[String],
    all: &[T],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut chosen = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if name == "all" {
            chosen.extend_from_slice(all);
        } else {
            chosen.push(parse(name)?);
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

fn config(cli: &Cli) -> Result<RunConfig, String> {
    let indexes = dedup(
        select(&cli.index, &IndexSpec::all(), IndexSpec::from_str)
            .map_err(|e| format!("--index: {e}"))?,
    );
    let keysets = dedup(
        select(&cli.keys, KeySetKind::ALL, KeySetKind::from_str)
            .map_err(|e| format!("--keys: {e}"))?,
    );
    let workloads = dedup(
        select(&cli.workload, Workload::ALL, Workload::from_str)
            .map_err(|e| format!("--workload: {e}"))?,
    );
    let threads = dedup(cli.threads.clone());
    if threads.is_empty() || threads.contains(&0) {
        return Err("--threads: thread counts must be at least 1".to_string());
    }
    let n = cli.n.unwrap_or(if cli.quick { QUICK_N } else { DEFAULT_N });
    let repeat = cli.repeat.unwrap_or(if cli.quick { 1 } else { 3 });
    if repeat == 0 {
        return Err("--repeat must be at least 1".to_string());
    }
    if cli.scan_len == 0 {
        return Err("--scan-len must be at least 1".to_string());
    }
    if n < cli.scan_len.max(2) {
        return Err(format!(
            "--n must be at least {} (the scan length)",
            cli.scan_len.max(2)
        ));
    }
    if u32::try_from(n).is_err() {
        return Err(format!("--n must be at most {}", u32::MAX));
    }
    Ok(RunConfig {
        indexes,
        keysets,
        n,
        workloads,
        threads,
        repeat,
        seed: cli.seed,
        scan_len: cli.scan_len,
    })
}

fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cfg = match config(&cli) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("elastree-bench: {e}");
            return ExitCode::from(2);
        }
    };
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build; measure with `cargo run --release -p elastree-bench`"
        );
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
    println!(
        "elastree-bench: n={} seed={} repeat={} threads={:?} cores={cores} indexes={}",
        cfg.n,
        cfg.seed,
        cfg.repeat,
        cfg.threads,
        names.join(",")
    );

    let progress = progress_bar(workload::planned_measurements(&cfg));
    let mut rows = workload::run_suite(&cfg, &progress);
    progress.finish_and_clear();

    let keyset_names: Vec<&str> = cfg.keysets.iter().map(|k| k.name()).collect();
    report::sort_for_report(&mut rows, &keyset_names, &names);
    println!();
    print!("{}", report::render_table(&rows));
    let peak = rows.iter().filter_map(|m| m.peak_rss_bytes).max();
    if let Some(peak) = peak.or_else(alloc::peak_rss_bytes) {
        println!(
            "peak RSS (largest of any index's run): {:.0} MiB",
            peak as f64 / (1024.0 * 1024.0)
        );
    }

    if let Some(path) = &cli.json {
        let written = File::create(path).and_then(|file| {
            let mut out = BufWriter::new(file);
            report::write_json_lines(&rows, &mut out)?;
            out.flush()
        });
        if let Err(e) = written {
            eprintln!("elastree-bench: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {} rows to {}", rows.len(), path.display());
    }
    if rows.iter().any(|m| matches!(m.status, Status::Failed(_))) {
        eprintln!("elastree-bench: some measurements FAILED their result checks (see the table)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
