#!/usr/bin/env python3
"""output-shape.py OUTDIR: the shape of an output-shape.sh output directory, on stdout.

Two runs of the same code give the same text; a refactoring that drops or renames a column,
a row, a file, a heading or a table shows up as a diff. Reduced to:

* every directory: its sorted entries (sub-directories end in /);
* CSV: the header line, the row count, for each column whether it is numeric (every non-empty
  cell parses as a number) and, for the non-numeric ("key") columns, the tuple of their
  values per row, sorted;
* JSON lines (.jsonl, or .json that is not one document): the distinct sorted key sets of
  the lines (labelled K1, K2, ... with their line counts; nested keys as a.b, list items as
  a[]), then per line its key set's label and its non-numeric values (strings, booleans,
  null; a string that parses as a number is <number-string>), as sorted lines;
* .json documents: the sorted key paths with the type of their values;
* Markdown: headings, table header rows (a "|" line followed by a "|---" line) and the first
  cell of every table row (outside ``` fences, which are marked);
* PNG: the file name and its width x height; any other file: its name (in its directory).
* OUTDIR/_snapshot/meta.txt (output-shape.sh's record: scale, n and exit code per command).

Normalisations (what varies between two runs of the same code): NORMALISE (values replaced)
and DROP_ROWS (rows left out, noted in the output) below.
"""
import csv
import json
import os
import re
import struct
import sys

# Skipped entirely (logs and wall times of output-shape.sh); meta.txt is read on its own.
SKIP_DIRS = {"_snapshot/logs"}
SKIP_FILES = {"_snapshot/times.txt", "_snapshot/binary.txt"}

NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|nan|NaN|infinity)$")


def is_number(text):
    return bool(NUMBER.match(text.strip()))


# --- normalisation of values that vary run to run --------------------------------------------
# Each entry: (where it applies, regex, replacement); `where` is matched against
# "<relative path>:<column or key>" (re.search).
NORMALISE = [
    # dist-ycsb's "Scale-out: 3 to 4 masters" table has one row of measured counts; its first
    # cell, the number of sub-trees before the scale-out, depends on how the concurrent
    # clients' splits interleave (16 in one run, 15 in the next at --scale 0.02).
    (r"dist-ycsb/report\.md:row:sub-trees before$", r"^\d+$", "<number>"),
]


# Rows left out of CSV and JSON-lines files (and of their counts) because whether they exist
# depends on timing: (path regex, column / key, value regex, why).
DROP_ROWS = [
    # hybrid-latency writes the latency quantiles of the operations that overlapped a merge
    # only when at least one did; at the minimum scale a merge is so short that, for the
    # background modes, some runs have none (13 of 20 runs lacked the "background, 2 threads"
    # rows, 3 of 20 the "background" ones). Their "ops merging" count rows are always there.
    (r"hybrid-latency/results\.(csv|jsonl)$", "measure", r"^(p50|p99|p99\.9|max) merging$",
     "latency quantiles of the operations during a merge (only when some op overlapped one)"),
]


def dropped(rel, get):
    """The DROP_ROWS rule that removes a row of `rel` (get(column) -> its value or None)."""
    for place, field, pattern, why in DROP_ROWS:
        if re.search(place, rel):
            v = get(field)
            if isinstance(v, str) and re.search(pattern, v):
                return why
    return None


def drop_note(rel, out):
    for place, field, pattern, why in DROP_ROWS:
        if re.search(place, rel):
            out.append(f"  rows left out (timing-dependent): {field} ~ /{pattern}/: {why}")


def normalise(where, value):
    for place, pattern, repl in NORMALISE:
        if re.search(place, where):
            value = re.sub(pattern, repl, value)
    return value


# --- readers ---------------------------------------------------------------------------------
def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return "not a PNG"
    w, h = struct.unpack(">II", head[16:24])
    return f"{w}x{h}"


def csv_schema(rel, path, out):
    with open(path, newline="") as f:
        text = f.read()
    lines = text.splitlines()
    out.append(f"  header: {lines[0] if lines else '<empty file>'}")
    rows = list(csv.reader(lines))
    if not rows:
        return
    header, body = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    body = [r for r in body
            if not dropped(rel, lambda f: r[col[f]] if f in col and col[f] < len(r) else None)]
    drop_note(rel, out)
    out.append(f"  rows: {len(body)}")
    ragged = sorted({len(r) for r in body if len(r) != len(header)})
    if ragged:
        out.append(f"  rows with another cell count than the header: {ragged}")
    keys = []
    for i, col in enumerate(header):
        cells = [r[i] if i < len(r) else "<missing>" for r in body]
        nonempty = [c for c in cells if c != ""]
        if nonempty and all(is_number(c) for c in nonempty):
            kind = "numeric"
        elif not nonempty:
            kind = "empty"
        else:
            kind = "text"
            keys.append(i)
        out.append(f"  column {col}: {kind}")
    if keys:
        out.append("  key columns: " + ",".join(header[i] for i in keys))
        tuples = []
        for r in body:
            vals = []
            for i in keys:
                c = r[i] if i < len(r) else "<missing>"
                if c == "":
                    c = "<empty>"
                elif is_number(c):
                    c = "<number>"
                vals.append(normalise(f"{rel}:{header[i]}", c))
            tuples.append(" | ".join(vals))
        for t in sorted(tuples):
            out.append(f"    {t}")


