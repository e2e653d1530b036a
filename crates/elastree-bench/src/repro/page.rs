//! `btree-page` (the Bw-tree paper's Figures 8, 9 and 13): elastree's B+-tree in its three
//! page organizations for variable-length keys (`btree-base`: slotted nodes; `btree-prefix`:
//! optimized pages split in the middle; `btree`: optimized pages with Prefix+Split, the
//! default) beside BTreeMap and the peers that take variable-length keys, on six key sets:
//! load, lookup and 15-key scan throughput and bytes per key (the suite of
//! [`super::baseline`]), then each organization's shape: total and inner-node bytes per key
//! and the bytes stored per key at every level (`pages.jsonl`, `pages.csv`).

use std::fmt::Write as _;

use elastree::btree::LevelShape;
use elastree::{BTreeIndex, BTreeOptions, Index, IndexOptions, PageOrganization};
use serde::Serialize;

use super::baseline::{write_suite, Suite};
use super::document::{targets_table_of, Target};
use super::plots::{draw_grouped_bars, Point, Series};
use super::{ExperimentContext, Report};
use crate::keys::KeySetKind;
use crate::output::{to_file, write_csv, write_json_lines};
use crate::peers::{key_len_of, IndexSpec, Peer};
use crate::report::BASELINE;
use crate::runner;
use crate::workload::{RunConfig, Workload, DEFAULT_SCAN_LEN};

/// The key sets: the paper's (document terms, 20-byte hashes, 28-byte keys with shared
/// prefixes) and the ones users index most (e-mail addresses, URLs, dictionary words).
pub const KEYSETS: &[KeySetKind] = &[
    KeySetKind::Email,
    KeySetKind::DocTerm,
    KeySetKind::Prefix28,
    KeySetKind::Url,
    KeySetKind::Words,
    KeySetKind::Sha1,
];

/// The peers that take variable-length keys.
const PEERS: &[Peer] = &[
    Peer::BTreeMap,
    Peer::BPlusTree,
    Peer::FernTree,
    Peer::Scc,
    Peer::SkipMap,
    Peer::MassTree,
    Peer::Blart,
];

/// The organizations in the order of the paper, with the names the suite's rows use.
const ORGANIZATIONS: &[(PageOrganization, &str)] = &[
    (PageOrganization::Base, "btree-base"),
    (PageOrganization::Prefix, "btree-prefix"),
    (PageOrganization::PrefixSplit, "btree"),
];

/// The suite's run: the three organizations and the peers, load, lookup and scan.
fn config(ctx: &ExperimentContext<'_>) -> RunConfig {
    // The default organization first: the summary compares the first index with BTreeMap.
    let organizations = [
        IndexSpec::Elastree(elastree::IndexKind::BTree),
        IndexSpec::Pages(elastree::IndexKind::BTree, PageOrganization::Base),
        IndexSpec::Pages(elastree::IndexKind::BTree, PageOrganization::Prefix),
    ];
    RunConfig {
        indexes: organizations
            .into_iter()
            .chain(PEERS.iter().map(|&p| IndexSpec::Peer(p)))
            .collect(),
        keysets: KEYSETS.to_vec(),
        n: ctx.n,
        workloads: vec![Workload::Load, Workload::Lookup, Workload::Scan],
        threads: vec![1],
        repeat: ctx.repeat,
        seed: ctx.seed,
        scan_len: DEFAULT_SCAN_LEN,
        budget: crate::peers::Budget::default(),
        tuning: crate::peers::SeqTreeTuning::default(),
        cluster: None,
    }
}

/// `btree-page`.
pub(super) fn run(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let cfg = config(ctx);
    cfg.validate()?;
    for keys in KEYSETS {
        keys.available()?;
    }
    let rows = runner::measure(&cfg);
    let labels: Vec<String> = cfg.indexes.iter().map(|s| s.name().to_string()).collect();
    let mut report = write_suite(ctx, &cfg, &labels, BASELINE, &rows)?;
    let shapes = measure_shapes(ctx)?;
    write_shapes(ctx, &shapes, &mut report)?;
    let suite = Suite {
        name: ctx.experiment.name,
        cfg: &cfg,
        labels: &labels,
        baseline: BASELINE,
        rows: &rows,
    };
    let targets = targets(&suite, &shapes);
    let table = targets_table_of("10 million keys where the key set has them", &targets);
    report.sections.insert(0, ("Targets".to_string(), table));
    report
        .sections
        .push(("Page organizations".to_string(), shapes_table(&shapes)));
    report
        .sections
        .push(("What the paper reports".to_string(), PAPER.to_string()));
    report.facts.push(
        "btree is elastree's B+-tree in its default organization, Prefix+Split; btree-base \
         and btree-prefix are the others"
            .to_string(),
    );
    Ok(report)
}

