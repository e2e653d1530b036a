//! The report writer every experiment shares: `report.md` (what was run, the machine, the
//! experiment's sections, the plots, the raw rows), and the README results block with its
//! splice between markers. The raw rows themselves are [`crate::output`]'s.

use std::fmt::Write as _;
use std::fs;
use std::path::{Component, Path};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Experiment, Report};

/// What a report says about the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineFacts {
    /// The CPU model.
    pub cpu: String,
    /// The cores this process may use.
    pub cores: String,
    /// The machine's memory.
    pub memory: String,
}

impl MachineFacts {
    /// Reads the facts of this machine (`unknown` for what cannot be read).
    pub fn read() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_string(), |(_, v)| v.trim().to_string());
        let cores = std::thread::available_parallelism()
            .map_or_else(|_| "unknown".to_string(), |n| n.get().to_string());
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<f64>().ok())
            .map_or_else(
                || "unknown".to_string(),
                |kib| format!("{:.1} GiB", kib / (1024.0 * 1024.0)),
            );
        MachineFacts { cpu, cores, memory }
    }
}

/// A throughput for a table: three decimals, or three significant digits below 0.1 (a
/// scan of a million keys runs at a few thousandths of a million scans a second).
pub fn fmt_rate(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || v.abs() >= 0.1 {
        return format!("{v:.3}");
    }
    let decimals = (-v.abs().log10()).floor() as usize + 3;
    format!("{v:.decimals$}")
}

/// A duration as `12.3 s` or `3m 07s`.
pub fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        format!("{}m {:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// How a run went, for the header of its report and its README block.
#[derive(Debug, Clone)]
pub struct RunFacts<'a> {
    /// The experiment.
    pub experiment: &'a Experiment,
    /// The command line as typed.
    pub command: &'a str,
    /// When the report was written (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub date: String,
    /// Wall time of the experiment (measurements and plots).
    pub elapsed: Duration,
    /// The machine.
    pub machine: MachineFacts,
}

/// The text of `report.md`.
pub fn report_markdown(facts: &RunFacts<'_>, report: &Report) -> String {
    let mut md = String::new();
    let w = &mut md;
    let _ = writeln!(w, "# `elastree repro {}`\n", facts.experiment.name);
    let _ = writeln!(w, "{}.\n", facts.experiment.about);
    let _ = writeln!(w, "## What was run\n");
    let _ = writeln!(w, "- command: `{}`", facts.command);
    let _ = writeln!(w, "- date: {} (UTC)", facts.date);
    let _ = writeln!(
        w,
        "- wall time of the measurements: {}",
        fmt_duration(facts.elapsed)
    );
    for line in &report.facts {
        let _ = writeln!(w, "- {line}");
    }
    let _ = writeln!(
        w,
        "- build: {}, elastree-bench {}",
        if cfg!(debug_assertions) {
            "debug (numbers are not representative)"
        } else {
            "release"
        },
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(w, "\n## Machine\n");
    let _ = writeln!(w, "- CPU: {}", facts.machine.cpu);
    let _ = writeln!(w, "- cores (nproc): {}", facts.machine.cores);
    let _ = writeln!(w, "- memory (MemTotal): {}", facts.machine.memory);
    for (heading, body) in &report.sections {
        let _ = write!(w, "\n## {heading}\n\n{body}");
    }
    let _ = writeln!(w, "\n## Plots\n");
    let _ = writeln!(
        w,
        "Where a measurement was repeated, its bar or point is the median and its error bar \
         spans the smallest to the largest repetition.\n"
    );
    for (what, file) in &report.plots {
        let _ = writeln!(w, "### {what}\n\n![{what}]({file})\n");
    }
    let _ = writeln!(w, "## Raw rows\n");
    let _ = writeln!(w, "{}", report.raw);
    md
}

/// A target an experiment is held to, checked against the measured numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The target, as it is stated.
    pub target: String,
    /// What this run measured for it.
    pub ours: String,
    /// Whether the measured numbers meet it (`None`: not measurable in this run, say why in
    /// `ours`).
    pub pass: Option<bool>,
}

impl Target {
    /// A target met when `measured` is known and `holds` of it.
    pub fn check(
        target: impl Into<String>,
        measured: Option<f64>,
        holds: impl Fn(f64) -> bool,
        ours: impl Fn(f64) -> String,
    ) -> Self {
        Target {
            target: target.into(),
            ours: measured.map_or_else(|| "not measured".to_string(), &ours),
            pass: measured.map(holds),
        }
    }
}

/// The Markdown table of the elastic tree's `targets` (stated for N = 20M keys): see
/// [`targets_table_of`].
pub fn targets_table(targets: &[Target]) -> String {
    targets_table_of("N = 20M keys", targets)
}

/// The Markdown table of `targets`, stated for `stated_for` (e.g. `N = 10M keys`): target,
/// ours, PASS / FAIL / n/a, with a line on how many passed.
pub fn targets_table_of(stated_for: &str, targets: &[Target]) -> String {
    let mut md = String::new();
    let w = &mut md;
    let passed = targets.iter().filter(|t| t.pass == Some(true)).count();
    let checked = targets.iter().filter(|t| t.pass.is_some()).count();
    let _ = writeln!(
        w,
        "Computed from this run's numbers ({passed} of {checked} checked targets met; they \
         are stated for {stated_for}, and runs with fewer keys are noisier):\n"
    );
    let _ = writeln!(w, "| target | ours | result |");
    let _ = writeln!(w, "|---|---|---|");
    for t in targets {
        let result = match t.pass {
            Some(true) => "PASS",
            Some(false) => "FAIL",
            None => "n/a",
        };
        let _ = writeln!(w, "| {} | {} | {result} |", t.target, t.ours);
    }
    md
}

