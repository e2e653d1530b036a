//! `hybrid-latency` (past the paper; its Table 3): the latency of every operation of a
//! mixed stream spanning merges, blocking vs background merges.

use super::*;

/// Inserts of the mixed stream, as a fraction of N: at ratio 10, enough for three merges
/// after any load (triggers of N/10, 1.1 N/10 and 1.21 N/10 entries).
pub const LATENCY_INSERT_FRACTION: f64 = 0.35;

/// The bound on the maximum operation latency during a non-blocking merge.
pub const MAX_MERGE_LATENCY_MS: f64 = 10.0;

/// Time bins of the latency-over-time plots.
pub(super) const LATENCY_BINS: usize = 200;

/// What the paper reports for Table 3 (section 7).
pub const PAPER_TABLE_3: &str = "\
Section 7, Table 3: TPC-C transaction latencies in H-Store (8 partitions, the same run as \
Figure 8a), with the paper's blocking merge:

| index | 50%-tile | 99%-tile | MAX |\n|---|---|---|---|\n\
| B+tree | 10 ms | 50 ms | 115 ms |\n\
| Hybrid | 10 ms | 52 ms | 611 ms |\n\
| Hybrid-Compressed | 11 ms | 83 ms | 1981 ms |\n\n\
The hybrid indexes barely change the 50th and 99th percentiles; the MAX grows \"because our \
current merge algorithm is blocking\". The paper leaves space-efficient non-blocking \
merges (and a concurrent hybrid index) to future work. These are whole-transaction \
latencies; ours are single index operations.
";

/// The merge modes of `hybrid-latency` with their labels, plot names and threads.
pub(super) const LATENCY_MODES: &[(&str, &str, MergeMode, usize)] = &[
    ("hybrid (blocking)", "blocking", MergeMode::Blocking, 1),
    (
        "hybrid (background)",
        "background",
        MergeMode::Background,
        1,
    ),
    (
        "hybrid (background, 2 threads)",
        "background-2-threads",
        MergeMode::Background,
        2,
    ),
];

/// The latency of one stream: each operation's start (ns from the index's creation) and
/// duration (ns), and the merges (from the index's records) that ran during it.
pub(super) struct Timeline {
    pub(super) starts: Vec<u64>,
    pub(super) latencies: Vec<u64>,
    pub(super) merges: Vec<(u64, u64)>,
}

impl Timeline {
    /// Whether each operation overlapped a merge.
    pub(super) fn overlapping(&self) -> Vec<bool> {
        let mut i = 0;
        self.starts
            .iter()
            .zip(&self.latencies)
            .map(|(&s, &l)| {
                while i < self.merges.len() && self.merges[i].1 < s {
                    i += 1;
                }
                i < self.merges.len() && s + l >= self.merges[i].0
            })
            .collect()
    }

    /// The maximum latency (ms) per time bin and whether a merge ran in it.
    pub(super) fn bins(&self) -> (Vec<String>, Vec<Option<f64>>, Vec<bool>) {
        let (Some(&first), Some(&last)) = (self.starts.first(), self.starts.last()) else {
            return (Vec::new(), Vec::new(), Vec::new());
        };
        let width = ((last - first) / LATENCY_BINS as u64).max(1);
        let bin = |t: u64| ((t.saturating_sub(first) / width) as usize).min(LATENCY_BINS - 1);
        let mut max = vec![None::<f64>; LATENCY_BINS];
        for (&s, &l) in self.starts.iter().zip(&self.latencies) {
            let m = &mut max[bin(s)];
            let ms = l as f64 / 1e6;
            *m = Some(m.map_or(ms, |v: f64| v.max(ms)));
        }
        let mut merging = vec![false; LATENCY_BINS];
        for &(a, b) in &self.merges {
            if b < first || a > last {
                continue;
            }
            for flag in &mut merging[bin(a)..=bin(b)] {
                *flag = true;
            }
        }
        let labels = (0..LATENCY_BINS)
            .map(|i| format!("{:.2}", (i as u64 * width) as f64 / 1e9))
            .collect();
        (labels, max, merging)
    }
}

