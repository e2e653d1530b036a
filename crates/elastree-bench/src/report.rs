//! Reports: a readable table, JSON lines and CSV.
//!
//! The table has one row per index, key set, workload and thread count: throughput median
//! [min-max] over the repetitions in millions of operations per second (keys per second for
//! `scan` and `scan-desc`), the ratio to the `btreemap` row of the same key set and workload (same thread count
//! if there is one, else its single-thread row), and bytes per key from the counting allocator
//! and as the index reports itself.
//!
//! # JSON lines and CSV fields
//!
//! `--json FILE` writes one JSON object per row, one per line; `--csv FILE` writes a header
//! line and then one line per row with the same fields in the same order ([`FIELDS`]). A
//! missing number is `null` in JSON and an empty cell in CSV.
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `index` | string | the index: `btree` (elastree) or a peer (`btreemap`, `bplustree`, `ferntree`, `congee`, `scc`, `skipmap`, `masstree`, `blart`, `sorted`) |
//! | `keys` | string | the key set (`rand64`, `mono64`, `email`, ...) |
//! | `n` | integer | keys in the key set |
//! | `workload` | string | `load`, `lookup`, `lookup-zipf`, `scan`, `scan-desc`, `delete`, or a YCSB core workload `ycsb-a` ... `ycsb-f` |
//! | `threads` | integer | threads that ran the workload |
//! | `mops_median` | number or null | median throughput over the repetitions, millions of `unit`s per second |
//! | `mops_min` | number or null | the slowest repetition's throughput |
//! | `mops_max` | number or null | the fastest repetition's throughput |
//! | `bytes_per_key_alloc` | number or null | bytes the loaded index holds according to the counting global allocator, divided by `n` |
//! | `bytes_per_key_self` | number or null | bytes the index reports for itself (its own accounting; for the distributed kinds, on the cluster's masters), divided by `n` |
//! | `peak_rss_bytes` | integer or null | the process's peak RSS while this index ran on this key set at this thread count (includes the key set and operation streams) |
//! | `p50_ns`, `p99_ns`, `max_ns` | integer or null | median, 99th percentile and largest latency of one operation, in nanoseconds, over every 16th operation of every repetition: one insert, lookup or remove; one whole scan for `scan` and `scan-desc`; one operation of whatever kind for YCSB (a YCSB-E scan is one operation). `null` for a bulk load (the sorted array) |
//! | `unit` | string | what the throughput counts: `ops`, or `keys` for `scan` and `scan-desc` (keys visited) |
//! | `ops` | integer | operations per repetition |
//! | `repeat` | integer | repetitions measured |
//! | `status` | string | `ok`, `skipped` or `failed` |
//! | `note` | string or null | why the row was skipped or what failed |
//! | `round_trips_per_op` | number | distributed kinds (`dist`, `dist-baseline`) only: network round trips per index operation over the timed phases of every repetition (retries and top refreshes included; a YCSB read-modify-write is two operations, a scan one) |
//! | `masters_per_op` | number | distributed kinds only: distinct cluster masters contacted per index operation, over the same phases |
//!
//! Throughput numbers are `null` unless `status` is `ok`. The last two fields appear only on
//! the measured rows of the distributed kinds (`dist`, `dist-baseline`); the CSV file has
//! their columns ([`DIST_FIELDS`]) only when such a row is in it, and the table shows them
//! as a `RT/op | masters/op` column.

use std::io::{self, Write};

use serde::Serialize;

use crate::output::{self, fmt_opt};
use crate::runner::{median, Summary};
use crate::workload::{Measurement, Status};

/// The name of the index every other row is compared with.
pub const BASELINE: &str = "btreemap";

/// One JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct JsonRow<'a> {
    /// Index name.
    pub index: &'a str,
    /// Key set name.
    pub keys: &'a str,
    /// Keys in the key set.
    pub n: usize,
    /// Workload name.
    pub workload: &'a str,
    /// Threads.
    pub threads: usize,
    /// Median throughput, millions of `unit`s per second.
    pub mops_median: Option<f64>,
    /// Smallest throughput of the repetitions.
    pub mops_min: Option<f64>,
    /// Largest throughput of the repetitions.
    pub mops_max: Option<f64>,
    /// Bytes per key from the counting allocator.
    pub bytes_per_key_alloc: Option<f64>,
    /// Bytes per key the index reports itself.
    pub bytes_per_key_self: Option<f64>,
    /// Peak RSS while this index ran on this key set at this thread count.
    pub peak_rss_bytes: Option<u64>,
    /// Median sampled latency, ns.
    pub p50_ns: Option<u64>,
    /// 99th-percentile sampled latency, ns.
    pub p99_ns: Option<u64>,
    /// Largest sampled latency, ns.
    pub max_ns: Option<u64>,
    /// What the throughput counts: `ops`, or `keys` for `scan` and `scan-desc`.
    pub unit: &'a str,
    /// Operations per repetition.
    pub ops: u64,
    /// Repetitions measured.
    pub repeat: usize,
    /// `ok`, `skipped` or `failed`.
    pub status: &'a str,
    /// Why the row was skipped or what failed.
    pub note: Option<&'a str>,
    /// Distributed kinds: round trips per index operation in the timed phases (left out of
    /// the JSON of the other indexes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trips_per_op: Option<f64>,
    /// Distributed kinds: distinct masters contacted per index operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masters_per_op: Option<f64>,
}

