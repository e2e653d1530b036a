//! Timed parallel regions and sampled single-operation latencies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// How a parallel region hands its operations to its threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// One contiguous chunk per thread (thread `t` takes the `t`-th of `threads` equal parts).
    Chunks,
    /// Consecutive batches of this many operations, each to the next thread that is free: the
    /// threads work on neighbouring parts of the stream at any moment, as workers taking
    /// readings from one ingest queue do.
    Batches(usize),
}

/// Runs `work` on `threads` threads, each on one contiguous chunk of `ops` (given with the
/// position of its first op in `ops`), and times the parallel region only: the threads line up on a barrier, each reads the clock when it leaves
/// the barrier and when it finishes, and the region runs from the earliest start to the latest
/// finish (the monotonic clock is shared by all threads). Returns the elapsed time and the sum
/// of what the threads returned.
pub fn run_parallel<F>(ops: &[u32], threads: usize, work: F) -> (Duration, u64)
where
    F: Fn(usize, &[u32]) -> u64 + Sync,
{
    run_parallel_with(
        ops,
        threads,
        Dispatch::Chunks,
        || (),
        |_, first, chunk| work(first, chunk),
        |_| {},
    )
}

/// [`run_parallel`] handing out `ops` as `dispatch` says: each thread makes its state with
/// `start`, runs `work` on every part it takes, and hands the state to `finish`.
pub fn run_parallel_with<S, F>(
    ops: &[u32],
    threads: usize,
    dispatch: Dispatch,
    start: impl Fn() -> S + Sync,
    work: F,
    finish: impl Fn(S) + Sync,
) -> (Duration, u64)
where
    F: Fn(&mut S, usize, &[u32]) -> u64 + Sync,
{
    let threads = threads.max(1);
    let barrier = Barrier::new(threads);
    let next_batch = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, work, next_batch) = (&barrier, &work, &next_batch);
                let (start, finish) = (&start, &finish);
                scope.spawn(move || {
                    let mut state = start();
                    barrier.wait();
                    let began = Instant::now();
                    let mut result = 0;
                    match dispatch {
                        Dispatch::Chunks => {
                            let first = t * ops.len() / threads;
                            let chunk = &ops[first..(t + 1) * ops.len() / threads];
                            result = work(&mut state, first, chunk);
                        }
                        Dispatch::Batches(size) => loop {
                            let first = next_batch.fetch_add(1, Ordering::Relaxed) * size;
                            if first >= ops.len() {
                                break;
                            }
                            let chunk = &ops[first..(first + size).min(ops.len())];
                            result += work(&mut state, first, chunk);
                        },
                    }
                    let ended = Instant::now();
                    finish(state);
                    (began, ended, result)
                })
            })
            .collect();
        let mut first_start: Option<Instant> = None;
        let mut last_end: Option<Instant> = None;
        let mut total = 0u64;
        for handle in handles {
            let (start, end, result) = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            first_start = Some(first_start.map_or(start, |s| s.min(start)));
            last_end = Some(last_end.map_or(end, |e| e.max(end)));
            total += result;
        }
        let elapsed = match (first_start, last_end) {
            (Some(start), Some(end)) => end.duration_since(start),
            _ => Duration::ZERO,
        };
        (elapsed, total)
    })
}

/// One operation in this many is timed on its own for the latency percentiles: often enough
/// for a stable p99, rarely enough that reading the clock (about 20 ns twice) barely touches
/// the throughput figure.
pub const LATENCY_SAMPLE_EVERY: usize = 16;

/// Per-thread buffers for the latency samples of one timed run, allocated before it so that
/// sampling allocates nothing inside the timed region (nor anything a memory reading around
/// it would count).
pub struct Latencies {
    buffers: Mutex<Vec<Vec<u64>>>,
    /// Whether to take samples at all.
    sampling: bool,
}

