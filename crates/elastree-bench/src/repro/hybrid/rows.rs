//! Measurements and their rows: one [`Cell`] of repetition values per index, key set,
//! uniqueness and measure; the written [`Row`]s and the report they end in.

use super::*;

/// The repetition values of one index (label), key set, uniqueness and measure.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The index as the report names it (`btree`, `static-lz4`, `hybrid r=5`, ...).
    pub index: String,
    /// The key set.
    pub keys: KeySetKind,
    /// Unique (`true`) or non-unique index.
    pub unique: bool,
    /// Pairs in the index when measured.
    pub pairs: usize,
    /// What was measured (`insert-only`, `lookup`, `own`, `p99 merging`, ...).
    pub measure: &'static str,
    /// Its unit (`Mops/s`, `B/pair`, `us`, ...).
    pub unit: &'static str,
    /// One value per repetition, and the first failure.
    pub trials: Trials,
}

/// Every cell of a run, in the order they were first measured.
#[derive(Debug, Clone, Default)]
pub struct Cells(pub Vec<Cell>);

/// Which cell: index label, key set, uniqueness, measure.
pub(super) type At<'a> = (&'a str, KeySetKind, bool, &'static str);

impl Cells {
    /// Adds one repetition's `value` (or its failure) to the cell `at`.
    pub fn add(
        &mut self,
        at: At<'_>,
        unit: &'static str,
        pairs: usize,
        value: Result<f64, String>,
    ) {
        let (index, keys, unique, measure) = at;
        let cell = match self.0.iter().position(|c| {
            c.index == index && c.keys == keys && c.unique == unique && c.measure == measure
        }) {
            Some(i) => &mut self.0[i],
            None => {
                self.0.push(Cell {
                    index: index.to_string(),
                    keys,
                    unique,
                    pairs,
                    measure,
                    unit,
                    trials: Trials::default(),
                });
                self.0.last_mut().expect("just pushed")
            }
        };
        match value {
            Ok(v) => cell.trials.record(Ok(v)),
            Err(problem) => {
                eprintln!("FAILED {index} {keys} {measure}: {problem}");
                cell.trials.record(Err(problem));
            }
        }
    }

    /// The cell `at`, if measured without failure.
    pub fn summary(&self, at: At<'_>) -> Option<Summary> {
        let (index, keys, unique, measure) = at;
        self.0
            .iter()
            .find(|c| {
                c.index == index && c.keys == keys && c.unique == unique && c.measure == measure
            })
            .and_then(|c| c.trials.summary())
    }

    /// The cell `at` for a plot: its median with the repetitions' range as an error bar, or
    /// without a range for a memory figure (the same every repetition).
    pub fn point(&self, at: At<'_>) -> Option<Point> {
        let s = self.summary(at)?;
        Some(if is_memory(at.3) {
            Point::from(s.median)
        } else {
            Point::from(s)
        })
    }

    /// The median of the cell `at`.
    pub fn median(&self, at: At<'_>) -> Option<f64> {
        self.summary(at).map(|s| s.median)
    }

    /// Cells with a failed repetition.
    pub fn failures(&self) -> usize {
        self.0.iter().filter(|c| !c.trials.ok()).count()
    }
}

/// One raw row: a cell's median, minimum and maximum, or one merge of a load.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The experiment.
    pub experiment: &'static str,
    /// The index label.
    pub index: String,
    /// The key set.
    pub keys: &'static str,
    /// Unique index.
    pub unique: bool,
    /// Pairs in the index when measured.
    pub pairs: usize,
    /// What was measured (`merge` for a merge record).
    pub measure: String,
    /// The unit of the values.
    pub unit: &'static str,
    /// Median over the repetitions (a merge: its duration).
    pub value_median: Option<f64>,
    /// Minimum over the repetitions.
    pub value_min: Option<f64>,
    /// Maximum over the repetitions.
    pub value_max: Option<f64>,
    /// Repetitions (values) behind the row.
    pub samples: usize,
    /// A merge: the repetition it happened in (from 1).
    pub rep: Option<usize>,
    /// A merge: pairs in the static stage before it.
    pub static_before: Option<usize>,
    /// A merge: pairs in the static stage after it.
    pub static_after: Option<usize>,
    /// A merge: dynamic-stage entries it applied.
    pub merged: Option<usize>,
    /// A merge: when it started, in ms from the index's creation.
    pub started_ms: Option<f64>,
    /// `ok` or `failed`.
    pub status: &'static str,
    /// What went wrong.
    pub note: Option<String>,
}