impl<'a> JsonRow<'a> {
    /// The JSON form of a measurement.
    pub fn from_measurement(m: &'a Measurement) -> Self {
        let summary = Summary::of(&m.mops);
        let (status, note) = match &m.status {
            Status::Ok => ("ok", None),
            Status::Skipped(reason) => ("skipped", Some(reason.as_str())),
            Status::Failed(problem) => ("failed", Some(problem.as_str())),
        };
        let ok = m.status == Status::Ok;
        let mut latencies = m.latency_ns.clone();
        latencies.sort_unstable();
        let percentile = |p: f64| -> Option<u64> {
            let last = latencies.len().checked_sub(1)?;
            (ok).then(|| latencies[((last as f64) * p).round() as usize])
        };
        JsonRow {
            index: &m.index,
            keys: m.keys.name(),
            n: m.n,
            workload: m.workload.name(),
            threads: m.threads,
            mops_median: summary.filter(|_| ok).map(|s| s.median),
            mops_min: summary.filter(|_| ok).map(|s| s.min),
            mops_max: summary.filter(|_| ok).map(|s| s.max),
            bytes_per_key_alloc: m.bytes_per_key_alloc,
            bytes_per_key_self: m.bytes_per_key_self,
            peak_rss_bytes: m.peak_rss_bytes,
            p50_ns: percentile(0.50),
            p99_ns: percentile(0.99),
            max_ns: percentile(1.0),
            unit: m.workload.unit(),
            ops: m.ops,
            repeat: m.mops.len(),
            status,
            note,
            round_trips_per_op: m.round_trips_per_op.filter(|_| ok),
            masters_per_op: m.masters_per_op.filter(|_| ok),
        }
    }
}

/// The fields of a JSON line and the columns of the CSV file, in order.
pub const FIELDS: &[&str] = &[
    "index",
    "keys",
    "n",
    "workload",
    "threads",
    "mops_median",
    "mops_min",
    "mops_max",
    "bytes_per_key_alloc",
    "bytes_per_key_self",
    "peak_rss_bytes",
    "p50_ns",
    "p99_ns",
    "max_ns",
    "unit",
    "ops",
    "repeat",
    "status",
    "note",
];

/// The columns the CSV file adds after [`FIELDS`] when a distributed kind ran (their JSON
/// fields appear only on the rows of the distributed kinds).
pub const DIST_FIELDS: &[&str] = &["round_trips_per_op", "masters_per_op"];

/// Writes a CSV header line ([`FIELDS`], and [`DIST_FIELDS`] when a distributed kind ran)
/// and one line per measurement with the JSON lines' values; a missing number is an empty
/// cell.
pub fn write_csv(rows: &[Measurement], out: &mut impl Write) -> io::Result<()> {
    let mut fields = FIELDS.to_vec();
    if rows.iter().any(|m| m.round_trips_per_op.is_some()) {
        fields.extend_from_slice(DIST_FIELDS);
    }
    output::write_csv(out, &fields, rows.iter().map(JsonRow::from_measurement))
}

/// Writes one JSON object per measurement, one per line.
pub fn write_json_lines(rows: &[Measurement], out: &mut impl Write) -> io::Result<()> {
    output::write_json_lines(out, rows.iter().map(JsonRow::from_measurement))
}

/// The baseline row for `m`: the first successful `btreemap` row of the same key set and
/// workload, preferring the same thread count and falling back to one thread.
fn baseline<'a>(rows: &'a [Measurement], m: &Measurement) -> Option<&'a Measurement> {
    let candidates = || {
        rows.iter().filter(|b| {
            b.index == BASELINE
                && b.keys == m.keys
                && b.workload == m.workload
                && b.status == Status::Ok
                && !b.mops.is_empty()
        })
    };
    candidates()
        .find(|b| b.threads == m.threads)
        .or_else(|| candidates().find(|b| b.threads == 1))
}

