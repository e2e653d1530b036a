//! The runner's entry point: a [`RunConfig`] measured with a progress bar, its rows sorted
//! for the table; and what every measuring command shares (the progress bar, the warning
//! on a debug build).

use std::io::{self, IsTerminal};

use indicatif::{ProgressBar, ProgressStyle};

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