/// The `q` quantile (0..=1) of sorted `values`.
pub(crate) fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    Some(sorted[((last as f64 * q).round() as usize).min(last)] as f64)
}

/// One timed operation of the mixed stream: runs operation `i`, appends its (start,
/// latency) and returns 1 if its answer was wrong.
pub(super) type TimedOp<'a> = dyn Fn(usize, &mut Vec<(u64, u64)>) -> usize + Sync + 'a;

/// Runs the mixed stream on a loaded index: `reads.len()` Zipfian reads (keys in
/// `read_keys`, they must find their position as tid) and as many inserts of keys
/// `first_new..` of `keys`, each operation timed on its own. One thread alternates a read and
/// an insert; two threads run the reads on one and the inserts on the other, concurrently.
pub(super) fn mixed_stream(
    l: &Loaded,
    keys: &KeySet,
    first_new: usize,
    (reads, read_keys): (&[u32], &KeySet),
    threads: usize,
) -> Result<Timeline, String> {
    let index = l.index.as_ref();
    let created = l.created;
    let ns = move |t: Instant| t.duration_since(created).as_nanos() as u64;
    // (start, latency) of each operation, and the wrong answers.
    let read = |i: usize, out: &mut Vec<(u64, u64)>| -> usize {
        let t0 = Instant::now();
        let found = with_key(read_keys.key(i), |k| index.get(k));
        let t1 = Instant::now();
        out.push((ns(t0), ns(t1) - ns(t0)));
        usize::from(!matches!(found, Ok(Some(t)) if t == u64::from(reads[i])))
    };
    let insert = |i: usize, out: &mut Vec<(u64, u64)>| -> usize {
        let new = first_new + i;
        let t0 = Instant::now();
        let old = with_key(keys.key(new), |k| index.insert(k, new as u64));
        let t1 = Instant::now();
        out.push((ns(t0), ns(t1) - ns(t0)));
        usize::from(!matches!(old, Ok(None)))
    };
    let count = reads.len();
    let (mut ops, wrong) = timed_ops((&read, &insert), count, threads);
    index.quiesce().map_err(|e| e.to_string())?;
    if wrong > 0 {
        return Err(format!(
            "{wrong} of {} operations failed or returned a wrong result",
            2 * count
        ));
    }
    ops.sort_unstable();
    let merges = merges_since(l, ops.first().map_or(0, |o| o.0));
    let (starts, latencies) = ops.into_iter().unzip();
    Ok(Timeline {
        starts,
        latencies,
        merges,
    })
}

/// Runs `count` reads and `count` inserts: alternating on one thread, or (`threads` > 1) the
/// reads on one thread and the inserts on another; (start, latency) of every operation, and
/// the wrong answers.
fn timed_ops(
    (read, insert): (&TimedOp<'_>, &TimedOp<'_>),
    count: usize,
    threads: usize,
) -> (Vec<(u64, u64)>, usize) {
    if threads <= 1 {
        let mut ops = Vec::with_capacity(2 * count);
        let mut wrong = 0;
        for i in 0..count {
            wrong += read(i, &mut ops) + insert(i, &mut ops);
        }
        return (ops, wrong);
    }
    let run = |op: &TimedOp<'_>| {
        let mut ops = Vec::with_capacity(count);
        let wrong = (0..count).map(|i| op(i, &mut ops)).sum::<usize>();
        (ops, wrong)
    };
    let ((mut a, wa), (b, wb)) = std::thread::scope(|scope| {
        let reader = scope.spawn(|| run(read));
        let writer = scope.spawn(|| run(insert));
        let join = |h: std::thread::ScopedJoinHandle<'_, (Vec<(u64, u64)>, usize)>| {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        };
        (join(reader), join(writer))
    });
    a.extend(b);
    (a, wa + wb)
}

