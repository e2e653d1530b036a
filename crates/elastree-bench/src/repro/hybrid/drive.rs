//! Driving an index through elastree's [`Index`] trait: building, timed loads, lookups,
//! and the bars and lines every hybrid experiment plots.

use super::*;

/// Hands `key`'s bytes (8-byte keys big-endian) to `f` without allocating.
#[inline]
pub(super) fn with_key<R>(key: Key<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
    match key {
        Key::U64(v) => f(&v.to_be_bytes()),
        Key::Bytes(b) => f(b),
    }
}

/// An empty index of `kind` for `keys`; the hybrid kinds get `options`.
pub(super) fn build(
    kind: IndexKind,
    keys: KeySetKind,
    unique: bool,
    options: &HybridOptions,
) -> Result<Box<dyn Index>, String> {
    let builder = match kind {
        IndexKind::Hybrid | IndexKind::HybridCompressed => {
            IndexBuilder::new(options.clone().for_kind(kind))
        }
        _ => IndexBuilder::new(kind),
    };
    let builder = builder.key_len(key_len_of(keys.width())).unique(unique);
    builder.build().map_err(|e| format!("building {kind}: {e}"))
}

/// An index after a timed load.
pub(super) struct Loaded {
    pub(super) index: Box<dyn Index>,
    /// When the index was created (merge records count from here): just after `build`.
    pub(super) created: Instant,
    /// Seconds of the load, waiting for its last merge included.
    pub(super) secs: f64,
    /// Pairs inserted.
    pub(super) pairs: usize,
    /// The index's own accounting after the load.
    pub(super) own: usize,
    /// The counting allocator's figure, if installed.
    pub(super) alloc: Option<usize>,
}

impl Loaded {
    pub(super) fn mops(&self) -> f64 {
        self.pairs as f64 / self.secs / 1e6
    }
}

/// What a load inserts: the first `loaded` keys of the key set, `per_key` tids each; pair `r`
/// of key `k` has tid `r * keys.len() + k`, inserted round by round (every key's first tid,
/// then every key's second, ...).
#[derive(Debug, Clone, Copy)]
pub(super) struct LoadPlan {
    pub(super) loaded: usize,
    pub(super) per_key: usize,
}

/// Builds an index of `kind` and loads it by inserts on this thread, timed until its last
/// merge is done; then reads its memory (once deferred frees have run).
pub(super) fn load(
    kind: IndexKind,
    keys: &KeySet,
    unique: bool,
    plan: LoadPlan,
    options: &HybridOptions,
) -> Result<Loaded, String> {
    settle_deferred_frees();
    let before = alloc::current();
    let index = build(kind, keys.kind, unique, options)?;
    // The hybrid index starts the clock of its merge records as the last step of its
    // construction, so the instant right after `build` returns is its origin to within the
    // boxing of the index (an instant taken before `build` would be early by the whole
    // construction: its stripes and Bloom filter, tens of microseconds).
    let created = Instant::now();
    let d = keys.len();
    let start = Instant::now();
    let mut unexpected = 0usize;
    for r in 0..plan.per_key {
        for k in 0..plan.loaded {
            let tid = (r * d + k) as u64;
            let old = with_key(keys.key(k), |b| index.insert(b, tid))
                .map_err(|e| format!("{kind} insert: {e}"))?;
            unexpected += usize::from(old.is_some());
        }
    }
    index.quiesce().map_err(|e| format!("{kind} merge: {e}"))?;
    let secs = start.elapsed().as_secs_f64();
    if unexpected > 0 {
        return Err(format!(
            "{kind}: {unexpected} inserts of new pairs found the pair present"
        ));
    }
    settle_deferred_frees();
    let alloc = alloc::installed().then(|| alloc::current().saturating_sub(before));
    let own = index.memory().total();
    Ok(Loaded {
        index,
        created,
        secs,
        pairs: plan.loaded * plan.per_key,
        own,
        alloc,
    })
}

/// Times `get` over the keys of `stream` (in lookup order, at key positions `positions`) and
/// returns Mops/s; every lookup must find a tid of its key (low 32 bits modulo `d` equal to
/// the position).
pub(super) fn lookups(
    stream: &KeySet,
    positions: &[u32],
    d: usize,
    get: impl Fn(&[u8]) -> Option<u64>,
) -> Result<f64, String> {
    let start = Instant::now();
    let mut hits = 0usize;
    for (j, &p) in positions.iter().enumerate() {
        let found = with_key(stream.key(j), &get);
        hits += usize::from(found.is_some_and(|t| (t & TID_MASK) as usize % d == p as usize));
    }
    let secs = start.elapsed().as_secs_f64();
    if hits != positions.len() {
        return Err(format!(
            "{} of {} lookups of present keys missed or returned a wrong tid",
            positions.len() - hits,
            positions.len()
        ));
    }
    Ok(positions.len() as f64 / secs / 1e6)
}