fn fmt_bytes(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    format!("{:.0} MiB", bytes as f64 / MIB)
}

/// Renders the table, rows in the order given (callers sort them; see [`sort_for_report`]).
pub fn render_table(rows: &[Measurement]) -> String {
    let distributed = rows.iter().any(|m| m.round_trips_per_op.is_some());
    let mut header: Vec<String> = [
        "index",
        "keys",
        "workload",
        "thr",
        "Mops/s median [min-max]",
        &format!("vs {BASELINE}"),
        "B/key alloc",
        "B/key self",
        "peak RSS",
    ]
    .map(str::to_string)
    .to_vec();
    if distributed {
        header.push("RT/op | masters/op".to_string());
    }
    let (cells, notes): (Vec<Vec<String>>, Vec<Option<String>>) =
        rows.iter().map(|m| table_row(rows, m, distributed)).unzip();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = aligned(&header, &widths);
    out.push('\n');
    let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    let mut previous: Option<(&str, &str, usize)> = None;
    for ((row, note), m) in cells.iter().zip(&notes).zip(rows) {
        let group = (m.keys.name(), m.workload.name(), m.threads);
        if previous.is_some_and(|p| p != group) {
            out.push('\n');
        }
        previous = Some(group);
        out.push_str(&aligned(row, &widths));
        if let Some(note) = note {
            out.push_str("  (");
            out.push_str(note);
            out.push(')');
        }
        out.push('\n');
    }
    out.push_str(TABLE_LEGEND);
    out
}

/// What the columns of [`render_table`] mean.
const TABLE_LEGEND: &str = "* scan and scan-desc throughput counts keys visited per second. \
     Ratios compare medians with the btreemap row of the same keys and workload.\n\
     B/key alloc: bytes the loaded index allocated (counting allocator) / keys; B/key self: \
     the index's own accounting (for dist and dist-baseline: what the tree takes on the \
     cluster's masters, one copy, as Redis counts each key).\n\
     peak RSS: process high-water mark during that index's runs, reset at their start; it \
     includes the key set and operation streams.\n";

/// The cells of `m`'s line in [`render_table`] (`rows` holds its baseline), and the note
/// that follows the line (why it was skipped or failed).
fn table_row(
    rows: &[Measurement],
    m: &Measurement,
    distributed: bool,
) -> (Vec<String>, Option<String>) {
    let (throughput, ratio, note) = match &m.status {
        Status::Ok => {
            let s = Summary::of(&m.mops);
            let throughput = s.map_or_else(
                || "-".to_string(),
                |s| format!("{:.3} [{:.3}-{:.3}]", s.median, s.min, s.max),
            );
            let ratio = match (baseline(rows, m).and_then(|b| median(&b.mops)), s) {
                (Some(base), Some(s)) if base > 0.0 => format!("{:.2}x", s.median / base),
                _ => "-".to_string(),
            };
            (throughput, ratio, None)
        }
        Status::Skipped(reason) => ("skipped".to_string(), "-".to_string(), Some(reason.clone())),
        Status::Failed(problem) => ("FAILED".to_string(), "-".to_string(), Some(problem.clone())),
    };
    let scan_mark = if m.workload.unit() == "keys" { "*" } else { "" };
    let mut row = vec![
        m.index.clone(),
        m.keys.name().to_string(),
        format!("{}{scan_mark}", m.workload.name()),
        m.threads.to_string(),
        throughput,
        ratio,
        fmt_opt(m.bytes_per_key_alloc, 1),
        fmt_opt(m.bytes_per_key_self, 1),
        m.peak_rss_bytes.map_or_else(|| "-".to_string(), fmt_bytes),
    ];
    if distributed {
        row.push(match (m.round_trips_per_op, m.masters_per_op) {
            (Some(rt), Some(masters)) if m.status == Status::Ok => {
                format!("{rt:.2} | {masters:.2}")
            }
            _ => "-".to_string(),
        });
    }
    (row, note)
}

/// One line of [`render_table`]: the three text columns left-aligned, numbers right-aligned.
fn aligned(row: &[String], widths: &[usize]) -> String {
    let parts: Vec<String> = row
        .iter()
        .zip(widths)
        .enumerate()
        .map(|(column, (cell, &w))| {
            if column < 3 {
                format!("{cell:<w$}")
            } else {
                format!("{cell:>w$}")
            }
        })
        .collect();
    parts.join("  ").trim_end().to_string()
}

