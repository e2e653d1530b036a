//! Workloads and the runner that measures them.
//!
//! All keys and operation streams are generated before any timed region. A measurement splits
//! its operation stream into one contiguous chunk per thread, starts the threads, lines them up
//! on a barrier and times only the parallel region (from the first thread leaving the barrier to
//! the last thread finishing its chunk).
//!
//! * `load`: inserts every key of the key set, in the set's order (random for `rand64` and
//!   `email`, increasing for `mono64`), key `i` mapping to tid `i`. This is also the insert
//!   throughput. Each repetition loads a fresh index; memory is measured here.
//! * `lookup`: `n` uniformly random lookups of existing keys; every one must hit with the right
//!   tid.
//! * `lookup-zipf`: `n` lookups of existing keys drawn from a scrambled Zipfian distribution
//!   (theta 0.99, YCSB's request distribution).
//! * `scan`: `n / 10` scans of `scan_len` (15) keys ascending from a random existing key (never
//!   closer than `scan_len` keys to the end); reported in keys per second.
//! * `scan-desc`: `n / 10` scans of `scan_len` keys descending from a random existing key
//!   (never closer than `scan_len` keys to the start); reported in keys per second. Indexes
//!   without reverse iteration skip it.
//! * `delete`: removes every key in random order; every remove must hit and the index must be
//!   empty afterwards. Each repetition deletes from a freshly loaded index.
//! * `ycsb-a` ... `ycsb-f`: the YCSB core workloads (see [`crate::ycsb`]), in operations per
//!   second. They change the index (updates, inserts of keys the load left out), so each runs
//!   on an index of its own, freshly loaded (untimed) with the first 95% of the key set; they
//!   come last in a pass, after `delete`, and the pass's shared index is dropped before them.
//! * `mixed`: the time-series mix (see [`crate::mixed`]): 50% inserts of new keys in the set's
//!   order, 30% scans of 10-100 keys, 10% scans of 5-10 keys and 10% lookups, on an index of
//!   its own loaded (untimed) with the first half of the key set; in operations per second.
//!
//! Every workload samples latency: every [`LATENCY_SAMPLE_EVERY`](crate::runner::timing::LATENCY_SAMPLE_EVERY)-th operation (scan, for the
//! scan workloads; YCSB operation of whatever kind) is timed on its own. A bulk load (the
//! sorted array) is one operation and has no per-operation latency.
//!
//! The workloads of a pass run in [`Workload::ALL`] order, whatever order they were given in:
//! `load` leaves the loaded index that `lookup`, `lookup-zipf`, `scan` and `scan-desc` read
//! (loading one untimed if `load` was not asked for) and `delete` empties.

use std::fmt;
use std::str::FromStr;

use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use elastree::Direction;
use elastree_dist::DistStats;

use crate::alloc;
use crate::cluster;
use crate::dist::ScrambledZipfian;
use crate::keys::{KeySet, KeySetKind};
use crate::mixed::MixedStream;
use crate::peers::{BenchIndex, Budget, IndexSpec, SeqTreeTuning};
use crate::runner::ops::{delete, fill, lookup, mixed, scan, ycsb, Timed};
use crate::runner::settle::settle_deferred_frees;
use crate::runner::timing::Latencies;
use crate::runner::{attempt, median};
use crate::ycsb::{Ycsb, YcsbStream};

/// The skew of the `lookup-zipf` workload: YCSB's default request distribution.
pub const ZIPF_THETA: f64 = 0.99;

/// The default number of keys one scan visits.
pub const DEFAULT_SCAN_LEN: usize = 15;

/// A workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// Insert every key into an empty index.
    Load,
    /// Uniformly random point lookups of existing keys.
    Lookup,
    /// Point lookups of existing keys drawn from a scrambled Zipfian distribution (theta
    /// 0.99, YCSB's request distribution): a few hot keys take most lookups.
    LookupZipf,
    /// Short ascending range scans from random existing keys.
    Scan,
    /// Short descending range scans from random existing keys.
    ScanDesc,
    /// Remove every key in random order.
    Delete,
    /// A YCSB core workload, on an index of its own loaded with 95% of the keys.
    Ycsb(Ycsb),
    /// The time-series mix of inserts, long and short scans and lookups, on an index of its
    /// own loaded with half of the keys.
    Mixed,
}

