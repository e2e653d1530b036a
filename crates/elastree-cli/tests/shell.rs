//! End-to-end tests of `elastree shell`: run the real binary, pipe a script to its stdin and
//! compare the exact stdout.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::ops::Bound;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use elastree_testkit::time_limit;

mod common;
use common::run;

/// Runs `elastree shell ARGS` on `script`, checks it exits 0 with nothing on stderr, and
/// returns stdout.
fn shell(args: &[&str], script: &[u8]) -> String {
    let mut argv = vec!["shell"];
    argv.extend_from_slice(args);
    let output = run(&argv, script);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "elastree {argv:?} failed: {:?}\nstderr: {stderr}",
        output.status
    );
    assert!(stderr.is_empty(), "unexpected stderr: {stderr}");
    String::from_utf8(output.stdout).expect("stdout is UTF-8")
}

/// Joins expected lines, each with its newline.
fn lines(lines: &[&str]) -> String {
    lines.iter().map(|line| format!("{line}\n")).collect()
}

const UNIQUE: &[&str] = &["--index", "btree"];
const NON_UNIQUE: &[&str] = &["--index", "btree", "--non-unique"];

#[test]
fn unique_session() {
    let _limit = time_limit();
    let script = b"\
put apple 1
put banana 2
put apple 3
get apple
get banana
get cherry
put u64:7 70
get u64:7
get hex:0000000000000007
del apple
del apple
get apple
del cherry
len
put hex: 9
get hex:
put hex:616263 4
get abc
len
";
    assert_eq!(
        shell(UNIQUE, script),
        lines(&[
            "OK", "OK", "OK 1", "3", "2", "NONE", "OK", "70", "70", "3", "NONE", "NONE", "NONE",
            "2", "OK", "9", "OK", "4", "4",
        ])
    );
}

#[test]
fn non_unique_session() {
    let _limit = time_limit();
    let script = b"\
put k 5
put k 2
put k 9
put k 5
get k
get j
put j 1
get j
del k 5
del k 5
del k 100
get k
len
del k 2
del k 9
get k
len
";
    assert_eq!(
        shell(NON_UNIQUE, script),
        lines(&[
            "OK", "OK", "OK", "OK", "2 5 9", "NONE", "OK", "1", "5", "NONE", "NONE", "2 9", "3",
            "2", "9", "NONE", "1",
        ])
    );
}

#[test]
fn del_arity_depends_on_the_mode() {
    let _limit = time_limit();
    assert_eq!(
        shell(UNIQUE, b"put a 1\ndel a 1\nget a\ndel a\n"),
        lines(&[
            "OK",
            "ERR wrong number of arguments (usage: del KEY on a unique index)",
            "1",
            "1",
        ])
    );
    assert_eq!(
        shell(NON_UNIQUE, b"put a 1\ndel a\nget a\ndel a 1\n"),
        lines(&[
            "OK",
            "ERR wrong number of arguments (usage: del KEY TID on a non-unique index)",
            "1",
            "1",
        ])
    );
}

#[test]
fn unique_scans() {
    let _limit = time_limit();
    let script = b"\
put b 2
put a 1
put c 3
put hex: 0
put hex:00 5
scan hex: 100
scan a 2
scan bb 10
scan d 10
scan a 0
rscan c 2
rscan bz 10
rscan hex:00 10
rscan hex: 10
range a c 10
range a c 1
range hex: hex:00 10
range c a 10
range b b 10
";
    assert_eq!(
        shell(UNIQUE, script),
        lines(&[
            "OK", "OK", "OK", "OK", "OK",
            // scan hex: 100 (the empty key prints as empty hex)
            " 0", "00 5", "61 1", "62 2", "63 3", "END", // scan a 2
            "61 1", "62 2", "END", // scan bb 10
            "63 3", "END", // scan d 10, scan a 0
            "END", "END", // rscan c 2
            "63 3", "62 2", "END", // rscan bz 10
            "62 2", "61 1", "00 5", " 0", "END", // rscan hex:00 10
            "00 5", " 0", "END", // rscan hex: 10
            " 0", "END", // range a c 10, range a c 1
            "61 1", "62 2", "END", "61 1", "END", // range hex: hex:00 10
            " 0", "END", // range c a 10 (inverted), range b b 10 (empty)
            "END", "END",
        ])
    );
}