/// One organization's shape on one key set, after loading every key (one thread).
struct Shape {
    keys: KeySetKind,
    pages: PageOrganization,
    n: usize,
    total: usize,
    inner: usize,
    levels: Vec<LevelShape>,
}

/// Loads each key set into each organization and reads its memory and shape.
fn measure_shapes(ctx: &ExperimentContext<'_>) -> Result<Vec<Shape>, String> {
    let mut shapes = Vec::new();
    for &keys in KEYSETS {
        let set = keys.generate(ctx.n, ctx.seed);
        for &(pages, _) in ORGANIZATIONS {
            eprintln!("{}: shape of {pages} pages on {keys}", ctx.experiment.name);
            let options = IndexOptions {
                key_len: key_len_of(keys.width()),
                ..IndexOptions::default()
            };
            let index = BTreeIndex::with_options(&options, &BTreeOptions::default().pages(pages))
                .map_err(|e| format!("building {pages} pages: {e}"))?;
            for i in 0..set.len() {
                set.key(i)
                    .with_bytes(|k| index.insert(k, i as u64))
                    .map_err(|e| format!("{pages} pages on {keys}: {e}"))?;
            }
            let memory = index.memory();
            shapes.push(Shape {
                keys,
                pages,
                n: set.len(),
                total: memory.total(),
                inner: memory.inner,
                levels: index.shape(),
            });
        }
    }
    Ok(shapes)
}

/// One row of `pages.jsonl` / `pages.csv`: one level of one organization on one key set.
#[derive(Serialize)]
struct ShapeRow {
    keys: &'static str,
    pages: &'static str,
    n: usize,
    bytes_per_key: f64,
    inner_bytes_per_key: f64,
    level: u16,
    nodes: usize,
    entries: usize,
    key_bytes_per_entry: f64,
}

/// The fields of [`ShapeRow`], in CSV order.
const SHAPE_FIELDS: &[&str] = &[
    "keys",
    "pages",
    "n",
    "bytes_per_key",
    "inner_bytes_per_key",
    "level",
    "nodes",
    "entries",
    "key_bytes_per_entry",
];

fn shape_rows(shapes: &[Shape]) -> Vec<ShapeRow> {
    shapes
        .iter()
        .flat_map(|s| {
            s.levels.iter().map(move |l| ShapeRow {
                keys: s.keys.name(),
                pages: s.pages.name(),
                n: s.n,
                bytes_per_key: s.total as f64 / s.n.max(1) as f64,
                inner_bytes_per_key: s.inner as f64 / s.n.max(1) as f64,
                level: l.level,
                nodes: l.nodes,
                entries: l.entries,
                key_bytes_per_entry: l.key_bytes_per_entry(),
            })
        })
        .collect()
}

/// Writes the shape rows and the two memory plots.
fn write_shapes(
    ctx: &ExperimentContext<'_>,
    shapes: &[Shape],
    report: &mut Report,
) -> Result<(), String> {
    let rows = shape_rows(shapes);
    for (file, json) in [("pages.jsonl", true), ("pages.csv", false)] {
        to_file(&ctx.out.join(file), |out| {
            if json {
                write_json_lines(out, &rows)
            } else {
                write_csv(out, SHAPE_FIELDS, &rows)
            }
        })
        .map_err(|e| format!("{file}: {e}"))?;
        report.files.push(file.to_string());
    }
    let categories: Vec<&str> = KEYSETS.iter().map(|k| k.name()).collect();
    let plots = [
        ("pages-memory.png", "bytes per key, whole index", false),
        ("pages-inner.png", "inner-node bytes per key", true),
    ];
    for (file, what, inner) in plots {
        let series: Vec<Series> = ORGANIZATIONS
            .iter()
            .map(|&(pages, _)| {
                let values = KEYSETS
                    .iter()
                    .map(|&k| per_key(shapes, k, pages, inner).map(Point::from))
                    .collect();
                (format!("{pages} pages"), values)
            })
            .collect();
        let title = format!(
            "{}: {what} (index's own accounting), n={}",
            ctx.experiment.name, ctx.n
        );
        draw_grouped_bars(&ctx.out.join(file), &title, &categories, &series)
            .map_err(|e| format!("{file}: {e}"))?;
        report.plots.push((what.to_string(), file.to_string()));
        report.files.push(file.to_string());
    }
    Ok(())
}

/// Bytes per key of an organization on a key set: the whole index, or its inner nodes.
fn per_key(
    shapes: &[Shape],
    keys: KeySetKind,
    pages: PageOrganization,
    inner: bool,
) -> Option<f64> {
    let s = shapes.iter().find(|s| s.keys == keys && s.pages == pages)?;
    let bytes = if inner { s.inner } else { s.total };
    Some(bytes as f64 / s.n.max(1) as f64)
}

