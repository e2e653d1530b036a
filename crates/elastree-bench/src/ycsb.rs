//! The YCSB core workloads A-F, and the two mixes of the Bw-tree paper's experiments, as
//! pre-generated operation streams.
//!
//! Each workload runs on its own freshly loaded index (see [`crate::workload`]): the first
//! [`loaded_keys`]`(n)` keys of the key set (95%, in the set's order) are inserted untimed, key `i`
//! mapping to tid `i`; the remaining 5% are the reserve that inserts draw fresh keys from. Then
//! the stream runs, timed:
//!
//! | workload | mix | request distribution | operations |
//! |---|---|---|---|
//! | `ycsb-a` | 50% read, 50% update | scrambled Zipfian | `n` |
//! | `ycsb-b` | 95% read, 5% update | scrambled Zipfian | `n` |
//! | `ycsb-c` | 100% read | scrambled Zipfian | `n` |
//! | `ycsb-d` | 95% read, 5% insert | latest | `n` |
//! | `ycsb-e` | 95% scan (1..=100 keys, uniform), 5% insert | scrambled Zipfian start keys | `n / 10` |
//! | `ycsb-f` | 50% read, 50% read-modify-write | scrambled Zipfian | `n` |
//! | `updates-P` | P% update, the rest read (the Bw-tree paper's Figure 10) | uniform | `n` |
//! | `scan-update-L` | 95% scan of exactly L keys, 5% update (its Figure 11) | scans uniform, updates scrambled Zipfian | `n / L`, at least [`MIN_SCAN_UPDATE_OPS`] |
//!
//! * *read*: a point lookup; it must find the key with its tid (in the low 32 bits).
//! * *update*: overwrites the tid of an existing key (a unique-index insert of a present key)
//!   with a new value whose low 32 bits are still the key's position.
//! * *insert*: adds a key from the reserve. Inserts take the reserve in order, so on `mono64`
//!   they append at the end of the key space, as YCSB's ordered inserts do.
//! * *scan*: an ascending scan of 1..=100 keys (uniform, YCSB's default `maxscanlength`; in
//!   `scan-update-L` exactly L) from an existing key; it must visit at least that key.
//! * *read-modify-write*: a read, then an update of the same key with the value read plus
//!   [`VERSION_STEP`].
//!
//! Zipfian requests are drawn with [`ScrambledZipfian`] (theta 0.99) over the loaded keys.
//! "Latest" (YCSB's `SkewedLatestGenerator`) draws a rank `r` from a Zipfian (theta 0.99) over
//! every key inserted so far, counted from the newest, and reads the `r`-th most recently
//! inserted key; the Zipfian grows with each insert.
//!
//! **Threads.** A stream is generated for a thread count: [`crate::runner::timing::run_parallel`]
//! gives thread `t` the contiguous chunk `t * len / threads .. (t + 1) * len / threads`, and the
//! chunk for thread `t` is generated as a sub-stream of its own. Each sub-stream has the
//! workload's mix (its operation kinds are an exact-count mix, shuffled), takes the next
//! contiguous run of reserve keys for its inserts, and its "latest" reads look at the loaded
//! keys plus its *own* inserts so far: a key another thread inserts may not be there yet when
//! this thread runs, so it is never requested. On one thread that is exactly YCSB's stream.

use std::fmt;
use std::ops::Range;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::dist::{ScrambledZipfian, Zipfian, DEFAULT_THETA};
use crate::keys::KeySet;

/// The longest YCSB-E scan: lengths are uniform in `1..=YCSB_MAX_SCAN_LEN`.
pub const YCSB_MAX_SCAN_LEN: u8 = 100;

/// The update percentages of the `updates-P` mixes (the x axis of the Bw-tree paper's
/// Figure 10), with their names.
pub const UPDATE_MIXES: &[(u8, &str)] = &[
    (0, "updates-0"),
    (1, "updates-1"),
    (10, "updates-10"),
    (50, "updates-50"),
    (100, "updates-100"),
];

