//! Suite experiments over *variants*: one index kind measured under several settings (an
//! elastic tree at several budgets, a seqtree at several BlindiTree levels or breathing
//! slacks), each reported as an index of its own under its label (`elastic-25%`,
//! `seqtree L3 s4`).
//!
//! The suite runner ([`crate::workload::run_suite`]) takes one budget and one tuning per run,
//! so [`measure_variants`] runs it once per variant and repetition, one repetition at a time
//! and variant after variant (repetitions interleave the variants as the runner interleaves
//! indexes), and merges the rows of each label: the throughputs of every repetition, and the
//! median of the repetitions' memory figures. Every run of one key set regenerates the same
//! keys and operation streams from the same seed.

use elastree::elastic::ElasticStats;

use crate::keys::{KeySet, KeySetKind};
use crate::peers::{BenchIndex, Budget, IndexSpec, SeqTreeTuning};
use crate::report::sort_for_report;
use crate::runner;
use crate::runner::median;
use crate::runner::settle::settle_deferred_frees;
use crate::runner::Summary;
use crate::workload::{Measurement, RunConfig, Status, Workload};

/// An index under one setting, measured as an index of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// The name its rows, tables and plots carry.
    pub label: String,
    /// The index.
    pub spec: IndexSpec,
    /// The elastic kind's budget.
    pub budget: Budget,
    /// The SeqTree-leaf options.
    pub tuning: SeqTreeTuning,
}

impl Variant {
    /// `spec` with the default budget and tuning, labelled with its name.
    pub fn plain(spec: IndexSpec) -> Self {
        Variant {
            label: spec.name().to_string(),
            spec,
            budget: Budget::default(),
            tuning: SeqTreeTuning::default(),
        }
    }
}

/// Measures every variant on the key sets, workloads and thread counts of `base` (its
/// `indexes`, `budget` and `tuning` are the variants'), `base.repeat` interleaved
/// repetitions, and returns one row per label, key set, workload and thread count, sorted
/// for the report (labels in `variants` order).
pub fn measure_variants(
    base: &RunConfig,
    variants: &[Variant],
) -> Result<Vec<Measurement>, String> {
    let mut merged: Vec<Merged> = Vec::new();
    for rep in 0..base.repeat {
        for v in variants {
            let cfg = RunConfig {
                indexes: vec![v.spec],
                repeat: 1,
                budget: v.budget,
                tuning: v.tuning,
                ..base.clone()
            };
            cfg.validate()?;
            eprintln!("{}: repetition {}/{}", v.label, rep + 1, base.repeat);
            for mut row in runner::measure(&cfg) {
                row.index = v.label.clone();
                match merged.iter_mut().find(|m| same_cell(&m.row, &row)) {
                    Some(m) => m.add(row),
                    None => merged.push(Merged::new(row)),
                }
            }
        }
    }
    let mut rows: Vec<Measurement> = merged.into_iter().map(Merged::finish).collect();
    let keysets: Vec<&str> = base.keysets.iter().map(|k| k.name()).collect();
    let labels: Vec<&str> = variants.iter().map(|v| v.label.as_str()).collect();
    sort_for_report(&mut rows, &keysets, &labels);
    Ok(rows)
}

/// Whether `a` and `b` measure the same index (by name), key set, workload and threads.
fn same_cell(a: &Measurement, b: &Measurement) -> bool {
    a.index == b.index && a.keys == b.keys && a.workload == b.workload && a.threads == b.threads
}

/// The rows of one label, key set, workload and thread count over the repetitions so far.
struct Merged {
    row: Measurement,
    alloc: Vec<f64>,
    own: Vec<f64>,
}

impl Merged {
    fn new(row: Measurement) -> Self {
        let mut merged = Merged {
            alloc: Vec::new(),
            own: Vec::new(),
            row: Measurement {
                mops: Vec::new(),
                latency_ns: Vec::new(),
                ..row.clone()
            },
        };
        merged.add(row);
        merged
    }

    /// Adds one repetition's row: its throughputs, latencies and memory; a failure or skip
    /// of any repetition is the label's.
    fn add(&mut self, mut row: Measurement) {
        self.row.mops.append(&mut row.mops);
        self.row.latency_ns.append(&mut row.latency_ns);
        self.alloc.extend(row.bytes_per_key_alloc);
        self.own.extend(row.bytes_per_key_self);
        self.row.peak_rss_bytes = self.row.peak_rss_bytes.max(row.peak_rss_bytes);
        if self.row.status == Status::Ok {
            self.row.status = row.status;
        }
    }