impl Workload {
    /// Every workload, in the order a run performs them (`--workload all`).
    pub const ALL: &'static [Workload] = &[
        Workload::Load,
        Workload::Lookup,
        Workload::LookupZipf,
        Workload::Scan,
        Workload::ScanDesc,
        Workload::Delete,
        Workload::Ycsb(Ycsb::A),
        Workload::Ycsb(Ycsb::B),
        Workload::Ycsb(Ycsb::C),
        Workload::Ycsb(Ycsb::D),
        Workload::Ycsb(Ycsb::E),
        Workload::Ycsb(Ycsb::F),
        Workload::Mixed,
    ];

    /// The workloads of a default run (`elastree bench` without `--workload`, and
    /// `repro btree-baseline`): load, lookup, lookup-zipf, scan, delete.
    pub const DEFAULT: &'static [Workload] = &[
        Workload::Load,
        Workload::Lookup,
        Workload::LookupZipf,
        Workload::Scan,
        Workload::Delete,
    ];

    /// The six YCSB core workloads (`--workload ycsb`).
    pub const YCSB: &'static [Workload] = Workload::ALL.split_at(6).1.split_at(6).0;

    /// Every workload with a name: [`Workload::ALL`], then the Bw-tree paper's mixes
    /// ([`Ycsb::paper_mixes`]: `updates-P`, `scan-update-L`), which only a run that names
    /// them performs.
    pub fn named() -> impl Iterator<Item = Workload> {
        let mixes = Ycsb::paper_mixes().map(Workload::Ycsb);
        Workload::ALL.iter().copied().chain(mixes)
    }

    /// The workload's CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Load => "load",
            Workload::Lookup => "lookup",
            Workload::LookupZipf => "lookup-zipf",
            Workload::Scan => "scan",
            Workload::ScanDesc => "scan-desc",
            Workload::Delete => "delete",
            Workload::Ycsb(ycsb) => ycsb.name(),
            Workload::Mixed => "mixed",
        }
    }

    /// What the throughput counts: operations, or keys for the `scan` and `scan-desc`
    /// workloads (a YCSB-E scan counts as one operation).
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Scan | Workload::ScanDesc => "keys",
            Workload::Load
            | Workload::Lookup
            | Workload::LookupZipf
            | Workload::Delete
            | Workload::Ycsb(_)
            | Workload::Mixed => "ops",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Workload::named().find(|w| w.name() == s).ok_or_else(|| {
            let names: Vec<_> = Workload::named().map(|w| w.name()).collect();
            format!("unknown workload {s:?} (known: {})", names.join(", "))
        })
    }
}

/// The operation streams of one key set, generated once and shared by every index.
#[derive(Debug, Clone)]
pub struct OpStreams {
    /// Key positions in load order: `0..n`.
    pub load: Vec<u32>,
    /// Key positions to look up, uniformly random.
    pub lookups: Vec<u32>,
    /// Key positions to start scans at: uniformly random over the sorted keys, leaving at least
    /// `scan_len` keys from each start to the end.
    pub scan_starts: Vec<u32>,
    /// Key positions to start descending scans at: uniformly random over the sorted keys,
    /// leaving at least `scan_len` keys from the start to each.
    pub scan_desc_starts: Vec<u32>,
    /// Keys per scan.
    pub scan_len: usize,
    /// Key positions in delete order: a random permutation of `0..n`.
    pub deletes: Vec<u32>,
    /// The keys of `lookups`, in lookup order (see [`KeySet::gather`]).
    pub lookup_keys: KeySet,
    /// Key positions to look up, scrambled-Zipfian (theta 0.99) over the key set.
    pub zipf_lookups: Vec<u32>,
    /// The keys of `zipf_lookups`, in lookup order.
    pub zipf_lookup_keys: KeySet,
    /// The keys of `scan_starts`, in scan order.
    pub scan_keys: KeySet,
    /// The keys of `scan_desc_starts`, in scan order.
    pub scan_desc_keys: KeySet,
    /// The keys of `deletes`, in delete order.
    pub delete_keys: KeySet,
    /// Key positions sorted by key.
    pub sorted: Vec<u32>,
}