/// The scan lengths of the `scan-update-L` mixes (the Bw-tree paper's Figure 11 and its
/// appendix table), with their names.
pub const SCAN_UPDATE_MIXES: &[(u32, &str)] = &[
    (1, "scan-update-1"),
    (10, "scan-update-10"),
    (100, "scan-update-100"),
    (1_000, "scan-update-1000"),
    (10_000, "scan-update-10000"),
    (100_000, "scan-update-100000"),
    (1_000_000, "scan-update-1000000"),
];

/// The `cursor-update-L` mixes: `scan-update-L`'s stream, its scans read through a
/// physiological cursor (the Bw-tree's; a logical one for indexes without).
pub const CURSOR_UPDATE_MIXES: &[(u32, &str)] = &[
    (1, "cursor-update-1"),
    (10, "cursor-update-10"),
    (100, "cursor-update-100"),
    (1_000, "cursor-update-1000"),
    (10_000, "cursor-update-10000"),
    (100_000, "cursor-update-100000"),
    (1_000_000, "cursor-update-1000000"),
];

/// The `logical-update-L` mixes: `scan-update-L`'s stream, its scans read through a logical
/// cursor (the resume key only: every request descends from the root).
pub const LOGICAL_UPDATE_MIXES: &[(u32, &str)] = &[
    (1, "logical-update-1"),
    (10, "logical-update-10"),
    (100, "logical-update-100"),
    (1_000, "logical-update-1000"),
    (10_000, "logical-update-10000"),
    (100_000, "logical-update-100000"),
    (1_000_000, "logical-update-1000000"),
];

/// Requests a cursor of `cursor-update-L` and `logical-update-L` serves before it is opened
/// again at the next scan's start key: a client paging through a range, `L` keys per
/// request, for 16 requests (the first one opens the cursor with a descent, the other 15
/// go on from where the one before stopped). Short enough that the scans still start all
/// over the key set, long enough that most requests continue a cursor.
pub const CURSOR_REQUESTS: usize = 16;

/// The fewest operations of a `scan-update-L` run, so that its long scans still give every
/// thread many operations (and its 5% updates some).
pub const MIN_SCAN_UPDATE_OPS: usize = 400;

/// A tid's low 32 bits are its key's position; updates change only the bits above.
pub const TID_MASK: u64 = u32::MAX as u64;

/// What a read-modify-write adds to the value it read (the low 32 bits stay the position).
pub const VERSION_STEP: u64 = 1 << 32;

/// One part in this many of the key set is reserved for inserts (5%): the first
/// [`loaded_keys`] keys are loaded before a YCSB run.
pub const RESERVE_DIVISOR: usize = 20;

/// The number of keys loaded before a YCSB run over `n` keys: all but the last `n / 20`.
pub fn loaded_keys(n: usize) -> usize {
    n - n / RESERVE_DIVISOR
}

/// A YCSB core workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ycsb {
    /// Update heavy: 50% reads, 50% updates, Zipfian.
    A,
    /// Read mostly: 95% reads, 5% updates, Zipfian.
    B,
    /// Read only: 100% reads, Zipfian.
    C,
    /// Read latest: 95% reads, 5% inserts, reads skewed to the latest inserts.
    D,
    /// Short ranges: 95% scans of 1..=100 keys, 5% inserts, Zipfian start keys.
    E,
    /// Read-modify-write: 50% reads, 50% read-modify-writes, Zipfian.
    F,
    /// The Bw-tree paper's read/update mix (its Figure 10): this percentage (one of
    /// [`UPDATE_MIXES`]) of blind updates, the rest reads, keys uniform over the loaded ones.
    Updates(u8),
    /// The Bw-tree paper's scan mix (its Figure 11): 95% ascending scans of exactly this many
    /// keys (one of [`SCAN_UPDATE_MIXES`]) from uniformly random loaded keys, 5% blind
    /// updates of scrambled-Zipfian keys.
    ScanUpdate(u32),
    /// [`Ycsb::ScanUpdate`]'s stream (the same operations and keys), each scan a request for
    /// the next `L` keys of the thread's cursor ([`CURSOR_REQUESTS`] per cursor, opened at the
    /// scan's start key), physiological where the index has such a cursor.
    CursorUpdate(u32),
    /// [`Ycsb::CursorUpdate`] with logical cursors (every request descends from the root).
    LogicalUpdate(u32),
}

