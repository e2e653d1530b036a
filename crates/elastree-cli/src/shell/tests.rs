//! Unit tests of the parser, and of [`run_shell`] against a small model index.

use std::collections::BTreeSet;
use std::ops::{Bound, RangeBounds};
use std::sync::Mutex;

use elastree::{Direction, Index, IndexKind, MemoryUsage};

use super::*;

fn parse(line: &str) -> Command {
    parse_command(line).unwrap_or_else(|err| panic!("{line:?}: {err}"))
}

fn parse_err(line: &str) -> ParseError {
    match parse_command(line) {
        Ok(command) => panic!("{line:?} parsed as {command:?}"),
        Err(err) => err,
    }
}

fn key(bytes: &[u8]) -> Vec<u8> {
    bytes.to_vec()
}

// ---------------------------------------------------------------------------------------
// Parser: accepted forms.

#[test]
fn blank_and_comment_lines_are_empty() {
    for line in [
        "",
        " ",
        "\t",
        "  \t  ",
        "\r",
        "#",
        "# put a 1",
        "   # x",
        "#put",
        "\u{a0}",
    ] {
        assert_eq!(parse(line), Command::Empty, "{line:?}");
    }
}

#[test]
fn plain_key_tokens_are_their_utf8_bytes() {
    assert_eq!(parse("get apple"), Command::Get { key: key(b"apple") });
    assert_eq!(
        parse("get ключ"),
        Command::Get {
            key: "ключ".as_bytes().to_vec()
        }
    );
    // Prefixes are case-sensitive and need their colon.
    for token in [
        "HEX:ab", "U64:1", "u64", "hex", "u64-1", "x:1", "#a", "del", "1",
    ] {
        assert_eq!(
            parse(&format!("get {token}")),
            Command::Get {
                key: token.as_bytes().to_vec()
            },
            "{token}"
        );
    }
}

#[test]
fn u64_key_tokens_are_big_endian() {
    assert_eq!(parse("get u64:0"), Command::Get { key: vec![0; 8] });
    assert_eq!(
        parse("get u64:258"),
        Command::Get {
            key: vec![0, 0, 0, 0, 0, 0, 1, 2]
        }
    );
    assert_eq!(
        parse("get u64:18446744073709551615"),
        Command::Get { key: vec![0xff; 8] }
    );
    assert_eq!(
        parse("get u64:007"),
        Command::Get {
            key: 7u64.to_be_bytes().to_vec()
        }
    );
}

#[test]
fn hex_key_tokens_are_raw_bytes() {
    assert_eq!(parse("get hex:"), Command::Get { key: vec![] });
    assert_eq!(
        parse("get hex:00ff7f"),
        Command::Get {
            key: vec![0x00, 0xff, 0x7f]
        }
    );
    assert_eq!(
        parse("get hex:DEADbeef"),
        Command::Get {
            key: vec![0xde, 0xad, 0xbe, 0xef]
        }
    );
}

#[test]
fn every_command_parses() {
    assert_eq!(
        parse("put a 1"),
        Command::Put {
            key: key(b"a"),
            tid: 1
        }
    );
    assert_eq!(
        parse("put u64:5 18446744073709551615"),
        Command::Put {
            key: 5u64.to_be_bytes().to_vec(),
            tid: u64::MAX
        }
    );
    assert_eq!(parse("get a"), Command::Get { key: key(b"a") });
    assert_eq!(
        parse("del a"),
        Command::Del {
            key: key(b"a"),
            tid: None
        }
    );
    assert_eq!(
        parse("del a 0"),
        Command::Del {
            key: key(b"a"),
            tid: Some(0)
        }
    );
    assert_eq!(
        parse("scan hex: 10"),
        Command::Scan {
            start: vec![],
            limit: 10
        }
    );
    assert_eq!(
        parse("rscan z 0"),
        Command::Rscan {
            start: key(b"z"),
            limit: 0
        }
    );
    assert_eq!(
        parse("range a u64:1 3"),
        Command::Range {
            lo: key(b"a"),
            hi: 1u64.to_be_bytes().to_vec(),
            limit: 3
        }
    );
    assert_eq!(parse("len"), Command::Len);
    assert_eq!(parse("mem"), Command::Mem);
    assert_eq!(parse("check"), Command::Check);
    assert_eq!(parse("help"), Command::Help);
    assert_eq!(parse("quit"), Command::Quit);
    assert_eq!(parse("exit"), Command::Quit);
}

