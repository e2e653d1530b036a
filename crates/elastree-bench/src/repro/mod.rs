//! Named experiments: `elastree repro <experiment> [--scale S] [--out DIR] [--update-readme]`.
//!
//! Each [`Experiment`] in [`EXPERIMENTS`] is a function that measures (with its number of
//! keys scaled by `--scale`), writes its raw rows and plots into its output directory
//! (default `results/<experiment>/`) and returns a [`Report`]: the lines, sections and plots
//! of its `report.md` and a compact summary. The writer every experiment shares
//! ([`document`]) then writes `report.md`:
//!
//! * what was run: the exact command, the date, the wall time, the experiment's own facts
//!   (indexes, key sets, workloads, repetitions, seed) and the build;
//! * the machine: CPU model, cores, memory;
//! * the experiment's sections (tables, the paper's reported numbers where there is a paper
//!   figure to compare with), the plots and a note on the raw rows (`results.jsonl` and
//!   `results.csv`).
//!
//! The run ends by printing the summary for a terminal ([`terminal`]: tables as aligned
//! columns, no Markdown marks), then the output directory, its file count and the report's
//! path.
//!
//! With `--update-readme` the run also replaces the README's block between
//! `<!-- results:<experiment> begin -->` and `<!-- results:<experiment> end -->` with the
//! summary, the machine, the command and a link to the full report.
//!
//! The experiments:
//!
//! * `btree-baseline` ([`baseline`]): a *suite* experiment: the benchmark's workloads on
//!   every index and key set, reported as a table of medians and grouped bar charts;
//! * `grow-shrink` ([`grow_shrink`]): a *curve* experiment: the data-spike run of
//!   [`crate::growshrink`], reported per step as tables and line plots;
//! * `elastic-grow-shrink`, `elastic-ycsb` and `elastic-objlog` ([`elastic`]): the elastic
//!   B+-tree's experiments (the paper's Figures 5, 6 and 8): the data spike with a budget,
//!   and suites over *variants* ([`variants`]) of the elastic tree at several budgets;
//! * `seqtree-sweep` ([`seqtree_sweep`]): SeqTree128's BlindiTree levels and breathing
//!   (Figures 9-11), a suite over variants of `seqtree`.
//!
//! * `hybrid-static`, `hybrid-merge`, `hybrid-ycsb`, `hybrid-ratio` and `hybrid-latency`
//!   ([`hybrid`]): the hybrid index's experiments (the hybrid-index paper's Figures 5, 6, 7
//!   and 13, 11, and the merge tail latency past its Table 3): the static stage alone against
//!   `btree`, merge time against the static stage's size, YCSB on unique and non-unique
//!   indexes, the merge-ratio sweep, and per-operation latency with blocking and background
//!   merges.
//!
//! * `dist-ycsb` ([`dist`]): the distributed index (STI-BT) against its Baseline on a local
//!   Redis Cluster the experiment starts: YCSB A-F throughput, round trips and masters per
//!   operation on 3 masters, then on 4 after a scale-out and a rebalance (the STI-BT paper's
//!   Figure 2 and Table 2), with the targets of issue 6.
//!
//! * `sbtree-ingest`, `sbtree-delayed`, `sbtree-latency` and `sbtree-memory` ([`sbtree`]):
//!   the SB-tree paper's Figures 6-8, 10 and 11 on time-series keys: ingestion, lookups,
//!   scans and the mixed workload on 1 and 2 threads, delayed fractions from 0 to 50%, tail
//!   latency and memory, each beside `btree`, BTreeMap and the peers.
//!
//! * `bwtree-update` and `bwtree-scan` ([`bwtree`]): the Bw-tree paper's Figures 10 and 11
//!   on two threads: loads, lookups and read/update mixes from 0 to 100% updates, and scans
//!   of 1 to 1,000,000 keys with 5% Zipfian updates, the Bw-tree in its page organizations
//!   beside `btree` and the concurrent peers.
//!
//! The elastic experiments end with the targets of issue 4 they speak to, the hybrid ones
//! with those of issue 5, each PASS or FAIL as computed from the run's numbers.

pub mod baseline;
pub mod bwtree;
pub mod dist;
pub mod document;
pub mod elastic;
pub mod grow_shrink;
pub mod hybrid;
pub mod page;
pub mod plots;
pub mod sbtree;
pub mod seqtree_sweep;
pub mod terminal;
pub mod variants;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Args;

