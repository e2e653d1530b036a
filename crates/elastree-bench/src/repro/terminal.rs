//! Markdown for a terminal: what `elastree repro` prints of a report's summary.
//!
//! [`render`] turns the small Markdown the summaries use into plain text:
//!
//! * a table (consecutive lines starting with `|`) becomes aligned columns: each column as
//!   wide as its widest cell, two spaces between columns, a rule of dashes under the header,
//!   columns of numbers right-aligned; a table wider than the line has its widest text columns
//!   wrapped, with a blank line between rows so that a row's continuation lines stay with it;
//! * inline Markdown is stripped: `**bold**` and `*emphasis*` keep their text, backticks go,
//!   a link `[text](url)` (or an image `![text](file)`) becomes `text`, `\|` becomes `|`;
//! * every other line is word-wrapped to the line width (a list item's continuation lines
//!   indented under its text); blank lines and short lines stay as they are.

/// The line width when the terminal's cannot be read (stdout is not a terminal and
/// `COLUMNS` is not set).
pub const DEFAULT_WIDTH: usize = 100;

/// The narrowest width [`render`] wraps to, and the narrowest a wrapped table column gets.
const MIN_WIDTH: usize = 40;
const MIN_COLUMN: usize = 12;

/// Spaces between table columns.
const GAP: &str = "  ";

/// The width to render for: stdout's terminal width, else `COLUMNS`, else
/// [`DEFAULT_WIDTH`].
pub fn width() -> usize {
    console::Term::stdout()
        .size_checked()
        .map(|(_, cols)| usize::from(cols))
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .unwrap_or(DEFAULT_WIDTH)
}

/// `markdown` as plain text for a terminal `width` columns wide (at least 40); every line
/// ends in a newline.
pub fn render(markdown: &str, width: usize) -> String {
    let width = width.max(MIN_WIDTH);
    let mut out = String::new();
    let lines: Vec<&str> = markdown.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if is_table_row(lines[i]) {
            let start = i;
            while i < lines.len() && is_table_row(lines[i]) {
                i += 1;
            }
            render_table(&lines[start..i], width, &mut out);
        } else {
            wrap_line(&inline(lines[i]), width, &mut out);
            i += 1;
        }
    }
    out
}

fn is_table_row(line: &str) -> bool {
    line.trim_start().starts_with('|')
}

/// The cells of a table row: split at the pipes that are not escaped, trimmed, with `\|`
/// unescaped.
fn cells(row: &str) -> Vec<String> {
    let row = row.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = match row.strip_suffix('|') {
        Some(rest) if !rest.ends_with('\\') => rest,
        _ => row,
    };
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell)),
            c => cell.push(c),
        }
    }
    cells.push(cell);
    cells.iter().map(|c| c.trim().to_string()).collect()
}

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

/// The alignment a delimiter row (`|---|:--|--:|`) sets for each column: `None` where it sets
/// none (`---`); `None` for the whole row when it is not a delimiter row.
fn delimiter(cells: &[String]) -> Option<Vec<Option<Align>>> {
    cells
        .iter()
        .map(|c| {
            let dashes = c.trim_start_matches(':').trim_end_matches(':');
            if dashes.is_empty() || !dashes.chars().all(|ch| ch == '-') {
                return None;
            }
            Some(match (c.starts_with(':'), c.ends_with(':')) {
                (false, true) => Some(Align::Right),
                (true, _) => Some(Align::Left),
                (false, false) => None,
            })
        })
        .collect()
}

/// A cell that reads as a number: `12`, `-3.5`, `1.02x`, `50%`, `23.6 (27.1)`,
/// `4.10 (1.00x)`, `1.234 [1.1-1.3]`.
fn is_number(cell: &str) -> bool {
    let number = |t: &str| {
        let t = t.strip_suffix(['x', '%']).unwrap_or(t);
        !t.is_empty() && t.parse::<f64>().is_ok_and(f64::is_finite)
    };
    let token = |t: &str| {
        let t = t.trim_matches(|c| matches!(c, '(' | ')' | '[' | ']' | ','));
        // A range `min-max` of two numbers, or one number.
        match t.get(1..).and_then(|rest| rest.find('-')) {
            Some(at) => number(&t[..=at]) && number(&t[at + 2..]),
            None => number(t),
        }
    };
    let mut tokens = cell.split_whitespace().peekable();
    tokens.peek().is_some() && tokens.all(token)
}

