//! `seqtree-sweep` (the elastic-index paper's Figures 9-11): SeqTree128 (`seqtree`, every
//! leaf compact) on `rand64` with BlindiTree levels 0 to 6 (breathing at its default) and
//! with breathing slacks of 1, 2, 4, 8 and 16 tuple-id slots (levels at their default): insert
//! throughput (the load), lookup throughput and bytes per key, next to `btree`. Each setting
//! is a [`Variant`] (`seqtree L3`, `seqtree s8`); besides the suite's bar charts the report
//! has line plots along each sweep (`levels-throughput.png`, `levels-memory.png`,
//! `breathing-throughput.png`, `breathing-memory.png`).

use std::fmt::Write as _;

use super::document::Target;
use super::elastic::{single_thread, VariantSuite, BTREE, SEQTREE, SEQTREE_MAX_BYTES_PER_KEY};
use super::plots::{draw_lines, LineChart, Point, Series};
use super::variants::{fmt_ratio, ratio, Variant};
use super::{ExperimentContext, Report};
use crate::keys::KeySetKind;
use crate::peers::SeqTreeTuning;
use crate::workload::{Workload, DEFAULT_SCAN_LEN};

/// The BlindiTree levels swept (the paper: up to log2(leafSlots) - 1 = 6 at 128 keys).
pub const LEVELS: &[u8] = &[0, 1, 2, 3, 4, 5, 6];

/// The breathing slacks swept.
pub const BREATHING: &[usize] = &[1, 2, 4, 8, 16];

/// The library's default breathing, which the levels sweep keeps (see
/// `elastree::SeqTreeOptions::breathing`).
pub const DEFAULT_BREATHING: usize = 4;

/// The library's default levels for 128-key leaves, which the breathing sweep keeps (see
/// `elastree::elastic::default_levels`).
pub const DEFAULT_LEVELS: u8 = 2;

/// What the paper reports for Figures 9-11, from the text of section 6.4.
pub const PAPER_FIGURES_9_11: &str = "\
Section 6.4, Figures 9-11, STX-SeqTree with 64-bit keys (from the text; the figures are not \
in our extraction):

- Setup: insert 50 million uniformly distributed keys, then 50 million uniform searches; \
  averages of 5 runs. Up to log2(leafSlots) - 1 levels exist; the level sweep has breathing \
  disabled.
- Levels, inserts (Figure 9): a small number of levels beats level 0 as leaves grow; \
  insert throughput peaks at level 3 with 512-slot leaves and at level 2 otherwise.
- Levels, searches: larger levels help as leaves grow; the peak is at level 5 for 128-slot \
  leaves and level 6 for 256 and 512.
- Levels, memory: levels 1-3 add no overhead (alignment of the leaf nodes), 4 and 5 minor \
  overheads, 6 and 7 around 10% extra space.
