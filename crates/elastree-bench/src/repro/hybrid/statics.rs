//! `hybrid-static` (Figure 5): the static stage alone against the B+-tree it replaces.

use super::*;

/// Lookups per pass of `hybrid-static`, as a fraction of N (each of the uniform and Zipfian
/// passes, per structure and repetition).
pub const STATIC_LOOKUP_FRACTION: f64 = 0.1;

/// The structures of `hybrid-static`.
pub(super) const STATIC_LABELS: &[&str] = &["btree", "static", "static-lz4"];

/// What the paper reports for Figure 5 (section 6.2).
pub const PAPER_FIGURE_5: &str = "\
Section 6.2, Figure 5 (from the text; the figure's bars are not in our extraction):

- Setup: the read-only workload (YCSB C, Zipfian) on 50 million entries after loading, 10 \
  million queries, 64-bit random and monotonically increasing integers and e-mail keys \
  (30 bytes on average), average of three trials; the compact structures alone, without \
  merging.
- Throughput: the compact indexes read up to 20% faster than their originals in most cases \
  (Compact ART is the exception: 4% slower on random integers, 1% on e-mail).
- Memory: the compact indexes are up to 71% smaller, more than 30% smaller in all but one \
  case; B+-tree and skip-list nodes are 69% full on average (ART 54%).
- Compression (Snappy, B+-tree only): 24% (mono-inc) and 31% (e-mail) further savings at \
  18-34% lower throughput; the paper concludes naive compression is a poor choice.
";

/// One structure of `hybrid-static`.
pub(super) enum Structure {
    Tree(Box<dyn Index>),
    Static(StaticStage),
}

impl Structure {
    #[inline]
    pub(super) fn get(&self, key: &[u8]) -> Option<u64> {
        match self {
            Structure::Tree(index) => index.get(key).ok().flatten(),
            Structure::Static(stage) => stage.get(key),
        }
    }
}

/// Builds a static stage from every key of `keys` in key order (tid = position) and returns
/// it with its own and allocated bytes.
pub(super) fn build_static(
    keys: &KeySet,
    sorted: &[u32],
    compression: Compression,
) -> Result<(StaticStage, usize, Option<usize>), String> {
    settle_deferred_frees();
    let before = alloc::current();
    let mut options = StaticOptions::new(true, key_len_of(keys.kind.width()));
    options.compression = compression;
    let mut pairs = sorted.iter().map(|&i| {
        let mut key = Vec::new();
        keys.key_bytes(i as usize, &mut key);
        (key, u64::from(i))
    });
    let stage = StaticStage::build(options, &mut pairs)
        .map_err(|e| format!("building the static stage: {e}"))?;
    settle_deferred_frees();
    let alloc = alloc::installed().then(|| alloc::current().saturating_sub(before));
    let own = stage.memory().total();
    Ok((stage, own, alloc))
}

/// `hybrid-static`.
pub(crate) fn run_static(ctx: &ExperimentContext<'_>) -> Result<Report, String> {
    let ops = ((ctx.n as f64 * STATIC_LOOKUP_FRACTION) as usize).max(1);
    let mut cells = Cells::default();
    for &kind in KEYSETS {
        measure_keyset(ctx, &mut cells, kind, ops);
    }
    let plots = static_plots(ctx, &cells)?;
    finish(
        ctx,
        &cells,
        Vec::new(),
        Written {
            summary: static_summary(ctx, &cells, ops),
            sections: Vec::new(),
            paper: static_paper(&cells, ctx.n),
            targets: static_targets(&cells),
            facts: static_facts(ctx, ops),
            plots,
        },
    )
}

/// Measures every structure of `hybrid-static` on key set `kind`: loads or builds each once,
/// then the repetitions of the uniform and Zipfian lookup passes, `ops` lookups each.
fn measure_keyset(ctx: &ExperimentContext<'_>, cells: &mut Cells, kind: KeySetKind, ops: usize) {
    let (name, n) = (ctx.experiment.name, ctx.n);
    eprintln!("{name}: {kind}: generating {n} keys and the lookup streams");
    let keys = kind.generate(n, ctx.seed);
    let sorted = keys.sorted_order();
    let uniform = uniform_positions(n, ops, ctx.seed);
    let zipf = zipf_positions(n, ops, ctx.seed);
    let (uniform_keys, zipf_keys) = (keys.gather(&uniform), keys.gather(&zipf));
    eprintln!("{name}: {kind}: loading btree, building the static stages");
    let structures = load_structures(cells, kind, &keys, &sorted, n);
    // Repetitions interleave the structures, so a slow spell of a shared machine lands on
    // all of them alike.
    for rep in 0..ctx.repeat {
        for (label, s) in &structures {
            for (measure, stream, positions) in [
                (LOOKUP, &uniform_keys, &uniform),
                (LOOKUP_ZIPF, &zipf_keys, &zipf),
            ] {
                let mops = lookups(stream, positions, n, |k| s.get(k));
                cells.add((label, kind, true, measure), MOPS, n, mops);
            }
        }
        eprintln!("{name}: {kind}: repetition {}/{}", rep + 1, ctx.repeat);
    }
}

