//! The checked, timed operations every driver runs on a [`BenchIndex`]: a load, lookups,
//! scans, deletes and YCSB streams; each checks the index's answers and fails with what went
//! wrong.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use elastree::Direction;
use elastree_dist::DistStats;

use super::timing::{run_sampled, run_sampled_with, sampled, Dispatch, Latencies};
use crate::cluster;
use crate::keys::{Key, KeySet};
use crate::mixed::{MixedOp, MixedStream};
use crate::peers::{BenchCursor, BenchIndex};
use crate::workload::OpStreams;
use crate::ycsb::{YcsbOp, YcsbStream, CURSOR_REQUESTS, TID_MASK, VERSION_STEP};

/// What one timed run yields: its seconds, its sampled latencies in nanoseconds and, for a
/// distributed index, its client's counters over the timed phase.
pub type Timed = (f64, Vec<u64>, Option<DistStats>);

/// Runs `run` and returns what it returned with `index`'s distributed counters over it
/// (`None` for an index that is not distributed).
pub fn counted<R>(index: &dyn BenchIndex, run: impl FnOnce() -> R) -> (R, Option<DistStats>) {
    let before = index.stats_as::<DistStats>();
    let result = run();
    let delta = before
        .zip(index.stats_as::<DistStats>())
        .map(|(before, after)| cluster::stats_delta(after, before));
    (result, delta)
}

/// A loaded index, the seconds its load took and (distributed kinds) the client's counters
/// over the load.
pub type Filled = (Box<dyn BenchIndex>, f64, Option<DistStats>);

/// Loads `index` with the keys at `positions` (key `i` mapping to tid `i`): by bulk load if the
/// index loads in bulk, else by inserts on `threads` threads, sampling their latencies into
/// `latencies` if given. Returns the index, the timed seconds and, for a distributed index,
/// its client's counters over the inserts.
pub fn fill(
    mut index: Box<dyn BenchIndex>,
    keys: &KeySet,
    positions: &[u32],
    threads: usize,
    latencies: Option<&Latencies>,
) -> Result<Filled, String> {
    if index.loads_in_bulk() {
        // A bulk load maps key `i` of the set it is given to tid `i`: the whole key set, or a
        // prefix of it (`positions` are `0..count`), keeps tids equal to positions.
        let prefix;
        let set = if positions.len() == keys.len() {
            keys
        } else {
            debug_assert!(positions.iter().zip(0u32..).all(|(&p, i)| p == i));
            prefix = keys.gather(positions);
            &prefix
        };
        let start = Instant::now();
        index.bulk_load(set)?;
        return Ok((index, start.elapsed().as_secs_f64(), None));
    }
    let unsampled = Latencies::none();
    let (secs, dist) = insert(
        index.as_ref(),
        keys,
        positions,
        threads,
        latencies.unwrap_or(&unsampled),
    );
    Ok((index, secs, dist))
}

/// Keys a thread takes from a stream key set at a time in a multi-threaded load (a batch of
/// readings: large enough that taking one is rare, small enough that the threads stay on
/// neighbouring readings).
pub const STREAM_BATCH: usize = 256;

/// Inserts the keys of `keys` at `positions` (key `i` with tid `i`) on `threads` threads,
/// sampling their latencies into `latencies`; returns the seconds taken and, for a
/// distributed index, its client's counters over the inserts. A stream key set
/// ([`crate::keys::KeySetKind::is_stream`]) is handed out in batches of [`STREAM_BATCH`].
pub fn insert(
    index: &dyn BenchIndex,
    keys: &KeySet,
    positions: &[u32],
    threads: usize,
    latencies: &Latencies,
) -> (f64, Option<DistStats>) {
    let dispatch = if keys.kind.is_stream() {
        Dispatch::Batches(STREAM_BATCH)
    } else {
        Dispatch::Chunks
    };
    let ((elapsed, _), dist) = counted(index, || {
        run_sampled_with(
            positions,
            threads,
            dispatch,
            latencies,
            |first, chunk, samples| {
                for (j, &i) in (first..).zip(chunk) {
                    sampled(samples, j, || {
                        index.insert(keys.key(i as usize), u64::from(i))
                    });
                }
                0
            },
        )
    });
    (elapsed.as_secs_f64(), dist)
}