/// A cell that says there is no value.
fn is_placeholder(cell: &str) -> bool {
    matches!(cell, "" | "-" | "n/a" | "?")
}

/// Right for a column whose cells are numbers (or placeholders, with at least one number).
fn auto_align(body: &[Vec<String>], column: usize) -> Align {
    let column_cells = || body.iter().filter_map(|row| row.get(column));
    let numbers = column_cells().filter(|c| is_number(c)).count();
    if numbers > 0 && column_cells().all(|c| is_number(c) || is_placeholder(c)) {
        Align::Right
    } else {
        Align::Left
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Renders the table `rows` (Markdown lines) into `out`.
fn render_table(rows: &[&str], width: usize, out: &mut String) {
    let mut rows: Vec<Vec<String>> = rows.iter().map(|r| cells(r)).collect();
    // A header and a delimiter row under it, or (not a Markdown table) only body rows.
    let explicit = rows.get(1).and_then(|r| delimiter(r));
    let header = explicit.as_ref().map(|_| rows.remove(0));
    if explicit.is_some() {
        rows.remove(0);
    }
    let header = header.map(|h| h.iter().map(|c| inline(c)).collect::<Vec<_>>());
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| inline(c)).collect())
        .collect();
    let columns = header.iter().chain(&body).map(Vec::len).max().unwrap_or(0);
    let aligns: Vec<Align> = (0..columns)
        .map(|c| {
            explicit
                .as_ref()
                .and_then(|d| d.get(c).copied().flatten())
                .unwrap_or_else(|| auto_align(&body, c))
        })
        .collect();
    let mut widths: Vec<usize> = (0..columns)
        .map(|c| {
            header
                .iter()
                .chain(&body)
                .filter_map(|row| row.get(c))
                .map(|cell| chars(cell))
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Too wide for the line: narrow the widest text column, one character at a time.
    let total = |widths: &[usize]| widths.iter().sum::<usize>() + GAP.len() * (columns.max(1) - 1);
    while total(&widths) > width {
        let widest = (0..columns)
            .filter(|&c| aligns[c] == Align::Left && widths[c] > MIN_COLUMN)
            .max_by_key(|&c| (widths[c], std::cmp::Reverse(c)));
        match widest {
            Some(c) => widths[c] -= 1,
            None => break,
        }
    }
    let wraps = body
        .iter()
        .chain(&header)
        .any(|row| row.iter().zip(&widths).any(|(cell, &w)| chars(cell) > w));

    let empty = String::new();
    let write_row = |row: &[String], out: &mut String| {
        let wrapped: Vec<Vec<String>> = (0..columns)
            .map(|c| wrap_words(row.get(c).unwrap_or(&empty), widths[c]))
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        for line in 0..height {
            let mut text = String::new();
            for c in 0..columns {
                if c > 0 {
                    text.push_str(GAP);
                }
                let piece = wrapped[c].get(line).map_or("", String::as_str);
                let pad = " ".repeat(widths[c].saturating_sub(chars(piece)));
                match aligns[c] {
                    Align::Left => {
                        text.push_str(piece);
                        text.push_str(&pad);
                    }
                    Align::Right => {
                        text.push_str(&pad);
                        text.push_str(piece);
                    }
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
    };
    if let Some(header) = &header {
        write_row(header, out);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        out.push_str(&rule.join(GAP));
        out.push('\n');
    }
    for (i, row) in body.iter().enumerate() {
        if wraps && i > 0 {
            out.push('\n');
        }
        write_row(row, out);
    }
}

/// `text` broken at spaces into lines of at most `width` characters (a longer word is cut);
/// one empty line for empty text.
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > width {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..width).collect());
        }
        let word: String = word.into_iter().collect();
        if line.is_empty() {
            line = word;
        } else if chars(&line) + 1 + chars(&word) <= width {
            line.push(' ');
            line.push_str(&word);
        } else {
            lines.push(std::mem::replace(&mut line, word));
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Writes `line` into `out`, word-wrapped to `width` when longer: its leading spaces (and a
/// list marker's width) indent the continuation lines.
fn wrap_line(line: &str, width: usize, out: &mut String) {
    let line = line.trim_end();
    if chars(line) <= width {
        out.push_str(line);
        out.push('\n');
        return;
    }
    let text = line.trim_start();
    let lead = chars(line) - chars(text);
    let marker = ["- ", "* ", "+ "]
        .iter()
        .find(|m| text.starts_with(**m))
        .map_or(0, |m| m.len());
    let indent = " ".repeat(lead + marker);
    let first = &line[..line.len() - text.len()];
    let pieces = wrap_words(&text[marker..], width.saturating_sub(lead + marker));
    for (i, piece) in pieces.iter().enumerate() {
        if i == 0 {
            out.push_str(first);
            out.push_str(&text[..marker]);
        } else {
            out.push_str(&indent);
        }
        out.push_str(piece);
        out.push('\n');
    }
}

/// `text` with its inline Markdown stripped: code spans keep their text without the
/// backticks, emphasis (`*`, `**`, `***`) its text, a link or image its text; a backslash
/// escape becomes the character it escapes.
pub fn inline(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            '`' => {
                let ticks = run_of(&s, i, '`');
                let inner = i + ticks;
                match find_run(&s, inner, '`', ticks) {
                    Some(close) => {
                        out.extend(&s[inner..close]);
                        i = close + ticks;
                    }
                    // An unmatched run of backticks: dropped.
                    None => i = inner,
                }
            }
            '\\' if s.get(i + 1).is_some_and(char::is_ascii_punctuation) => {
                out.push(s[i + 1]);
                i += 2;
            }
            '!' if s.get(i + 1) == Some(&'[') && link_at(&s, i + 1).is_some() => i += 1,
            '[' if link_at(&s, i).is_some() => {
                let (text_end, end) = link_at(&s, i).expect("checked");
                out.push_str(&inline(&s[i + 1..text_end].iter().collect::<String>()));
                i = end;
            }
            '*' | '_' => {
                let marker = s[i];
                let run = run_of(&s, i, marker);
                match emphasis_close(&s, i, run) {
                    Some(close) => {
                        out.push_str(&inline(&s[i + run..close].iter().collect::<String>()));
                        i = close + run;
                    }
                    None => {
                        out.extend(&s[i..i + run]);
                        i += run;
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// How many `c` follow each other from `at`.
fn run_of(s: &[char], at: usize, c: char) -> usize {
    s[at..].iter().take_while(|&&x| x == c).count()
}

/// The start of the next run of exactly `len` `c`s from `from`.
fn find_run(s: &[char], from: usize, c: char, len: usize) -> Option<usize> {
    let mut i = from;
    while i < s.len() {
        if s[i] == c {
            let run = run_of(s, i, c);
            if run == len {
                return Some(i);
            }
            i += run;
        } else {
            i += 1;
        }
    }
    None
}

/// A link whose text opens with the `[` at `at`: the positions of its `]` and of the
/// character after its `)`.
fn link_at(s: &[char], at: usize) -> Option<(usize, usize)> {
    let mut depth = 0;
    let mut close = None;
    for (i, &c) in s.iter().enumerate().skip(at) {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    if s.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = s[close + 2..].iter().position(|&c| c == ')')? + close + 2;
    Some((close, end + 1))
}

/// Where the emphasis opened by the run of `run` markers at `at` closes, if it is one: the
/// opening run follows the start, a space or an opening bracket and comes before a
/// non-space; the closing run of the same marker and length follows a non-space and comes
/// before the end, a space or punctuation.
fn emphasis_close(s: &[char], at: usize, run: usize) -> Option<usize> {
    let marker = s[at];
    let opens = (at == 0 || s[at - 1].is_whitespace() || matches!(s[at - 1], '(' | '['))
        && s.get(at + run).is_some_and(|c| !c.is_whitespace());
    if !opens || run > 3 {
        return None;
    }
    let mut i = at + run;
    while let Some(close) = find_run(s, i, marker, run) {
        let after = s.get(close + run);
        if !s[close - 1].is_whitespace()
            && after.is_none_or(|c| c.is_whitespace() || c.is_ascii_punctuation())
        {
            return Some(close);
        }
        i = close + run;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_becomes_aligned_columns_with_a_rule_under_the_header() {
        let md = "| keys | load | bytes/key `btree` (`btreemap`) |\n\
                  |---|---|---|\n\
                  | rand64 | 1.02x | 23.6 (27.1) |\n\
                  | email | 11.5x | 184.2 (79.4) |\n";
        let text = render(md, 100);
        assert_eq!(
            text,
            "keys     load  bytes/key btree (btreemap)\n\
             ------  -----  --------------------------\n\
             rand64  1.02x                 23.6 (27.1)\n\
             email   11.5x                184.2 (79.4)\n"
        );
    }

    #[test]
    fn ragged_rows_get_empty_cells_and_text_columns_stay_left() {
        let md = "| index | note | n |\n|---|---|---|\n| `a` | long note here | 7 |\n\
                  | `bb` |\n| `c` | x | - | extra |\n";
        let text = render(md, 100);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "index  note            n");
        assert_eq!(lines[1], "-----  --------------  -  -----");
        assert_eq!(lines[2], "a      long note here  7");
        assert_eq!(lines[3], "bb");
        assert_eq!(lines[4], "c      x               -  extra");
    }

    #[test]
    fn emphasis_backticks_links_and_escapes_are_stripped() {
        assert_eq!(
            inline("**Ours, next to it** (this run)"),
            "Ours, next to it (this run)"
        );
        assert_eq!(inline("*Elastic index* (EDBT)"), "Elastic index (EDBT)");
        assert_eq!(inline("a `btree` and ``x`y``"), "a btree and x`y");
        assert_eq!(
            inline("Full report: [`results/a/report.md`](results/a/report.md)."),
            "Full report: results/a/report.md."
        );
        assert_eq!(inline("![plot](a.png)"), "plot");
        assert_eq!(inline("0.2 \\| 2"), "0.2 | 2");
        // Not emphasis: a lone star, stars inside words and code, snake_case, brackets.
        assert_eq!(inline("max* merging"), "max* merging");
        assert_eq!(inline("2*3*4 and `a*b*`"), "2*3*4 and a*b*");
        assert_eq!(inline("key_set_name"), "key_set_name");
        assert_eq!(inline("[min-max] (ratio)"), "[min-max] (ratio)");
    }

    #[test]
    fn escaped_pipes_stay_in_their_cell() {
        let md = "| workload | paper | ours |\n|---|---|---|\n| a | 0.2 \\| 2 | 1.00 \\| 1 |\n";
        let text = render(md, 100);
        assert!(
            text.lines()
                .nth(2)
                .unwrap()
                .starts_with("a         0.2 | 2"),
            "{text}"
        );
    }

    #[test]
    fn explicit_alignment_wins_and_pipe_rows_without_a_delimiter_are_a_body() {
        let md = "| a | b |\n|:--|--:|\n| 1 | x |\n";
        assert_eq!(render(md, 80), "a  b\n-  -\n1  x\n");
        assert_eq!(
            render("| 1 | 22 |\n| 333 | 4 |\n", 80),
            "  1  22\n333   4\n"
        );
    }

    #[test]
    fn other_lines_are_wrapped_or_left_as_they_are() {
        let md = "Short line.\n\n- a list item that goes on and on past the width of the line\n\
                  A paragraph of words that is longer than forty characters wide.\n";
        let text = render(md, 40);
        assert_eq!(
            text,
            "Short line.\n\n\
             - a list item that goes on and on past\n  the width of the line\n\
             A paragraph of words that is longer than\nforty characters wide.\n"
        );
        for line in text.lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
        }
    }

    #[test]
    fn a_table_wider_than_the_line_wraps_its_widest_text_column() {
        let target = "rand64: below the bound elastic within 3% of btree (mean ratio per step)";
        let md = format!(
            "| target | ours | result |\n|---|---|---|\n| {target} | lookup 0.98x | PASS |\n\
             | short | 1.00x | FAIL |\n"
        );
        let text = render(&md, 60);
        for line in text.lines() {
            assert!(line.chars().count() <= 60, "{line:?} in\n{text}");
        }
        // Every word of the long cell is there, and the rows are apart.
        let words: Vec<&str> = text.split_whitespace().collect();
        for word in target.split_whitespace() {
            assert!(words.contains(&word), "{word} missing:\n{text}");
        }
        assert!(text.contains("PASS\n"), "{text}");
        assert!(text.contains("\n\nshort"), "{text}");
    }

    #[test]
    fn the_line_width_is_at_least_forty() {
        let long = "word ".repeat(20);
        let text = render(&long, 5);
        let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert_eq!(widths, [39, 39, 19], "{text}");
    }
}