    fn finish(mut self) -> Measurement {
        self.row.bytes_per_key_alloc = median(&self.alloc);
        self.row.bytes_per_key_self = median(&self.own);
        self.row
    }
}

/// An index of `spec` (with `budget` and `tuning`) holding the first `count` keys of `keys`,
/// inserted on one thread, untimed: for calibrating budgets and reading what the elasticity
/// algorithm did.
pub fn load_prefix(
    spec: IndexSpec,
    keys: &KeySet,
    count: usize,
    budget: Budget,
    tuning: SeqTreeTuning,
) -> Result<Box<dyn BenchIndex>, String> {
    let index = spec.build_tuned(keys, budget, tuning)?;
    for i in 0..count.min(keys.len()) {
        index.insert(keys.key(i), i as u64);
    }
    // Nodes the load retired are freed now, so that the index's accounting counts only what
    // it holds (as after a timed load).
    index.quiesce();
    settle_deferred_frees();
    Ok(index)
}

/// The bytes an elastree index of `spec` reports itself holding with the first `count` keys
/// of `keys` (see [`load_prefix`]).
pub fn own_bytes(
    spec: IndexSpec,
    keys: &KeySet,
    count: usize,
    budget: Budget,
) -> Result<usize, String> {
    load_prefix(spec, keys, count, budget, SeqTreeTuning::default())?
        .self_reported_bytes()
        .ok_or_else(|| format!("{} does not account for its memory", spec.name()))
}

/// What the elasticity algorithm of each elastic variant did while loading the first `count`
/// keys of `keys` untimed, as a Markdown list (empty if no variant is elastic).
pub fn elastic_activity(variants: &[Variant], keys: &KeySet, count: usize) -> String {
    let mut md = String::new();
    for v in variants {
        if v.spec != ELASTIC {
            continue;
        }
        let line = match load_prefix(v.spec, keys, count, v.budget, v.tuning) {
            Ok(index) => {
                let bytes = index.self_reported_bytes().unwrap_or(0);
                match index.stats_as::<ElasticStats>() {
                    Some(stats) => describe_stats(&stats, bytes, v.budget.bytes(keys.len())),
                    None => "no elasticity statistics".to_string(),
                }
            }
            Err(e) => format!("could not be built: {e}"),
        };
        md.push_str(&format!("- `{}`: {line}\n", v.label));
    }
    md
}

/// One line on `stats` of an index holding `bytes` under a budget of `budget` bytes.
pub fn describe_stats(stats: &ElasticStats, bytes: usize, budget: usize) -> String {
    format!(
        "{} compactions, {} SeqTree grows, {} expansions, {} sweep conversions (pairs of cold \
         standard leaves); {:.3} MiB of a {:.3} MiB budget ({:.2}x){}",
        stats.compactions,
        stats.grows,
        stats.expansions,
        stats.sweeps,
        bytes as f64 / MIB,
        budget as f64 / MIB,
        bytes as f64 / budget.max(1) as f64,
        if stats.over_budget {
            "; went over its bound at some point"
        } else {
            ""
        }
    )
}

/// Bytes in a MiB.
pub const MIB: f64 = 1024.0 * 1024.0;

/// The row of `label` on `keys` under `workload` (its first thread count), if it ran.
fn ok_row<'a>(
    rows: &'a [Measurement],
    label: &str,
    keys: KeySetKind,
    workload: Workload,
) -> Option<&'a Measurement> {
    rows.iter()
        .find(|m| m.index == label && m.keys == keys && m.workload == workload)
        .filter(|m| m.status == Status::Ok)
}

/// The median, minimum and maximum throughput of `label` on `keys` under `workload`, if it
/// was measured.
pub fn mops_summary(
    rows: &[Measurement],
    label: &str,
    keys: KeySetKind,
    workload: Workload,
) -> Option<Summary> {
    ok_row(rows, label, keys, workload).and_then(|m| Summary::of(&m.mops))
}

/// The bytes `label` held once loaded with every key of `keys` (median over the
/// repetitions): by its own accounting (`own`) or by the counting allocator.
pub fn loaded_bytes(rows: &[Measurement], label: &str, keys: KeySetKind, own: bool) -> Option<f64> {
    let m = ok_row(rows, label, keys, Workload::Load)?;
    let per_key = if own {
        m.bytes_per_key_self
    } else {
        m.bytes_per_key_alloc
    };
    per_key.map(|b| b * m.n as f64)
}