/// An operation of a YCSB stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum YcsbOp {
    /// A point lookup of an existing key.
    Read,
    /// An overwrite of an existing key's tid.
    Update,
    /// An insert of a fresh key from the reserve.
    Insert,
    /// An ascending scan of this many keys from an existing key.
    Scan(u32),
    /// A read, then an update of the same key with the value read plus [`VERSION_STEP`].
    ReadModifyWrite,
}

/// Which key a request (read, update, scan, read-modify-write) goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDist {
    /// Uniform over the loaded keys.
    Uniform,
    /// Scrambled Zipfian (theta 0.99) over the loaded keys.
    Zipfian,
    /// Zipfian (theta 0.99) over the keys inserted so far, newest first.
    Latest,
}

/// The kinds of operation a mix is made of (a scan's length is drawn per operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl Ycsb {
    /// The six workloads, A to F.
    pub const ALL: &'static [Ycsb] = &[Ycsb::A, Ycsb::B, Ycsb::C, Ycsb::D, Ycsb::E, Ycsb::F];

    /// The workload's CLI name: `ycsb-a` ... `ycsb-f`.
    pub fn name(self) -> &'static str {
        match self {
            Ycsb::A => "ycsb-a",
            Ycsb::B => "ycsb-b",
            Ycsb::C => "ycsb-c",
            Ycsb::D => "ycsb-d",
            Ycsb::E => "ycsb-e",
            Ycsb::F => "ycsb-f",
            Ycsb::Updates(percent) => name_of(UPDATE_MIXES, percent).unwrap_or("updates"),
            Ycsb::ScanUpdate(len) => name_of(SCAN_UPDATE_MIXES, len).unwrap_or("scan-update"),
            Ycsb::CursorUpdate(len) => name_of(CURSOR_UPDATE_MIXES, len).unwrap_or("cursor-update"),
            Ycsb::LogicalUpdate(len) => {
                name_of(LOGICAL_UPDATE_MIXES, len).unwrap_or("logical-update")
            }
        }
    }

    /// A number per workload that seeds its stream: A to F are 0 to 5; the paper mixes'
    /// numbers are distinct for every value of their tables.
    fn ordinal(self) -> u64 {
        match self {
            Ycsb::A => 0,
            Ycsb::B => 1,
            Ycsb::C => 2,
            Ycsb::D => 3,
            Ycsb::E => 4,
            Ycsb::F => 5,
            Ycsb::Updates(percent) => 8 + u64::from(percent),
            // The cursor mixes run the very stream of `scan-update-L`.
            Ycsb::ScanUpdate(len) | Ycsb::CursorUpdate(len) | Ycsb::LogicalUpdate(len) => {
                128 + u64::from(len.max(1).ilog2())
            }
        }
    }

    /// The Bw-tree paper's mixes: every `updates-P`, then every `scan-update-L`, then their
    /// cursor variants `cursor-update-L` and `logical-update-L`.
    pub fn paper_mixes() -> impl Iterator<Item = Ycsb> {
        let updates = UPDATE_MIXES.iter().map(|&(p, _)| Ycsb::Updates(p));
        let lengths = || SCAN_UPDATE_MIXES.iter().map(|&(len, _)| len);
        updates
            .chain(lengths().map(Ycsb::ScanUpdate))
            .chain(lengths().map(Ycsb::CursorUpdate))
            .chain(lengths().map(Ycsb::LogicalUpdate))
    }

    /// How the workload's scans read: `None` each from its start key (every workload but
    /// the cursor mixes), `Some(true)` through a physiological cursor, `Some(false)` through
    /// a logical one.
    pub fn cursor(self) -> Option<bool> {
        match self {
            Ycsb::CursorUpdate(_) => Some(true),
            Ycsb::LogicalUpdate(_) => Some(false),
            _ => None,
        }
    }

    /// The mix: each kind of operation with its share. The first kind takes whatever the
    /// others' rounded-down counts leave.
    fn mix(self) -> Vec<(Kind, f64)> {
        match self {
            Ycsb::A => vec![(Kind::Read, 0.5), (Kind::Update, 0.5)],
            Ycsb::B => vec![(Kind::Read, 0.95), (Kind::Update, 0.05)],
            Ycsb::C => vec![(Kind::Read, 1.0)],
            Ycsb::D => vec![(Kind::Read, 0.95), (Kind::Insert, 0.05)],
            Ycsb::E => vec![(Kind::Scan, 0.95), (Kind::Insert, 0.05)],
            Ycsb::F => vec![(Kind::Read, 0.5), (Kind::ReadModifyWrite, 0.5)],
            Ycsb::Updates(percent) => {
                let updates = f64::from(percent.min(100)) / 100.0;
                vec![(Kind::Read, 1.0 - updates), (Kind::Update, updates)]
            }
            Ycsb::ScanUpdate(_) | Ycsb::CursorUpdate(_) | Ycsb::LogicalUpdate(_) => {
                vec![(Kind::Scan, 0.95), (Kind::Update, 0.05)]
            }
        }
    }

    /// The request distribution of an operation of `kind`.
    fn request_dist(self, kind: Kind) -> RequestDist {
        match (self, kind) {
            (Ycsb::D, _) => RequestDist::Latest,
            (Ycsb::Updates(_), _)
            | (Ycsb::ScanUpdate(_) | Ycsb::CursorUpdate(_) | Ycsb::LogicalUpdate(_), Kind::Scan) => {
                RequestDist::Uniform
            }
            _ => RequestDist::Zipfian,
        }
    }

    /// The length of each scan: uniform in `1..=`[`YCSB_MAX_SCAN_LEN`], or exactly `L` in
    /// `scan-update-L`.
    fn scan_len(self, rng: &mut StdRng) -> u32 {
        match self {
            Ycsb::ScanUpdate(len) | Ycsb::CursorUpdate(len) | Ycsb::LogicalUpdate(len) => {
                len.max(1)
            }
            _ => u32::from(rng.gen_range(1..=YCSB_MAX_SCAN_LEN)),
        }
    }

    /// Operations per run on a key set of `n` keys: `n`, or `n / 10` for the scans of E (as
    /// the `scan` workload does), at least 1; `scan-update-L`: `n / L` scans' worth, at least
    /// [`MIN_SCAN_UPDATE_OPS`].
    pub fn ops(self, n: usize) -> usize {
        match self {
            Ycsb::E => (n / 10).max(1),
            Ycsb::ScanUpdate(len) | Ycsb::CursorUpdate(len) | Ycsb::LogicalUpdate(len) => {
                (n / len.max(1) as usize).max(MIN_SCAN_UPDATE_OPS)
            }
            Ycsb::A | Ycsb::B | Ycsb::C | Ycsb::D | Ycsb::F | Ycsb::Updates(_) => n.max(1),
        }
    }

    /// Whether the workload inserts (D and E), so that its index ends holding the reserve
    /// keys it inserted.
    pub fn inserts(self) -> bool {
        self.mix().iter().any(|&(kind, _)| kind == Kind::Insert)
    }

    /// Whether the workload scans (E).
    pub fn scans(self) -> bool {
        self.mix().iter().any(|&(kind, _)| kind == Kind::Scan)
    }

    /// Whether the workload only reads (C), so a read-only index can run it.
    pub fn read_only(self) -> bool {
        self.mix().iter().all(|&(kind, _)| kind == Kind::Read)
    }
}