use crate::runner;
use crate::EXIT_USAGE;
use document::{fmt_duration, MachineFacts, RunFacts};

/// A named experiment.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    /// The name `elastree repro` takes.
    pub name: &'static str,
    /// One line on what it measures.
    pub about: &'static str,
    /// Keys per key set at `--scale 1`.
    pub base_n: usize,
    /// The fewest keys per key set it can run with (a smaller `--scale` is refused).
    pub min_n: usize,
    /// Measures, writes the raw rows and plots into the context's directory, and returns
    /// the report's contents.
    run: fn(&ExperimentContext<'_>) -> Result<Report, String>,
}

impl Experiment {
    /// Runs the experiment in `ctx`.
    pub fn run(&self, ctx: &ExperimentContext<'_>) -> Result<Report, String> {
        (self.run)(ctx)
    }
}

/// Every experiment `elastree repro` knows.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "btree-baseline",
        about: "elastree's B+-tree (btree) vs BTreeMap, bplustree, ferntree, congee, scc, \
                SkipMap, masstree, blart and a sorted array on every key set: load, lookup, \
                scan, delete and bytes per key, one thread",
        base_n: 1_000_000,
        min_n: crate::workload::DEFAULT_SCAN_LEN,
        run: baseline::run,
    },
    Experiment {
        name: "btree-page",
        about: "the Bw-tree paper's Figures 8, 9 and 13: the B+-tree in its three page \
                organizations (base: slotted nodes; prefix; prefix-split, the default) vs \
                BTreeMap and the peers that take variable-length keys on email, docterm, \
                prefix28, url, words and sha1: load, lookup, 15-key scans, bytes per key, \
                inner-node bytes and key bytes per level, one thread",
        // Ten indexes on six key sets, three repetitions: about five minutes on 2 shared
        // cores.
        base_n: 500_000,
        min_n: crate::workload::DEFAULT_SCAN_LEN,
        run: page::run,
    },
    Experiment {
        name: "grow-shrink",
        about: "the data spike of the elastic-index paper (Figure 5): insert N keys in 10 \
                chunks, then delete them in 10 chunks; after each chunk, lookups, 15-key scans, \
                the chunk's insert or remove throughput and the index's memory; elastree's \
                btree vs BTreeMap, bplustree, ferntree, congee, scc and SkipMap, one thread",
        // Every index on rand64, mono64 and email, three repetitions: about two minutes on
        // 2 shared cores (1M keys took three and a half, two thirds of it on email).
        base_n: 500_000,
        min_n: grow_shrink::MIN_N,
        run: grow_shrink::run,
    },
    Experiment {
        name: "elastic-grow-shrink",
        about: "the data spike of the elastic-index paper's Figure 5 with the elastic B+-tree: \
                insert N keys in 10 chunks, then delete them in 10 chunks; after each chunk, \
                lookups, 15-key scans, insert or remove throughput and memory; btree, elastic \
                (budget: btree's own memory at N/2 keys), seqtree (SeqTree128) and the peers \
                on 8-, 16- and ~30-byte keys, one thread",
        // Nine indexes on three key sets, three repetitions: about two minutes on 2 shared
        // cores (1M keys took four).
        base_n: 500_000,
        min_n: grow_shrink::MIN_N,
        run: elastic::grow_shrink,
    },
    Experiment {
        name: "elastic-ycsb",
        about: "the elastic-index paper's Figure 6: YCSB A-F after loading N rand64 keys, for \
                btree, seqtree and the elastic tree with budgets of 25, 50 and 75% of btree's \
                size, one thread",
        base_n: 1_000_000,
        min_n: 1_000,
        run: elastic::ycsb,
    },
    Experiment {
        name: "elastic-objlog",
        about: "the elastic-index paper's Figure 8: the objlog access log (16-byte keys) \
                loaded as an indexed table; memory, load, lookups and 1,000-key scans of \
                btree, seqtree and the elastic tree with budgets of 83, 66, 50 and 33% of the \
                data size (N x 24 bytes), one thread",
        base_n: 1_500_000,
        min_n: 2 * elastic::OBJLOG_SCAN_LEN,
        run: elastic::objlog,
    },
    Experiment {
        name: "seqtree-sweep",
        about: "the elastic-index paper's Figures 9-11: SeqTree128 (seqtree) on rand64 with \
                BlindiTree levels 0-6 and breathing 1, 2, 4, 8 and 16: insert and lookup \
                throughput and bytes per key, next to btree, one thread",
        // 13 settings x 3 repetitions of a load and a lookup pass: about two minutes on 2
        // shared cores (2M keys took four).
        base_n: 1_000_000,
        min_n: 1_000,
        run: seqtree_sweep::run,
    },
    Experiment {
        name: "hybrid-static",
        about: "the hybrid-index paper's Figure 5: the static stage alone vs the original: \
                btree loaded by inserts vs the static stage built from the sorted keys, plain \
                and LZ4-compressed; uniform and Zipfian lookups and bytes per key on rand64, \
                mono64 and email, one thread",
        // Runtime at 10M keys, estimated from 0.1M and 1M runs and the README's btree rates at
        // 10M (the five hybrid experiments together: about 15 minutes on 2 shared cores if
        // the hybrid kinds run at the issue's targets, about 21 if at half of them): about 2
        // minutes (three btree loads and static builds, 54 passes of 1M lookups).
        base_n: hybrid::BASE_N,
        min_n: hybrid::MIN_N,
        run: hybrid::run_static,
    },
    Experiment {
        name: "hybrid-merge",
        about: "the hybrid-index paper's Figure 6: insert-only loads into hybrid (ratio 10, \
                background merges) on rand64, mono64 and email; every merge's time vs the \
                static stage's size, time per static entry, one thread",
        // Nine hybrid loads (three key sets, three repetitions): about 2 minutes at 10M keys.
        base_n: hybrid::BASE_N,
        min_n: hybrid::MIN_N,
        run: hybrid::run_merge,
    },
    Experiment {
        name: "hybrid-ycsb",
        about: "the hybrid-index paper's Figures 7 and 13: btree, hybrid and hybrid-compressed, \
                unique and non-unique (10 tids per key), on rand64, mono64 and email: \
                insert-only, read-only (YCSB C), read/write (YCSB A), scan/insert (YCSB E) \
                and bytes per pair, one thread",
        // 18 loads (each index once per key set and uniqueness; the non-unique email loads
        // are the longest), three repetitions of 0.5M-operation passes: about 6-9 minutes at
        // 10M keys.
        base_n: hybrid::BASE_N,
        min_n: hybrid::MIN_N,
        run: hybrid::run_ycsb,
    },
    Experiment {
        name: "hybrid-ratio",
        about: "the hybrid-index paper's Figure 11: merge ratios 1 to 100 on rand64 with \
                blocking merges: insert-only throughput, then read-only throughput with the \
                dynamic stage half full, next to btree, one thread",
        // Eight loads, one per ratio (ratio 100 rewrites the static stage about 100 times:
        // ~1G entries merged), three repetitions of 1M reads: about 1.5-2.5 minutes at 10M.
        base_n: hybrid::BASE_N,
        min_n: hybrid::MIN_N,
        run: hybrid::run_ratio,
    },
    Experiment {
        name: "hybrid-latency",
        about: "merge tail latency (past the hybrid-index paper's Table 3): hybrid on rand64 \
                with blocking vs background merges, the latency of every operation of a \
                Zipfian read / insert stream spanning several merges, on one thread and on a \
                reader and a writer thread",
        // Nine loads (three modes, three repetitions) and streams of 7M timed operations:
        // about 2.5 minutes at 10M keys.
        base_n: hybrid::BASE_N,
        min_n: hybrid::MIN_N,
        run: hybrid::run_latency,
    },
    Experiment {
        name: "bwtree-update",
        about: "the Bw-tree paper's Figure 10: bwtree (Prefix+Split, Prefix and Base pages) \
                vs btree, scc, skipmap, masstree and ferntree on rand64, email, docterm and \
                url keys: load, lookups and read/update mixes with 0, 1, 10, 50 and 100% \
                blind updates of uniform keys, 2 threads",
        base_n: bwtree::BASE_N,
        min_n: bwtree::MIN_N,
        run: bwtree::update,
    },
    Experiment {
        name: "bwtree-scan",
        about: "the Bw-tree paper's Figure 11: scans of 1 to 1,000,000 keys from uniform start \
                keys with 5% blind updates of Zipfian keys, bwtree vs btree and the concurrent \
                peers on rand64, email, docterm and url keys, 2 threads",
        base_n: bwtree::BASE_N,
        min_n: bwtree::MIN_N,
        run: bwtree::scan,
    },
    Experiment {
        name: "sbtree-ingest",
        about: "the SB-tree paper's Figures 6 and 7: sbtree vs btree, BTreeMap, congee, scc \
                and masstree on in-order time-series keys (tsensor:0): insert-only load, \
                lookups, 100-key scans and the mixed workload (50% inserts, 40% scans, 10% \
                lookups), 1 and 2 threads",
        base_n: sbtree::BASE_N,
        min_n: sbtree::MIN_N,
        run: sbtree::ingest,
    },
    Experiment {
        name: "sbtree-delayed",
        about: "the SB-tree paper's Figure 8: insert-only loads of time-series keys with 0, 10, \
                20, 30, 40 and 50% of them delayed, sbtree vs btree and the peers, one thread",
        base_n: sbtree::BASE_N,
        min_n: sbtree::MIN_N,
        run: sbtree::delayed,
    },
    Experiment {
        name: "sbtree-latency",
        about: "the SB-tree paper's Figure 10: p50 to p99.99 latency of inserts, lookups and \
                100-key scans on time-series keys (5% delayed), sbtree vs btree and the peers, \
                one thread",
        base_n: sbtree::BASE_N,
        min_n: sbtree::MIN_N,
        run: sbtree::latency,
    },
    Experiment {
        name: "sbtree-memory",
        about: "the SB-tree paper's Figure 11 and Table 1: bytes per key after loading \
                time-series keys with 0, 20 and 50% delayed, sbtree vs btree and the peers, by \
                the counting allocator and each index's own accounting",
        base_n: sbtree::BASE_N,
        min_n: sbtree::MIN_N,
        run: sbtree::memory,
    },
    Experiment {
        name: "dist-ycsb",
        about: "the STI-BT paper's Figure 2 and Table 2: YCSB A-F on a local Redis Cluster \
                (3 masters, 1 replica each, started by the experiment) for the distributed \
                index (dist) and its Baseline (dist-baseline): throughput, round trips and \
                masters contacted per operation; then a fourth master joins, dist rebalances \
                and A-F run again; 1 and 2 client threads",
        base_n: dist::BASE_N,
        min_n: dist::MIN_N,
        run: dist::run,
    },
];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// What an experiment runs with.
#[derive(Debug, Clone)]
pub struct ExperimentContext<'a> {
    /// The experiment.
    pub experiment: &'a Experiment,
    /// Keys per key set (its `base_n` times `--scale`).
    pub n: usize,
    /// Repetitions of each measurement.
    pub repeat: usize,
    /// Seed of the key sets and operation streams.
    pub seed: u64,
    /// The directory to write plots and raw rows into (it exists).
    pub out: &'a Path,
}