/// `a / b` when both are known and `b` is positive.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// A ratio as `0.93x`, or `-`.
pub fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{r:.2}x"))
}

/// The Markdown table of what each variant held once loaded with every key of `keys`: its
/// budget (elastic variants), its own accounting and the allocator's figure in MiB and bytes
/// per key, and its own bytes as a fraction of `reference` (a name and a byte count, e.g.
/// the data size or `btree`'s bytes) and of its budget.
pub fn memory_table(
    rows: &[Measurement],
    variants: &[Variant],
    keys: KeySetKind,
    n: usize,
    reference: (&str, Option<f64>),
) -> String {
    let mut md = String::new();
    let (reference_name, reference_bytes) = reference;
    md.push_str(&format!(
        "| index | budget MiB | own MiB | own B/key | alloc MiB | alloc B/key | own / \
         {reference_name} | own / budget |\n|---|---|---|---|---|---|---|---|\n"
    ));
    let mib = |b: Option<f64>| b.map_or_else(|| "-".to_string(), |b| format!("{:.2}", b / MIB));
    let per_key =
        |b: Option<f64>| b.map_or_else(|| "-".to_string(), |b| format!("{:.1}", b / n as f64));
    for v in variants {
        let own = loaded_bytes(rows, &v.label, keys, true);
        let alloc = loaded_bytes(rows, &v.label, keys, false);
        let budget = (v.spec == ELASTIC).then(|| v.budget.bytes(n) as f64);
        md.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} |\n",
            v.label,
            mib(budget),
            mib(own),
            per_key(own),
            mib(alloc),
            per_key(alloc),
            fmt_ratio(ratio(own, reference_bytes)),
            fmt_ratio(ratio(own, budget)),
        ));
    }
    md
}

/// The elastic tree.
pub const ELASTIC: IndexSpec = IndexSpec::Elastree(elastree::IndexKind::Elastic);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_measured_under_their_labels_and_merged_over_repetitions() {
        let base = RunConfig {
            indexes: Vec::new(),
            keysets: vec![KeySetKind::Rand64],
            n: 2_000,
            workloads: vec![Workload::Load, Workload::Lookup],
            threads: vec![1],
            repeat: 2,
            seed: 3,
            scan_len: 15,
            budget: Budget::default(),
            tuning: SeqTreeTuning::default(),
            cluster: None,
        };
        let elastic = IndexSpec::Elastree(elastree::IndexKind::Elastic);
        let seqtree = IndexSpec::Elastree(elastree::IndexKind::SeqTree);
        let variants = [
            Variant {
                label: "elastic-tight".to_string(),
                budget: Budget::PerKey(8.0),
                ..Variant::plain(elastic)
            },
            Variant {
                label: "seqtree L0".to_string(),
                tuning: SeqTreeTuning {
                    tree_levels: Some(0),
                    breathing: None,
                },
                ..Variant::plain(seqtree)
            },
            Variant::plain(IndexSpec::Elastree(elastree::IndexKind::BTree)),
        ];
        let rows = measure_variants(&base, &variants).unwrap();
        let names: Vec<&str> = rows.iter().map(|m| m.index.as_str()).collect();
        assert_eq!(
            names,
            [
                "elastic-tight",
                "seqtree L0",
                "btree",
                "elastic-tight",
                "seqtree L0",
                "btree"
            ]
        );
        assert!(rows
            .iter()
            .all(|m| m.status == Status::Ok && m.mops.len() == 2));
        assert!(rows.iter().all(|m| m.bytes_per_key_self.is_some()));
        let activity = elastic_activity(&variants, &base.keysets[0].generate(2_000, 3), 2_000);
        assert!(activity.starts_with("- `elastic-tight`: "), "{activity}");
        assert!(activity.contains("compactions"), "{activity}");
        // The B+-tree has no SeqTree leaves to tune.
        let keys = KeySetKind::Rand64.generate(10, 1);
        let tuned = SeqTreeTuning {
            tree_levels: Some(3),
            breathing: None,
        };
        assert!(load_prefix(variants[2].spec, &keys, 10, Budget::default(), tuned).is_err());
        assert!(own_bytes(seqtree, &keys, 10, Budget::default()).unwrap() > 0);
    }
}