#[test]
fn whitespace_around_and_between_tokens_is_ignored() {
    let put = Command::Put {
        key: key(b"k"),
        tid: 9,
    };
    for line in ["put k 9", "  put   k\t9  ", "\tput k 9\r", "put\tk\t\t9"] {
        assert_eq!(parse(line), put, "{line:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Parser: errors.

#[test]
fn unknown_commands() {
    for line in [
        "foo", "PUT a 1", "Get a", "puts a 1", "scan-a", "-", "\u{0}",
    ] {
        let name = line.split_whitespace().next().unwrap();
        assert_eq!(
            parse_err(line),
            ParseError::UnknownCommand(name.to_owned()),
            "{line:?}"
        );
    }
    assert_eq!(
        parse_err("frobnicate x").to_string(),
        "unknown command \"frobnicate\" (try help)"
    );
}

#[test]
fn wrong_arity_of_every_command() {
    let cases: &[(&str, &str)] = &[
        ("put", USAGE_PUT),
        ("put a", USAGE_PUT),
        ("put a 1 2", USAGE_PUT),
        ("get", USAGE_GET),
        ("get a b", USAGE_GET),
        ("del", USAGE_DEL),
        ("del a 1 2", USAGE_DEL),
        ("scan", USAGE_SCAN),
        ("scan a", USAGE_SCAN),
        ("scan a 1 2", USAGE_SCAN),
        ("rscan a", USAGE_RSCAN),
        ("rscan a 1 2", USAGE_RSCAN),
        ("range a b", USAGE_RANGE),
        ("range a b 1 2", USAGE_RANGE),
        ("len x", "len"),
        ("mem x", "mem"),
        ("check x", "check"),
        ("help me", "help"),
        ("quit now", "quit"),
        ("put a 1 # trailing comments are not supported", USAGE_PUT),
    ];
    for &(line, usage) in cases {
        assert_eq!(
            parse_err(line),
            ParseError::WrongArity { usage },
            "{line:?}"
        );
    }
    assert_eq!(
        parse_err("put a").to_string(),
        "wrong number of arguments (usage: put KEY TID)"
    );
}

#[test]
fn bad_numbers() {
    let cases: &[(&str, &str, &str)] = &[
        ("put a x", "tid", "x"),
        ("put a -1", "tid", "-1"),
        ("put a +1", "tid", "+1"),
        ("put a 1.5", "tid", "1.5"),
        ("put a 1_000", "tid", "1_000"),
        ("put a 0x10", "tid", "0x10"),
        ("put a ٣", "tid", "٣"),
        ("del a b", "tid", "b"),
        ("scan a x", "limit", "x"),
        ("scan a -1", "limit", "-1"),
        ("rscan a 1e3", "limit", "1e3"),
        ("range a b c", "limit", "c"),
        ("get u64:", "u64 key", "u64:"),
        ("get u64:abc", "u64 key", "u64:abc"),
        ("get u64:-1", "u64 key", "u64:-1"),
        ("get u64:+1", "u64 key", "u64:+1"),
        ("get u64:1a", "u64 key", "u64:1a"),
    ];
    for &(line, what, token) in cases {
        let err = parse_err(line);
        assert_eq!(
            err,
            ParseError::BadNumber {
                what,
                token: token.to_owned()
            },
            "{line:?}"
        );
    }
    assert_eq!(
        parse_err("put a x").to_string(),
        "bad tid \"x\": expected a decimal integer"
    );
}

#[test]
fn numbers_out_of_range() {
    let over = "18446744073709551616";
    let huge = "99999999999999999999999999999999";
    let cases = [
        (format!("put a {over}"), "tid", over.to_owned()),
        (format!("put a {huge}"), "tid", huge.to_owned()),
        (format!("get u64:{over}"), "u64 key", format!("u64:{over}")),
        (
            format!("put u64:{huge} 1"),
            "u64 key",
            format!("u64:{huge}"),
        ),
        (format!("scan a {huge}"), "limit", huge.to_owned()),
    ];
    for (line, what, token) in cases {
        match parse_err(&line) {
            ParseError::OutOfRange {
                what: got_what,
                token: got_token,
                ..
            } => {
                assert_eq!(
                    (got_what, got_token.as_str()),
                    (what, token.as_str()),
                    "{line}"
                );
            }
            other => panic!("{line}: {other:?}"),
        }
    }
    assert_eq!(
        parse_err(&format!("get u64:{over}")).to_string(),
        format!("u64 key \"u64:{over}\" is out of range (at most 18446744073709551615)")
    );
}

#[test]
fn bad_hex_keys() {
    for (token, bad) in [
        ("hex:zz", 'z'),
        ("hex:0g", 'g'),
        ("hex:0x00", 'x'),
        ("hex:abc-", '-'),
        ("hex:éé", 'é'),
    ] {
        assert_eq!(
            parse_err(&format!("get {token}")),
            ParseError::BadHexDigit {
                token: token.to_owned(),
                bad
            },
            "{token}"
        );
    }
    for token in ["hex:a", "hex:abc", "hex:00000"] {
        assert_eq!(
            parse_err(&format!("put {token} 1")),
            ParseError::OddHex {
                token: token.to_owned()
            },
            "{token}"
        );
    }
    assert_eq!(
        parse_err("get hex:abc").to_string(),
        "bad hex key \"hex:abc\": odd number of hex digits"
    );
    assert_eq!(
        parse_err("get hex:0g").to_string(),
        "bad hex key \"hex:0g\": 'g' is not a hex digit"
    );
}

#[test]
fn the_first_bad_argument_is_reported() {
    assert_eq!(
        parse_err("range hex:1 u64:x y"),
        ParseError::OddHex {
            token: "hex:1".to_owned()
        }
    );
    assert!(matches!(
        parse_err("put hex:zz 99999999999999999999999"),
        ParseError::BadHexDigit { .. }
    ));
    // Arity is checked before the arguments.
    assert!(matches!(
        parse_err("put hex:zz"),
        ParseError::WrongArity { .. }
    ));
}

#[test]
fn error_messages_quote_and_shorten_tokens() {
    let long = "y".repeat(1000);
    let msg = parse_err(&long).to_string();
    assert_eq!(
        msg,
        format!("unknown command \"{}\"... (try help)", "y".repeat(40))
    );
    let msg = parse_err("put a \u{7}").to_string();
    assert_eq!(msg, "bad tid \"\\u{7}\": expected a decimal integer");
}

#[test]
fn hex_output_is_lowercase() {
    let mut out = Vec::new();
    push_hex(&mut out, &[0x00, 0x0f, 0xa5, 0xff]);
    assert_eq!(out, b"000fa5ff");
    out.clear();
    push_hex(&mut out, &[]);
    assert!(out.is_empty());
}

// ---------------------------------------------------------------------------------------
// run_shell against a model index.

/// A simple, obviously correct index: a sorted set of (key, tid) pairs.
struct Model {
    unique: bool,
    max_key_len: usize,
    pairs: Mutex<BTreeSet<(Vec<u8>, u64)>>,
    corrupt: bool,
}

impl Model {
    fn new(unique: bool) -> Self {
        Self {
            unique,
            max_key_len: 4,
            pairs: Mutex::new(BTreeSet::new()),
            corrupt: false,
        }
    }

    fn check_len(&self, key: &[u8]) -> Result<(), elastree::Error> {
        if key.len() > self.max_key_len {
            return Err(elastree::Error::KeyTooLong {
                len: key.len(),
                max: self.max_key_len,
            });
        }
        Ok(())
    }

    fn tids(&self, key: &[u8]) -> Vec<u64> {
        let pairs = self.pairs.lock().unwrap();
        pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|&(_, tid)| tid)
            .collect()
    }
}

impl Index for Model {
    fn kind(&self) -> &'static str {
        IndexKind::BTree.name()
    }

    fn is_unique(&self) -> bool {
        self.unique
    }

    fn max_key_len(&self) -> usize {
        self.max_key_len
    }

    fn insert(&self, key: &[u8], tid: u64) -> Result<Option<u64>, elastree::Error> {
        self.check_len(key)?;
        let old = self.tids(key);
        let mut pairs = self.pairs.lock().unwrap();
        if self.unique {
            for &t in &old {
                pairs.remove(&(key.to_vec(), t));
            }
            pairs.insert((key.to_vec(), tid));
            Ok(old.first().copied())
        } else if pairs.insert((key.to_vec(), tid)) {
            Ok(None)
        } else {
            Ok(Some(tid))
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<u64>, elastree::Error> {
        self.check_len(key)?;
        Ok(self.tids(key).first().copied())
    }

    fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), elastree::Error> {
        self.check_len(key)?;
        out.extend(self.tids(key));
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> Result<Option<u64>, elastree::Error> {
        if !self.unique {
            return Err(elastree::Error::Unsupported {
                operation: "remove",
                reason: "non-unique",
            });
        }
        self.check_len(key)?;
        let old = self.tids(key).first().copied();
        if let Some(tid) = old {
            self.pairs.lock().unwrap().remove(&(key.to_vec(), tid));
        }
        Ok(old)
    }

    fn remove_pair(&self, key: &[u8], tid: u64) -> Result<bool, elastree::Error> {
        self.check_len(key)?;
        Ok(self.pairs.lock().unwrap().remove(&(key.to_vec(), tid)))
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, elastree::Error> {
        for bound in [lower, upper] {
            if let Bound::Included(key) | Bound::Excluded(key) = bound {
                self.check_len(key)?;
            }
        }
        if let (
            Bound::Included(lo) | Bound::Excluded(lo),
            Bound::Included(hi) | Bound::Excluded(hi),
        ) = (lower, upper)
        {
            assert!(lo <= hi, "the shell must not ask for an inverted range");
        }
        let pairs = self.pairs.lock().unwrap();
        // Spelled out: with the `bytes` crate in the build (through redis), `[u8]` has more
        // than one `PartialOrd` and `(lower, upper).contains(..)` no longer infers.
        let in_range = |(key, _): &&(Vec<u8>, u64)| {
            RangeBounds::<[u8]>::contains(&(lower, upper), key.as_slice())
        };
        let mut visited = 0;
        let mut emit = |(key, tid): &(Vec<u8>, u64)| {
            visit(key, *tid);
            visited += 1;
        };
        match direction {
            Direction::Ascending => pairs
                .iter()
                .filter(in_range)
                .take(limit)
                .for_each(&mut emit),
            Direction::Descending => pairs
                .iter()
                .rev()
                .filter(in_range)
                .take(limit)
                .for_each(&mut emit),
        }
        Ok(visited)
    }

    fn len(&self) -> usize {
        self.pairs.lock().unwrap().len()
    }

    fn memory(&self) -> MemoryUsage {
        MemoryUsage {
            inner: 100,
            leaves: 20,
            aux: 3,
        }
    }

    fn check(&self) -> Result<(), elastree::Error> {
        if self.corrupt {
            Err(elastree::Error::Corrupt("leaf 7 out of order".to_owned()))
        } else {
            Ok(())
        }
    }
}

fn session(index: &Model, input: &[u8], prompt: bool) -> String {
    let mut out = Vec::new();
    run_shell(index, input, &mut out, prompt).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn unique_session() {
    let index = Model::new(true);
    let input = b"put b 2\nput a 1\nput b 3\nget b\nget c\ndel b\ndel b\ndel a 1\nget a\nlen\n";
    assert_eq!(
        session(&index, input, false),
        "OK\nOK\nOK 2\n3\nNONE\n3\nNONE\n\
         ERR wrong number of arguments (usage: del KEY on a unique index)\n1\n1\n"
    );
}

#[test]
fn non_unique_session() {
    let index = Model::new(false);
    let input = b"put k 5\nput k 2\nput k 5\nget k\nget j\ndel k\ndel k 5\ndel k 5\nget k\nlen\n";
    assert_eq!(
        session(&index, input, false),
        "OK\nOK\nOK\n2 5\nNONE\n\
         ERR wrong number of arguments (usage: del KEY TID on a non-unique index)\n\
         5\nNONE\n2\n1\n"
    );
}

#[test]
fn scans_print_hex_keys_then_end() {
    let index = Model::new(false);
    let input = b"put hex: 1\nput a 2\nput a 3\nput b 4\nput c 5\n\
                  scan hex: 10\nscan a 2\nscan d 5\nscan a 0\n\
                  rscan b 10\nrscan hex: 10\n\
                  range a c 10\nrange a c 1\nrange c a 10\nrange b b 10\n";
    assert_eq!(
        session(&index, input, false),
        "OK\nOK\nOK\nOK\nOK\n\
         \x201\n61 2\n61 3\n62 4\n63 5\nEND\n\
         61 2\n61 3\nEND\n\
         END\n\
         END\n\
         62 4\n61 3\n61 2\n 1\nEND\n\
         \x201\nEND\n\
         61 2\n61 3\n62 4\nEND\n\
         61 2\nEND\n\
         END\n\
         END\n"
    );
}

#[test]
fn len_mem_check_and_index_errors() {
    let mut index = Model::new(true);
    let input = b"len\nmem\ncheck\nput abcde 1\nget abcde\nscan abcde 1\nput abcd 1\nlen\n";
    assert_eq!(
        session(&index, input, false),
        "0\n123 inner=100 leaves=20 aux=3\nOK\n\
         ERR key of 5 bytes exceeds the maximum key length of 4 bytes\n\
         ERR key of 5 bytes exceeds the maximum key length of 4 bytes\n\
         ERR key of 5 bytes exceeds the maximum key length of 4 bytes\n\
         OK\n1\n"
    );
    index.corrupt = true;
    assert_eq!(
        session(&index, b"check\n", false),
        "ERR invariant violated: leaf 7 out of order\n"
    );
}

#[test]
fn line_endings_blank_lines_comments_and_invalid_utf8() {
    let index = Model::new(true);
    let input = b"put a 1\r\n\r\n   \n# comment\n\tget a\r\nget \xff\xfe\nbogus\nget a";
    assert_eq!(
        session(&index, input, false),
        "OK\n1\nERR line is not valid UTF-8\nERR unknown command \"bogus\" (try help)\n1\n"
    );
}

#[test]
fn help_and_quit() {
    let index = Model::new(true);
    assert_eq!(
        session(&index, b"help\nput a 1\nquit\nput b 2\n", false),
        format!("{HELP}OK\n")
    );
    assert_eq!(index.len(), 1);
    assert_eq!(session(&index, b"exit", false), "");
}

#[test]
fn prompt_only_when_asked() {
    let index = Model::new(true);
    assert_eq!(session(&index, b"put a 1\n\nlen\n", false), "OK\n1\n");
    assert_eq!(
        session(&index, b"put a 2\n\nlen\n", true),
        "elastree> OK 1\nelastree> elastree> 1\nelastree> \n"
    );
}

#[test]
fn empty_input_prints_nothing() {
    let index = Model::new(true);
    assert_eq!(session(&index, b"", false), "");
}

/// A writer that fails once it has taken `room` bytes.
struct Full {
    room: usize,
}

impl io::Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "reader gone"));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn output_errors_end_the_session() {
    let index = Model::new(true);
    let input = "len\n".repeat(100_000);
    let err = run_shell(&index, input.as_bytes(), Full { room: 10 }, false).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    let err = run_shell(&index, input.as_bytes(), Full { room: 10 }, true).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
}