/// Loads `btree` with the `n` keys of `keys` (of key set `kind`) and builds the static
/// stages from them (`sorted`: their key order), recording each load or build in `cells`;
/// the structures that succeeded, by label.
fn load_structures(
    cells: &mut Cells,
    kind: KeySetKind,
    keys: &KeySet,
    sorted: &[u32],
    n: usize,
) -> Vec<(&'static str, Structure)> {
    let mut structures = Vec::new();
    let plan = LoadPlan {
        loaded: n,
        per_key: 1,
    };
    match load(IndexKind::BTree, keys, true, plan, &options(n)) {
        Ok(l) => {
            record_load(cells, "btree", kind, true, &l);
            structures.push(("btree", Structure::Tree(l.index)));
        }
        Err(e) => cells.add(("btree", kind, true, OWN), B_PAIR, n, Err(e)),
    }
    for (label, compression) in [
        ("static", Compression::None),
        ("static-lz4", Compression::Lz4),
    ] {
        if let Some(stage) = build_recorded(cells, (label, kind), keys, sorted, compression, n) {
            structures.push((label, Structure::Static(stage)));
        }
    }
    structures
}

/// Builds the static stage `label` (see [`build_static`]) and records its build rate and
/// memory in `cells`; the stage, or `None` when the build failed (recorded as such).
fn build_recorded(
    cells: &mut Cells,
    (label, kind): (&str, KeySetKind),
    keys: &KeySet,
    sorted: &[u32],
    compression: Compression,
    n: usize,
) -> Option<StaticStage> {
    let started = Instant::now();
    match build_static(keys, sorted, compression) {
        Ok((stage, own, alloc)) => {
            let secs = started.elapsed().as_secs_f64();
            let mops = Ok(n as f64 / secs / 1e6);
            cells.add((label, kind, true, "build"), MOPS, n, mops);
            cells.add((label, kind, true, OWN), B_PAIR, n, Ok(per_pair(own, n)));
            if let Some(a) = alloc {
                cells.add((label, kind, true, ALLOC), B_PAIR, n, Ok(per_pair(a, n)));
            }
            Some(stage)
        }
        Err(e) => {
            cells.add((label, kind, true, OWN), B_PAIR, n, Err(e));
            None
        }
    }
}

/// The bar charts of `hybrid-static`: uniform and Zipfian lookups, memory.
fn static_plots(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
) -> Result<Vec<(String, String)>, String> {
    let (name, n) = (ctx.experiment.name, ctx.n);
    let mut plots = Vec::new();
    for (measure, what, unit) in [
        (LOOKUP, "uniform lookups", MOPS),
        (LOOKUP_ZIPF, "Zipfian lookups", MOPS),
        (OWN, "memory (own accounting)", B_PAIR),
    ] {
        bars(
            ctx,
            cells,
            &mut plots,
            format!("{}.png", measure),
            format!("{name}: {what} ({unit}), n={n}"),
            STATIC_LABELS,
            true,
            measure,
        )?;
    }
    Ok(plots)
}

/// The median of `label`'s `measure` on `keys` (a unique index).
fn median_of(cells: &Cells, label: &str, keys: KeySetKind, measure: &'static str) -> Option<f64> {
    cells.median((label, keys, true, measure))
}

/// `label`'s median `measure` on `keys` over `reference`'s.
fn over(
    cells: &Cells,
    (label, reference): (&str, &str),
    keys: KeySetKind,
    measure: &'static str,
) -> Option<f64> {
    ratio(
        median_of(cells, label, keys, measure),
        median_of(cells, reference, keys, measure),
    )
}