/// The Markdown table of the shapes: bytes per key (whole, inner) and stored key bytes per
/// entry at each level, leaves first.
fn shapes_table(shapes: &[Shape]) -> String {
    let mut md = String::from(
        "The index's own accounting after loading every key (one thread), and the bytes each \
         level stores per entry for its keys (slotted nodes: head word, length and offset, \
         heap words; optimized pages: the prefix once, then mid-key, suffix location and \
         suffix):\n\n| key set | pages | B/key | inner B/key | key bytes per entry, leaves first |\n\
         |---|---|---:|---:|---|\n",
    );
    for s in shapes {
        let levels: Vec<String> = s
            .levels
            .iter()
            .rev()
            .map(|l| format!("{:.1}", l.key_bytes_per_entry()))
            .collect();
        let n = s.n.max(1) as f64;
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.2} | {} |",
            s.keys,
            s.pages,
            s.total as f64 / n,
            s.inner as f64 / n,
            levels.join(" / ")
        );
    }
    md
}

/// `a / b` where both are known and `b` is positive.
fn over(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    a.zip(b.filter(|&b| b > 0.0)).map(|(a, b)| a / b)
}

/// The lowest of the ratios, or `None` if any is unknown.
fn worst(ratios: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    ratios
        .collect::<Option<Vec<f64>>>()?
        .into_iter()
        .reduce(f64::min)
}

/// The targets, from this run's numbers.
fn targets(suite: &Suite<'_>, shapes: &[Shape]) -> Vec<Target> {
    let x = |r: f64| format!("{r:.2}x");
    let speed = |index: &str, base: &str, w: Workload, keys: &[KeySetKind]| {
        worst(
            keys.iter()
                .map(|&k| over(suite.median(index, k, w), suite.median(base, k, w))),
        )
    };
    let bytes = |index: &str, k: KeySetKind| suite.bytes_per_key(index, k).0;
    let memory = |keys: &[KeySetKind]| {
        keys.iter()
            .map(|&k| over(bytes("btree", k), bytes(BASELINE, k)))
            .try_fold(0.0f64, |worst, r| r.map(|r| worst.max(r)))
    };
    let compressible = &KEYSETS[..4];
    let inner = worst(
        [KeySetKind::DocTerm, KeySetKind::Prefix28]
            .iter()
            .map(|&k| {
                over(
                    per_key(shapes, k, PageOrganization::Base, true),
                    per_key(shapes, k, PageOrganization::PrefixSplit, true),
                )
            }),
    );
    vec![
        Target::check("bytes per key at most 0.6x BTreeMap's on email, docterm, prefix28 and url (the largest ratio)", memory(compressible), |r| r <= 0.6, x),
        Target::check("bytes per key at most 1.0x BTreeMap's on sha1", memory(&[KeySetKind::Sha1]), |r| r <= 1.0, x),
        Target::check("inner-node bytes at most 1/4 of Base's on docterm and prefix28 (Base over Prefix+Split, the smaller)", inner, |r| r >= 4.0, |r| format!("{r:.2}x smaller")),
        Target::check("lookups at least 1.4x Base on every key set (the smallest ratio)", speed("btree", "btree-base", Workload::Lookup, KEYSETS), |r| r >= 1.4, x),
        Target::check("lookups at least 1.6x BTreeMap on every key set", speed("btree", BASELINE, Workload::Lookup, KEYSETS), |r| r >= 1.6, x),
        Target::check("15-key scans at least 1.5x BTreeMap on every key set", speed("btree", BASELINE, Workload::Scan, KEYSETS), |r| r >= 1.5, x),
        Target::check("inserts at least 1.2x BTreeMap on every key set", speed("btree", BASELINE, Workload::Load, KEYSETS), |r| r >= 1.2, x),
    ]
}

/// What the paper reports (section VI and the appendix).
const PAPER: &str = "\
Section VI-B and Figures 8, 9 and 13 of the Bw-tree paper (Base, Prefix and Prefix+Split \
pages; DocumentDB terms averaging 32 bytes, 20-byte de-duplication hashes, synthetic 28-byte \
keys with an 8-byte prefix shared by 1,000 keys):

- Index (inner-node) size: about 3/4 of Base for Prefix and about 1/4 of Base for \
  Prefix+Split on DocumentDB, in line on the synthetic keys; on the hashes, leaf compression \
  is modest and Prefix+Split still shrinks the index well below Prefix.
- Leaf key size: both Prefix and Prefix+Split factor out most of a DocumentDB key (31.5 \
  bytes, of which 16.6 are the on-page prefix at the leaves, Figure 9).
- Speed (Figure 10): Prefix+Split is consistently the fastest organization at every \
  update ratio; Prefix is modestly behind it, Base last.
";