/// The latency buffers of a run of `ops` operations on `threads` threads: every
/// [`super::timing::LATENCY_SAMPLE_EVERY`]-th operation sampled if `sample`, none otherwise.
fn latencies_for(ops: usize, threads: usize, sample: bool) -> Latencies {
    if sample {
        Latencies::new(ops, threads)
    } else {
        Latencies::none()
    }
}

/// Runs lookups of `keys` (in lookup order; `tids` are the tids they must find, their
/// positions in the key set) on `threads` threads, sampling latencies if `sample`; returns
/// the seconds taken and the sampled latencies in nanoseconds.
pub fn lookup(
    index: &dyn BenchIndex,
    keys: &KeySet,
    tids: &[u32],
    threads: usize,
    sample: bool,
) -> Result<Timed, String> {
    let latencies = latencies_for(tids.len(), threads, sample);
    let ((elapsed, hits), dist) = counted(index, || {
        run_sampled(tids, threads, &latencies, |first, chunk, samples| {
            let mut hits = 0u64;
            for (j, &i) in (first..).zip(chunk) {
                let found = sampled(samples, j, || index.get(keys.key(j)));
                hits += u64::from(found == Some(u64::from(i)));
            }
            hits
        })
    });
    if hits != tids.len() as u64 {
        return Err(format!(
            "{} of {} lookups of present keys missed or returned a wrong tid",
            tids.len() as u64 - hits,
            tids.len()
        ));
    }
    Ok((elapsed.as_secs_f64(), latencies.into_samples(), dist))
}

/// Where scans start: positions in the key set, with their keys in scan order.
pub type ScanStarts<'a> = (&'a [u32], &'a KeySet);

/// What [`scans`] measured: the timed run, the keys visited in all, and how many scans ended
/// short of `scan_len` keys.
pub type Scanned = (Timed, u64, usize);

