//! The targets of issue 6 that `dist-ycsb` speaks to, and what round trips alone would allow.

use elastree_dist::{DistKind, RebalanceReport};

use super::measure::Shape;
use super::report::{fmt_ratio, joined, or_dash, per_master};
use super::rows::{find, speedup, Row};
use super::MASTERS;
use crate::repro::document::{targets_table_of, Target};
use crate::ycsb::Ycsb;

/// Share of index operations that write (and so also wait for a replica) in each workload
/// the throughput target names: YCSB A updates half its operations, E inserts 5%.
const WRITE_SHARE: [(Ycsb, f64); 2] = [(Ycsb::A, 0.5), (Ycsb::E, 0.05)];

/// What round trips alone allow (3 masters, one thread): if every round trip cost the same
/// and nothing else did, `dist`'s throughput over `dist-baseline`'s would be (baseline RT/op +
/// w) / (`dist` RT/op + w), w the share of operations that also wait for a replica's
/// acknowledgement (one more round trip, on either tree). And what a `dist` call costs here,
/// in the baseline's round trips, from YCSB C (reads only).
pub(super) fn round_trip_bound(rows: &[Row]) -> String {
    let at = |index, y| find(rows, index, MASTERS[0], 1, y);
    let bounds: Vec<String> = WRITE_SHARE
        .iter()
        .filter_map(|&(y, w)| {
            let d = at(DistKind::Tree, y)?.round_trips_per_op?;
            let b = at(DistKind::Baseline, y)?.round_trips_per_op?;
            Some(format!(
                "{y} {:.1}x ({b:.2} vs {d:.2} round trips per operation, w = {w})",
                (b + w) / (d + w)
            ))
        })
        .collect();
    let call_cost = (|| {
        let d = at(DistKind::Tree, Ycsb::C)?;
        let b = at(DistKind::Baseline, Ycsb::C)?;
        let (d_ops, b_ops) = (d.median()?, b.median()?);
        let b_rt = b.round_trips_per_op?;
        // Time per `dist` operation over time per baseline round trip.
        Some((b_ops * b_rt) / (d_ops * d.round_trips_per_op?))
    })();
    format!(
        "What round trips allow: with round trips costing the same and nothing else costing \
         anything (a slow network), `dist` over `dist-baseline` would be (baseline RT/op + w) / \
         (`dist` RT/op + w), w the share of operations that also wait for a replica (one more \
         round trip on either tree): {} on {} masters. So 5x on A is out of reach of any \
         network for a baseline of height 4, which needs 4.5 round trips per A operation. On \
         this machine's loopback a `dist` round trip is not a baseline round trip: on YCSB C a \
         `dist` call took as long as {} of the baseline's round trips (its Redis Function \
         does the descent that the baseline's client does).\n",
        bounds.join(", "),
        MASTERS[0],
        or_dash(call_cost, |c| format!("{c:.1}")),
    )
}

/// Round trips per operation of `index` over the point workloads (A, B, C, D, F) at every
/// cluster size and thread count: the operations-weighted mean, and the per-cluster-size
/// means.
fn point_round_trips(rows: &[Row], index: DistKind) -> (Option<f64>, Vec<(usize, f64)>) {
    let point = |r: &&Row| {
        r.index == index.name() && r.workload != Ycsb::E.name() && r.round_trips_per_op.is_some()
    };
    // Weight each row by its operations (all rows of one run size have the same count).
    let mean = |rows: Vec<&Row>| -> Option<f64> {
        let weight: f64 = rows.iter().map(|r| (r.ops * r.repeat) as f64).sum();
        (weight > 0.0).then(|| {
            rows.iter()
                .map(|r| r.round_trips_per_op.unwrap_or(0.0) * (r.ops * r.repeat) as f64)
                .sum::<f64>()
                / weight
        })
    };
    let all = mean(rows.iter().filter(point).collect());
    let per = MASTERS
        .iter()
        .filter_map(|&m| {
            mean(
                rows.iter()
                    .filter(point)
                    .filter(|r| r.masters == m)
                    .collect(),
            )
            .map(|v| (m, v))
        })
        .collect();
    (all, per)
}

/// The targets of issue 6, checked against the rows, the baseline's height and the
/// rebalance.
pub(super) fn targets_section(rows: &[Row], shape: &Shape, r: &RebalanceReport) -> String {
    let [dist_rt, base_rt] = round_trip_targets(rows, shape);
    let targets = vec![dist_rt, base_rt, throughput_target(rows), balance_target(r)];
    targets_table_of(
        "a local cluster of 3 masters with 1 replica each, then 4 masters",
        &targets,
    )
}