impl OpStreams {
    /// Generates the streams for `keys` from `seed`.
    ///
    /// # Panics
    ///
    /// If the key set has fewer than `scan_len` keys or more than `u32::MAX`.
    pub fn generate(keys: &KeySet, scan_len: usize, seed: u64) -> Self {
        let n = keys.len();
        assert!(
            scan_len >= 1 && n >= scan_len,
            "need at least {scan_len} keys, have {n}"
        );
        let n32 = u32::try_from(n).expect("key sets are limited to 2^32 keys");
        let mut rng = StdRng::seed_from_u64(seed ^ 0x6f70_7374_7265_616d);
        let sorted = keys.sorted_order();
        let load: Vec<u32> = (0..n32).collect();
        let lookups: Vec<u32> = (0..n).map(|_| rng.gen_range(0..n32)).collect();
        let last_start = n - scan_len;
        let scan_starts: Vec<u32> = (0..(n / 10).max(1))
            .map(|_| sorted[rng.gen_range(0..=last_start)])
            .collect();
        let mut deletes = load.clone();
        deletes.shuffle(&mut rng);
        let scan_desc_starts: Vec<u32> = (0..(n / 10).max(1))
            .map(|_| sorted[rng.gen_range(scan_len - 1..n)])
            .collect();
        let zipf_lookups = ScrambledZipfian::new(n as u64, ZIPF_THETA, seed)
            .expect("theta 0.99 over a non-empty key set")
            .positions(n, seed ^ 0x7a69_7066);
        Self {
            lookup_keys: keys.gather(&lookups),
            zipf_lookup_keys: keys.gather(&zipf_lookups),
            zipf_lookups,
            scan_keys: keys.gather(&scan_starts),
            scan_desc_keys: keys.gather(&scan_desc_starts),
            delete_keys: keys.gather(&deletes),
            load,
            lookups,
            scan_starts,
            scan_desc_starts,
            scan_len,
            deletes,
            sorted,
        }
    }
}

/// What a run measures.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The indexes, in report order.
    pub indexes: Vec<IndexSpec>,
    /// The key sets, in report order.
    pub keysets: Vec<KeySetKind>,
    /// Keys per key set.
    pub n: usize,
    /// The workloads (run in [`Workload::ALL`] order whatever the order given).
    pub workloads: Vec<Workload>,
    /// The thread counts.
    pub threads: Vec<usize>,
    /// Repetitions of each measurement.
    pub repeat: usize,
    /// Seed of the key sets and operation streams.
    pub seed: u64,
    /// Keys per scan.
    pub scan_len: usize,
    /// The elastic kind's budget.
    pub budget: Budget,
    /// The SeqTree-leaf options of elastree's elastic and seqtree kinds.
    pub tuning: SeqTreeTuning,
    /// The Redis Cluster ("host:port" of a node) the distributed kinds (`dist`,
    /// `dist-baseline`) connect to; they cannot be built without one.
    pub cluster: Option<String>,
}

impl RunConfig {
    /// Checks a run configuration: at least one thread, repetition and scan key, and enough keys.
    pub fn validate(&self) -> Result<(), String> {
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err("--threads: thread counts must be at least 1".to_string());
        }
        if self.repeat == 0 {
            return Err("--repeat must be at least 1".to_string());
        }
        if self.scan_len == 0 {
            return Err("--scan-len must be at least 1".to_string());
        }
        if self.n < self.scan_len.max(2) {
            return Err(format!(
                "--n must be at least {} (the scan length)",
                self.scan_len.max(2)
            ));
        }
        if u32::try_from(self.n).is_err() {
            return Err(format!("--n must be at most {}", u32::MAX));
        }
        Ok(())
    }
}

/// How a row ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Measured; results checked.
    Ok,
    /// Not run, and why.
    Skipped(String),
    /// Run, but the results were wrong (or the index failed): what went wrong.
    Failed(String),
}

