//! `elastree bench` and `elastree repro` through the real binary, at tiny scales.

use std::fs;
use std::path::PathBuf;
use std::process::Output;

use elastree_testkit::time_limit;

mod common;

/// Runs `elastree ARGS` (killed, failing the test, if it runs past the child limit).
fn elastree(args: &[&str]) -> Output {
    common::run(args, b"")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What a run printed, for a failure message.
fn printed(out: &Output) -> String {
    format!(
        "exit status {}\n--- stdout:\n{}\n--- stderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// A fresh, empty directory under Cargo's temporary directory for integration tests.
fn temp_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn bench_quick_prints_a_table_and_writes_json_and_csv() {
    let _limit = time_limit();
    let dir = temp_dir("bench-quick");
    let json = dir.join("rows.jsonl");
    let csv = dir.join("rows.csv");
    let out = elastree(&[
        "bench",
        "--quick",
        "--n",
        "5K",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Mops/s median [min-max]"), "{stdout}");
    for index in ["btree", "btreemap", "sorted"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(index)),
            "no {index} row:\n{stdout}"
        );
    }
    // The counting allocator is the binary's global allocator: bytes/key are measured.
    let first: serde_json::Value =
        serde_json::from_str(fs::read_to_string(&json).unwrap().lines().next().unwrap()).unwrap();
    assert!(first["bytes_per_key_alloc"].is_number(), "{first}");
    let csv = fs::read_to_string(&csv).unwrap();
    assert!(csv.starts_with("index,keys,n,workload,threads,"), "{csv}");
    let json = fs::read_to_string(&json).unwrap();
    assert_eq!(
        csv.lines().count(),
        json.lines().count() + 1,
        "a CSV header and one CSV row per JSON row:\n{csv}\n{json}"
    );
}

#[test]
fn bench_rejects_bad_arguments_with_exit_code_2() {
    let _limit = time_limit();
    let out = elastree(&["bench", "--index", "nope", "--n", "5K"]);
    assert_eq!(out.status.code(), Some(2), "{}", printed(&out));
    assert!(
        text(&out.stderr).contains("unknown index"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn repro_help_lists_the_experiments() {
    let _limit = time_limit();
    let out = elastree(&["repro", "--help"]);
    assert!(out.status.success(), "{}", printed(&out));
    let help = text(&out.stdout);
    for experiment in elastree_bench::repro::EXPERIMENTS {
        assert!(help.contains(experiment.name), "{help}");
    }
}

#[test]
fn repro_unknown_experiment_is_a_usage_error() {
    let _limit = time_limit();
    let out = elastree(&["repro", "no-such-experiment"]);
    assert_eq!(out.status.code(), Some(2), "{}", printed(&out));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no-such-experiment"), "{stderr}");
    assert!(stderr.contains("btree-baseline"), "{stderr}");
}

#[test]
fn repro_rejects_a_scale_that_makes_no_run() {
    let _limit = time_limit();
    let dir = temp_dir("repro-bad-scale");
    let out = elastree(&[
        "repro",
        "btree-baseline",
        "--scale",
        "0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", printed(&out));
    assert!(
        text(&out.stderr).contains("--scale"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn repro_btree_baseline_writes_the_report_and_plots() {
    let _limit = time_limit();
    let dir = temp_dir("repro-btree-baseline");
    let out = elastree(&[
        "repro",
        "btree-baseline",
        "--scale",
        "0.002",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", printed(&out));
    let report = fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert!(
        report.contains("elastree repro btree-baseline --scale 0.002"),
        "{report}"
    );
    assert!(report.contains("## Machine"), "{report}");
    // btree-baseline measures the foundation tree and every peer.
    let indexes: Vec<&str> = elastree_bench::repro::baseline::btree_baseline_config(1, 1, 0)
        .indexes
        .into_iter()
        .map(|spec| spec.name())
        .collect();
    for keys in elastree_bench::keys::KeySetKind::BASELINE {
        for index in &indexes {
            let row = format!("| {} | `{index}` |", keys.name());
            assert!(report.contains(&row), "no row {row}:\n{report}");
        }
    }
    for plot in ["load", "lookup", "lookup-zipf", "scan", "delete", "memory"] {
        let file = dir.join(format!("{plot}.png"));
        let bytes = fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} is not a PNG ({} bytes)",
            file.display(),
            bytes.len()
        );
        assert!(report.contains(&format!("({plot}.png)")), "{report}");
    }
    let rows = fs::read_to_string(dir.join("results.jsonl")).unwrap();
    // 8 indexes x key sets x every default workload x 1 thread.
    assert_eq!(
        rows.lines().count(),
        indexes.len()
            * elastree_bench::keys::KeySetKind::BASELINE.len()
            * elastree_bench::workload::Workload::DEFAULT.len(),
        "rows of {indexes:?}:\n{rows}"
    );
    assert!(dir.join("results.csv").exists(), "no results.csv");

    // The terminal gets the summary: btree's ratios to btreemap per key set and workload.
    let stdout = text(&out.stdout);
    let header = summary_header(&stdout, &dir);
    let words: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        words,
        [
            "keys",
            "load",
            "lookup",
            "lookup-zipf",
            "scan",
            "delete",
            "bytes/key",
            "btree",
            "(btreemap)"
        ],
        "{stdout}"
    );
    for keys in elastree_bench::keys::KeySetKind::BASELINE {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{} ", keys.name())))
            .unwrap_or_else(|| panic!("no {keys} row in the summary:\n{stdout}"));
        assert_eq!(row.split_whitespace().count(), words.len() - 1, "{row}");
    }
}

/// Checks that `stdout` of a repro run into `out` ends with the summary rendered as plain
/// text (a table whose first column is `keys`, a rule under its header, no Markdown left),
/// then the file count and the report's path; returns the table's header line.
fn summary_header<'a>(stdout: &'a str, out: &std::path::Path) -> &'a str {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("keys "))
        .unwrap_or_else(|| panic!("no summary table on stdout:\n{stdout}"));
    assert!(
        lines.get(at + 1).is_some_and(|l| l.starts_with("----")),
        "no rule under the summary's header:\n{stdout}"
    );
    for markdown in ["| keys |", "|---", "**", "`"] {
        assert!(
            !stdout.contains(markdown),
            "{markdown} on stdout:\n{stdout}"
        );
    }
    let report = format!("report: {}", out.join("report.md").display());
    let end = lines
        .iter()
        .position(|l| *l == report)
        .unwrap_or_else(|| panic!("no {report:?} on stdout:\n{stdout}"));
    assert!(
        end > at,
        "the report's path comes after the summary:\n{stdout}"
    );
    assert!(
        lines[end - 1].contains(&format!("files to {}", out.display())),
        "{stdout}"
    );
    lines[at]
}

/// The PNG files a report embeds (`![...](file.png)`).
fn embedded_plots(report: &str) -> Vec<String> {
    report
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')'))
        .map(|(file, _)| file.to_string())
        .filter(|file| file.ends_with(".png"))
        .collect()
}

/// One test per experiment (named after it), so that the harness runs them in parallel and a
/// failure names its experiment; [`TESTED`] lists them in [`EXPERIMENTS`] order.
///
/// [`EXPERIMENTS`]: elastree_bench::repro::EXPERIMENTS
macro_rules! tiny_scale_tests {
    ($($test:ident: $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                let _limit = time_limit();
                repro_at_a_tiny_scale($name);
            }
        )*

        /// The experiments the tests above run.
        const TESTED: &[&str] = &[$($name),*];
    };
}

tiny_scale_tests! {
    repro_btree_baseline_at_a_tiny_scale: "btree-baseline",
    repro_btree_page_at_a_tiny_scale: "btree-page",
    repro_grow_shrink_at_a_tiny_scale: "grow-shrink",
    repro_elastic_grow_shrink_at_a_tiny_scale: "elastic-grow-shrink",
    repro_elastic_ycsb_at_a_tiny_scale: "elastic-ycsb",
    repro_elastic_objlog_at_a_tiny_scale: "elastic-objlog",
    repro_seqtree_sweep_at_a_tiny_scale: "seqtree-sweep",
    repro_hybrid_static_at_a_tiny_scale: "hybrid-static",
    repro_hybrid_merge_at_a_tiny_scale: "hybrid-merge",
    repro_hybrid_ycsb_at_a_tiny_scale: "hybrid-ycsb",
    repro_hybrid_ratio_at_a_tiny_scale: "hybrid-ratio",
    repro_hybrid_latency_at_a_tiny_scale: "hybrid-latency",
    repro_bwtree_update_at_a_tiny_scale: "bwtree-update",
    repro_bwtree_scan_at_a_tiny_scale: "bwtree-scan",
    repro_sbtree_ingest_at_a_tiny_scale: "sbtree-ingest",
    repro_sbtree_delayed_at_a_tiny_scale: "sbtree-delayed",
    repro_sbtree_latency_at_a_tiny_scale: "sbtree-latency",
    repro_sbtree_memory_at_a_tiny_scale: "sbtree-memory",
    repro_dist_ycsb_at_a_tiny_scale: "dist-ycsb",
}

/// Every experiment `elastree repro` knows has its tiny-scale test above: a new experiment
/// without one fails here.
#[test]
fn every_experiment_runs_at_a_tiny_scale() {
    let _limit = time_limit();
    let known: Vec<&str> = elastree_bench::repro::EXPERIMENTS
        .iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        TESTED, known,
        "tiny_scale_tests! must list every experiment, in EXPERIMENTS order"
    );
}

/// Runs experiment `name` through the binary at a tiny scale with `--update-readme`, and
/// checks its report, plots, raw rows and README block.
fn repro_at_a_tiny_scale(name: &str) {
    let experiment = elastree_bench::repro::find(name)
        .unwrap_or_else(|| panic!("{name} is not an experiment of elastree repro"));
    let dir = temp_dir(&format!("repro-every-{name}"));
    let out = dir.join("out");
    // A few thousand keys per key set, and at least what the experiment needs.
    let n = experiment.min_n.max(2_000);
    let scale = format!("{}", n as f64 / experiment.base_n as f64);
    let readme = dir.join("README.md");
    fs::write(
        &readme,
        format!(
            "# test\n<!-- results:{name} begin -->\nstale\n<!-- results:{name} end -->\nafter\n"
        ),
    )
    .unwrap();
    let run = elastree(&[
        "repro",
        name,
        "--scale",
        &scale,
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--update-readme",
        "--readme",
        readme.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{name}: {}", printed(&run));
    summary_header(&text(&run.stdout), &out);

    let report = fs::read_to_string(out.join("report.md"))
        .unwrap_or_else(|e| panic!("{name}: report.md: {e}"));
    let command = format!("elastree repro {name} --scale {scale}");
    assert!(report.contains(&command), "{name}: {report}");
    for section in ["## What was run", "## Machine", "## Plots", "## Raw rows"] {
        assert!(report.contains(section), "{name}: no {section}:\n{report}");
    }
    assert!(!report.contains("FAILED"), "{name}: {report}");
    let plots = embedded_plots(&report);
    assert!(!plots.is_empty(), "{name}: no plots in the report");
    for plot in &plots {
        let bytes = fs::read(out.join(plot)).unwrap_or_else(|e| panic!("{name}: {plot}: {e}"));
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{name}: {plot} is not a PNG ({} bytes)",
            bytes.len()
        );
        assert!(
            bytes.len() > 10_000,
            "{name}: {plot} is nearly empty ({} bytes)",
            bytes.len()
        );
    }

    // Raw rows: JSON objects naming an index and a status; some measured, none failed;
    // every measured number finite and not negative.
    let jsonl = fs::read_to_string(out.join("results.jsonl"))
        .unwrap_or_else(|e| panic!("{name}: results.jsonl: {e}"));
    let rows: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect();
    assert!(!rows.is_empty(), "{name}: no rows");
    let mut measured = 0;
    for row in &rows {
        assert!(row["index"].is_string(), "{name}: {row}");
        let status = row["status"].as_str().unwrap_or_default();
        assert!(["ok", "skipped"].contains(&status), "{name}: {row}");
        if status != "ok" {
            assert!(row["note"].is_string(), "{name}: a skip says why: {row}");
            continue;
        }
        for (field, value) in row.as_object().unwrap() {
            if let Some(v) = value.as_f64() {
                assert!(v.is_finite() && v >= 0.0, "{name}: {field} = {v}: {row}");
            }
            if field.ends_with("_median") && !value.is_null() {
                measured += 1;
            }
        }
    }
    assert!(measured > 0, "{name}: nothing was measured:\n{jsonl}");
    let csv = fs::read_to_string(out.join("results.csv"))
        .unwrap_or_else(|e| panic!("{name}: results.csv: {e}"));
    assert_eq!(
        csv.lines().count(),
        rows.len() + 1,
        "{name}: a CSV header and one CSV row per JSON row:\n{csv}"
    );

    // The README block now holds this run's summary and links the report.
    let readme = fs::read_to_string(&readme).unwrap();
    assert!(!readme.contains("stale"), "{name}: {readme}");
    assert!(readme.contains(&command), "{name}: {readme}");
    assert!(readme.contains("out/report.md"), "{name}: {readme}");
    assert!(
        readme.contains("| keys |"),
        "{name}: no summary table: {readme}"
    );
    assert!(
        readme.ends_with(&format!("<!-- results:{name} end -->\nafter\n")),
        "{name}: the README goes on after the block as before:\n{readme}"
    );
}
