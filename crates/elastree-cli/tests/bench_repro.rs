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
    // btree-baseline measures every index the benchmark knows.
    let indexes: Vec<&str> = elastree_bench::peers::IndexSpec::all()
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