/// What an experiment hands to the report writer.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The size of the run for headings, e.g. `1000000 keys per key set`.
    pub size: String,
    /// Lines of the report's "What was run" list after the command, date and wall time.
    pub facts: Vec<String>,
    /// The report's sections after the machine: (heading, Markdown body ending in a newline).
    pub sections: Vec<(String, String)>,
    /// The plots, in report order: (what it shows, file name in the output directory).
    pub plots: Vec<(String, String)>,
    /// The paragraph of the "Raw rows" section.
    pub raw: String,
    /// Every file the experiment wrote into the output directory.
    pub files: Vec<String>,
    /// A compact Markdown summary (a table and a line on how to read it) for the README.
    pub summary: String,
    /// Measurements that failed their result checks.
    pub failures: usize,
}

/// Arguments of `elastree repro`.
#[derive(Debug, Clone, Args)]
pub struct ReproArgs {
    /// The experiment to run.
    #[arg(value_name = "EXPERIMENT", value_parser = experiment_parser())]
    pub experiment: String,

    /// Multiplies the experiment's number of keys (1 = its default, which finishes in a few
    /// minutes on 2 cores).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,

    /// Where to write the report, plots and raw rows (default: `results/<EXPERIMENT>/`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Repetitions of each measurement (median, min and max are reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,