def flatten(value, prefix=""):
    """(key path, value) of every leaf of a JSON value."""
    if isinstance(value, dict):
        if not value:
            yield prefix or ".", {}
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(value, list):
        if not value:
            yield prefix + "[]", []
        for v in value:
            yield from flatten(v, prefix + "[]")
    else:
        yield prefix or ".", value


def leaf_text(rel, key, v):
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return None
    if isinstance(v, str):
        return normalise(f"{rel}:{key}", "<number-string>" if is_number(v) else v)
    return json.dumps(v)


def jsonl_schema(rel, path, out):
    """Distinct key sets (with their line counts), then per line its key set's label and its
    non-numeric values, sorted."""
    lines = []
    bad = 0
    with open(path) as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                bad += 1
                continue
            if isinstance(obj, dict) and dropped(rel, obj.get):
                continue
            leaves = list(flatten(obj))
            keyset = ",".join(sorted({k for k, _ in leaves}))
            vals = [f"{k}={t}" for k, v in leaves if (t := leaf_text(rel, k, v)) is not None]
            lines.append((keyset, " ".join(sorted(vals))))
    drop_note(rel, out)
    out.append(f"  lines: {len(lines)}" + (f" (+{bad} not JSON)" if bad else ""))
    keysets = sorted({k for k, _ in lines})
    label = {k: f"K{i + 1}" for i, k in enumerate(keysets)}
    for k in keysets:
        count = sum(1 for ks, _ in lines if ks == k)
        out.append(f"  keys {label[k]} ({count} lines): {{{k}}}")
    for line in sorted(f"{label[k]}: {v}" for k, v in lines):
        out.append(f"    {line}")


def json_schema(rel, path, out):
    with open(path) as f:
        text = f.read()
    try:
        doc = json.loads(text)
    except ValueError:
        return jsonl_schema(rel, path, out)
    paths = sorted({f"{k}: {type(v).__name__}" for k, v in flatten(doc)})
    for p in paths:
        out.append(f"    {p}")


def md_schema(rel, path, out):
    with open(path) as f:
        lines = f.read().splitlines()
    fence = False
    in_table = False
    table_key = ""
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("```"):
            fence = not fence
            out.append("  ```" if fence else "  ```end")
            continue
        if fence:
            continue
        if s.startswith("#"):
            out.append(f"  heading: {normalise(rel + ':heading', s)}")
            in_table = False
            continue
        if s.startswith("|"):
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if re.match(r"^\|\s*:?-{3,}", nxt):
                out.append(f"  table: {normalise(rel + ':table', s)}")
                in_table = True
                table_key = s.strip("|").split("|")[0].strip()
                continue
            if re.match(r"^\|\s*:?-{3,}", s):
                continue
            if in_table:
                first = s.strip("|").split("|")[0].strip()
                out.append("    row: " + normalise(f"{rel}:row:{table_key}", first))
            continue
        in_table = False


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: output-shape.py OUTDIR")
    root = sys.argv[1].rstrip("/")
    out = []
    meta = os.path.join(root, "_snapshot", "meta.txt")
    if os.path.exists(meta):
        out.append("== _snapshot/meta.txt")
        with open(meta) as f:
            for line in f:
                out.append("  " + normalise("_snapshot/meta.txt:line", line.rstrip("\n")))
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames
                             if os.path.normpath(os.path.join(rel_dir, d)) not in SKIP_DIRS)
        entries = sorted([d + "/" for d in dirnames] + filenames)
        out.append(f"== dir {rel_dir}: {' '.join(entries)}")
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel in SKIP_FILES or rel == "_snapshot/meta.txt":
                continue
            low = name.lower()
            if low.endswith(".csv"):
                out.append(f"== csv {rel}")
                csv_schema(rel, path, out)
            elif low.endswith(".jsonl") or low.endswith(".ndjson"):
                out.append(f"== jsonl {rel}")
                jsonl_schema(rel, path, out)
            elif low.endswith(".json"):
                out.append(f"== json {rel}")
                json_schema(rel, path, out)
            elif low.endswith(".md"):
                out.append(f"== md {rel}")
                md_schema(rel, path, out)
            elif low.endswith(".png"):
                out.append(f"== png {rel} {png_size(path)}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