/// One row of the report: an index on a key set under a workload at a thread count.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// The index's name.
    pub index: String,
    /// The key set.
    pub keys: KeySetKind,
    /// Keys in the key set.
    pub n: usize,
    /// The workload.
    pub workload: Workload,
    /// Threads.
    pub threads: usize,
    /// Operations (keys, for scans) per repetition.
    pub ops: u64,
    /// Throughput of each repetition, in millions of operations (keys, for scans) per second.
    pub mops: Vec<f64>,
    /// Sampled single-operation latencies of every repetition, in nanoseconds: every
    /// [`LATENCY_SAMPLE_EVERY`](crate::runner::timing::LATENCY_SAMPLE_EVERY)-th operation (a whole scan, for the scan workloads); none for a
    /// bulk load.
    pub latency_ns: Vec<u64>,
    /// Bytes allocated by the loaded index per key, from the counting allocator.
    pub bytes_per_key_alloc: Option<f64>,
    /// Bytes per key the index reports itself holding.
    pub bytes_per_key_self: Option<f64>,
    /// Peak RSS of the process while this index ran on this key set at this thread count: the
    /// peak is reset before each such group (after returning free heap to the system) where the
    /// system allows. It includes the key set, the operation streams and whatever heap the
    /// allocator kept from earlier groups.
    pub peak_rss_bytes: Option<u64>,
    /// Distributed kinds: network round trips per index operation in the timed phases (all
    /// repetitions; a YCSB read-modify-write is two operations, a scan one).
    pub round_trips_per_op: Option<f64>,
    /// Distributed kinds: distinct masters contacted per index operation in the timed phases.
    pub masters_per_op: Option<f64>,
    /// How the row ended.
    pub status: Status,
}

/// Prints a note on stderr without tearing the progress bar.
fn note(progress: &ProgressBar, message: &str) {
    if progress.is_hidden() {
        eprintln!("{message}");
    } else {
        progress.println(message);
    }
}

/// The number of timed measurements a run makes (for the progress bar).
pub fn planned_measurements(cfg: &RunConfig) -> u64 {
    (cfg.indexes.len() * cfg.keysets.len() * cfg.threads.len() * cfg.workloads.len() * cfg.repeat)
        as u64
}

/// Runs everything `cfg` asks for: per key set, generates keys and operation streams, then
/// measures every index at each thread count. Returns one [`Measurement`] per index, key set,
/// workload and thread count.
///
/// Repetitions are interleaved: each repetition runs one *pass* per index (load, lookup, scan,
/// delete on one freshly loaded copy, then each YCSB workload on a fresh load of its own),
/// index after index, so a slow spell of this shared machine lands on every index alike
/// instead of on whichever index ran during it. YCSB streams depend on the thread count (see
/// [`crate::ycsb`]) and are generated per thread count, shared by every index.
pub fn run_suite(cfg: &RunConfig, progress: &ProgressBar) -> Vec<Measurement> {
    let mut rows = Vec::new();
    for &kind in &cfg.keysets {
        note(
            progress,
            &format!("generating {} keys of {kind} (seed {})", cfg.n, cfg.seed),
        );
        let keys = kind.generate(cfg.n, cfg.seed);
        let ops = OpStreams::generate(&keys, cfg.scan_len, cfg.seed);
        note(
            progress,
            &format!("{kind}: average key length {:.1} bytes", keys.avg_key_len()),
        );
        for &threads in &cfg.threads {
            let ycsb: Vec<YcsbStream> = cfg
                .workloads
                .iter()
                .filter_map(|&w| match w {
                    Workload::Ycsb(y) => Some(YcsbStream::generate(y, &keys, threads, cfg.seed)),
                    _ => None,
                })
                .collect();
            let mixed = cfg
                .workloads
                .contains(&Workload::Mixed)
                .then(|| MixedStream::generate(&keys, threads, cfg.seed));
            let streams = Streams {
                ops: &ops,
                ycsb: &ycsb,
                mixed: mixed.as_ref(),
            };
            let mut groups: Vec<GroupRun<'_>> = cfg
                .indexes
                .iter()
                .map(|&spec| GroupRun::new(spec, &keys, streams, threads, cfg, progress))
                .collect();
            for _ in 0..cfg.repeat {
                for group in &mut groups {
                    group.pass(progress);
                }
            }
            rows.extend(groups.into_iter().flat_map(|g| g.finish(progress)));
        }
    }
    rows
}