    /// Seed of the key sets and operation streams.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Also replace the README's results block of this experiment (between
    /// `<!-- results:EXPERIMENT begin -->` and `<!-- results:EXPERIMENT end -->`) with a
    /// summary of this run.
    #[arg(long)]
    pub update_readme: bool,

    /// The README that --update-readme rewrites.
    #[arg(long, value_name = "FILE", default_value = "README.md")]
    pub readme: PathBuf,
}

/// The experiment names as clap's possible values, with their descriptions for `--help`.
fn experiment_parser() -> PossibleValuesParser {
    PossibleValuesParser::new(
        EXPERIMENTS
            .iter()
            .map(|e| PossibleValue::new(e.name).help(e.about)),
    )
}

/// The keys per key set of `experiment` at `scale`, or why that makes no run.
pub fn scaled_n(experiment: &Experiment, scale: f64) -> Result<usize, String> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(format!("--scale must be a positive number, not {scale}"));
    }
    let n = (experiment.base_n as f64 * scale).round();
    if n > f64::from(u32::MAX) {
        return Err(format!("--scale {scale} makes too many keys"));
    }
    let n = n as usize;
    if n < experiment.min_n {
        return Err(format!(
            "--scale {scale} makes {n} keys per key set; {} needs at least {}",
            experiment.name, experiment.min_n
        ));
    }
    Ok(n)
}