#[test]
fn non_unique_scans_print_one_line_per_pair() {
    let _limit = time_limit();
    let script = b"\
put u64:2 20
put u64:1 11
put u64:1 10
put u64:2 21
put u64:3 30
scan u64:1 100
scan u64:1 3
rscan u64:2 100
rscan u64:2 1
range u64:1 u64:3 100
range u64:2 u64:2 100
";
    let k1 = "0000000000000001";
    let k2 = "0000000000000002";
    let k3 = "0000000000000003";
    assert_eq!(
        shell(NON_UNIQUE, script),
        lines(&[
            "OK",
            "OK",
            "OK",
            "OK",
            "OK",
            &format!("{k1} 10"),
            &format!("{k1} 11"),
            &format!("{k2} 20"),
            &format!("{k2} 21"),
            &format!("{k3} 30"),
            "END",
            &format!("{k1} 10"),
            &format!("{k1} 11"),
            &format!("{k2} 20"),
            "END",
            &format!("{k2} 21"),
            &format!("{k2} 20"),
            &format!("{k1} 11"),
            &format!("{k1} 10"),
            "END",
            &format!("{k2} 21"),
            "END",
            &format!("{k1} 10"),
            &format!("{k1} 11"),
            &format!("{k2} 20"),
            &format!("{k2} 21"),
            "END",
            "END",
        ])
    );
}

/// Parses a `mem` reply into (total, inner, leaves, aux), checking its format.
fn parse_mem(line: &str) -> (usize, usize, usize, usize) {
    let tokens: Vec<&str> = line.split(' ').collect();
    assert_eq!(tokens.len(), 4, "{line:?}");
    let total: usize = tokens[0].parse().expect("total is a number");
    let part = |token: &str, name: &str| -> usize {
        token
            .strip_prefix(name)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line:?}: expected {name}<n>"))
    };
    let inner = part(tokens[1], "inner=");
    let leaves = part(tokens[2], "leaves=");
    let aux = part(tokens[3], "aux=");
    assert_eq!(total, inner + leaves + aux, "{line:?}");
    (total, inner, leaves, aux)
}

#[test]
fn len_mem_check() {
    let _limit = time_limit();
    let mut script = String::from("len\nmem\ncheck\n");
    for i in 0..2000 {
        script.push_str(&format!("put u64:{i} {i}\n"));
    }
    script.push_str("len\nmem\ncheck\n");
    for i in 0..1000 {
        script.push_str(&format!("del u64:{i}\n"));
    }
    script.push_str("len\ncheck\n");
    let out = shell(
        &["--leaf-capacity", "8", "--inner-capacity", "8"],
        script.as_bytes(),
    );
    let out: Vec<&str> = out.lines().collect();
    assert_eq!(out.len(), 3 + 2000 + 3 + 1000 + 2, "output lines");
    assert_eq!(out[0], "0");
    let (empty_total, ..) = parse_mem(out[1]);
    assert_eq!(out[2], "OK");
    if let Some(i) = out[3..2003].iter().position(|line| *line != "OK") {
        panic!("put u64:{i} {i}: {}", out[3 + i]);
    }
    assert_eq!(out[2003], "2000");
    let (full_total, _, leaves, _) = parse_mem(out[2004]);
    assert!(full_total > empty_total, "{} -> {}", out[1], out[2004]);
    assert!(
        leaves >= 2000 * 16,
        "2000 pairs of 16 bytes in {leaves} leaf bytes?"
    );
    assert_eq!(out[2005], "OK");
    for (i, line) in out[2006..3006].iter().enumerate() {
        assert_eq!(*line, i.to_string(), "del u64:{i}");
    }
    assert_eq!(out[3006], "1000");
    assert_eq!(out[3007], "OK");
}