/// The name `table` gives `value`.
fn name_of<T: PartialEq>(table: &[(T, &'static str)], value: T) -> Option<&'static str> {
    table
        .iter()
        .find(|(v, _)| *v == value)
        .map(|&(_, name)| name)
}

impl fmt::Display for Ycsb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The part `t` of `threads` parts of `total`, as [`crate::runner::timing::run_parallel`] splits its
/// operations.
fn share(total: usize, t: usize, threads: usize) -> Range<usize> {
    t * total / threads..(t + 1) * total / threads
}

/// The operations of one YCSB run, without the keys: what [`YcsbStream`] runs, and what the
/// generator's tests check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YcsbPlan {
    /// The workload.
    pub workload: Ycsb,
    /// The thread count the stream was split for.
    pub threads: usize,
    /// Keys `0..loaded` of the key set are loaded before the run.
    pub loaded: usize,
    /// The operations, in stream order.
    pub ops: Vec<YcsbOp>,
    /// The key position of each operation (for inserts, the fresh key's position).
    pub positions: Vec<u32>,
    /// The positions the inserts add: `loaded..loaded + inserts`, each exactly once.
    pub inserted: Range<usize>,
}

impl YcsbPlan {
    /// Plans `workload` on a key set of `n` keys (`2 <= n <= 2^32`) for `threads` threads.
    pub fn generate(workload: Ycsb, n: usize, threads: usize, seed: u64) -> Self {
        Self::generate_ops(workload, n, workload.ops(n), threads, seed)
    }

    /// [`YcsbPlan::generate`] with `total` operations instead of [`Ycsb::ops`]`(n)` (at least
    /// one); inserts still never exceed the reserve.
    pub fn generate_ops(workload: Ycsb, n: usize, total: usize, threads: usize, seed: u64) -> Self {
        let total = total.max(1);
        assert!(
            n >= 2 && n as u64 <= 1 << 32,
            "YCSB needs 2..=2^32 keys, got {n}"
        );
        let threads = threads.max(1);
        let loaded = loaded_keys(n);
        let reserve = n - loaded;
        let salt = seed ^ 0x7963_7362 ^ ((workload.ordinal() + 1) << 40);
        let zipfian = ScrambledZipfian::new(loaded as u64, DEFAULT_THETA, salt)
            .expect("theta 0.99 over at least one loaded key");
        let latest = Zipfian::new(loaded as u64, DEFAULT_THETA)
            .expect("theta 0.99 over at least one loaded key");
        let mut ops = Vec::with_capacity(total);
        let mut positions = Vec::with_capacity(total);
        let mut inserted_total = 0;
        for t in 0..threads {
            let len = share(total, t, threads).len();
            let mut rng = StdRng::seed_from_u64(salt ^ (t as u64).wrapping_mul(0x9e37_79b9));
            // An exact-count mix, shuffled: every kind but the first rounded down, the first
            // taking the rest; inserts never more than the reserve has left.
            let mut kinds = Vec::with_capacity(len);
            let mix = workload.mix();
            let (&(first, _), rest) = mix.split_first().expect("a non-empty mix");
            for &(kind, fraction) in rest {
                let mut count = (fraction * len as f64) as usize;
                if kind == Kind::Insert {
                    count = count.min(reserve - inserted_total);
                }
                kinds.extend(std::iter::repeat_n(kind, count));
            }
            kinds.extend(std::iter::repeat_n(first, len - kinds.len()));
            kinds.shuffle(&mut rng);

            let mut own_inserts = 0usize;
            let mut latest = latest.clone();
            for kind in kinds {
                let request = |rng: &mut StdRng, own_inserts: usize| -> usize {
                    match workload.request_dist(kind) {
                        RequestDist::Uniform => rng.gen_range(0..loaded),
                        RequestDist::Zipfian => zipfian.sample(rng) as usize,
                        RequestDist::Latest => {
                            // Rank 0 is this thread's newest insert, then its older ones,
                            // then the loaded keys from the last loaded back.
                            let rank = latest.sample(rng) as usize;
                            if rank < own_inserts {
                                loaded + inserted_total + own_inserts - 1 - rank
                            } else {
                                loaded - 1 - (rank - own_inserts)
                            }
                        }
                    }
                };
                let (op, position) = match kind {
                    Kind::Insert => {
                        let position = loaded + inserted_total + own_inserts;
                        own_inserts += 1;
                        latest.grow((loaded + own_inserts) as u64);
                        (YcsbOp::Insert, position)
                    }
                    Kind::Read => (YcsbOp::Read, request(&mut rng, own_inserts)),
                    Kind::Update => (YcsbOp::Update, request(&mut rng, own_inserts)),
                    Kind::ReadModifyWrite => {
                        (YcsbOp::ReadModifyWrite, request(&mut rng, own_inserts))
                    }
                    Kind::Scan => {
                        let len = workload.scan_len(&mut rng);
                        (YcsbOp::Scan(len), request(&mut rng, own_inserts))
                    }
                };
                ops.push(op);
                positions.push(position as u32);
            }
            // The next thread's inserts continue where this one's end.
            inserted_total += own_inserts;
        }
        let plan = Self {
            workload,
            threads,
            loaded,
            ops,
            positions,
            inserted: loaded..loaded + inserted_total,
        };
        debug_assert_eq!(plan.ops.len(), total);
        plan
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the plan has no operations (never: every workload has at least one).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A [`YcsbPlan`] with its keys gathered in operation order, ready to run.
#[derive(Debug, Clone)]
pub struct YcsbStream {
    /// The operations and their key positions.
    pub plan: YcsbPlan,
    /// The key of each operation, in operation order (see [`KeySet::gather`]).
    pub keys: KeySet,
}

impl YcsbStream {
    /// The stream of `workload` over `keys` for `threads` threads.
    pub fn generate(workload: Ycsb, keys: &KeySet, threads: usize, seed: u64) -> Self {
        Self::of_plan(
            YcsbPlan::generate(workload, keys.len(), threads, seed),
            keys,
        )
    }

    /// The stream of `workload` over `keys` with `total` operations (see
    /// [`YcsbPlan::generate_ops`]) for `threads` threads.
    pub fn generate_ops(
        workload: Ycsb,
        keys: &KeySet,
        total: usize,
        threads: usize,
        seed: u64,
    ) -> Self {
        let plan = YcsbPlan::generate_ops(workload, keys.len(), total, threads, seed);
        Self::of_plan(plan, keys)
    }

    fn of_plan(plan: YcsbPlan, keys: &KeySet) -> Self {
        Self {
            keys: keys.gather(&plan.positions),
            plan,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: usize = 100_000;

    fn count(plan: &YcsbPlan, pred: impl Fn(YcsbOp) -> bool) -> usize {
        plan.ops.iter().filter(|&&op| pred(op)).count()
    }

    #[test]
    fn mixes_have_their_shares() {
        let expected: [(Ycsb, [f64; 5]); 6] = [
            // read, update, insert, scan, read-modify-write
            (Ycsb::A, [0.5, 0.5, 0.0, 0.0, 0.0]),
            (Ycsb::B, [0.95, 0.05, 0.0, 0.0, 0.0]),
            (Ycsb::C, [1.0, 0.0, 0.0, 0.0, 0.0]),
            (Ycsb::D, [0.95, 0.0, 0.05, 0.0, 0.0]),
            (Ycsb::E, [0.0, 0.0, 0.05, 0.95, 0.0]),
            (Ycsb::F, [0.5, 0.0, 0.0, 0.0, 0.5]),
        ];
        for threads in [1, 2, 3] {
            for (workload, shares) in expected {
                let plan = YcsbPlan::generate(workload, N, threads, 1);
                assert_eq!(plan.len(), workload.ops(N), "{workload}");
                let got = [
                    count(&plan, |op| op == YcsbOp::Read),
                    count(&plan, |op| op == YcsbOp::Update),
                    count(&plan, |op| op == YcsbOp::Insert),
                    count(&plan, |op| matches!(op, YcsbOp::Scan(_))),
                    count(&plan, |op| op == YcsbOp::ReadModifyWrite),
                ];
                for (got, share) in got.into_iter().zip(shares) {
                    let fraction = got as f64 / plan.len() as f64;
                    assert!(
                        (fraction - share).abs() < 0.002,
                        "{workload} x{threads}: {fraction} vs {share}"
                    );
                }
                // Each thread's chunk has the mix too, not just the whole stream.
                for t in 0..threads {
                    let chunk = &plan.ops[share(plan.len(), t, threads)];
                    let reads = chunk.iter().filter(|&&op| op == YcsbOp::Read).count();
                    let read_share = shares[0];
                    assert!(
                        (reads as f64 / chunk.len() as f64 - read_share).abs() < 0.002,
                        "{workload} x{threads} thread {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn requests_go_to_present_keys_and_inserts_to_fresh_ones() {
        for workload in Ycsb::ALL.iter().copied().chain(Ycsb::paper_mixes()) {
            for threads in [1, 2, 3] {
                let plan = YcsbPlan::generate(workload, 20_000, threads, 3);
                assert_eq!(plan.loaded, loaded_keys(20_000));
                let mut inserted = vec![false; 20_000];
                for t in 0..threads {
                    let range = share(plan.len(), t, threads);
                    for (&op, &pos) in plan.ops[range.clone()].iter().zip(&plan.positions[range]) {
                        let pos = pos as usize;
                        if op == YcsbOp::Insert {
                            assert!(pos >= plan.loaded && !inserted[pos], "{workload}: {pos}");
                            inserted[pos] = true;
                        } else {
                            // A loaded key, or one this thread inserted before.
                            assert!(pos < plan.loaded || inserted[pos], "{workload}: {pos}");
                        }
                    }
                }
                let fresh: Vec<usize> = (0..20_000).filter(|&p| inserted[p]).collect();
                assert_eq!(
                    fresh,
                    plan.inserted.clone().collect::<Vec<_>>(),
                    "{workload}"
                );
                assert_eq!(!plan.inserted.is_empty(), workload.inserts(), "{workload}");
            }
        }
    }

    #[test]
    fn latest_reads_favour_recent_inserts() {
        let plan = YcsbPlan::generate(Ycsb::D, N, 1, 5);
        let mut inserted = 0usize;
        let (mut reads, mut recent, mut of_inserted) = (0usize, 0usize, 0usize);
        for (&op, &pos) in plan.ops.iter().zip(&plan.positions) {
            let pos = pos as usize;
            match op {
                YcsbOp::Insert => inserted += 1,
                YcsbOp::Read => {
                    reads += 1;
                    // Keys in insertion order: the loaded ones, then the inserted ones.
                    let newest = plan.loaded + inserted - 1;
                    if newest - pos < N / 100 {
                        recent += 1;
                    }
                    if pos >= plan.loaded {
                        of_inserted += 1;
                    }
                }
                other => panic!("D has no {other:?}"),
            }
        }
        // The newest 1% of the keys take most reads (Zipf 0.99: about 60%), where a uniform
        // choice would give them 1%.
        let recent_share = recent as f64 / reads as f64;
        assert!(recent_share > 0.5, "{recent_share}");
        assert!(
            of_inserted as f64 / reads as f64 > 0.3,
            "{of_inserted} of {reads}"
        );
        // The Zipfian plans spread over the loaded keys instead.
        let a = YcsbPlan::generate(Ycsb::A, N, 1, 5);
        let near_end = a
            .positions
            .iter()
            .filter(|&&p| a.loaded - 1 - (p as usize) < N / 100)
            .count();
        assert!((near_end as f64 / a.len() as f64) < 0.1, "{near_end}");
    }

    #[test]
    fn plans_are_deterministic_from_the_seed() {
        for &workload in Ycsb::ALL {
            let plan = YcsbPlan::generate(workload, 5_000, 2, 11);
            assert_eq!(plan, YcsbPlan::generate(workload, 5_000, 2, 11));
            let other = YcsbPlan::generate(workload, 5_000, 2, 12);
            assert_ne!(plan.positions, other.positions, "{workload}");
        }
    }

    #[test]
    fn scan_lengths_cover_one_to_a_hundred() {
        let plan = YcsbPlan::generate(Ycsb::E, 500_000, 1, 9);
        let lens: Vec<u32> = plan
            .ops
            .iter()
            .filter_map(|&op| match op {
                YcsbOp::Scan(len) => Some(len),
                _ => None,
            })
            .collect();
        let most = u32::from(YCSB_MAX_SCAN_LEN);
        assert!(lens.iter().all(|&l| (1..=most).contains(&l)));
        assert_eq!(lens.iter().min(), Some(&1));
        assert_eq!(lens.iter().max(), Some(&most));
        let mean = lens.iter().map(|&l| f64::from(l)).sum::<f64>() / lens.len() as f64;
        assert!((mean - 50.5).abs() < 1.5, "{mean}");
    }

    /// The most requests any one key gets among `plan`'s operations that `pick` selects, as
    /// a share of those operations.
    fn hottest_share(plan: &YcsbPlan, pick: impl Fn(YcsbOp) -> bool) -> f64 {
        let mut counts = std::collections::HashMap::new();
        let mut total = 0;
        for (&op, &p) in plan.ops.iter().zip(&plan.positions) {
            if pick(op) {
                *counts.entry(p).or_insert(0usize) += 1;
                total += 1;
            }
        }
        counts.values().copied().max().unwrap_or(0) as f64 / total.max(1) as f64
    }

    #[test]
    fn paper_mixes_have_their_shares_lengths_and_distributions() {
        for threads in [1, 2] {
            for &(percent, name) in UPDATE_MIXES {
                let workload = Ycsb::Updates(percent);
                assert_eq!(workload.name(), name);
                let plan = YcsbPlan::generate(workload, N, threads, 4);
                assert_eq!(plan.len(), N);
                let updates = count(&plan, |op| op == YcsbOp::Update);
                let reads = count(&plan, |op| op == YcsbOp::Read);
                assert_eq!(updates + reads, N, "{name}");
                let share = updates as f64 / N as f64;
                assert!(
                    (share - f64::from(percent) / 100.0).abs() < 0.002,
                    "{name}: {share}"
                );
                // Uniform keys: no key takes even 0.1% of the requests (a Zipfian's hottest
                // takes several percent).
                assert!(hottest_share(&plan, |_| true) < 0.001, "{name}");
            }
            for &(len, name) in SCAN_UPDATE_MIXES {
                let workload = Ycsb::ScanUpdate(len);
                assert_eq!(workload.name(), name);
                let plan = YcsbPlan::generate(workload, N, threads, 5);
                assert_eq!(plan.len(), (N / len as usize).max(MIN_SCAN_UPDATE_OPS));
                let scans = count(&plan, |op| op == YcsbOp::Scan(len));
                let updates = count(&plan, |op| op == YcsbOp::Update);
                assert_eq!(
                    scans + updates,
                    plan.len(),
                    "{name}: only scans of {len} and updates"
                );
                let share = updates as f64 / plan.len() as f64;
                assert!((share - 0.05).abs() < 0.005, "{name}: {share}");
            }
        }
        // Enough operations to see the distributions: scans start uniformly, updates are
        // Zipfian (a few keys take a large share).
        let plan = YcsbPlan::generate(Ycsb::ScanUpdate(1), N, 1, 6);
        assert!(hottest_share(&plan, |op| matches!(op, YcsbOp::Scan(_))) < 0.001);
        assert!(hottest_share(&plan, |op| op == YcsbOp::Update) > 0.02);
    }

    #[test]
    fn tiny_key_sets_still_plan() {
        for workload in Ycsb::ALL.iter().copied().chain(Ycsb::paper_mixes()) {
            for n in [2, 3, 20, 41] {
                let plan = YcsbPlan::generate(workload, n, 2, 1);
                assert_eq!(plan.len(), workload.ops(n));
                assert!(plan.positions.iter().all(|&p| (p as usize) < n));
            }
        }
    }
}
