//! The one writer of measured rows: JSON lines and CSV over any row type that serializes to
//! a JSON object, the `results.jsonl` + `results.csv` pair every experiment leaves in its
//! directory, and how an optional number is printed in tables.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde::Serialize;

/// The files [`write_results`] writes, in that order.
pub const RESULT_FILES: [&str; 2] = ["results.jsonl", "results.csv"];

/// Writes one JSON object per row, one per line.
pub fn write_json_lines<T: Serialize>(
    out: &mut impl Write,
    rows: impl IntoIterator<Item = T>,
) -> io::Result<()> {
    for row in rows {
        serde_json::to_writer(&mut *out, &row)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes a CSV header line of `fields`, then one line per row with the values of those
/// fields of its JSON form (a missing or `null` value is an empty cell).
pub fn write_csv<T: Serialize>(
    out: &mut impl Write,
    fields: &[&str],
    rows: impl IntoIterator<Item = T>,
) -> io::Result<()> {
    writeln!(out, "{}", fields.join(","))?;
    for row in rows {
        writeln!(out, "{}", csv_line(fields, &serde_json::to_value(row)?))?;
    }
    Ok(())
}

/// Writes `rows` into `dir` as [`RESULT_FILES`]: JSON lines, and CSV with the columns
/// `fields`. Returns the file names, for the report's list of files.
pub fn write_results<T: Serialize>(
    dir: &Path,
    fields: &[&str],
    rows: &[T],
) -> Result<Vec<String>, String> {
    let [json, csv] = RESULT_FILES;
    to_file(&dir.join(json), |out| write_json_lines(out, rows))
        .map_err(|e| format!("{json}: {e}"))?;
    to_file(&dir.join(csv), |out| write_csv(out, fields, rows))
        .map_err(|e| format!("{csv}: {e}"))?;
    Ok(RESULT_FILES.iter().map(|f| f.to_string()).collect())
}

/// Creates the file at `path` and writes it with `write`, buffered.
pub fn to_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    write(&mut out)?;
    out.flush()
}

/// The CSV line of a JSON object: the values of `fields` in order, a missing or `null` value
/// an empty cell.
pub fn csv_line(fields: &[&str], value: &serde_json::Value) -> String {
    let cells: Vec<String> = fields
        .iter()
        .map(|field| match value.get(field) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(text)) => csv_cell(text),
            Some(other) => other.to_string(),
        })
        .collect();
    cells.join(",")
}

/// Quotes a CSV cell when it holds a comma, a quote or a line break (RFC 4180).
fn csv_cell(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// `value` with `decimals` decimals, or `-` when there is none.
pub fn fmt_opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}