/// Runs an experiment and writes its report. `command` is the command line as typed, for the
/// report. Exit codes: 0 on success, 1 when a file cannot be written or a measurement failed
/// its result check, 2 on arguments that make no run.
pub fn run(args: &ReproArgs, command: &str) -> ExitCode {
    let Some(experiment) = find(&args.experiment) else {
        let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
        eprintln!(
            "elastree repro: unknown experiment {:?} (known: {})",
            args.experiment,
            names.join(", ")
        );
        return ExitCode::from(EXIT_USAGE);
    };
    let n = match scaled_n(experiment, args.scale) {
        Ok(n) if args.repeat > 0 => n,
        Ok(_) => {
            eprintln!("elastree repro: --repeat must be at least 1");
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => {
            eprintln!("elastree repro: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("results").join(experiment.name));
    if let Err(e) = fs::create_dir_all(&out) {
        eprintln!("elastree repro: creating {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    runner::warn_if_debug("cargo run --release -p elastree-cli -- repro");
    eprintln!(
        "elastree repro {}: n={n} per key set, repeat {}; writing to {}",
        experiment.name,
        args.repeat,
        out.display()
    );
    let ctx = ExperimentContext {
        experiment,
        n,
        repeat: args.repeat,
        seed: args.seed,
        out: &out,
    };
    let started = Instant::now();
    let report = match experiment.run(&ctx) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("elastree repro {}: {e}", experiment.name);
            return ExitCode::FAILURE;
        }
    };
    let facts = RunFacts {
        experiment,
        command,
        date: document::utc_now(),
        elapsed: started.elapsed(),
        machine: MachineFacts::read(),
    };
    let report_path = out.join("report.md");
    if let Err(e) = fs::write(&report_path, document::report_markdown(&facts, &report)) {
        eprintln!("elastree repro: writing {}: {e}", report_path.display());
        return ExitCode::FAILURE;
    }
    print!("{}", final_words(&facts, &report, &out, terminal::width()));
    if args.update_readme {
        if let Err(e) = update_readme(&args.readme, &facts, &report, &report_path) {
            eprintln!("elastree repro: updating {}: {e}", args.readme.display());
            return ExitCode::FAILURE;
        }
        println!(
            "elastree repro {}: updated its results block in {}",
            experiment.name,
            args.readme.display()
        );
    }
    if report.failures > 0 {
        eprintln!(
            "elastree repro: {} measurements FAILED their result checks (see report.md)",
            report.failures
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// What `elastree repro` prints once the report is written: a heading, the summary rendered
/// for a terminal `width` columns wide, then where the files went and the report's path.
fn final_words(facts: &RunFacts<'_>, report: &Report, out: &Path, width: usize) -> String {
    let name = facts.experiment.name;
    format!(
        "\nelastree repro {name} ({})\n\n{}\n\
         elastree repro {name}: done in {}; wrote {} files to {}\nreport: {}\n",
        report.size,
        terminal::render(report.summary.trim(), width),
        fmt_duration(facts.elapsed),
        report.files.len() + 1,
        out.display(),
        out.join("report.md").display()
    )
}

/// Replaces the experiment's results block in the README at `readme` with this run's.
fn update_readme(
    readme: &Path,
    facts: &RunFacts<'_>,
    report: &Report,
    report_path: &Path,
) -> Result<(), String> {
    let text = fs::read_to_string(readme).map_err(|e| e.to_string())?;
    let dir = readme.parent().unwrap_or(Path::new(""));
    let link = document::link_from(dir, report_path);
    let block = document::readme_block(facts, report, &link);
    let spliced = document::splice_readme(&text, facts.experiment.name, &block)?;
    fs::write(readme, spliced).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique_and_found() {
        for e in EXPERIMENTS {
            assert_eq!(find(e.name).map(|f| f.name), Some(e.name));
            assert_eq!(EXPERIMENTS.iter().filter(|o| o.name == e.name).count(), 1);
            assert!(e.min_n <= e.base_n, "{}", e.name);
        }
        assert!(find("nope").is_none());
    }

    #[test]
    fn scale_must_be_positive_and_make_enough_keys() {
        let e = find("btree-baseline").unwrap();
        assert_eq!(scaled_n(e, 0.5), Ok(500_000));
        assert!(scaled_n(e, 0.0).is_err());
        assert!(scaled_n(e, -1.0).is_err());
        assert!(scaled_n(e, f64::NAN).is_err());
        assert!(scaled_n(e, 1e-9).unwrap_err().contains("at least"));
        assert!(scaled_n(e, 1e6).unwrap_err().contains("too many"));
    }

    /// A finished grow-shrink run of 1000 keys with a one-row summary.
    fn grow_shrink_run() -> (RunFacts<'static>, Report) {
        let facts = RunFacts {
            experiment: find("grow-shrink").unwrap(),
            command: "elastree repro grow-shrink",
            date: "2026-01-01 00:00:00".to_string(),
            elapsed: std::time::Duration::from_secs(61),
            machine: MachineFacts {
                cpu: "CPU X".to_string(),
                cores: "2".to_string(),
                memory: "1.0 GiB".to_string(),
            },
        };
        let report = Report {
            size: "1000 keys per key set".to_string(),
            summary: "| a | b |\n|---|---|\n| 1 | 2 |\n".to_string(),
            ..Report::default()
        };
        (facts, report)
    }

    #[test]
    fn the_run_ends_with_the_summary_then_the_files() {
        let (facts, mut report) = grow_shrink_run();
        report.summary = format!("How to read **it**.\n\n{}", report.summary);
        report.files = vec!["results.jsonl".to_string(), "a.png".to_string()];
        let text = final_words(&facts, &report, Path::new("/tmp/r"), 80);
        assert_eq!(
            text,
            "\nelastree repro grow-shrink (1000 keys per key set)\n\n\
             How to read it.\n\na  b\n-  -\n1  2\n\n\
             elastree repro grow-shrink: done in 1m 01s; wrote 3 files to /tmp/r\n\
             report: /tmp/r/report.md\n"
        );
    }

    #[test]
    fn readme_update_splices_the_run_into_its_block() {
        let dir = std::env::temp_dir().join(format!("elastree-readme-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let readme = dir.join("README.md");
        fs::write(
            &readme,
            "# p\n<!-- results:grow-shrink begin -->\nold\n<!-- results:grow-shrink end -->\n",
        )
        .unwrap();
        let (facts, report) = grow_shrink_run();
        let report_path = dir.join("results/grow-shrink/report.md");
        update_readme(&readme, &facts, &report, &report_path).unwrap();
        let text = fs::read_to_string(&readme).unwrap();
        assert!(!text.contains("old"), "{text}");
        assert!(text.contains("| 1 | 2 |"), "{text}");
        assert!(text.contains("CPU X (2 cores, 1.0 GiB)"), "{text}");
        assert!(text.contains("`elastree repro grow-shrink`"), "{text}");
        assert!(
            text.contains("(results/grow-shrink/report.md)"),
            "the link is relative to the README: {text}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