/// Round trips per point operation: about one for `dist`, at least the height for the
/// baseline.
fn round_trip_targets(rows: &[Row], shape: &Shape) -> [Target; 2] {
    let (dist_rt, dist_rt_per) = point_round_trips(rows, DistKind::Tree);
    let (base_rt, base_rt_per) = point_round_trips(rows, DistKind::Baseline);
    let per = |v: &[(usize, f64)]| joined(v, |(m, rt)| format!("{rt:.3} on {m} masters"));
    let height = shape.heights.iter().copied().max();
    [
        Target::check(
            "`dist`: round trips per point operation at most 1.1 on average (YCSB A, B, C, D, \
             F; all round trips of the measuring client, retries and top refreshes included, \
             over all its index operations, at 3 and 4 masters and every thread count)",
            dist_rt,
            |v| v <= 1.1,
            |v| format!("{v:.3} ({})", per(&dist_rt_per)),
        ),
        Target::check(
            "`dist-baseline`: round trips per point operation at least the tree's height",
            base_rt.zip(height).map(|(rt, h)| rt / h as f64),
            |v| v >= 1.0,
            |v| {
                format!(
                    "{:.2} round trips per operation = {v:.2}x the height {} ({})",
                    base_rt.unwrap_or(0.0),
                    height.unwrap_or(0),
                    per(&base_rt_per)
                )
            },
        ),
    ]
}

/// `dist` at least 5x the baseline's throughput on YCSB A and E, one thread, both cluster
/// sizes.
fn throughput_target(rows: &[Row]) -> Target {
    let ratios: Vec<(String, Option<f64>)> = [Ycsb::A, Ycsb::E]
        .iter()
        .flat_map(|&y| {
            MASTERS.iter().map(move |&masters| {
                (
                    format!("{y} on {masters} masters"),
                    speedup(rows, masters, 1, y),
                )
            })
        })
        .collect();
    let min_ratio = ratios
        .iter()
        .map(|(_, r)| *r)
        .collect::<Option<Vec<f64>>>()
        .map(|v| v.into_iter().fold(f64::INFINITY, f64::min));
    Target::check(
        "`dist` throughput at least 5x `dist-baseline` on YCSB A and E (one client thread, \
         3 and 4 masters)",
        min_ratio,
        |v| v >= 5.0,
        |_| joined(&ratios, |(what, r)| format!("{what}: {}", fmt_ratio(*r))),
    )
}

/// Sub-trees spread evenly over the masters after the rebalance.
fn balance_target(r: &RebalanceReport) -> Target {
    Target::check(
        "sub-trees per master within 20% of the mean after rebalancing",
        Some(r.imbalance()),
        |v| v <= 0.2,
        |v| {
            format!(
                "largest deviation {:.0}% ({} sub-trees on {} masters: {})",
                v * 100.0,
                r.subtrees_after,
                r.masters,
                per_master(r)
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(index: DistKind, masters: usize, workload: Ycsb, rt: f64, ops: usize) -> Row {
        Row {
            experiment: "dist-ycsb",
            index: index.name(),
            masters,
            threads: 1,
            workload: workload.name(),
            n: 1000,
            ops,
            repeat: 1,
            mops_median: Some(0.01),
            mops_min: Some(0.01),
            mops_max: Some(0.01),
            round_trips_per_op: Some(rt),
            masters_per_op: Some(1.0),
            top_refreshes: None,
            stale_routes: None,
            retries: Some(0),
            p50_ns: None,
            p99_ns: None,
            status: "ok",
            note: None,
        }
    }

    #[test]
    fn point_round_trips_weigh_by_operations_and_leave_out_scans() {
        let rows = vec![
            row(DistKind::Tree, 3, Ycsb::A, 1.0, 100),
            row(DistKind::Tree, 3, Ycsb::E, 9.0, 10),
            row(DistKind::Tree, 4, Ycsb::C, 1.3, 300),
            row(DistKind::Baseline, 3, Ycsb::A, 4.0, 100),
        ];
        let (all, per) = point_round_trips(&rows, DistKind::Tree);
        assert!((all.unwrap() - (100.0 + 1.3 * 300.0) / 400.0).abs() < 1e-9);
        assert_eq!(per, vec![(3, 1.0), (4, 1.3)]);
        assert_eq!(point_round_trips(&rows, DistKind::Baseline).0, Some(4.0));
        assert!(find(&rows, DistKind::Tree, 4, 1, Ycsb::C).is_some());
        assert!(find(&rows, DistKind::Tree, 4, 2, Ycsb::C).is_none());
    }
}