#[test]
fn malformed_lines_get_err_and_the_shell_goes_on() {
    let _limit = time_limit();
    let script = "\
frobnicate
PUT a 1
put
put a
put a 1 2
get
get a b
del
del a 1 2
scan a
rscan a 1 2
range a b
len 1
mem x
check x
help me
put a x
put a -1
put a 1.5
put a 18446744073709551616
scan a many
get u64:abc
get u64:
get u64:18446744073709551616
get hex:zz
get hex:abc
put a 1
get a
";
    let out = shell(UNIQUE, script.as_bytes());
    assert_eq!(
        out,
        lines(&[
            "ERR unknown command \"frobnicate\" (try help)",
            "ERR unknown command \"PUT\" (try help)",
            "ERR wrong number of arguments (usage: put KEY TID)",
            "ERR wrong number of arguments (usage: put KEY TID)",
            "ERR wrong number of arguments (usage: put KEY TID)",
            "ERR wrong number of arguments (usage: get KEY)",
            "ERR wrong number of arguments (usage: get KEY)",
            "ERR wrong number of arguments (usage: del KEY (unique index) or del KEY TID (non-unique index))",
            "ERR wrong number of arguments (usage: del KEY (unique index) or del KEY TID (non-unique index))",
            "ERR wrong number of arguments (usage: scan KEY N)",
            "ERR wrong number of arguments (usage: rscan KEY N)",
            "ERR wrong number of arguments (usage: range LO HI N)",
            "ERR wrong number of arguments (usage: len)",
            "ERR wrong number of arguments (usage: mem)",
            "ERR wrong number of arguments (usage: check)",
            "ERR wrong number of arguments (usage: help)",
            "ERR bad tid \"x\": expected a decimal integer",
            "ERR bad tid \"-1\": expected a decimal integer",
            "ERR bad tid \"1.5\": expected a decimal integer",
            "ERR tid \"18446744073709551616\" is out of range (at most 18446744073709551615)",
            "ERR bad limit \"many\": expected a decimal integer",
            "ERR bad u64 key \"u64:abc\": expected a decimal integer",
            "ERR bad u64 key \"u64:\": expected a decimal integer",
            "ERR u64 key \"u64:18446744073709551616\" is out of range (at most 18446744073709551615)",
            "ERR bad hex key \"hex:zz\": 'z' is not a hex digit",
            "ERR bad hex key \"hex:abc\": odd number of hex digits",
            "OK",
            "1",
        ])
    );
}

#[test]
fn over_long_keys_are_refused() {
    let _limit = time_limit();
    let script = b"\
put abcd 1
put abcde 2
put hex:0102030405 3
put u64:1 4
get abcd
get abcde
del abcde
len
";
    let too_long =
        |len: usize| format!("ERR key of {len} bytes exceeds the maximum key length of 4 bytes");
    assert_eq!(
        shell(&["--max-key-len", "4"], script),
        lines(&[
            "OK",
            &too_long(5),
            &too_long(5),
            &too_long(8),
            "1",
            &too_long(5),
            &too_long(5),
            "1",
        ])
    );
    assert_eq!(
        shell(
            &["--max-key-len", "4", "--non-unique"],
            b"put abcde 1\nget abcde\ndel abcde 1\nlen\n"
        ),
        lines(&[&too_long(5), &too_long(5), &too_long(5), "0"])
    );
}

#[test]
fn fixed_key_length() {
    let _limit = time_limit();
    let script = b"put u64:1 1\nput abc 2\nget u64:1\nlen\n";
    assert_eq!(
        shell(&["--key-len", "8"], script),
        lines(&[
            "OK",
            "ERR key of 3 bytes does not match the index's fixed key length of 8 bytes",
            "1",
            "1",
        ])
    );
}

#[test]
fn invalid_utf8_lines_are_errors() {
    let _limit = time_limit();
    let script = b"put a 1\nput \xff\xfe 2\n\xc3\x28\nget a\x80\nlen\n";
    assert_eq!(
        shell(UNIQUE, script),
        lines(&[
            "OK",
            "ERR line is not valid UTF-8",
            "ERR line is not valid UTF-8",
            "ERR line is not valid UTF-8",
            "1",
        ])
    );
}