/// Sorts rows for the table: by key set (in `keysets` order), workload, thread count, then
/// index (in `indexes` order), so the indexes of one measurement sit side by side.
pub fn sort_for_report(rows: &mut [Measurement], keysets: &[&str], indexes: &[&str]) {
    let position =
        |list: &[&str], name: &str| list.iter().position(|&x| x == name).unwrap_or(usize::MAX);
    rows.sort_by_key(|m| {
        (
            position(keysets, m.keys.name()),
            m.workload,
            m.threads,
            position(indexes, &m.index),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeySetKind;
    use crate::workload::Workload;

    fn row(index: &str, threads: usize, mops: &[f64], status: Status) -> Measurement {
        Measurement {
            index: index.to_string(),
            keys: KeySetKind::Rand64,
            n: 1000,
            workload: Workload::Lookup,
            threads,
            ops: 1000,
            mops: mops.to_vec(),
            latency_ns: (1..=100).collect(),
            bytes_per_key_alloc: Some(40.0),
            bytes_per_key_self: None,
            peak_rss_bytes: Some(1 << 20),
            round_trips_per_op: None,
            masters_per_op: None,
            status,
        }
    }

    #[test]
    fn summary_median_min_max() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn table_has_ratios_against_btreemap() {
        let rows = vec![
            row("btreemap", 1, &[1.0, 1.0, 1.0], Status::Ok),
            row("btree", 1, &[2.0, 3.0, 4.0], Status::Ok),
            row("btree", 2, &[5.0], Status::Ok),
            row("congee", 1, &[], Status::Skipped("no".to_string())),
        ];
        let table = render_table(&rows);
        assert!(table.contains("3.00x"), "{table}");
        assert!(table.contains("5.00x"), "{table}");
        assert!(table.contains("skipped"), "{table}");
        assert!(table.contains("(no)"), "{table}");
    }

    #[test]
    fn json_lines_have_the_fields() {
        let rows = vec![row("btree", 1, &[2.0, 3.0, 4.0], Status::Ok)];
        let mut out = Vec::new();
        write_json_lines(&rows, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1);
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["mops_median"], 3.0);
        // Latencies 1..=100 ns: nearest-rank percentiles.
        assert_eq!(
            (&v["p50_ns"], &v["p99_ns"], &v["max_ns"]),
            (
                &serde_json::json!(51),
                &serde_json::json!(99),
                &serde_json::json!(100)
            )
        );
        assert_eq!(v["index"], "btree");
        assert_eq!(v["status"], "ok");
        let object = v.as_object().unwrap();
        let keys: Vec<&str> = object.keys().map(|k| k.as_str()).collect();
        let mut fields = FIELDS.to_vec();
        fields.sort_unstable();
        let mut keys_sorted = keys.clone();
        keys_sorted.sort_unstable();
        assert_eq!(keys_sorted, fields, "FIELDS lists exactly the JSON fields");
    }

    #[test]
    fn csv_has_a_header_and_the_json_values() {
        let rows = vec![
            row("btree", 1, &[2.0, 3.0, 4.0], Status::Ok),
            row(
                "congee",
                1,
                &[],
                Status::Skipped("no, \"really\"".to_string()),
            ),
        ];
        let mut out = Vec::new();
        write_csv(&rows, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], FIELDS.join(","));
        assert_eq!(
            lines[1],
            "btree,rand64,1000,lookup,1,3.0,2.0,4.0,40.0,,1048576,51,99,100,ops,1000,3,ok,"
        );
        assert!(
            lines[2].ends_with(",skipped,\"no, \"\"really\"\"\""),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn distributed_rows_add_their_fields() {
        let mut dist = row("dist", 1, &[0.01], Status::Ok);
        dist.round_trips_per_op = Some(1.0);
        dist.masters_per_op = Some(1.0);
        let rows = vec![row("btree", 1, &[2.0], Status::Ok), dist];
        let mut out = Vec::new();
        write_csv(&rows, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with(",note,round_trips_per_op,masters_per_op"),
            "{text}"
        );
        assert!(lines[1].ends_with(",ok,,,"), "{text}");
        assert!(lines[2].ends_with(",ok,,1.0,1.0"), "{text}");
        let mut json = Vec::new();
        write_json_lines(&rows, &mut json).unwrap();
        let json = String::from_utf8(json).unwrap();
        let (btree, dist) = json.split_once('\n').unwrap();
        assert!(!btree.contains("round_trips_per_op"), "{btree}");
        assert!(dist.contains("\"round_trips_per_op\":1.0"), "{dist}");
        let table = render_table(&rows);
        assert!(
            table.contains("RT/op | masters/op") && table.contains("1.00 | 1.00"),
            "{table}"
        );
    }
}
