//! The experiments of the hybrid index (issue 5), after section 6 and appendices C-E of the
//! hybrid-index paper (Zhang et al., SIGMOD 2016) and past it:
//!
//! * `hybrid-static` (Figure 5): the static stage alone against the original: `btree` loaded
//!   by inserts vs a [`StaticStage`] built from the sorted keys, uncompressed (`static`) and
//!   LZ4-compressed (`static-lz4`): uniform and Zipfian lookups, memory;
//! * `hybrid-merge` (Figure 6): an insert-only load into `hybrid` (ratio 10, background
//!   merges), every merge's duration against the static stage's size;
//! * `hybrid-ycsb` (Figure 7 and Figure 13): `btree`, `hybrid` and `hybrid-compressed` as
//!   unique and non-unique (10 tids per key) indexes: insert-only (the load), read-only
//!   (YCSB C), read/write (YCSB A) and scan/insert (YCSB E), and memory after the load; each
//!   index is loaded once per key set and uniqueness, the repetitions are of the YCSB passes;
//! * `hybrid-ratio` (Figure 11): merge ratios 1 to 100 on `rand64` with blocking merges (the
//!   paper's, so the trigger rule alone places the merges): insert-only throughput, then
//!   read-only throughput with the dynamic stage half full; one load per ratio;
//! * `hybrid-latency` (past the paper; its Table 3): the latency of every operation of a
//!   mixed read/insert stream spanning several merges, blocking vs background merges, on one
//!   thread and with a reader and a writer thread.
//!
//! Every experiment drives the indexes through elastree's [`Index`] trait (the benchmark's
//! `BenchIndex` is unique-only and knows no merges), keeps one `Cell` of repetition values
//! per index, key set, uniqueness and measure, writes them as rows (`Row`, fields
//! `FIELDS`) with the shared report writer, and ends with the targets of issue 5 it speaks
//! to, PASS or FAIL as computed from the run's numbers. Tid of key `i` is `i` (non-unique:
//! pair `r` of key `k` has tid `r * D + k`, D the number of distinct keys). Memory is the
//! index's own accounting (`Index::memory().total()`) and the counting allocator's figure,
//! both read after `Index::quiesce()` once deferred frees have run.
//!
//! At small scales the smallest merge shrinks with N ([`min_merge`]) so that merges happen;
//! from 1M keys up it is the library's default.

use std::fmt::Write as _;
use std::ops::Bound;
use std::time::Instant;

use elastree::hybrid::static_stage::{Compression, StaticOptions, StaticStage};
use elastree::hybrid::{HybridOptions, HybridStats, MergeMode, MergeRecord, MergeTrigger};
use elastree::{Direction, Index, IndexBuilder, IndexKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::document::{targets_table_of, Target};
use super::grow_shrink::fmt_items;
use super::plots::{draw_grouped_bars, draw_lines, plain, LineChart, Point, Series};
use super::variants::{fmt_ratio, ratio};
use super::{ExperimentContext, Report};
use crate::alloc;
use crate::dist::{ScrambledZipfian, DEFAULT_THETA};
use crate::keys::{Key, KeySet, KeySetKind};
use crate::output::{fmt_opt, write_results};
use crate::peers::key_len_of;
use crate::runner::settle::settle_deferred_frees;
use crate::runner::{Summary, Trials};
use crate::ycsb::{loaded_keys, Ycsb, YcsbOp, YcsbPlan, TID_MASK, VERSION_STEP};

mod drive;
mod latency;
mod merge;
mod ratio;
mod rows;
mod statics;
mod ycsb;

use drive::*;
use rows::*;
use statics::*;

pub(super) use latency::{quantile, run_latency};
pub(super) use merge::run_merge;
pub(super) use ratio::run_ratio;
pub(super) use statics::run_static;
pub(super) use ycsb::run_ycsb;

/// Keys per key set at `--scale 1`, as issue 5 states its targets.
pub const BASE_N: usize = 10_000_000;

/// The fewest keys per key set.
pub const MIN_N: usize = 1_000;

/// The key sets: 8-byte random and increasing integers and ~30-byte e-mail addresses, as in
/// the paper.
pub const KEYSETS: &[KeySetKind] = &[KeySetKind::Rand64, KeySetKind::Mono64, KeySetKind::Email];

/// The indexes of `hybrid-ycsb`: the reference B+-tree and the two hybrid kinds.
pub const INDEXES: &[IndexKind] = &[
    IndexKind::BTree,
    IndexKind::Hybrid,
    IndexKind::HybridCompressed,
];

/// Tids per key of the non-unique (secondary) indexes, as in Appendix E.
pub const TIDS_PER_KEY: usize = 10;

/// The merge ratios of `hybrid-ratio`, as in Appendix C.
pub const RATIOS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0];

/// The library's default smallest merge (`HybridOptions::default().min_merge`).
const DEFAULT_MIN_MERGE: usize = 4096;

/// The smallest merge at `n` keys: the library's default (4096) from 1M keys up, `n / 256`
/// (at least 64) below, so that small runs merge too.
pub fn min_merge(n: usize) -> usize {
    DEFAULT_MIN_MERGE.min(n / 256).max(64)
}

/// The paper's hybrid options (ratio 10, merge everything, in the background) with the
/// smallest merge of [`min_merge`].
pub fn options(n: usize) -> HybridOptions {
    HybridOptions {
        min_merge: min_merge(n),
        ..HybridOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::latency::{quantile, Timeline};
    use super::merge::linearity;
    use super::ratio::half_full_count;
    use super::*;
    use std::time::Duration;

    #[test]
    fn half_full_counts_end_half_a_trigger_after_a_merge() {
        let opts = HybridOptions {
            min_merge: 100,
            ..HybridOptions::default()
        };
        let count = half_full_count(100_000, &opts);
        assert!(count <= 100_000 && count > 80_000, "{count}");
        // Replaying the trigger rule: the count is a merge point plus half the next trigger.
        let mut s = 0;
        while s + opts.merge_threshold(s) / 2 < count {
            s += opts.merge_threshold(s);
        }
        assert_eq!(s + opts.merge_threshold(s) / 2, count);
        let one = HybridOptions {
            trigger: MergeTrigger::Ratio(1.0),
            ..opts
        };
        assert!(half_full_count(100_000, &one) < count);
    }

    #[test]
    fn overlaps_and_quantiles() {
        let t = Timeline {
            starts: vec![0, 10, 20, 30, 40],
            latencies: vec![5, 5, 5, 5, 5],
            merges: vec![(12, 22)],
        };
        assert_eq!(t.overlapping(), [false, true, true, false, false]);
        assert_eq!(quantile(&[1, 2, 3, 4, 5], 0.5), Some(3.0));
        assert_eq!(quantile(&[1, 2, 3, 4, 5], 1.0), Some(5.0));
        assert_eq!(quantile(&[], 0.5), None);
        let records = [
            MergeRecord {
                static_before: 100,
                static_after: 110,
                merged: 10,
                carried: 0,
                started: Duration::ZERO,
                duration: Duration::from_micros(110),
            },
            MergeRecord {
                static_before: 1000,
                static_after: 1100,
                merged: 100,
                carried: 0,
                started: Duration::ZERO,
                duration: Duration::from_micros(2200),
            },
        ];
        assert_eq!(linearity(&records, 50), Some(2.0));
        assert_eq!(linearity(&records, 500), None);
    }
}