#[test]
fn blank_lines_comments_and_line_endings() {
    let _limit = time_limit();
    let script = b"\n   \n\t\n# a comment\n   # another\nput a 1\r\n\r\nget a\r\nput b 2\n\nlen";
    assert_eq!(shell(UNIQUE, script), lines(&["OK", "1", "OK", "2"]));
}

#[test]
fn utf8_keys_are_their_bytes() {
    let _limit = time_limit();
    let script = "put ключ 1\nget ключ\nscan ключ 1\n";
    assert_eq!(
        shell(UNIQUE, script.as_bytes()),
        lines(&["OK", "1", "d0bad0bbd18ed187 1", "END"])
    );
}

#[test]
fn end_of_input_exits_0_without_a_prompt() {
    let _limit = time_limit();
    for script in [&b""[..], b"\n", b"len", b"put a 1\nget a\n"] {
        let output = run(&["shell"], script);
        assert!(output.status.success(), "{:?}", output.status);
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(!stdout.contains("elastree>"), "{stdout:?}");
        assert!(output.stderr.is_empty());
    }
    assert_eq!(shell(UNIQUE, b""), "");
}

#[test]
fn help_and_quit() {
    let _limit = time_limit();
    let out = shell(UNIQUE, b"help\nput a 1\nquit\nput b 2\n");
    let (help, rest) = out.split_at(out.len() - 3);
    assert_eq!(rest, "OK\n");
    for command in [
        "put KEY TID",
        "get KEY",
        "del KEY",
        "del KEY TID",
        "scan KEY N",
        "rscan KEY N",
        "range LO HI N",
        "len",
        "mem",
        "check",
        "help",
        "quit",
    ] {
        assert!(help.contains(command), "help lacks {command:?}:\n{help}");
    }
}

#[test]
fn help_flags_exit_0() {
    let _limit = time_limit();
    let output = run(&["--help"], b"");
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("shell"), "{stdout}");

    let output = run(&["shell", "--help"], b"");
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    for needle in [
        "--index",
        "btree",
        "--non-unique",
        "--max-key-len",
        "--key-len",
        "--leaf-capacity",
        "--inner-capacity",
    ] {
        assert!(
            stdout.contains(needle),
            "shell --help lacks {needle}:\n{stdout}"
        );
    }

    let output = run(&["--version"], b"");
    assert!(output.status.success());
}