/// The measurements of one index on one key set at one thread count, built up pass by pass.
struct GroupRun<'a> {
    group: Group<'a>,
    /// One row per workload, in [`Workload::ALL`] order.
    rows: Vec<Measurement>,
    /// Distributed kinds: the client counters of each row's timed phases, summed over the
    /// repetitions (parallel to `rows`).
    dist: Vec<Option<DistStats>>,
    /// Whether any workload runs at all.
    active: bool,
    /// Bytes still allocated after this index's passes dropped their copies: memory the
    /// index never freed. Measured around each pass, so leaks are attributed to the index
    /// whose pass leaked even though passes of different indexes interleave.
    retained: usize,
    /// The highest peak RSS of any pass.
    peak_rss: Option<u64>,
}

impl<'a> GroupRun<'a> {
    /// Checks what this index supports and prepares its rows.
    fn new(
        spec: IndexSpec,
        keys: &'a KeySet,
        streams: Streams<'a>,
        threads: usize,
        cfg: &'a RunConfig,
        progress: &ProgressBar,
    ) -> Self {
        let mut workloads = cfg.workloads.clone();
        workloads.sort();
        workloads.dedup();
        let row = |workload: Workload, status: Status| Measurement {
            index: spec.name().to_string(),
            keys: keys.kind,
            n: keys.len(),
            workload,
            threads,
            ops: streams.ops_of(workload),
            mops: Vec::new(),
            latency_ns: Vec::new(),
            bytes_per_key_alloc: None,
            bytes_per_key_self: None,
            peak_rss_bytes: None,
            round_trips_per_op: None,
            masters_per_op: None,
            status,
        };
        // Each workload's status, or the reason the index cannot run here at all.
        let support = || -> Result<Vec<Status>, String> {
            let probe = spec.build_on(keys, cfg.budget, cfg.tuning, cfg.cluster.as_deref())?;
            probe.supports(keys.kind)?;
            if threads == 0 {
                return Err("0 threads".to_string());
            }
            if threads > 1 && !probe.concurrent() {
                return Err(format!("{} is single-threaded", spec.name()));
            }
            let bulk = probe.loads_in_bulk();
            Ok(workloads
                .iter()
                .map(|&w| match probe.supports_workload(w) {
                    Err(reason) => Status::Skipped(reason),
                    Ok(()) if w == Workload::Load && bulk && threads > 1 => {
                        Status::Skipped("bulk load is single-threaded".to_string())
                    }
                    Ok(()) => Status::Ok,
                })
                .collect())
        };
        let statuses =
            support().unwrap_or_else(|reason| vec![Status::Skipped(reason); workloads.len()]);
        let skipped = statuses
            .iter()
            .filter(|s| matches!(s, Status::Skipped(_)))
            .count();
        progress.inc((skipped * cfg.repeat) as u64);
        let active = skipped < statuses.len();
        let dist = vec![None; workloads.len()];
        let rows = workloads
            .iter()
            .zip(statuses)
            .map(|(&w, status)| row(w, status))
            .collect();
        settle_deferred_frees();
        Self {
            group: Group {
                spec,
                keys,
                budget: cfg.budget,
                tuning: cfg.tuning,
                cluster: cfg.cluster.as_deref(),
                ops: streams.ops,
                ycsb: streams.ycsb,
                mixed: streams.mixed,
                threads,
                loaded: None,
                mem_alloc: Vec::new(),
                mem_self: Vec::new(),
                latencies: Vec::new(),
                dist: None,
            },
            rows,
            dist,
            active,
            retained: 0,
            peak_rss: None,
        }
    }