- Breathing (Figure 11, normalized to no breathing): leaves are about 70% full; breathing \
  saves 20% of leaf space when the leaf capacity is at least 64; measurements for 1, 2 and 4 \
  often coincide (jemalloc's 64 MB granularity); a small search slowdown at small leaves, \
  almost none at 64 and more; inserts degrade notably. With s = 4: almost all of the 20% \
  with almost no search penalty and 10% slower inserts; the paper picks 4.

Our sweep runs 128-key leaves only (`seqtree`), levels with breathing 4 (the library has no \
\"breathing disabled\"), and breathing with 2 levels.
";

fn levels_label(levels: u8) -> String {
    format!("seqtree L{levels}")
}

fn breathing_label(slots: usize) -> String {
    format!("seqtree s{slots}")
}

/// The variants: `btree`, then the levels sweep, then the breathing sweep.
pub fn variants() -> Vec<Variant> {
    let mut variants = vec![Variant::plain(BTREE)];
    variants.extend(LEVELS.iter().map(|&levels| Variant {
        label: levels_label(levels),
        tuning: SeqTreeTuning {
            tree_levels: Some(levels),
            breathing: Some(DEFAULT_BREATHING),
        },
        ..Variant::plain(SEQTREE)
    }));
    variants.extend(BREATHING.iter().map(|&slots| Variant {
        label: breathing_label(slots),
        tuning: SeqTreeTuning {
            tree_levels: Some(DEFAULT_LEVELS),
            breathing: Some(slots),
        },
        ..Variant::plain(SEQTREE)
    }));
    variants
}

/// `seqtree-sweep`.
pub(super) fn run(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let base = single_thread(
        ctx,
        KeySetKind::Rand64,
        vec![Workload::Load, Workload::Lookup],
        DEFAULT_SCAN_LEN,
    );
    let suite = VariantSuite::measure(base, variants())?;
    let default = levels_label(DEFAULT_LEVELS);
    let mut plots = Vec::new();
    let mut normalized = String::new();
    for sweep in &sweeps() {
        plots.extend(sweep.plot(ctx, &suite)?);
        normalized.push_str(&sweep.normalized(&suite, &default));
    }
    let paper = format!("{}\n{}", PAPER_FIGURES_9_11.trim_end(), ours(ctx, &suite));
    let targets = targets(ctx, &suite);
    let mut report = suite.report(ctx, &facts(), paper, &targets, None)?;
    report
        .sections
        .insert(2, ("Sweeps".to_string(), normalized));
    for (what, file) in plots {
        report.files.push(file.clone());
        report.plots.push((what, file));
    }
    Ok(report)
}

/// The two sweeps: BlindiTree levels, then breathing slack.
fn sweeps() -> [Sweep; 2] {
    [
        Sweep {
            name: "levels",
            what: "BlindiTree levels (breathing 4)",
            points: LEVELS
                .iter()
                .map(|l| (l.to_string(), levels_label(*l)))
                .collect(),
        },
        Sweep {
            name: "breathing",
            what: "breathing slack s (2 levels)",
            points: BREATHING
                .iter()
                .map(|s| (s.to_string(), breathing_label(*s)))
                .collect(),
        },
    ]
}

/// The targets the default setting is held to: bytes per key, and lookups and inserts
/// against `btree`.
fn targets(ctx: &ExperimentContext<'_>, suite: &VariantSuite) -> [Target; 3] {
    let default = levels_label(DEFAULT_LEVELS);
    let vs_btree = |w: Workload| ratio(suite.mops(&default, w), suite.mops("btree", w));
    let per_key = suite.bytes(&default, false).map(|b| b / ctx.n as f64);
    let at_least = |what: &str, w: Workload| {
        Target::check(
            format!("maximum compaction: {what} at least 0.75x `btree` (`{default}`)"),
            vs_btree(w),
            |r| r >= super::elastic::COMPACT_MIN_RATIO,
            |r| format!("{r:.2}x"),
        )
    };
    [
        Target::check(
            format!(
                "fully compacted, 8-byte keys: at most 11 bytes per key, tuple ids and inner \
                 nodes included (`{default}`, the default setting)"
            ),
            per_key,
            |b| b <= SEQTREE_MAX_BYTES_PER_KEY,
            |b| format!("{b:.1} B/key (counting allocator)"),
        ),
        at_least("lookups", Workload::Lookup),
        at_least("inserts", Workload::Load),
    ]
}

/// "Ours, next to it": where this run's inserts and lookups peak, and what more levels and
/// more breathing cost in bytes.
fn ours(ctx: &ExperimentContext<'_>, suite: &VariantSuite) -> String {
    let default = levels_label(DEFAULT_LEVELS);
    let best = |labels: &[String], w: Workload| {
        labels
            .iter()
            .filter_map(|l| Some((l.clone(), suite.mops(l, w)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or_else(|| "-".to_string(), |(l, _)| format!("`{l}`"))
    };
    let level_labels: Vec<String> = LEVELS.iter().map(|&l| levels_label(l)).collect();
    format!(
        "\n**Ours, next to it** (this run, {} keys, 128-key leaves): inserts peak at {}, \
         lookups at {}; bytes per key (own accounting) at 6 levels over 2 levels: {}; at \
         breathing 16 over breathing 1: {}. The normalized tables are under \"Sweeps\".\n",
        ctx.n,
        best(&level_labels, Workload::Load),
        best(&level_labels, Workload::Lookup),
        fmt_ratio(ratio(
            suite.bytes(&levels_label(6), true),
            suite.bytes(&default, true)
        )),
        fmt_ratio(ratio(
            suite.bytes(&breathing_label(16), true),
            suite.bytes(&breathing_label(1), true)
        )),
    )
}

/// The report's line on the settings measured.
fn facts() -> String {
    let list = |items: Vec<String>| items.join(", ");
    format!(
        "settings: `seqtree L<l>` = {} levels with breathing {DEFAULT_BREATHING}; `seqtree \
         s<s>` = breathing {} with {DEFAULT_LEVELS} levels (`{}` and `{}` are the same \
         setting, the library's default, measured twice); `load` is the insert throughput",
        list(LEVELS.iter().map(u8::to_string).collect()),
        list(BREATHING.iter().map(usize::to_string).collect()),
        levels_label(DEFAULT_LEVELS),
        breathing_label(DEFAULT_BREATHING),
    )
}

/// One sweep: its points (x label, variant label) in order.
struct Sweep {
    name: &'static str,
    what: &'static str,
    points: Vec<(String, String)>,
}

impl Sweep {
    /// A table of the sweep: each point's throughputs and bytes per key, and their ratios to
    /// the default setting `default`.
    fn normalized(&self, suite: &VariantSuite, default: &str) -> String {
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(
            w,
            "### {}\n\nMedians; in parentheses the ratio to `{default}` (the default).\n",
            self.what
        );
        let _ = writeln!(
            w,
            "| setting | insert Mops/s | lookup Mops/s | own B/key | alloc B/key |\n|---|---|---|---|---|"
        );
        let n = suite.base.n as f64;
        let cell = |v: Option<f64>, d: Option<f64>, decimals: usize| {
            v.map_or_else(
                || "-".to_string(),
                |v| format!("{v:.decimals$} ({})", fmt_ratio(ratio(Some(v), d))),
            )
        };
        for (_, label) in &self.points {
            let mops = |wl| (suite.mops(label, wl), suite.mops(default, wl));
            let bytes = |own| {
                (
                    suite.bytes(label, own).map(|b| b / n),
                    suite.bytes(default, own).map(|b| b / n),
                )
            };
            let (li, di) = mops(Workload::Load);
            let (ll, dl) = mops(Workload::Lookup);
            let (bo, dbo) = bytes(true);
            let (ba, dba) = bytes(false);
            let _ = writeln!(
                w,
                "| `{label}` | {} | {} | {} | {} |",
                cell(li, di, 2),
                cell(ll, dl, 2),
                cell(bo, dbo, 1),
                cell(ba, dba, 1)
            );
        }
        md.push('\n');
        md
    }

    /// The sweep's two line plots: inserts and lookups, and bytes per key, along the sweep,
    /// with `btree`'s as a flat reference line.
    fn plot(
        &self,
        ctx: &ExperimentContext<'_>,
        suite: &VariantSuite,
    ) -> Result<Vec<(String, String)>, String> {
        let x_labels: Vec<String> = self.points.iter().map(|(x, _)| x.clone()).collect();
        let n = suite.base.n as f64;
        let along = |value: &dyn Fn(&str) -> Option<Point>| -> Vec<Option<Point>> {
            self.points.iter().map(|(_, label)| value(label)).collect()
        };
        let flat = |v: Option<Point>| vec![v; self.points.len()];
        // Throughput: medians with the repetitions' ranges; memory is the same every
        // repetition, so it has none.
        let mops = |label: &str, wl| suite.mops_summary(label, wl).map(Point::from);
        let throughput: Vec<Series> = [(Workload::Load, "insert"), (Workload::Lookup, "lookup")]
            .into_iter()
            .flat_map(|(wl, name)| {
                [
                    (format!("seqtree {name}"), along(&|l| mops(l, wl))),
                    (format!("btree {name}"), flat(mops("btree", wl))),
                ]
            })
            .collect();
        let per_key = |label: &str, own| suite.bytes(label, own).map(|b| Point::from(b / n));
        let memory: Vec<Series> = [(true, "own"), (false, "alloc")]
            .into_iter()
            .flat_map(|(own, name)| {
                [
                    (format!("seqtree ({name})"), along(&|l| per_key(l, own))),
                    (format!("btree ({name})"), flat(per_key("btree", own))),
                ]
            })
            .collect();
        let mut files = Vec::new();
        for (what, y_desc, series) in [
            ("throughput", "Mops/s", &throughput),
            ("memory", "bytes per key", &memory),
        ] {
            let file = format!("{}-{what}.png", self.name);
            let title = format!(
                "{}: {what} vs {} ({} keys of rand64, median of {})",
                ctx.experiment.name, self.what, suite.base.n, suite.base.repeat
            );
            let chart = LineChart {
                title: &title,
                x_desc: self.what,
                y_desc,
                x_labels: &x_labels,
                series,
                phases: None,
            };
            draw_lines(&ctx.out.join(&file), &chart).map_err(|e| format!("{file}: {e}"))?;
            files.push((format!("{what} vs {}", self.what), file));
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_covers_every_level_and_breathing_once() {
        let v = variants();
        assert_eq!(v.len(), 1 + LEVELS.len() + BREATHING.len());
        assert_eq!(v[0].label, "btree");
        assert!(v[1..].iter().all(|v| v.spec == SEQTREE));
        let labels: Vec<&str> = v.iter().map(|v| v.label.as_str()).collect();
        assert!(labels.contains(&"seqtree L6") && labels.contains(&"seqtree s16"));
        let mut unique = labels.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), labels.len());
    }
}