#[test]
fn bad_arguments_exit_2() {
    let _limit = time_limit();
    let output = run(&["shell", "--index", "nope"], b"len\n");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nope") && stderr.contains("btree"),
        "{stderr}"
    );

    let output = run(&["shell", "--leaf-capacity", "-3"], b"len\n");
    assert_eq!(output.status.code(), Some(2));

    let output = run(&[], b"");
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn an_index_that_cannot_be_built_exits_2() {
    let _limit = time_limit();
    for args in [
        &["shell", "--max-key-len", "0"][..],
        &["shell", "--max-key-len", "4", "--key-len", "8"],
        &["shell", "--max-key-len", "100000000"],
        &["shell", "--leaf-capacity", "2"],
        &["shell", "--non-unique", "--inner-capacity", "1"],
    ] {
        let output = run(args, b"len\n");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr
                .starts_with("elastree: cannot build the btree index: invalid index configuration"),
            "{args:?}: {stderr}"
        );
    }
    for ratio in ["0", "-1", "NaN"] {
        let ratio = format!("--merge-ratio={ratio}");
        let output = run(&["shell", "--index", "hybrid", &ratio], b"len\n");
        assert_eq!(output.status.code(), Some(2), "{ratio}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("merge ratio must be a positive number"),
            "{stderr}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// A long random script checked line by line against a model.

/// SplitMix64: a small, fixed-seed, good-enough generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random key as (token, bytes), in one of the three token forms.
/// A random key token and its bytes; `integer`: always a `u64:` key (for kinds that take
/// only fixed-width integer keys).
fn random_key(rng: &mut Rng, integer: bool) -> (String, Vec<u8>) {
    match if integer { 0 } else { rng.below(3) } {
        0 => {
            let n = rng.below(400);
            (format!("u64:{n}"), n.to_be_bytes().to_vec())
        }
        1 => {
            let token = format!("k{}", rng.below(300));
            let bytes = token.clone().into_bytes();
            (token, bytes)
        }
        _ => {
            let len = rng.below(4) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(4) as u8 * 0x3f).collect();
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            (format!("hex:{hex}"), bytes)
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The reference: a set of (key, tid) pairs, with the unique-index rules on top.
struct Model {
    unique: bool,
    /// Only 8-byte integer keys.
    integer: bool,
    pairs: BTreeSet<(Vec<u8>, u64)>,
}

impl Model {
    fn tids(&self, key: &[u8]) -> Vec<u64> {
        self.pairs
            .range((key.to_vec(), 0)..=(key.to_vec(), u64::MAX))
            .map(|(_, tid)| *tid)
            .collect()
    }

    fn scan_lines<'a>(
        pairs: impl Iterator<Item = &'a (Vec<u8>, u64)>,
        limit: usize,
    ) -> Vec<String> {
        let mut out: Vec<String> = pairs
            .take(limit)
            .map(|(key, tid)| format!("{} {tid}", hex(key)))
            .collect();
        out.push("END".to_owned());
        out
    }

    /// Generates one random command and returns it with the replies the shell must print.
    fn step(&mut self, rng: &mut Rng) -> (String, Vec<String>) {
        let (token, key) = random_key(rng, self.integer);
        // A tid names a tuple, and a tuple has one key: tids are derived from the key (one
        // of a few per key), as kinds that load keys by tid require.
        let tid = key_tid(&key) | rng.below(if self.unique { 8 } else { 6 });
        let limit = rng.below(12) as usize;
        let roll = rng.below(100);
        let one = |line: String| vec![line];
        match roll {
            0..=39 => {
                let old = self.tids(&key);
                let reply = if self.unique {
                    for old_tid in &old {
                        self.pairs.remove(&(key.clone(), *old_tid));
                    }
                    match old.first() {
                        Some(old_tid) => format!("OK {old_tid}"),
                        None => "OK".to_owned(),
                    }
                } else {
                    "OK".to_owned()
                };
                self.pairs.insert((key, tid));
                (format!("put {token} {tid}"), one(reply))
            }
            40..=59 => {
                let tids = self.tids(&key);
                let reply = if tids.is_empty() {
                    "NONE".to_owned()
                } else {
                    let tids: Vec<String> = tids.iter().map(u64::to_string).collect();
                    tids.join(" ")
                };
                (format!("get {token}"), one(reply))
            }
            60..=79 => {
                if self.unique {
                    let reply = match self.tids(&key).first() {
                        Some(&old) => {
                            self.pairs.remove(&(key, old));
                            old.to_string()
                        }
                        None => "NONE".to_owned(),
                    };
                    (format!("del {token}"), one(reply))
                } else {
                    let reply = if self.pairs.remove(&(key, tid)) {
                        tid.to_string()
                    } else {
                        "NONE".to_owned()
                    };
                    (format!("del {token} {tid}"), one(reply))
                }
            }
            80..=88 => {
                let pairs = self.pairs.range((key, 0)..);
                (
                    format!("scan {token} {limit}"),
                    Self::scan_lines(pairs, limit),
                )
            }
            89..=93 => {
                let pairs = self.pairs.range(..=(key, u64::MAX)).rev();
                (
                    format!("rscan {token} {limit}"),
                    Self::scan_lines(pairs, limit),
                )
            }
            94..=97 => {
                let (hi_token, hi) = random_key(rng, self.integer);
                let reply = if key < hi {
                    let lower = Bound::Included((key, 0));
                    let upper = Bound::Excluded((hi, 0));
                    Self::scan_lines(self.pairs.range((lower, upper)), limit)
                } else {
                    vec!["END".to_owned()]
                };
                (format!("range {token} {hi_token} {limit}"), reply)
            }
            98 => ("len".to_owned(), one(self.pairs.len().to_string())),
            _ => ("check".to_owned(), one("OK".to_owned())),
        }
    }
}

/// A key's tid family: a 64-bit hash of the key with the low 3 bits free.
fn key_tid(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h ^ (h >> 31)) & !7
}

fn random_session(kind: &[&str], unique: bool, seed: u64, commands: usize) {
    let integer = kind.contains(&"sbtree");
    let mut rng = Rng(seed);
    let mut model = Model {
        unique,
        integer,
        pairs: BTreeSet::new(),
    };
    let mut script = String::new();
    // For each expected output line: (script line number, expected text).
    let mut expected: Vec<(usize, String)> = Vec::new();
    let mut commands_text = Vec::with_capacity(commands);
    for line_no in 0..commands {
        let (command, replies) = model.step(&mut rng);
        script.push_str(&command);
        script.push('\n');
        commands_text.push(command);
        expected.extend(replies.into_iter().map(|reply| (line_no, reply)));
    }
    script.push_str("len\ncheck\n");
    expected.push((commands, model.pairs.len().to_string()));
    expected.push((commands + 1, "OK".to_owned()));
    commands_text.push("len".to_owned());
    commands_text.push("check".to_owned());

    let mut args = kind.to_vec();
    args.extend(["--leaf-capacity", "4", "--inner-capacity", "4"]);
    if !unique {
        args.push("--non-unique");
    }
    let out = shell(&args, script.as_bytes());
    let got: Vec<&str> = out.lines().collect();
    for (i, (line_no, want)) in expected.iter().enumerate() {
        let got_line = got.get(i).copied().unwrap_or("<missing>");
        assert_eq!(
            got_line,
            want,
            "output line {i}, for script line {} {:?}",
            line_no + 1,
            commands_text[*line_no]
        );
    }
    assert_eq!(got.len(), expected.len(), "extra output lines");
    // The model was exercised in every mode it has.
    assert!(!model.pairs.is_empty());
}

/// Every kind the random sessions run: the elastic kind with a budget small enough that
/// the session converts leaves both ways.
const KINDS: &[&[&str]] = &[
    &["--index", "btree"],
    &["--index", "seqtree"],
    &["--index", "elastic", "--budget", "4K"],
    &[
        "--index",
        "hybrid",
        "--merge-ratio",
        "2",
        "--min-merge",
        "8",
    ],
    &[
        "--index",
        "hybrid-compressed",
        "--merge-ratio",
        "2",
        "--min-merge",
        "8",
    ],
    // The B+-tree in optimized pages of the smallest size (they grow to hold two keys of
    // the longest length), so that pages split, merge and change their prefix constantly.
    &[
        "--index",
        "btree",
        "--pages",
        "prefix",
        "--page-bytes",
        "256",
    ],
    &[
        "--index",
        "btree",
        "--pages",
        "prefix-split",
        "--page-bytes",
        "256",
    ],
    &["--index", "btree", "--pages", "base"],
    &["--index", "bwtree"],
    // The Bw-tree's pages of whole keys, small so that they split and merge constantly.
    &[
        "--index",
        "bwtree",
        "--pages",
        "base",
        "--page-bytes",
        "256",
    ],
    // Fixed 8-byte keys only: the sessions draw `u64:` keys for it.
    &["--index", "sbtree"],
];

#[test]
fn random_unique_script_matches_a_btreemap_model() {
    let _limit = time_limit();
    for kind in KINDS {
        random_session(kind, true, 0x5eed_0001, 20_000);
    }
}

#[test]
fn random_non_unique_script_matches_a_btreeset_model() {
    let _limit = time_limit();
    for kind in KINDS {
        random_session(kind, false, 0x5eed_0002, 20_000);
    }
}

#[test]
fn indirect_kinds_keep_their_table_in_step() {
    let _limit = time_limit();
    for kind in &KINDS[1..3] {
        let script = b"\
put apple 1
put banana 1
put apple 3
put banana 1
get banana
del apple
put apple 3
mem
check
";
        let out = shell(kind, script);
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got.len(), 9, "{kind:?}: one line per command:\n{out}");
        assert_eq!(got[0], "OK", "{kind:?}: put apple 1");
        assert!(
            got[1].starts_with("ERR tid 1 is the tuple of key hex:6170706c65"),
            "{kind:?}: {}",
            got[1]
        );
        // Replacing apple's tid released tid 1, so banana may take it.
        assert_eq!(&got[2..6], ["OK 1", "OK", "1", "3"], "{kind:?}");
        assert_eq!(got[6], "OK", "{kind:?}: put apple 3");
        assert_eq!(got[8], "OK", "{kind:?}: check");
    }
}

#[test]
fn a_kinds_own_option_on_another_kind_is_refused() {
    let _limit = time_limit();
    for (args, says) in [
        (
            &["shell", "--budget", "4K"][..],
            "--budget applies to the elastic kind only",
        ),
        (
            &["shell", "--index", "seqtree", "--budget", "4K"],
            "--budget applies",
        ),
        (
            &["shell", "--merge-ratio", "4"],
            "apply to the hybrid kinds only",
        ),
        (
            &[
                "shell",
                "--index",
                "elastic",
                "--budget",
                "4K",
                "--min-merge",
                "8",
            ],
            "hybrid kinds only",
        ),
        (
            &["shell", "--index", "seqtree", "--pages", "prefix"],
            "apply to the btree and bwtree kinds only",
        ),
        (
            &["shell", "--pages", "base", "--page-bytes", "4K"],
            "not the btree's --pages base",
        ),
    ] {
        let output = run(args, b"len\n");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// The SB-tree takes 8-byte keys unless told 16: another key length answers `ERR` and the
/// session goes on; a key length it does not take at all is refused at start.
#[test]
fn sbtree_takes_fixed_width_integer_keys() {
    let _limit = time_limit();
    let script = b"put u64:5 1\nput u64:7 2\nput abc 3\nget u64:5\nscan u64:0 5\nrscan u64:9 1\nlen\ncheck\n";
    let out = shell(&["--index", "sbtree"], script);
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(&got[..2], ["OK", "OK"], "{out}");
    assert!(
        got[2].starts_with("ERR") && got[2].contains("8 bytes"),
        "{out}"
    );
    assert_eq!(
        &got[3..],
        [
            "1",
            "0000000000000005 1",
            "0000000000000007 2",
            "END",
            "0000000000000007 2",
            "END",
            "2",
            "OK"
        ],
        "{out}"
    );
    let wide = shell(
        &["--index", "sbtree", "--key-len", "16"],
        b"put hex:000102030405060708090a0b0c0d0e0f 9\nget u64:1\nlen\n",
    );
    let got: Vec<&str> = wide.lines().collect();
    assert_eq!(got[0], "OK", "{wide}");
    assert!(got[1].starts_with("ERR"), "{wide}");
    assert_eq!(got[2], "1", "{wide}");
    let output = run(&["shell", "--index", "sbtree", "--key-len", "4"], b"len\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("8 or 16 bytes"), "{stderr}");
}

#[test]
fn elastic_needs_a_budget() {
    let _limit = time_limit();
    let output = run(&["shell", "--index", "elastic"], b"len\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("budget"), "{stderr}");
}

#[test]
fn a_million_lines_pipe_through() {
    let _limit = time_limit();
    let mut script = String::with_capacity(16 << 20);
    for i in 0..500_000u64 {
        script.push_str(&format!(
            "put u64:{} {i}\n",
            i.wrapping_mul(0x9e37_79b9) % 1_000_000
        ));
    }
    for i in 0..500_000u64 {
        script.push_str(&format!("get u64:{i}\n"));
    }
    let out = shell(UNIQUE, script.as_bytes());
    assert_eq!(out.lines().count(), 1_000_000);
    // BTreeMap is in the test to keep the model honest on a sample of the answers.
    let mut model = BTreeMap::new();
    for i in 0..500_000u64 {
        model.insert(i.wrapping_mul(0x9e37_79b9) % 1_000_000, i);
    }
    for (i, line) in out.lines().skip(500_000).enumerate().step_by(997) {
        let want = model
            .get(&(i as u64))
            .map_or_else(|| "NONE".to_owned(), u64::to_string);
        assert_eq!(line, want, "get u64:{i}");
    }
}

/// A program that drives the shell over pipes one line at a time gets each reply before it
/// sends the next line (replies are flushed whenever the shell would wait for input).
#[test]
fn replies_arrive_line_by_line_over_pipes() {
    let _limit = time_limit();
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    let child = Command::new(env!("CARGO_BIN_EXE_elastree"))
        .args(["shell", "--index", "btree"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start elastree shell");
    let mut child = KillOnDrop(child);
    let mut stdin = child.0.stdin.take().unwrap();
    let stdout = child.0.stdout.take().unwrap();
    // Replies are read on a thread of their own: a reply that is never flushed (the
    // regression this test is for) fails the test after a minute instead of blocking it.
    let (send, replies) = mpsc::channel::<String>();
    thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match stdout.read_line(&mut line) {
                Ok(n) if n > 0 && send.send(line).is_ok() => {}
                _ => break,
            }
        }
    });
    for (command, expected) in [
        ("put k 1\n", "OK\n"),
        ("put k 2\n", "OK 1\n"),
        ("get k\n", "2\n"),
    ] {
        stdin.write_all(command.as_bytes()).unwrap();
        stdin.flush().unwrap();
        match replies.recv_timeout(REPLY_WAIT) {
            Ok(reply) => assert_eq!(reply, expected, "reply to {command:?}"),
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "no reply to {command:?} within {REPLY_WAIT:?}: the shell waits for input \
                 without flushing its replies"
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!(
                "no reply to {command:?}: the shell closed its stdout (exit status {})",
                child.wait_within(REPLY_WAIT)
            ),
        }
    }
    drop(stdin);
    let status = child.wait_within(REPLY_WAIT);
    assert!(
        status.success(),
        "the shell exits with {status} at end of input"
    );
}

/// How long [`replies_arrive_line_by_line_over_pipes`] waits for one reply: far more than a
/// reply takes on a loaded machine.
const REPLY_WAIT: Duration = Duration::from_secs(60);

/// A child process killed when the test ends, also when it fails.
struct KillOnDrop(Child);

impl KillOnDrop {
    /// Waits for the child to exit, for at most `limit`; fails the test if it does not.
    fn wait_within(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            match self.0.try_wait().expect("wait for the shell") {
                Some(status) => return status,
                None if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                None => panic!("the shell did not exit within {limit:?} after its input ended"),
            }
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `text` to a fresh file for `--load` and returns its path.
fn load_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("elastree-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_static_index_is_loaded_from_a_file_and_refuses_writes() {
    let _limit = time_limit();
    let path = load_file("static.txt", "# fruit\npear 3\napple 1\n\nbanana 2\n");
    let path = path.to_str().unwrap();
    let out = shell(
        &["--index", "static", "--load", path],
        b"get apple\nscan b 5\nput cherry 4\ndel apple\nlen\ncheck\n",
    );
    let got: Vec<&str> = out.lines().collect();
    // Scans print hex keys: banana, pear.
    assert_eq!(
        &got[..4],
        ["1", "62616e616e61 2", "70656172 3", "END"],
        "{out}"
    );
    assert!(
        got[4].starts_with("ERR") && got[4].contains("read-only"),
        "{out}"
    );
    assert!(
        got[5].starts_with("ERR") && got[5].contains("read-only"),
        "{out}"
    );
    assert_eq!(&got[6..], ["3", "OK"], "{out}");
    // Other kinds insert the loaded pairs; non-unique files may repeat keys.
    let path = load_file("pairs.txt", "k 2\nk 1\nj 5\n");
    let path = path.to_str().unwrap();
    for kind in ["btree", "hybrid", "static", "seqtree"] {
        let out = shell(
            &["--index", kind, "--non-unique", "--load", path],
            b"get k\nlen\n",
        );
        assert_eq!(out, lines(&["1 2", "3"]), "{kind}");
    }
}

#[test]
fn a_bad_load_file_exits_2_naming_the_line() {
    let _limit = time_limit();
    let path = load_file("bad.txt", "a 1\nb x\n");
    let output = run(&["shell", "--load", path.to_str().unwrap()], b"len\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 2"), "{stderr}");
    let path = load_file("dup.txt", "a 1\na 2\n");
    let output = run(&["shell", "--load", path.to_str().unwrap()], b"len\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("lines 1 and 2"), "{stderr}");
}