impl Latencies {
    /// Buffers for a run of `ops` operations on `threads` threads.
    pub fn new(ops: usize, threads: usize) -> Self {
        let threads = threads.max(1);
        let per_thread = ops.div_ceil(threads) / LATENCY_SAMPLE_EVERY + 2;
        Self {
            buffers: Mutex::new(
                (0..threads)
                    .map(|_| Vec::with_capacity(per_thread))
                    .collect(),
            ),
            sampling: true,
        }
    }

    /// No buffers: a run that takes no samples.
    pub fn none() -> Self {
        Self {
            buffers: Mutex::new(Vec::new()),
            sampling: false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u64>>> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every sample taken, in nanoseconds.
    pub fn into_samples(self) -> Vec<u64> {
        let buffers = self.buffers.into_inner().unwrap_or_else(|e| e.into_inner());
        buffers.concat()
    }
}

/// Where one thread puts its samples: a buffer of [`Latencies`], or nowhere.
pub struct Samples {
    buffer: Vec<u64>,
    sampling: bool,
}

/// Runs `op`, timing it into `samples` if `j` (its position in the whole operation stream)
/// is a multiple of [`LATENCY_SAMPLE_EVERY`].
#[inline(always)]
pub fn sampled<R>(samples: &mut Samples, j: usize, op: impl FnOnce() -> R) -> R {
    if samples.sampling && j.is_multiple_of(LATENCY_SAMPLE_EVERY) {
        let start = Instant::now();
        let result = op();
        samples.buffer.push(start.elapsed().as_nanos() as u64);
        result
    } else {
        op()
    }
}

/// [`run_parallel`] with a [`Samples`] buffer from `latencies` for each thread, returned to it
/// when the thread's chunk is done.
pub fn run_sampled<F>(
    ops: &[u32],
    threads: usize,
    latencies: &Latencies,
    work: F,
) -> (Duration, u64)
where
    F: Fn(usize, &[u32], &mut Samples) -> u64 + Sync,
{
    run_sampled_with(ops, threads, Dispatch::Chunks, latencies, work)
}

/// [`run_sampled`] handing out `ops` as `dispatch` says (each thread keeps its [`Samples`]
/// buffer across the parts it takes).
pub fn run_sampled_with<F>(
    ops: &[u32],
    threads: usize,
    dispatch: Dispatch,
    latencies: &Latencies,
    work: F,
) -> (Duration, u64)
where
    F: Fn(usize, &[u32], &mut Samples) -> u64 + Sync,
{
    run_parallel_with(
        ops,
        threads,
        dispatch,
        || Samples {
            buffer: if latencies.sampling {
                latencies.lock().pop().unwrap_or_default()
            } else {
                Vec::new()
            },
            sampling: latencies.sampling,
        },
        |samples, first, chunk| work(first, chunk, samples),
        |samples| {
            if latencies.sampling {
                latencies.lock().push(samples.buffer);
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cover_every_op_once_on_any_thread() {
        let ops: Vec<u32> = (0..1001).collect();
        for threads in 1..=4 {
            let (_, sum) = run_parallel_with(
                &ops,
                threads,
                Dispatch::Batches(16),
                || (),
                |_, first, chunk| {
                    assert_eq!(u64::from(chunk[0]), first as u64);
                    assert!(chunk.len() <= 16);
                    chunk.iter().map(|&x| u64::from(x)).sum()
                },
                |_| {},
            );
            assert_eq!(sum, 1000 * 1001 / 2);
        }
    }

    #[test]
    fn run_parallel_covers_every_op_once() {
        let ops: Vec<u32> = (0..1001).collect();
        for threads in 1..=4 {
            let (_, sum) = run_parallel(&ops, threads, |first, chunk| {
                assert_eq!(u64::from(chunk[0]), first as u64);
                chunk.iter().map(|&x| u64::from(x)).sum()
            });
            assert_eq!(sum, 1000 * 1001 / 2);
        }
    }
}
