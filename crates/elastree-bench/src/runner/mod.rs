//! The one runner every experiment measures with.
//!
//! - [`timing`]: parallel regions timed from the first thread's start to the last thread's end,
//!   and sampled single-operation latencies;
//! - [`ops`]: the checked, timed operations on a [`crate::peers::BenchIndex`] (load, lookups,
//!   scans, deletes, YCSB streams);
//! - [`settle`]: memory readings at rest (deferred frees made to happen first);
//! - here: [`Trials`], the repetitions of one figure and how they ended, summarised the same
//!   way in every row type ([`Summary`]); [`attempt`], which turns a panicking index into a
//!   failed measurement; the progress bar; and [`measure`], the entry point of
//!   `elastree bench` and of the experiments built on [`crate::workload::run_suite`].

use std::any::Any;
use std::io::{self, IsTerminal};
use std::panic::{self, AssertUnwindSafe};

use indicatif::{ProgressBar, ProgressStyle};

pub mod ops;
pub mod settle;
pub mod timing;

use crate::report;
use crate::workload::{self, Measurement, RunConfig};

/// A progress bar on stderr when stderr is a terminal, else a hidden one.
pub fn progress_bar(total: u64) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Runs `cfg` with a progress bar (on a terminal) and returns the rows sorted for the table:
/// key set, workload, threads, then index in the order `cfg` lists them.
pub fn measure(cfg: &RunConfig) -> Vec<Measurement> {
    let progress = progress_bar(workload::planned_measurements(cfg));
    let mut rows = workload::run_suite(cfg, &progress);
    progress.finish_and_clear();
    let keyset_names: Vec<&str> = cfg.keysets.iter().map(|k| k.name()).collect();
    let index_names: Vec<&str> = cfg.indexes.iter().map(|s| s.name()).collect();
    report::sort_for_report(&mut rows, &keyset_names, &index_names);
    rows
}

/// Warns on stderr when this is a debug build, whose numbers mean little. `how` says how to
/// run a release build.
pub fn warn_if_debug(how: &str) {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; measure with `{how}`");
    }
}

/// The message of a panic payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// Runs `work`; a panic in it (an adapter's or the index's own) becomes an `Err` with the
/// panic's message, so that it fails one measurement instead of the run.
pub fn attempt<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    panic::catch_unwind(AssertUnwindSafe(work)).map_err(|p| panic_message(p.as_ref()))
}

/// Median, minimum and maximum of a figure's repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let median = median(values)?;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Summary { median, min, max })
    }
}

/// The repetitions of one measured figure: the value of every repetition that succeeded, and
/// what went wrong in the first one that failed (the rows say `failed` and show it as their
/// note).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trials {
    /// One value per successful repetition, in the order measured.
    pub values: Vec<f64>,
    /// The first failure, if any repetition failed.
    pub failure: Option<String>,
}

impl Trials {
    /// Records one repetition: its value, or its failure (the first failure is kept).
    pub fn record(&mut self, outcome: Result<f64, String>) {
        match outcome {
            Ok(value) => self.values.push(value),
            Err(problem) => {
                self.failure.get_or_insert(problem);
            }
        }
    }

    /// Whether no repetition failed.
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }

    /// Median, minimum and maximum of the values, if there are any and none failed.
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.values).filter(|_| self.ok())
    }

    /// The median, if there are values and none failed.
    pub fn median(&self) -> Option<f64> {
        self.summary().map(|s| s.median)
    }

    /// `ok` or `failed`, as the rows' `status` column says it.
    pub fn status(&self) -> &'static str {
        if self.ok() {
            "ok"
        } else {
            "failed"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn trials_keep_the_first_failure_and_summarise_only_clean_runs() {
        let mut t = Trials::default();
        t.record(Ok(2.0));
        t.record(Ok(1.0));
        t.record(Ok(3.0));
        assert_eq!(t.status(), "ok");
        assert_eq!(
            t.summary(),
            Some(Summary {
                median: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        t.record(Err("first".to_string()));
        t.record(Err("second".to_string()));
        assert_eq!(t.failure.as_deref(), Some("first"));
        assert_eq!(
            (t.status(), t.summary(), t.values.len()),
            ("failed", None, 3)
        );
        assert_eq!(attempt(|| 7), Ok(7));
        assert_eq!(
            attempt(|| -> u8 { panic!("boom") }),
            Err("boom".to_string())
        );
    }
}
