//! `elastree bench` and `elastree repro` through the real binary, at tiny scales.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

fn elastree(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_elastree"))
        .args(args)
        .output()
        .expect("runs the elastree binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
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
    assert_eq!(
        csv.lines().count(),
        fs::read_to_string(&json).unwrap().lines().count() + 1
    );
}

#[test]
fn bench_rejects_bad_arguments_with_exit_code_2() {
    let out = elastree(&["bench", "--index", "nope", "--n", "5K"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown index"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn repro_help_lists_the_experiments() {
    let out = elastree(&["repro", "--help"]);
    assert!(out.status.success());
    let help = text(&out.stdout);
    for experiment in elastree_bench::repro::EXPERIMENTS {
        assert!(help.contains(experiment.name), "{help}");
    }
}

#[test]
fn repro_unknown_experiment_is_a_usage_error() {
    let out = elastree(&["repro", "no-such-experiment"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no-such-experiment"), "{stderr}");
    assert!(stderr.contains("btree-baseline"), "{stderr}");
}

#[test]
fn repro_rejects_a_scale_that_makes_no_run() {
    let dir = temp_dir("repro-bad-scale");
    let out = elastree(&[
        "repro",
        "btree-baseline",
        "--scale",
        "0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--scale"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn repro_btree_baseline_writes_the_report_and_plots() {
    let dir = temp_dir("repro-btree-baseline");
    let out = elastree(&[
        "repro",
        "btree-baseline",
        "--scale",
        "0.002",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
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
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", file.display());
        assert!(report.contains(&format!("({plot}.png)")), "{report}");
    }
    let rows = fs::read_to_string(dir.join("results.jsonl")).unwrap();
    // 8 indexes x key sets x every default workload x 1 thread.
    assert_eq!(
        rows.lines().count(),
        indexes.len()
            * elastree_bench::keys::KeySetKind::BASELINE.len()
            * elastree_bench::workload::Workload::DEFAULT.len()
    );
    assert!(dir.join("results.csv").exists());
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

#[test]
fn repro_runs_every_experiment_at_a_tiny_scale() {
    for experiment in elastree_bench::repro::EXPERIMENTS {
        let dir = temp_dir(&format!("repro-every-{}", experiment.name));
        let out = dir.join("out");
        // A few thousand keys per key set, and at least what the experiment needs.
        let n = experiment.min_n.max(2_000);
        let scale = format!("{}", n as f64 / experiment.base_n as f64);
        let readme = dir.join("README.md");
        fs::write(
            &readme,
            format!(
                "# test\n<!-- results:{0} begin -->\nstale\n<!-- results:{0} end -->\nafter\n",
                experiment.name
            ),
        )
        .unwrap();
        let run = elastree(&[
            "repro",
            experiment.name,
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
        let name = experiment.name;
        assert!(
            run.status.success(),
            "{name}: {}\n{}",
            text(&run.stdout),
            text(&run.stderr)
        );

        let report = fs::read_to_string(out.join("report.md")).expect("report.md");
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
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}: {plot}");
            assert!(bytes.len() > 10_000, "{name}: {plot} is nearly empty");
        }

        // Raw rows: JSON objects naming an index and a status; some measured, none failed;
        // every measured number finite and not negative.
        let jsonl = fs::read_to_string(out.join("results.jsonl")).unwrap();
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
        assert!(measured > 0, "{name}: nothing was measured");
        let csv = fs::read_to_string(out.join("results.csv")).unwrap();
        assert_eq!(csv.lines().count(), rows.len() + 1, "{name}: CSV rows");

        // The README block now holds this run's summary and links the report.
        let readme = fs::read_to_string(&readme).unwrap();
        assert!(!readme.contains("stale"), "{name}: {readme}");
        assert!(readme.contains(&command), "{name}: {readme}");
        assert!(readme.contains("out/report.md"), "{name}: {readme}");
        assert!(
            readme.contains("| keys |"),
            "{name}: no summary table: {readme}"
        );
        assert!(readme.ends_with(&format!("<!-- results:{name} end -->\nafter\n")));
    }
}