/// The merges of `l`'s index (from its records: start and end, ns from its creation) that
/// ended at or after `since`.
fn merges_since(l: &Loaded, since: u64) -> Vec<(u64, u64)> {
    l.index
        .stats_as::<HybridStats>()
        .unwrap_or_default()
        .records
        .iter()
        .map(|m| {
            let a = m.started.as_nanos() as u64;
            (a, a + m.duration.as_nanos() as u64)
        })
        .filter(|&(_, b)| b >= since)
        .collect()
}

/// The key set of `hybrid-latency`.
const LATENCY_KEYS: KeySetKind = KeySetKind::Rand64;

/// The mixed stream's keys: `keys` (loaded: the first N; then `inserts` new ones), the read
/// positions and their keys.
struct Stream {
    keys: KeySet,
    inserts: usize,
    reads: Vec<u32>,
    read_keys: KeySet,
}

/// `hybrid-latency`.
pub(crate) fn run_latency(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let (name, n) = (ctx.experiment.name, ctx.n);
    let inserts = ((n as f64 * LATENCY_INSERT_FRACTION) as usize).max(1);
    eprintln!("{name}: generating {} keys", n + inserts);
    let keys = LATENCY_KEYS.generate(n + inserts, ctx.seed);
    let reads = zipf_positions(n, inserts, ctx.seed);
    let read_keys = keys.gather(&reads);
    let stream = Stream {
        keys,
        inserts,
        reads,
        read_keys,
    };
    let mut cells = Cells::default();
    let mut first_timelines: Vec<(&str, &str, Timeline)> = Vec::new();
    for rep in 0..ctx.repeat {
        for &(label, slug, mode, threads) in LATENCY_MODES {
            let timeline = measure_mode(ctx, &mut cells, &stream, (label, mode, threads), rep);
            if let (Some(timeline), 0) = (timeline, rep) {
                first_timelines.push((label, slug, timeline));
            }
        }
    }
    let mut plots = Vec::new();
    for (label, slug, timeline) in &first_timelines {
        latency_plot(ctx, &mut plots, (label, slug), timeline)?;
    }
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary: latency_summary(ctx, &cells, inserts),
            sections: Vec::new(),
            paper: latency_paper(&cells, n),
            targets: latency_targets(&cells),
            facts: latency_facts(ctx, inserts),
            plots,
        },
    )
}

/// One repetition (`rep`, from 0) of one merge mode (`label`, `mode`, `threads`): a fresh
/// index loaded with the first N keys, then the mixed stream, recorded in `cells`; its
/// timeline, or `None` when it failed (recorded as such).
fn measure_mode(
    ctx: &ExperimentContext<'_>,
    cells: &mut Cells,
    stream: &Stream,
    (label, mode, threads): (&str, MergeMode, usize),
    rep: usize,
) -> Option<Timeline> {
    let n = ctx.n;
    let opts = HybridOptions { mode, ..options(n) };
    let plan = LoadPlan {
        loaded: n,
        per_key: 1,
    };
    let started = Instant::now();
    let reads = (stream.reads.as_slice(), &stream.read_keys);
    let outcome = load(IndexKind::Hybrid, &stream.keys, true, plan, &opts)
        .and_then(|l| mixed_stream(&l, &stream.keys, n, reads, threads));
    let timeline = match outcome {
        Ok(t) => t,
        Err(e) => {
            cells.add((label, LATENCY_KEYS, true, "max all"), "us", n, Err(e));
            return None;
        }
    };
    record_timeline(cells, label, &timeline, n + stream.inserts);
    eprintln!(
        "{}: {label} repetition {}/{}: {:.1} s, {} merges during the stream",
        ctx.experiment.name,
        rep + 1,
        ctx.repeat,
        started.elapsed().as_secs_f64(),
        timeline.merges.len()
    );
    Some(timeline)
}