/// The fields of [`Row`], in CSV column order.
pub const FIELDS: &[&str] = &[
    "experiment",
    "index",
    "keys",
    "unique",
    "pairs",
    "measure",
    "unit",
    "value_median",
    "value_min",
    "value_max",
    "samples",
    "rep",
    "static_before",
    "static_after",
    "merged",
    "started_ms",
    "status",
    "note",
];

impl Row {
    pub(super) fn of_cell(experiment: &'static str, c: &Cell) -> Self {
        let s = c.trials.summary();
        Row {
            experiment,
            index: c.index.clone(),
            keys: c.keys.name(),
            unique: c.unique,
            pairs: c.pairs,
            measure: c.measure.to_string(),
            unit: c.unit,
            value_median: s.map(|s| s.median),
            value_min: s.map(|s| s.min),
            value_max: s.map(|s| s.max),
            samples: c.trials.values.len(),
            rep: None,
            static_before: None,
            static_after: None,
            merged: None,
            started_ms: None,
            status: c.trials.status(),
            note: c.trials.failure.clone(),
        }
    }

    pub(super) fn of_merge(
        experiment: &'static str,
        keys: KeySetKind,
        rep: usize,
        m: &MergeRecord,
    ) -> Self {
        let ms = m.duration.as_secs_f64() * 1e3;
        Row {
            experiment,
            index: "hybrid".to_string(),
            keys: keys.name(),
            unique: true,
            pairs: m.static_after,
            measure: "merge".to_string(),
            unit: "ms",
            value_median: Some(ms),
            value_min: Some(ms),
            value_max: Some(ms),
            samples: 1,
            rep: Some(rep + 1),
            static_before: Some(m.static_before),
            static_after: Some(m.static_after),
            merged: Some(m.merged),
            started_ms: Some(m.started.as_secs_f64() * 1e3),
            status: "ok",
            note: None,
        }
    }
}

/// What an experiment hands to [`finish`].
pub(super) struct Written {
    /// The summary table (and how to read it), first in the report and in the README.
    pub(super) summary: String,
    /// Sections after the summary: (heading, body).
    pub(super) sections: Vec<(String, String)>,
    /// "What the paper reports" (the paper's numbers, then ours next to them).
    pub(super) paper: String,
    /// The targets of issue 5 this experiment speaks to.
    pub(super) targets: Vec<Target>,
    /// Lines of "What was run".
    pub(super) facts: Vec<String>,
    /// Plots: (what, file).
    pub(super) plots: Vec<(String, String)>,
}

/// Writes the rows and assembles the report of a finished experiment.
pub(super) fn finish(
    ctx: &ExperimentContext<'_>,
    cells: &Cells,
    extra_rows: Vec<Row>,
    w: Written,
) -> Result<Report, String> {
    let name = ctx.experiment.name;
    let mut rows: Vec<Row> = cells.0.iter().map(|c| Row::of_cell(name, c)).collect();
    rows.extend(extra_rows);
    let mut files = write_results(ctx.out, FIELDS, &rows)?;
    let table = targets_table_of("N = 10M keys", &w.targets);
    let summary = format!("{}\n{table}", w.summary);
    let mut sections = vec![("Summary".to_string(), summary.clone())];
    sections.extend(w.sections);
    sections.push(("What the paper reports".to_string(), w.paper));
    sections.push(("Targets".to_string(), table));
    files.extend(w.plots.iter().map(|(_, f)| f.clone()));
    Ok(Report {
        size: format!("{} keys per key set", ctx.n),
        facts: w.facts,
        sections,
        plots: w.plots,
        raw: format!(
            "`results.jsonl` (one JSON object per index x key set x uniqueness x measure, \
             with the median, minimum and maximum over the repetitions; `hybrid-merge` adds \
             one row per merge) and `results.csv` (the same fields: {}), documented in \
             `crates/elastree-bench/src/repro/hybrid/rows.rs`.",
            FIELDS
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        files,
        summary,
        failures: cells.failures(),
    })
}