    /// One repetition of every workload still running, on one freshly loaded index.
    fn pass(&mut self, progress: &ProgressBar) {
        if !self.active {
            return;
        }
        settle_deferred_frees();
        alloc::release_free_memory();
        alloc::reset_peak_rss();
        // The latency samples the pass adds to the rows are the harness's, not the index's.
        let sample_bytes = |rows: &[Measurement]| -> usize {
            rows.iter()
                .map(|m| m.latency_ns.capacity() * std::mem::size_of::<u64>())
                .sum()
        };
        let samples_before = sample_bytes(&self.rows);
        let before = alloc::current();
        let (name, kind, threads) = (
            self.group.spec.name(),
            self.group.keys.kind,
            self.group.threads,
        );
        for (m, dist) in self.rows.iter_mut().zip(&mut self.dist) {
            if m.status != Status::Ok {
                continue;
            }
            let workload = m.workload;
            progress.set_message(format!("{name} {kind} {workload} x{threads}"));
            let group = &mut self.group;
            // A panicking index (an adapter or the index itself) fails this row, not the run.
            let outcome = attempt(|| group.measure(workload)).unwrap_or_else(|panic| {
                let _ = attempt(|| group.loaded = None);
                Err(format!("panicked: {panic}"))
            });
            match outcome {
                Ok(secs) => {
                    m.mops.push(m.ops as f64 / secs / 1e6);
                    m.latency_ns.append(&mut group.latencies);
                    if let Some(delta) = group.dist.take() {
                        *dist = Some(dist.map_or(delta, |sum| cluster::stats_sum(sum, delta)));
                    }
                }
                Err(problem) => {
                    note(
                        progress,
                        &format!("FAILED {name} {kind} {workload} x{threads}: {problem}"),
                    );
                    m.status = Status::Failed(problem);
                }
            }
            progress.inc(1);
        }
        // Free this copy before the next index's pass.
        self.group.loaded = None;
        self.peak_rss = self.peak_rss.max(alloc::peak_rss_bytes());
        settle_deferred_frees();
        let samples_added = sample_bytes(&self.rows).saturating_sub(samples_before);
        self.retained += alloc::current()
            .saturating_sub(before)
            .saturating_sub(samples_added);
    }

    /// The finished rows, with memory figures; notes memory the index never freed.
    fn finish(mut self, progress: &ProgressBar) -> Vec<Measurement> {
        self.group.loaded = None;
        settle_deferred_frees();
        let (keys, threads) = (self.group.keys, self.group.threads);
        let retained = self.retained;
        // Below 1 B/key, or a few hundred KiB of thread and epoch bookkeeping at small n, is
        // not an index's leak.
        if self.active && alloc::installed() && retained > keys.len().max(256 * 1024) {
            note(
                progress,
                &format!(
                    "note: {} on {} x{threads} left {:.1} MiB allocated after its indexes were \
                     dropped ({:.1} B/key: memory the index never freed)",
                    self.group.spec.name(),
                    keys.kind,
                    retained as f64 / (1024.0 * 1024.0),
                    retained as f64 / keys.len() as f64
                ),
            );
        }
        let n = keys.len() as f64;
        let alloc_per_key = median(&self.group.mem_alloc).map(|b| b / n);
        let self_per_key = median(&self.group.mem_self).map(|b| b / n);
        for (m, dist) in self.rows.iter_mut().zip(&self.dist) {
            if matches!(m.status, Status::Skipped(_)) {
                continue;
            }
            if let Some((round_trips, masters)) = dist.and_then(cluster::per_op) {
                m.round_trips_per_op = Some(round_trips);
                m.masters_per_op = Some(masters);
            }
            m.bytes_per_key_alloc = alloc_per_key;
            m.bytes_per_key_self = self_per_key;
            m.peak_rss_bytes = self.peak_rss;
        }
        self.rows
    }
}

/// The operation streams of one key set at one thread count.
#[derive(Clone, Copy)]
struct Streams<'a> {
    ops: &'a OpStreams,
    /// The YCSB streams of the YCSB workloads asked for.
    ycsb: &'a [YcsbStream],
    /// The stream of the `mixed` workload, if asked for.
    mixed: Option<&'a MixedStream>,
}