/// Records one stream's counts and latency quantiles (microseconds) in `cells` under
/// `label`, over all operations and over those that overlapped a merge.
fn record_timeline(cells: &mut Cells, label: &str, timeline: &Timeline, pairs: usize) {
    let during = timeline.overlapping();
    let mut all = timeline.latencies.clone();
    let mut merging: Vec<u64> = timeline
        .latencies
        .iter()
        .zip(&during)
        .filter(|(_, &d)| d)
        .map(|(&l, _)| l)
        .collect();
    all.sort_unstable();
    merging.sort_unstable();
    let mut put = |measure: &'static str, unit, v: Option<f64>| {
        if let Some(v) = v {
            cells.add((label, LATENCY_KEYS, true, measure), unit, pairs, Ok(v));
        }
    };
    put("merges", "count", Some(timeline.merges.len() as f64));
    put("ops", "count", Some(all.len() as f64));
    put("ops merging", "count", Some(merging.len() as f64));
    for (sorted, measures) in [
        (&all, ["p50 all", "p99 all", "p99.9 all", "max all"]),
        (
            &merging,
            ["p50 merging", "p99 merging", "p99.9 merging", "max merging"],
        ),
    ] {
        for (measure, q) in measures.into_iter().zip([0.5, 0.99, 0.999, 1.0]) {
            put(measure, "us", quantile(sorted, q).map(|ns| ns / 1e3));
        }
    }
}

/// Draws the max latency per time bin of one stream (`label`, file `latency-{slug}.png`),
/// with the bins where a merge ran, and adds it to `plots`.
fn latency_plot(
    ctx: &ExperimentContext<'_>,
    plots: &mut Vec<(String, String)>,
    (label, slug): (&str, &str),
    timeline: &Timeline,
) -> Result<(), String> {
    let (x_labels, max, merging) = timeline.bins();
    let top = max.iter().flatten().copied().fold(0.0f64, f64::max) * 1.05;
    let marks = merging.iter().map(|&m| m.then_some(top));
    // One repetition's stream: no error bars.
    let series: Vec<Series> = vec![
        plain("max latency".to_string(), max),
        plain("merge running".to_string(), marks),
    ];
    let file = format!("latency-{slug}.png");
    let title = format!(
        "{}: {label}, max operation latency per time bin (ms), repetition 1",
        ctx.experiment.name
    );
    let chart = LineChart {
        title: &title,
        x_desc: "seconds into the mixed stream",
        y_desc: "max latency (ms)",
        x_labels: &x_labels,
        series: &series,
        phases: None,
    };
    line_plot(ctx, plots, file, &chart)
}

/// The cell of `label`'s `measure`, if measured without failure.
fn latency_cell(cells: &Cells, label: &str, measure: &'static str) -> Option<Summary> {
    cells.summary((label, LATENCY_KEYS, true, measure))
}

/// The median of `label`'s `measure`.
fn latency_median(cells: &Cells, label: &str, measure: &'static str) -> Option<f64> {
    latency_cell(cells, label, measure).map(|s| s.median)
}

/// `label`'s largest latency during a merge over the repetitions, in ms.
fn worst_ms(cells: &Cells, label: &str) -> Option<f64> {
    latency_cell(cells, label, "max merging").map(|s| s.max / 1e3)
}