/// Runs scans of up to `scan_len` keys in `direction` from each of `starts` on `threads`
/// threads, sampling the latencies of whole scans if `sample`; checks nothing.
pub fn scans(
    index: &dyn BenchIndex,
    (starts, start_keys): ScanStarts<'_>,
    scan_len: usize,
    threads: usize,
    (direction, sample): (Direction, bool),
) -> Scanned {
    let descending = direction == Direction::Descending;
    let latencies = latencies_for(starts.len(), threads, sample);
    let short = std::sync::atomic::AtomicUsize::new(0);
    let ((elapsed, visited), dist) = counted(index, || {
        run_sampled(starts, threads, &latencies, |first, chunk, samples| {
            let mut visited = 0u64;
            let mut checksum = 0u64;
            for j in first..first + chunk.len() {
                let mut visit = |_: crate::keys::Key<'_>, tid: u64| {
                    checksum = checksum.wrapping_add(tid);
                };
                let key = start_keys.key(j);
                let got = sampled(samples, j, || {
                    if descending {
                        index.scan_desc(key, scan_len, &mut visit)
                    } else {
                        index.scan(key, scan_len, &mut visit)
                    }
                });
                visited += got as u64;
                if got != scan_len {
                    short.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            std::hint::black_box(checksum);
            visited
        })
    });
    let timed = (elapsed.as_secs_f64(), latencies.into_samples(), dist);
    (timed, visited, short.into_inner())
}

/// [`scans`] from starts that each have at least `scan_len` keys on the scan's side, so
/// every scan must visit `scan_len` keys; returns the seconds taken and the sampled latencies
/// of whole scans.
pub fn scan(
    index: &dyn BenchIndex,
    starts: ScanStarts<'_>,
    scan_len: usize,
    threads: usize,
    direction: Direction,
) -> Result<Timed, String> {
    let (timed, visited, short) = scans(index, starts, scan_len, threads, (direction, true));
    if short != 0 {
        let expected = (starts.0.len() * scan_len) as u64;
        return Err(format!(
            "{short} scans ended short: they visited {visited} keys, expected {expected}"
        ));
    }
    Ok(timed)
}

/// Removes `keys` (in remove order; `positions` are their positions in the key set) on
/// `threads` threads, sampling latencies if `sample`; every remove must hit.
pub fn remove(
    index: &dyn BenchIndex,
    keys: &KeySet,
    positions: &[u32],
    threads: usize,
    sample: bool,
) -> Result<Timed, String> {
    let latencies = latencies_for(positions.len(), threads, sample);
    let ((elapsed, removed), dist) = counted(index, || {
        run_sampled(positions, threads, &latencies, |first, chunk, samples| {
            let mut removed = 0u64;
            for j in first..first + chunk.len() {
                removed += u64::from(sampled(samples, j, || index.remove(keys.key(j))));
            }
            removed
        })
    });
    if removed != positions.len() as u64 {
        return Err(format!(
            "{} of {} removes of present keys missed",
            positions.len() as u64 - removed,
            positions.len()
        ));
    }
    Ok((elapsed.as_secs_f64(), latencies.into_samples(), dist))
}

/// Removes every key of `ops`'s delete stream (in its order) and checks that each remove hit
/// and that the index is empty afterwards; returns the seconds taken and the sampled latencies.
pub fn delete(
    index: &dyn BenchIndex,
    keys: &KeySet,
    ops: &OpStreams,
    threads: usize,
) -> Result<Timed, String> {
    let timed = remove(index, &ops.delete_keys, &ops.deletes, threads, true)?;
    // Nothing may remain: a scan from the smallest key finds nothing.
    let smallest = keys.key(ops.sorted[0] as usize);
    let left = index.scan(smallest, 1, &mut |_, _| {});
    if left != 0 {
        return Err("the index is not empty after deleting every key".to_string());
    }
    Ok(timed)
}

/// Runs a YCSB stream on `index`, loaded with the stream's first `loaded` keys, and checks the
/// results: every read and read-modify-write finds its key with its position in the tid's low
/// 32 bits, every scan visits at least its start key and at most its length, and afterwards
/// every key the inserts added is there. Returns the seconds taken, the sampled latencies and
/// (for a distributed index) the client's counters over the timed operations.
pub fn ycsb(
    index: &dyn BenchIndex,
    keys: &KeySet,
    stream: &YcsbStream,
    threads: usize,
) -> Result<Timed, String> {
    let plan = &stream.plan;
    let latencies = Latencies::new(plan.len(), threads);
    let ((elapsed, good), dist) = counted(index, || {
        run_sampled(
            &plan.positions,
            threads,
            &latencies,
            |first, chunk, samples| {
                let mut good = 0u64;
                let mut checksum = 0u64;
                // The cursor mixes: the thread's cursor and the requests it has served.
                let mode = plan.workload.cursor();
                let mut cursor: Option<Box<dyn BenchCursor + '_>> = None;
                let mut served = 0;
                for (j, &position) in (first..).zip(chunk) {
                    let key = stream.keys.key(j);
                    let tid = u64::from(position);
                    let ok = sampled(samples, j, || match plan.ops[j] {
                        YcsbOp::Read => index.get(key).is_some_and(|v| v & TID_MASK == tid),
                        YcsbOp::Update => {
                            // A new value each time; the low 32 bits stay the position.
                            index.insert(key, tid | ((j as u64 + 1) << 32));
                            true
                        }
                        YcsbOp::Insert => {
                            index.insert(key, tid);
                            true
                        }
                        YcsbOp::Scan(len) => {
                            let mut visit = |_: Key<'_>, v: u64| {
                                checksum = checksum.wrapping_add(v);
                            };
                            let got = match mode {
                                None => index.scan(key, len as usize, &mut visit),
                                Some(physiological) => {
                                    if served == CURSOR_REQUESTS {
                                        cursor = None;
                                    }
                                    let mut got = 0;
                                    if let Some(open) = &mut cursor {
                                        got = open.next(len as usize, &mut visit);
                                        served += 1;
                                    }
                                    if got == 0 {
                                        // No cursor yet, or it reached the end of the keys:
                                        // open one at this scan's start key.
                                        let open = cursor.insert(index.cursor(key, physiological));
                                        got = open.next(len as usize, &mut visit);
                                        served = 1;
                                    }
                                    got
                                }
                            };
                            (1..=len as usize).contains(&got)
                        }
                        YcsbOp::ReadModifyWrite => match index.get(key) {
                            Some(v) if v & TID_MASK == tid => {
                                index.insert(key, v.wrapping_add(VERSION_STEP));
                                true
                            }
                            _ => false,
                        },
                    });
                    good += u64::from(ok);
                }
                std::hint::black_box(checksum);
                good
            },
        )
    });
    if good != plan.len() as u64 {
        return Err(format!(
            "{} of {} {} operations missed an existing key or returned a wrong tid",
            plan.len() as u64 - good,
            plan.len(),
            plan.workload
        ));
    }
    let missing = plan
        .inserted
        .clone()
        .filter(|&p| {
            index
                .get(keys.key(p))
                .is_none_or(|v| v & TID_MASK != p as u64)
        })
        .count();
    if missing != 0 {
        return Err(format!(
            "{missing} of {} inserted keys are missing after {}",
            plan.inserted.len(),
            plan.workload
        ));
    }
    Ok((elapsed.as_secs_f64(), latencies.into_samples(), dist))
}