impl Streams<'_> {
    /// Operations (keys, for `scan` and `scan-desc`) per repetition of `workload`.
    fn ops_of(&self, workload: Workload) -> u64 {
        let ops = self.ops;
        match workload {
            Workload::Load => ops.load.len() as u64,
            Workload::Lookup => ops.lookups.len() as u64,
            Workload::LookupZipf => ops.zipf_lookups.len() as u64,
            Workload::Scan => (ops.scan_starts.len() * ops.scan_len) as u64,
            Workload::ScanDesc => (ops.scan_desc_starts.len() * ops.scan_len) as u64,
            Workload::Delete => ops.deletes.len() as u64,
            Workload::Ycsb(y) => ycsb_stream(self.ycsb, y).map_or(0, |s| s.plan.len() as u64),
            Workload::Mixed => self.mixed.map_or(0, |s| s.plan.len() as u64),
        }
    }
}

/// The stream of YCSB workload `y` among `streams`.
fn ycsb_stream(streams: &[YcsbStream], y: Ycsb) -> Option<&YcsbStream> {
    streams.iter().find(|s| s.plan.workload == y)
}

/// The state of one index × key set × thread count while its workloads run.
struct Group<'a> {
    spec: IndexSpec,
    keys: &'a KeySet,
    /// The elastic kind's budget.
    budget: Budget,
    /// The SeqTree-leaf options.
    tuning: SeqTreeTuning,
    /// The cluster of the distributed kinds.
    cluster: Option<&'a str>,
    ops: &'a OpStreams,
    /// The YCSB streams of this thread count.
    ycsb: &'a [YcsbStream],
    /// The `mixed` stream of this thread count.
    mixed: Option<&'a MixedStream>,
    threads: usize,
    /// The index loaded with every key, if there is one.
    loaded: Option<Box<dyn BenchIndex>>,
    /// Allocated bytes of each load.
    mem_alloc: Vec<f64>,
    /// Self-reported bytes of each load.
    mem_self: Vec<f64>,
    /// Latency samples (ns) of the last measurement.
    latencies: Vec<u64>,
    /// Distributed kinds: the client counters of the last measurement's timed phase.
    dist: Option<DistStats>,
}