/// The summary table of `hybrid-latency`, `inserts` inserts (and as many reads) per stream.
fn latency_summary(ctx: &ExperimentContext<'_>, cells: &Cells, inserts: usize) -> String {
    let n = ctx.n;
    let mut summary = format!(
        "rand64: `hybrid` loaded with {n} keys, then {} operations, half Zipfian reads and \
         half inserts of new keys, alternating on one thread (or reads on one thread and \
         inserts on another: `2 threads`); every operation timed. `merging`: the \
         operations whose run overlapped a merge. Medians of {} repetitions, in \
         microseconds; max*: the largest over the repetitions.\n\n\
         | keys | index | merges | ops merging | p50 | p99 | max* | p50 merging | p99 merging \
         | max* merging |\n|---|---|---|---|---|---|---|---|---|---|\n",
        2 * inserts,
        ctx.repeat
    );
    for &(label, ..) in LATENCY_MODES {
        let worst = |m| latency_cell(cells, label, m).map(|s| s.max);
        let med = |m, decimals| fmt_opt(latency_median(cells, label, m), decimals);
        let _ = writeln!(
            summary,
            "| {LATENCY_KEYS} | `{label}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            med("merges", 0),
            med("ops merging", 0),
            med("p50 all", 2),
            med("p99 all", 2),
            fmt_opt(worst("max all"), 0),
            med("p50 merging", 2),
            med("p99 merging", 2),
            fmt_opt(worst("max merging"), 0),
        );
    }
    summary
}

/// The targets of issue 5 that `hybrid-latency` speaks to: one per non-blocking mode.
fn latency_targets(cells: &Cells) -> Vec<Target> {
    let blocking = LATENCY_MODES[0].0;
    LATENCY_MODES[1..]
        .iter()
        .map(|&(label, ..)| {
            Target::check(
                format!(
                    "non-blocking merge keeps the maximum operation latency during a merge \
                     under {MAX_MERGE_LATENCY_MS} ms (`{label}`, the largest over the \
                     repetitions)"
                ),
                worst_ms(cells, label),
                |ms| ms < MAX_MERGE_LATENCY_MS,
                |ms| {
                    format!(
                        "{ms:.2} ms ({} merges overlapped; blocking: {} ms)",
                        fmt_opt(latency_median(cells, label, "merges"), 0),
                        fmt_opt(worst_ms(cells, blocking), 1)
                    )
                },
            )
        })
        .collect()
}

/// "What the paper reports" for `hybrid-latency`, with this run's `n` keys next to it.
fn latency_paper(cells: &Cells, n: usize) -> String {
    let blocking = LATENCY_MODES[0].0;
    let background = LATENCY_MODES[1].0;
    format!(
        "{}\n**Ours, next to it** (this run, {n} keys, single index operations): maximum \
         latency during merges: blocking {} ms, background {} ms (2 threads: {} ms); p99 \
         over all operations: blocking {} us, background {} us.\n",
        PAPER_TABLE_3.trim_end(),
        fmt_opt(worst_ms(cells, blocking), 1),
        fmt_opt(worst_ms(cells, background), 2),
        fmt_opt(worst_ms(cells, LATENCY_MODES[2].0), 2),
        fmt_opt(latency_median(cells, blocking, "p99 all"), 2),
        fmt_opt(latency_median(cells, background, "p99 all"), 2),
    )
}

/// "What was run" of `hybrid-latency`, `inserts` inserts (and as many reads) per stream.
fn latency_facts(ctx: &ExperimentContext<'_>, inserts: usize) -> Vec<String> {
    let n = ctx.n;
    vec![
        format!(
            "index: `hybrid` (ratio 10, merge everything, smallest merge {} entries), merges \
             blocking (on the writer that hits the trigger, the paper's) or in the background \
             (on one thread alternating reads and inserts, or with a reader thread and a \
             writer thread running at once)",
            min_merge(n)
        ),
        format!(
            "per repetition and mode: a fresh index loaded with {n} rand64 keys (not timed, \
             its merges awaited), then {} operations: Zipfian (theta 0.99) reads of loaded \
             keys and inserts of {inserts} new keys, each timed with \
             `Instant::now()` around it; merges from the index's records (start and duration \
             from its creation, which the index clocks as the last step of its construction: \
             the origin here is the instant its builder returned); an operation is `merging` \
             when its run overlaps a merge's",
            2 * inserts
        ),
        format!(
            "repetitions: {} (interleaved mode by mode), seed {}; the plots show repetition 1",
            ctx.repeat, ctx.seed
        ),
    ]
}