/// The summary table of `hybrid-static`, `ops` lookups per pass.
fn static_summary(ctx: &ExperimentContext<'_>, cells: &Cells, ops: usize) -> String {
    let n = ctx.n;
    let cell = |label: &str, keys, measure| median_of(cells, label, keys, measure);
    let mut summary = format!(
        "{n} keys per key set; medians of {} repetitions of {ops} lookups each (Mops/s), in \
         parentheses the ratio to `btree`; memory in bytes per key by the structure's own \
         accounting (alloc: the counting allocator). `btree` is loaded by inserts, `static` \
         and `static-lz4` are built from the sorted keys; `built`: million keys per second \
         of that load or build (one run).\n\n\
         | keys | structure | lookup | lookup-zipf | own B/key | alloc B/key | built |\n\
         |---|---|---|---|---|---|---|\n",
        ctx.repeat
    );
    for &keys in KEYSETS {
        for &label in STATIC_LABELS {
            let vs_btree = |measure, decimals| {
                with_ratio(
                    cell(label, keys, measure),
                    cell("btree", keys, measure),
                    decimals,
                )
            };
            let _ = writeln!(
                summary,
                "| {keys} | `{label}` | {} | {} | {} | {} | {} |",
                vs_btree(LOOKUP, 2),
                vs_btree(LOOKUP_ZIPF, 2),
                vs_btree(OWN, 1),
                fmt_opt(cell(label, keys, ALLOC), 1),
                fmt_opt(
                    cell(label, keys, "build").or(cell(label, keys, INSERT_ONLY)),
                    2
                ),
            );
        }
    }
    summary
}

/// The targets of issue 5 that `hybrid-static` speaks to.
fn static_targets(cells: &Cells) -> Vec<Target> {
    let per_keyset = |measure| -> Vec<(String, Option<f64>)> {
        KEYSETS
            .iter()
            .map(|&k| {
                (
                    k.name().to_string(),
                    over(cells, ("static", "btree"), k, measure),
                )
            })
            .collect()
    };
    vec![
        all_hold(
            "unique memory at most 0.5x `btree` on every key set: the static stage alone \
             (`static`), the floor the hybrid index approaches"
                .to_string(),
            &per_keyset(OWN),
            |r| r <= 0.5,
        ),
        ratio_target(
            "`hybrid-compressed` at least 20% below `hybrid` on email: the static stage alone \
             (`static-lz4` over `static`)",
            over(cells, ("static-lz4", "static"), KeySetKind::Email, OWN),
            |r| r <= 0.8,
        ),
        all_hold(
            "read-only at least 0.9x `btree`: the static stage alone (`static`), Zipfian \
             lookups"
                .to_string(),
            &per_keyset(LOOKUP_ZIPF),
            |r| r >= 0.9,
        ),
        all_hold(
            "read-only at least 0.9x `btree`: the static stage alone (`static`), uniform \
             lookups"
                .to_string(),
            &per_keyset(LOOKUP),
            |r| r >= 0.9,
        ),
    ]
}

/// "What the paper reports" for `hybrid-static`, with this run's `n` keys next to it.
fn static_paper(cells: &Cells, n: usize) -> String {
    let per_keyset = |pair, measure| ratios_text(&|k| over(cells, pair, k, measure));
    format!(
        "{}\n**Ours, next to it** (this run, {n} keys): `static` over `btree`: memory {}; \
         uniform lookups {}. `static-lz4` over `static`: memory {}; uniform lookups {}.\n",
        PAPER_FIGURE_5.trim_end(),
        per_keyset(("static", "btree"), OWN),
        per_keyset(("static", "btree"), LOOKUP),
        per_keyset(("static-lz4", "static"), OWN),
        per_keyset(("static-lz4", "static"), LOOKUP),
    )
}

/// "What was run" of `hybrid-static`, `ops` lookups per pass.
fn static_facts(ctx: &ExperimentContext<'_>, ops: usize) -> Vec<String> {
    let n = ctx.n;
    vec![
        format!(
            "structures: `btree` (elastree's B+-tree, loaded by inserts in the key set's \
             order), `static` (the hybrid index's static stage, `StaticStage::build` from the \
             sorted keys), `static-lz4` (the same with LZ4-compressed leaf blocks and the \
             default cache of {} blocks)",
            HybridOptions::default().cache_blocks
        ),
        format!(
            "key sets: {}, {n} keys each; tid of key i = i",
            KEYSETS
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "lookups: {ops} uniformly random and {ops} scrambled-Zipfian (theta 0.99) lookups \
             of present keys per structure and repetition; one thread"
        ),
        format!(
            "repetitions: {} (interleaved structure by structure over one build of each), \
             seed {}; memory after the build, once deferred frees have run",
            ctx.repeat, ctx.seed
        ),
    ]
}

/// `rand64 0.42x, mono64 0.40x, email 0.45x` for a ratio per key set.
pub(super) fn ratios_text(of: &dyn Fn(KeySetKind) -> Option<f64>) -> String {
    KEYSETS
        .iter()
        .map(|&k| format!("{k} {}", fmt_ratio(of(k))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A target on one ratio `measured` (`None`: not measured), shown as `0.42x`. Every hybrid
/// experiment checks such targets; it lives here beside [`ratios_text`].
pub(super) fn ratio_target(
    target: impl Into<String>,
    measured: Option<f64>,
    holds: impl Fn(f64) -> bool,
) -> Target {
    Target::check(target, measured, holds, |r| format!("{r:.2}x"))
}