impl Group<'_> {
    /// Runs one repetition of `workload` and returns its timed seconds, or what went wrong;
    /// leaves the measurement's latency samples in `self.latencies`.
    fn measure(&mut self, workload: Workload) -> Result<f64, String> {
        let (ops, threads) = (self.ops, self.threads);
        let (secs, latencies, dist) = match workload {
            Workload::Load => {
                let (index, timed) = self.load()?;
                self.loaded = Some(index);
                timed
            }
            Workload::Lookup | Workload::LookupZipf => {
                let (keys, positions) = if workload == Workload::Lookup {
                    (&ops.lookup_keys, &ops.lookups)
                } else {
                    (&ops.zipf_lookup_keys, &ops.zipf_lookups)
                };
                lookup(self.ensure_loaded()?, keys, positions, threads, true)?
            }
            Workload::Scan | Workload::ScanDesc => {
                let (starts, direction) = if workload == Workload::Scan {
                    ((&ops.scan_starts[..], &ops.scan_keys), Direction::Ascending)
                } else {
                    (
                        (&ops.scan_desc_starts[..], &ops.scan_desc_keys),
                        Direction::Descending,
                    )
                };
                scan(
                    self.ensure_loaded()?,
                    starts,
                    ops.scan_len,
                    threads,
                    direction,
                )?
            }
            Workload::Delete => {
                self.ensure_loaded()?;
                let index = self.loaded.take().expect("just loaded");
                delete(index.as_ref(), self.keys, ops, threads)?
            }
            Workload::Ycsb(y) => {
                let stream = ycsb_stream(self.ycsb, y)
                    .ok_or_else(|| format!("no {y} stream was generated"))?;
                let index = self.fresh_with(stream.plan.loaded)?;
                ycsb(index.as_ref(), self.keys, stream, threads)?
            }
            Workload::Mixed => {
                let stream = self
                    .mixed
                    .ok_or_else(|| "no mixed stream was generated".to_string())?;
                let index = self.fresh_with(stream.plan.loaded)?;
                mixed(index.as_ref(), self.keys, stream, threads)?
            }
        };
        self.latencies = latencies;
        self.dist = dist;
        Ok(secs)
    }

    /// A fresh index of this group's spec loaded (untimed) with the first `loaded` keys, for
    /// the workloads that change the index (YCSB, `mixed`): they come last in a pass and each
    /// runs on a load of its own, so the pass's fully loaded copy is dropped first.
    fn fresh_with(&mut self, loaded: usize) -> Result<Box<dyn BenchIndex>, String> {
        self.loaded = None;
        settle_deferred_frees();
        let index = self.build()?;
        let (index, _, _) = fill(
            index,
            self.keys,
            &self.ops.load[..loaded],
            self.threads,
            None,
        )?;
        Ok(index)
    }

    /// A fresh, empty index of this group's spec.
    fn build(&self) -> Result<Box<dyn BenchIndex>, String> {
        self.spec
            .build_on(self.keys, self.budget, self.tuning, self.cluster)
    }

    /// The loaded index, loading one (untimed) if there is none.
    fn ensure_loaded(&mut self) -> Result<&dyn BenchIndex, String> {
        if self.loaded.is_none() {
            let (index, _) = self.load()?;
            self.loaded = Some(index);
        }
        Ok(self.loaded.as_deref().expect("just loaded"))
    }

    /// Builds and loads a fresh index with every key, recording its memory; returns it with
    /// the timed seconds and the sampled insert latencies.
    fn load(&mut self) -> Result<(Box<dyn BenchIndex>, Timed), String> {
        // Free the previous copy first so that its memory is not counted twice, and let the
        // frees that earlier indexes deferred to their epoch collectors happen now rather than
        // during this load.
        self.loaded = None;
        settle_deferred_frees();
        // The sample buffers are allocated before the memory reading, so that they do not
        // count as the index's.
        let latencies = Latencies::new(self.ops.load.len(), self.threads);
        let before = alloc::current();
        let index = self.build()?;
        let (index, secs, dist) = fill(
            index,
            self.keys,
            &self.ops.load,
            self.threads,
            Some(&latencies),
        )?;
        // Nodes the load retired (split, replaced) are freed now, and a merge the load
        // started has finished, so both figures below count what the loaded index holds.
        index.quiesce();
        settle_deferred_frees();
        if alloc::installed() {
            let after = alloc::current();
            self.mem_alloc.push(after.saturating_sub(before) as f64);
        }
        if let Some(bytes) = index.self_reported_bytes() {
            self.mem_self.push(bytes as f64);
        }
        Ok((index, (secs, latencies.into_samples(), dist)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_groups() {
        let ycsb: Vec<Workload> = Ycsb::ALL.iter().map(|&y| Workload::Ycsb(y)).collect();
        assert_eq!(Workload::YCSB, ycsb);
        assert!(Workload::DEFAULT.iter().all(|w| Workload::ALL.contains(w)));
        // ALL is in run order, and names parse back.
        assert!(Workload::ALL.windows(2).all(|w| w[0] < w[1]));
        for w in Workload::named() {
            assert_eq!(w.name().parse::<Workload>(), Ok(w));
        }
        // The paper mixes are named but not part of `all`.
        let mixes = crate::ycsb::UPDATE_MIXES.len()
            + crate::ycsb::SCAN_UPDATE_MIXES.len()
            + crate::ycsb::CURSOR_UPDATE_MIXES.len()
            + crate::ycsb::LOGICAL_UPDATE_MIXES.len();
        assert_eq!(Workload::named().count(), Workload::ALL.len() + mixes);
        assert!(!Workload::ALL.contains(&Workload::Ycsb(Ycsb::Updates(50))));
    }

    #[test]
    fn op_streams_are_in_range() {
        let keys = KeySetKind::Rand64.generate(1000, 7);
        let ops = OpStreams::generate(&keys, 15, 7);
        assert_eq!(ops.load.len(), 1000);
        assert!(ops.lookups.iter().all(|&i| i < 1000));
        let mut deletes = ops.deletes.clone();
        deletes.sort_unstable();
        assert_eq!(deletes, ops.load);
        // Scan starts leave at least 15 keys to the end of the sorted order.
        let rank: std::collections::HashMap<u32, usize> = ops
            .sorted
            .iter()
            .enumerate()
            .map(|(r, &i)| (i, r))
            .collect();
        assert!(ops.scan_starts.iter().all(|i| rank[i] + 15 <= 1000));
    }
}