/// The marker that opens the README results block of `experiment`.
pub fn begin_marker(experiment: &str) -> String {
    format!("<!-- results:{experiment} begin -->")
}

/// The marker that closes the README results block of `experiment`.
pub fn end_marker(experiment: &str) -> String {
    format!("<!-- results:{experiment} end -->")
}

/// The README results block of a run: a heading, the experiment's summary, the machine, the
/// command and a link (`report_link`) to the full report.
pub fn readme_block(facts: &RunFacts<'_>, report: &Report, report_link: &str) -> String {
    let mut block = String::new();
    let w = &mut block;
    let _ = writeln!(
        w,
        "### `elastree repro {}` ({})\n",
        facts.experiment.name, report.size
    );
    let _ = writeln!(w, "{}", report.summary.trim_end());
    let m = &facts.machine;
    let _ = writeln!(
        w,
        "\nMachine: {} ({} cores, {}). Command: `{}` ({} UTC, {}). \
         Full report with plots: [`{report_link}`]({report_link}).",
        m.cpu,
        m.cores,
        m.memory,
        facts.command,
        facts.date,
        fmt_duration(facts.elapsed)
    );
    block
}

/// Replaces the text between the results markers of `experiment` in `readme` with `block`
/// (which sits on lines of its own between them). Fails if either marker is missing,
/// repeated or out of order.
pub fn splice_readme(readme: &str, experiment: &str, block: &str) -> Result<String, String> {
    let (begin, end) = (begin_marker(experiment), end_marker(experiment));
    let find_once = |marker: &str| -> Result<usize, String> {
        let mut hits = readme.match_indices(marker).map(|(at, _)| at);
        match (hits.next(), hits.next()) {
            (Some(at), None) => Ok(at),
            (None, _) => Err(format!("the README has no `{marker}` marker")),
            (Some(_), Some(_)) => Err(format!("the README has `{marker}` more than once")),
        }
    };
    let start = find_once(&begin)? + begin.len();
    let stop = find_once(&end)?;
    if stop < start {
        return Err(format!("`{end}` comes before `{begin}` in the README"));
    }
    Ok(format!(
        "{}\n{}\n{}",
        &readme[..start],
        block.trim_matches('\n'),
        &readme[stop..]
    ))
}

/// How a file at `target` is linked from a Markdown file in directory `from`: relative when
/// `target` lies under `from` (or both are relative to the working directory), else as given.
pub fn link_from(from: &Path, target: &Path) -> String {
    let plain = |p: &Path| {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect::<std::path::PathBuf>()
    };
    let (from, target) = (plain(from), plain(target));
    let relative = if target.is_relative() && from.as_os_str().is_empty() {
        Some(target.clone())
    } else {
        target.strip_prefix(&from).ok().map(Path::to_path_buf)
    };
    relative
        .unwrap_or(target)
        .to_string_lossy()
        .replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_keep_three_significant_digits() {
        assert_eq!(fmt_rate(12.3456), "12.346");
        assert_eq!(fmt_rate(0.1), "0.100");
        assert_eq!(fmt_rate(0.0421), "0.0421");
        assert_eq!(fmt_rate(0.000312), "0.000312");
        assert_eq!(fmt_rate(0.0), "0.000");
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn splice_replaces_only_the_marked_block() {
        let readme = "# x\n\nintro\n<!-- results:demo begin -->\nold\nlines\n\
                      <!-- results:demo end -->\nafter\n<!-- results:other begin -->\nkeep\n\
                      <!-- results:other end -->\n";
        let spliced = splice_readme(readme, "demo", "\nnew table\n\n").unwrap();
        assert_eq!(
            spliced,
            "# x\n\nintro\n<!-- results:demo begin -->\nnew table\n\
             <!-- results:demo end -->\nafter\n<!-- results:other begin -->\nkeep\n\
             <!-- results:other end -->\n"
        );
        // Splicing again with the same block changes nothing.
        assert_eq!(
            splice_readme(&spliced, "demo", "new table").unwrap(),
            spliced
        );
        // The other block is untouched by a splice of its neighbour and vice versa.
        let other = splice_readme(&spliced, "other", "fresh").unwrap();
        assert!(other.contains("new table") && other.contains("\nfresh\n"));
        assert!(!other.contains("keep"));
    }

    #[test]
    fn splice_refuses_missing_repeated_or_reversed_markers() {
        assert!(splice_readme("no markers", "demo", "x")
            .unwrap_err()
            .contains("results:demo begin"));
        let twice = "<!-- results:demo begin --><!-- results:demo begin -->\
                     <!-- results:demo end -->";
        assert!(splice_readme(twice, "demo", "x")
            .unwrap_err()
            .contains("more than once"));
        let reversed = "<!-- results:demo end -->\n<!-- results:demo begin -->";
        assert!(splice_readme(reversed, "demo", "x")
            .unwrap_err()
            .contains("before"));
        // A marker of another experiment whose name extends this one's is not this one's.
        let longer = "<!-- results:demo-2 begin -->\n<!-- results:demo-2 end -->";
        assert!(splice_readme(longer, "demo", "x").is_err());
    }

    #[test]
    fn links_are_relative_to_the_readme() {
        let p = Path::new;
        assert_eq!(
            link_from(p(""), p("results/x/report.md")),
            "results/x/report.md"
        );
        assert_eq!(
            link_from(p("."), p("./results/x/report.md")),
            "results/x/report.md"
        );
        assert_eq!(
            link_from(p("/repo"), p("/repo/results/x/report.md")),
            "results/x/report.md"
        );
        assert_eq!(link_from(p("/repo"), p("/tmp/r.md")), "/tmp/r.md");
    }
}