/// `len` uniformly random positions below `n`.
pub(super) fn uniform_positions(n: usize, len: usize, seed: u64) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x756e_6966);
    (0..len).map(|_| rng.gen_range(0..n as u32)).collect()
}

/// `len` scrambled-Zipfian (theta 0.99) positions below `n`.
pub(super) fn zipf_positions(n: usize, len: usize, seed: u64) -> Vec<u32> {
    ScrambledZipfian::new(n as u64, DEFAULT_THETA, seed)
        .expect("theta 0.99 over a non-empty key set")
        .positions(len, seed ^ 0x7a69_7066)
}

/// Bytes per pair.
pub(super) fn per_pair(bytes: usize, pairs: usize) -> f64 {
    bytes as f64 / pairs.max(1) as f64
}

/// `v (ratio to reference)`, or `-`.
pub(super) fn with_ratio(v: Option<f64>, reference: Option<f64>, decimals: usize) -> String {
    v.map_or_else(
        || "-".to_string(),
        |v| format!("{v:.decimals$} ({})", fmt_ratio(ratio(Some(v), reference))),
    )
}

/// A target met when every named ratio is known and `holds`.
pub(super) fn all_hold(
    target: String,
    ratios: &[(String, Option<f64>)],
    holds: impl Fn(f64) -> bool,
) -> Target {
    let known: Vec<f64> = ratios.iter().filter_map(|(_, r)| *r).collect();
    Target {
        target,
        ours: ratios
            .iter()
            .map(|(what, r)| format!("{what} {}", fmt_ratio(*r)))
            .collect::<Vec<_>>()
            .join(", "),
        pass: (known.len() == ratios.len() && !known.is_empty())
            .then(|| known.iter().all(|&r| holds(r))),
    }
}

/// Draws a grouped bar chart `file` (key sets as groups, `labels` as bars) of `measure` (see
/// [`Cells::point`]) and adds it to `plots`.
#[allow(clippy::too_many_arguments)]
pub(super) fn bars(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
    plots: &mut Vec<(String, String)>,
    file: String,
    title: String,
    labels: &[&str],
    unique: bool,
    measure: &'static str,
) -> Result<(), String> {
    let categories: Vec<&str> = KEYSETS.iter().map(|k| k.name()).collect();
    let series: Vec<Series> = labels
        .iter()
        .map(|&label| {
            let values = KEYSETS
                .iter()
                .map(|&keys| cells.point((label, keys, unique, measure)))
                .collect();
            (label.to_string(), values)
        })
        .collect();
    draw_grouped_bars(&ctx.out.join(&file), &title, &categories, &series)
        .map_err(|e| format!("{file}: {e}"))?;
    plots.push((title, file));
    Ok(())
}

/// Draws `chart` into `file` in the output directory and adds it to `plots` under its title.
pub(super) fn line_plot(
    ctx: &ExperimentContext<'_>,
    plots: &mut Vec<(String, String)>,
    file: String,
    chart: &LineChart<'_>,
) -> Result<(), String> {
    draw_lines(&ctx.out.join(&file), chart).map_err(|e| format!("{file}: {e}"))?;
    plots.push((chart.title.to_string(), file));
    Ok(())
}

/// Whether `measure` is a memory figure (measured once per load, the same every repetition).
pub(super) fn is_memory(measure: &str) -> bool {
    measure == OWN || measure == ALLOC
}

// Measure names.
pub(super) const INSERT_ONLY: &str = "insert-only";
pub(super) const READ_ONLY: &str = "read-only";
pub(super) const READ_WRITE: &str = "read/write";
pub(super) const SCAN_INSERT: &str = "scan/insert";
pub(super) const LOOKUP: &str = "lookup";
pub(super) const LOOKUP_ZIPF: &str = "lookup-zipf";
pub(super) const OWN: &str = "own";
pub(super) const ALLOC: &str = "alloc";
pub(super) const MOPS: &str = "Mops/s";
pub(super) const B_PAIR: &str = "B/pair";

/// Records a load's throughput and memory in `cells`.
pub(super) fn record_load(
    cells: &mut Cells,
    label: &str,
    keys: KeySetKind,
    unique: bool,
    l: &Loaded,
) {
    cells.add(
        (label, keys, unique, INSERT_ONLY),
        MOPS,
        l.pairs,
        Ok(l.mops()),
    );
    cells.add(
        (label, keys, unique, OWN),
        B_PAIR,
        l.pairs,
        Ok(per_pair(l.own, l.pairs)),
    );
    if let Some(bytes) = l.alloc {
        cells.add(
            (label, keys, unique, ALLOC),
            B_PAIR,
            l.pairs,
            Ok(per_pair(bytes, l.pairs)),
        );
    }
}