/// Runs the `mixed` workload's operations on `index`, loaded with the plan's first keys, on
/// `threads` threads: inserts take the next keys of the set from one shared cursor in
/// batches of [`STREAM_BATCH`] (ingest workers reading one queue of readings); lookups must
/// find their key's tid, scans must visit their start key and at most their length. Checks
/// afterwards that every inserted key is there.
pub fn mixed(
    index: &dyn BenchIndex,
    keys: &KeySet,
    stream: &MixedStream,
    threads: usize,
) -> Result<Timed, String> {
    let plan = &stream.plan;
    let latencies = Latencies::new(plan.len(), threads);
    let cursor = AtomicUsize::new(plan.loaded);
    // Every op's index into the plan: threads run contiguous parts of it.
    let order: Vec<u32> = (0..plan.len() as u32).collect();
    let ((elapsed, good), dist) = counted(index, || {
        run_sampled(&order, threads, &latencies, |first, chunk, samples| {
            let mut good = 0u64;
            let mut checksum = 0u64;
            // This thread's batch of insert positions: `next..end`.
            let (mut next, mut end) = (0usize, 0usize);
            for j in first..first + chunk.len() {
                let key = stream.keys.key(j);
                let tid = u64::from(plan.positions[j]);
                let ok = match plan.ops[j] {
                    MixedOp::Insert => {
                        if next == end {
                            next = cursor.fetch_add(STREAM_BATCH, Ordering::Relaxed);
                            end = (next + STREAM_BATCH).min(keys.len());
                        }
                        if next < end {
                            let i = next;
                            next += 1;
                            sampled(samples, j, || index.insert(keys.key(i), i as u64));
                            true
                        } else {
                            false
                        }
                    }
                    MixedOp::Lookup => {
                        sampled(samples, j, || index.get(key)).is_some_and(|v| v == tid)
                    }
                    MixedOp::Scan(len) => {
                        let got = sampled(samples, j, || {
                            index.scan(key, len as usize, &mut |_, v| {
                                checksum = checksum.wrapping_add(v);
                            })
                        });
                        (1..=len as usize).contains(&got)
                    }
                };
                good += u64::from(ok);
            }
            std::hint::black_box(checksum);
            good
        })
    });
    if good != plan.len() as u64 {
        return Err(format!(
            "{} of {} mixed operations missed a loaded key, overran a scan or ran out of keys \
             to insert",
            plan.len() as u64 - good,
            plan.len(),
        ));
    }
    // The cursor handed out keys `loaded..handed`; a thread leaves the rest of its last batch
    // unused, so exactly `inserts` of them must be present, each with its tid.
    let handed = cursor.load(Ordering::Relaxed).min(keys.len());
    let present = (plan.loaded..handed)
        .filter(|&i| index.get(keys.key(i)) == Some(i as u64))
        .count();
    if present != plan.inserts {
        return Err(format!(
            "{present} keys of the {} the mixed workload inserted are present",
            plan.inserts
        ));
    }
    Ok((elapsed.as_secs_f64(), latencies.into_samples(), dist))
}
