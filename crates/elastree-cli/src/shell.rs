//! The `elastree shell` line protocol: one command per input line, one reply per command.
//!
//! [`parse_command`] turns a line into a [`Command`] (pure, no index involved) and
//! [`run_shell`] reads lines, runs them against an [`Index`] and writes the replies.
//!
//! # Keys
//!
//! A key token is one of
//!
//! * `u64:<decimal>`: the number as 8 big-endian bytes (so numeric order is key order);
//! * `hex:<hex digits>`: the raw bytes, an even number of hex digits in either case
//!   (`hex:` alone is the empty key);
//! * any other token: its UTF-8 bytes. The prefixes are case-sensitive, so `HEX:ab` is the
//!   five-byte key `HEX:ab`; to store a key that starts with `u64:` or `hex:` literally, give
//!   it in hex.
//!
//! Tokens are separated by whitespace; a `TID` is a decimal `u64` and a limit `N` a decimal
//! `usize` (digits only: no sign, no `_`).
//!
//! # Commands and replies
//!
//! | command | reply |
//! |---|---|
//! | `put KEY TID` | `OK`; a unique index that replaced a tid says `OK <old tid>` |
//! | `get KEY` | the tid or `NONE`; a non-unique index prints all tids of the key ascending, space-separated |
//! | `del KEY` (unique index) | the removed tid or `NONE` |
//! | `del KEY TID` (non-unique index) | `TID` if the pair was removed, else `NONE` |
//! | `scan KEY N` | up to `N` lines `<key hex> <tid>` for keys `>= KEY` ascending, then `END` |
//! | `rscan KEY N` | the same for keys `<= KEY`, descending |
//! | `range LO HI N` | the same for `LO <= key < HI`, ascending (nothing when `LO >= HI`) |
//! | `len` | the number of pairs |
//! | `mem` | `<total bytes> inner=<n> leaves=<n> aux=<n>` |
//! | `check` | `OK` or `ERR <what>` |
//! | `help` | the command list |
//! | `quit` / `exit` | nothing; ends the session like end of input |
//!
//! Scans print keys in lowercase hex, one line per (key, tid) pair (a non-unique key with
//! three tids gives three lines); the empty key prints as the empty string, so its line is
//! `" <tid>"`. Blank lines and lines whose first non-blank character is `#` produce no
//! output. Anything malformed, and any error the index returns, produces one line
//! `ERR <message>` and the session goes on; a line that is not valid UTF-8 is such an error.
//! Lines may end in `\n` or `\r\n`; the last line needs no terminator.
//!
//! # Kinds with indirect keys
//!
//! The `elastic` and `seqtree` kinds store tids, not keys, in their compact leaves, and load
//! a key from the table when they need it. In the shell the table is a [`ShellTable`]: `put
//! KEY TID` records that tuple `TID` has key `KEY`, and removing the pair forgets it. A tuple
//! has one key, so `put` of a tid that is still indexed under another key is refused with
//! `ERR`.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::ops::Bound;
use std::sync::RwLock;

use elastree::table::KeySource;
use elastree::{Direction, Index};

/// The table of a shell session whose index loads keys by tid (`elastic`, `seqtree`): the
/// key of every tid currently indexed.
#[derive(Debug, Default)]
pub struct ShellTable {
    keys: RwLock<HashMap<u64, Vec<u8>>>,
}

impl ShellTable {
    /// Records that tuple `tid` has key `key`; refuses a tid indexed under another key.
    /// Returns whether the tid is new (so a failed insert can forget it again).
    fn claim(&self, tid: u64, key: &[u8]) -> Result<bool, CommandError> {
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        match keys.get(&tid) {
            Some(existing) if existing.as_slice() == key => Ok(false),
            Some(existing) => {
                let mut hex = Vec::new();
                push_hex(&mut hex, existing);
                Err(CommandError::Conflict(format!(
                    "tid {tid} is the tuple of key hex:{}; a tuple has one key (delete that \
                     pair first)",
                    String::from_utf8_lossy(&hex)
                )))
            }
            None => {
                keys.insert(tid, key.to_vec());
                Ok(true)
            }
        }
    }

    /// Records the tuples of pairs loaded before the session (`--load`); refuses a tid
    /// given two keys.
    pub fn preload(&self, pairs: &[(Vec<u8>, u64)]) -> Result<(), String> {
        for (key, tid) in pairs {
            if let Err(CommandError::Conflict(msg)) = self.claim(*tid, key) {
                return Err(msg);
            }
        }
        Ok(())
    }

    /// Forgets tuple `tid` (its pair left the index).
    fn release(&self, tid: u64) {
        self.keys
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&tid);
    }
}

impl KeySource for ShellTable {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        out.clear();
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        match keys.get(&tid) {
            Some(key) => {
                out.extend_from_slice(key);
                true
            }
            None => false,
        }
    }
}

/// The prompt printed before each line when the input is interactive.
pub const PROMPT: &str = "elastree> ";

/// The reply to `help`.
pub const HELP: &str = "\
commands (KEY is u64:<decimal> = 8 bytes big-endian, hex:<hex digits> = raw bytes,
          or any other token = its UTF-8 bytes; TID and N are decimal):
  put KEY TID      insert (unique index: or replace); prints OK, or OK <old tid> on a replace
  get KEY          prints the tid, or NONE (non-unique index: all tids ascending)
  del KEY          unique index: remove the key; prints the removed tid or NONE
  del KEY TID      non-unique index: remove the pair; prints TID or NONE
  scan KEY N       up to N pairs with key >= KEY, ascending, as <key hex> <tid>; then END
  rscan KEY N      up to N pairs with key <= KEY, descending; then END
  range LO HI N    up to N pairs with LO <= key < HI, ascending; then END
  len              number of (key, tid) pairs
  mem              bytes held: <total> inner=<n> leaves=<n> aux=<n>
  check            verify the structure: OK or ERR <what>
  help             this list
  quit, exit       end the session (so does end of input)
scans print keys in lowercase hex (the empty key as nothing, so its line is \" <tid>\");
blank lines and lines starting with # are ignored; errors print ERR <message>.
";

/// One parsed shell line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A blank line or a comment: no output.
    Empty,
    /// `put KEY TID`.
    Put {
        /// The key bytes.
        key: Vec<u8>,
        /// The tuple id.
        tid: u64,
    },
    /// `get KEY`.
    Get {
        /// The key bytes.
        key: Vec<u8>,
    },
    /// `del KEY` (unique index) or `del KEY TID` (non-unique index). The parser accepts both
    /// forms; [`run_shell`] refuses the one that does not fit the index.
    Del {
        /// The key bytes.
        key: Vec<u8>,
        /// The tid of the pair to remove (non-unique form).
        tid: Option<u64>,
    },
    /// `scan KEY N`: ascending from `KEY` inclusive.
    Scan {
        /// The smallest key visited.
        start: Vec<u8>,
        /// The most pairs printed.
        limit: usize,
    },
    /// `rscan KEY N`: descending from `KEY` inclusive.
    Rscan {
        /// The largest key visited.
        start: Vec<u8>,
        /// The most pairs printed.
        limit: usize,
    },
    /// `range LO HI N`: ascending over `LO <= key < HI`.
    Range {
        /// Inclusive lower bound.
        lo: Vec<u8>,
        /// Exclusive upper bound.
        hi: Vec<u8>,
        /// The most pairs printed.
        limit: usize,
    },
    /// `len`.
    Len,
    /// `mem`.
    Mem,
    /// `check`.
    Check,
    /// `help`.
    Help,
    /// `quit` or `exit`.
    Quit,
}

/// Why a line could not be parsed (or, for `del`, does not fit the index's mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The line is not valid UTF-8.
    InvalidUtf8,
    /// The first token is not a command.
    UnknownCommand(String),
    /// The command got the wrong number of arguments.
    WrongArity {
        /// How the command is used.
        usage: &'static str,
    },
    /// A number is not a plain decimal integer.
    BadNumber {
        /// What the number is (`tid`, `limit`, `u64 key`).
        what: &'static str,
        /// The offending token.
        token: String,
    },
    /// A decimal number does not fit its type.
    OutOfRange {
        /// What the number is.
        what: &'static str,
        /// The offending token.
        token: String,
        /// The largest value allowed.
        max: u64,
    },
    /// A `hex:` key has an odd number of digits.
    OddHex {
        /// The offending token.
        token: String,
    },
    /// A `hex:` key contains a character that is not a hex digit.
    BadHexDigit {
        /// The offending token.
        token: String,
        /// The first bad character.
        bad: char,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::InvalidUtf8 => f.write_str("line is not valid UTF-8"),
            ParseError::UnknownCommand(token) => {
                write!(f, "unknown command {} (try help)", Shown(token))
            }
            ParseError::WrongArity { usage } => {
                write!(f, "wrong number of arguments (usage: {usage})")
            }
            ParseError::BadNumber { what, token } => {
                write!(f, "bad {what} {}: expected a decimal integer", Shown(token))
            }
            ParseError::OutOfRange { what, token, max } => {
                write!(f, "{what} {} is out of range (at most {max})", Shown(token))
            }
            ParseError::OddHex { token } => {
                write!(f, "bad hex key {}: odd number of hex digits", Shown(token))
            }
            ParseError::BadHexDigit { token, bad } => {
                write!(
                    f,
                    "bad hex key {}: {bad:?} is not a hex digit",
                    Shown(token)
                )
            }
        }
    }
}

impl std::error::Error for ParseError {}

/// Displays a user token quoted and escaped, cut to a readable length.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX_CHARS: usize = 40;
        match self.0.char_indices().nth(MAX_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(f, "{:?}...", &self.0[..cut]),
        }
    }
}

const USAGE_PUT: &str = "put KEY TID";
const USAGE_GET: &str = "get KEY";
const USAGE_DEL: &str = "del KEY (unique index) or del KEY TID (non-unique index)";
const USAGE_DEL_UNIQUE: &str = "del KEY on a unique index";
const USAGE_DEL_NON_UNIQUE: &str = "del KEY TID on a non-unique index";
const USAGE_SCAN: &str = "scan KEY N";
const USAGE_RSCAN: &str = "rscan KEY N";
const USAGE_RANGE: &str = "range LO HI N";

/// Parses one line (without its line terminator) into a [`Command`].
///
/// Pure: it does not know the index, so it accepts both forms of `del`.
pub fn parse_command(line: &str) -> Result<Command, ParseError> {
    let mut tokens = line.split_whitespace();
    let Some(name) = tokens.next() else {
        return Ok(Command::Empty);
    };
    if name.starts_with('#') {
        return Ok(Command::Empty);
    }
    let args: Vec<&str> = tokens.collect();
    let arity = |n: usize, usage: &'static str| {
        if args.len() == n {
            Ok(())
        } else {
            Err(ParseError::WrongArity { usage })
        }
    };
    let command = match name {
        "put" => {
            arity(2, USAGE_PUT)?;
            Command::Put {
                key: parse_key(args[0])?,
                tid: parse_tid(args[1])?,
            }
        }
        "get" => {
            arity(1, USAGE_GET)?;
            Command::Get {
                key: parse_key(args[0])?,
            }
        }
        "del" => match args.len() {
            1 => Command::Del {
                key: parse_key(args[0])?,
                tid: None,
            },
            2 => Command::Del {
                key: parse_key(args[0])?,
                tid: Some(parse_tid(args[1])?),
            },
            _ => return Err(ParseError::WrongArity { usage: USAGE_DEL }),
        },
        "scan" => {
            arity(2, USAGE_SCAN)?;
            Command::Scan {
                start: parse_key(args[0])?,
                limit: parse_limit(args[1])?,
            }
        }
        "rscan" => {
            arity(2, USAGE_RSCAN)?;
            Command::Rscan {
                start: parse_key(args[0])?,
                limit: parse_limit(args[1])?,
            }
        }
        "range" => {
            arity(3, USAGE_RANGE)?;
            Command::Range {
                lo: parse_key(args[0])?,
                hi: parse_key(args[1])?,
                limit: parse_limit(args[2])?,
            }
        }
        "len" => {
            arity(0, "len")?;
            Command::Len
        }
        "mem" => {
            arity(0, "mem")?;
            Command::Mem
        }
        "check" => {
            arity(0, "check")?;
            Command::Check
        }
        "help" => {
            arity(0, "help")?;
            Command::Help
        }
        "quit" | "exit" => {
            arity(0, "quit")?;
            Command::Quit
        }
        other => return Err(ParseError::UnknownCommand(other.to_owned())),
    };
    Ok(command)
}

/// Parses a key token: `u64:<decimal>`, `hex:<hex digits>` or plain UTF-8 bytes.
pub fn parse_key(token: &str) -> Result<Vec<u8>, ParseError> {
    if let Some(digits) = token.strip_prefix("u64:") {
        let n = parse_decimal(digits, token, "u64 key", u64::MAX)?;
        Ok(n.to_be_bytes().to_vec())
    } else if let Some(digits) = token.strip_prefix("hex:") {
        decode_hex(digits, token)
    } else {
        Ok(token.as_bytes().to_vec())
    }
}

/// Parses the pairs of a `--load` file: one `KEY TID` per line (keys as in `put`; blank
/// lines and lines starting with `#` skipped), returned sorted by (key, tid) without
/// repeats. A unique index takes one tid per key. Errors name the line.
pub fn parse_pairs(text: &str, unique: bool) -> Result<Vec<(Vec<u8>, u64)>, String> {
    let mut pairs = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |e: &dyn fmt::Display| format!("line {}: {e}", number + 1);
        let mut tokens = line.split_whitespace();
        let (Some(key), Some(tid), None) = (tokens.next(), tokens.next(), tokens.next()) else {
            return Err(at(&"expected KEY TID"));
        };
        let key = parse_key(key).map_err(|e| at(&e))?;
        let tid = parse_tid(tid).map_err(|e| at(&e))?;
        pairs.push((key, tid, number + 1));
    }
    pairs.sort_unstable();
    pairs.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    if unique {
        if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(format!(
                "lines {} and {}: a unique index maps a key to one tid",
                w[0].2.min(w[1].2),
                w[0].2.max(w[1].2)
            ));
        }
    }
    Ok(pairs.into_iter().map(|(k, t, _)| (k, t)).collect())
}

fn parse_tid(token: &str) -> Result<u64, ParseError> {
    parse_decimal(token, token, "tid", u64::MAX)
}

fn parse_limit(token: &str) -> Result<usize, ParseError> {
    let max = u64::try_from(usize::MAX).unwrap_or(u64::MAX);
    let n = parse_decimal(token, token, "limit", max)?;
    // `parse_decimal` enforced `n <= usize::MAX`.
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Parses `digits` (all ASCII digits, at least one) as a number no larger than `max`;
/// errors name `what` and show `token`.
fn parse_decimal(
    digits: &str,
    token: &str,
    what: &'static str,
    max: u64,
) -> Result<u64, ParseError> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::BadNumber {
            what,
            token: token.to_owned(),
        });
    }
    match digits.parse::<u64>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(ParseError::OutOfRange {
            what,
            token: token.to_owned(),
            max,
        }),
    }
}

fn decode_hex(digits: &str, token: &str) -> Result<Vec<u8>, ParseError> {
    if let Some(bad) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(ParseError::BadHexDigit {
            token: token.to_owned(),
            bad,
        });
    }
    if !digits.len().is_multiple_of(2) {
        return Err(ParseError::OddHex {
            token: token.to_owned(),
        });
    }
    // Every character is an ASCII hex digit, so bytes and characters coincide.
    Ok(digits
        .as_bytes()
        .chunks_exact(2)
        .map(|pair| (hex_value(pair[0]) << 4) | hex_value(pair[1]))
        .collect())
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0,
    }
}

/// Appends `bytes` to `out` as lowercase hex.
pub fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0x0f)]);
    }
}

/// Runs the shell: reads lines from `input` until end of input (or `quit`), runs each against
/// `index` and writes the replies to `output`.
///
/// With `prompt` (an interactive session) it prints [`PROMPT`] before each line. Replies are
/// buffered and flushed whenever the shell has read all the input that has arrived so far
/// (before it would wait for more), so piping millions of lines stays fast while a program
/// that writes one line and waits for the reply gets it at once. Malformed lines and index errors are replies (`ERR ...`), not errors:
/// the only errors returned are I/O errors of `input` or `output` (the output is flushed
/// before returning either way).
pub fn run_shell(
    index: &dyn Index,
    input: impl Read,
    output: impl Write,
    prompt: bool,
) -> io::Result<()> {
    run_shell_with_table(index, None, input, output, prompt)
}

/// [`run_shell`] for an index that loads keys from `table` (the kinds with indirect keys):
/// `put` and `del` keep the table in step with the index.
pub fn run_shell_with_table(
    index: &dyn Index,
    table: Option<&ShellTable>,
    input: impl Read,
    output: impl Write,
    prompt: bool,
) -> io::Result<()> {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    let mut session = Session::new(index);
    session.table = table;
    let result = session.run(&mut input, &mut out, prompt);
    let flushed = out.flush();
    result.and(flushed)
}

/// Whether the session goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// The scratch buffer capacity kept between commands.
const SCRATCH_KEEP: usize = 1 << 20;

/// The state of one shell session: the index and reusable buffers.
struct Session<'a> {
    index: &'a dyn Index,
    /// The table, for kinds with indirect keys.
    table: Option<&'a ShellTable>,
    unique: bool,
    tids: Vec<u64>,
    scratch: Vec<u8>,
}

impl<'a> Session<'a> {
    fn new(index: &'a dyn Index) -> Self {
        Self {
            index,
            table: None,
            unique: index.is_unique(),
            tids: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn run<R: Read>(
        &mut self,
        input: &mut BufReader<R>,
        out: &mut impl Write,
        prompt: bool,
    ) -> io::Result<()> {
        let mut line = Vec::new();
        loop {
            if prompt {
                out.write_all(PROMPT.as_bytes())?;
            }
            if prompt || input.buffer().is_empty() {
                // The next read may wait for input: let the other side see our replies first.
                out.flush()?;
            }
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                if prompt {
                    // Leave the terminal's next prompt on a line of its own.
                    out.write_all(b"\n")?;
                }
                return Ok(());
            }
            if line.last() == Some(&b'\n') {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
            }
            let flow = match std::str::from_utf8(&line) {
                Ok(text) => match parse_command(text) {
                    Ok(command) => self.execute(command, out)?,
                    Err(err) => {
                        writeln!(out, "ERR {err}")?;
                        Flow::Continue
                    }
                },
                Err(_) => {
                    writeln!(out, "ERR {}", ParseError::InvalidUtf8)?;
                    Flow::Continue
                }
            };
            if prompt {
                out.flush()?;
            }
            if flow == Flow::Stop {
                return Ok(());
            }
        }
    }

    /// Runs one command and writes its reply.
    fn execute(&mut self, command: Command, out: &mut impl Write) -> io::Result<Flow> {
        let index = self.index;
        let reply: Result<(), CommandError> = match command {
            Command::Empty => Ok(()),
            Command::Quit => return Ok(Flow::Stop),
            Command::Help => {
                out.write_all(HELP.as_bytes())?;
                Ok(())
            }
            Command::Put { key, tid } => self.put(&key, tid, out),
            Command::Get { key } => self.get(&key, out),
            Command::Del { key, tid } => match (self.unique, tid) {
                (true, None) => match index.remove(&key) {
                    Ok(removed) => {
                        self.forget(removed);
                        write_opt(out, removed).map_err(CommandError::from)
                    }
                    Err(err) => Err(err.into()),
                },
                (false, Some(tid)) => match index.remove_pair(&key, tid) {
                    Ok(removed) => {
                        self.forget(removed.then_some(tid));
                        write_opt(out, removed.then_some(tid)).map_err(CommandError::from)
                    }
                    Err(err) => Err(err.into()),
                },
                (true, Some(_)) => Err(ParseError::WrongArity {
                    usage: USAGE_DEL_UNIQUE,
                }
                .into()),
                (false, None) => Err(ParseError::WrongArity {
                    usage: USAGE_DEL_NON_UNIQUE,
                }
                .into()),
            },
            Command::Scan { start, limit } => self.scan(
                Bound::Included(&start),
                Bound::Unbounded,
                Direction::Ascending,
                limit,
                out,
            ),
            Command::Rscan { start, limit } => self.scan(
                Bound::Unbounded,
                Bound::Included(&start),
                Direction::Descending,
                limit,
                out,
            ),
            Command::Range { lo, hi, limit } => {
                // An empty (or inverted) range visits nothing; do not ask the index about it.
                let limit = if lo < hi { limit } else { 0 };
                self.scan(
                    Bound::Included(&lo),
                    Bound::Excluded(&hi),
                    Direction::Ascending,
                    limit,
                    out,
                )
            }
            Command::Len => {
                writeln!(out, "{}", index.len())?;
                Ok(())
            }
            Command::Mem => {
                let mem = index.memory();
                writeln!(
                    out,
                    "{} inner={} leaves={} aux={}",
                    mem.total(),
                    mem.inner,
                    mem.leaves,
                    mem.aux
                )?;
                Ok(())
            }
            Command::Check => match index.check() {
                Ok(()) => {
                    writeln!(out, "OK")?;
                    Ok(())
                }
                Err(err) => Err(err.into()),
            },
        };
        match reply {
            Ok(()) => {}
            Err(CommandError::Io(err)) => return Err(err),
            Err(CommandError::Parse(err)) => writeln!(out, "ERR {err}")?,
            Err(CommandError::Index(err)) => writeln!(out, "ERR {err}")?,
            Err(CommandError::Conflict(what)) => writeln!(out, "ERR {what}")?,
        }
        Ok(Flow::Continue)
    }

    /// `put`: records the tuple in the table (if there is one), then inserts.
    fn put(&mut self, key: &[u8], tid: u64, out: &mut impl Write) -> Result<(), CommandError> {
        let claimed = match self.table {
            Some(table) => table.claim(tid, key)?,
            None => false,
        };
        match self.index.insert(key, tid) {
            Ok(Some(old)) if self.unique => {
                if old != tid {
                    self.forget(Some(old));
                }
                writeln!(out, "OK {old}")?;
                Ok(())
            }
            Ok(_) => {
                writeln!(out, "OK")?;
                Ok(())
            }
            Err(err) => {
                if claimed {
                    self.forget(Some(tid));
                }
                Err(err.into())
            }
        }
    }

    /// Forgets a tuple that left the index.
    fn forget(&self, tid: Option<u64>) {
        if let (Some(table), Some(tid)) = (self.table, tid) {
            table.release(tid);
        }
    }

    fn get(&mut self, key: &[u8], out: &mut impl Write) -> Result<(), CommandError> {
        if self.unique {
            let tid = self.index.get(key)?;
            write_opt(out, tid)?;
            return Ok(());
        }
        self.tids.clear();
        self.index.get_all(key, &mut self.tids)?;
        if self.tids.is_empty() {
            out.write_all(b"NONE\n")?;
            return Ok(());
        }
        self.scratch.clear();
        for (i, tid) in self.tids.iter().enumerate() {
            if i > 0 {
                self.scratch.push(b' ');
            }
            // Writing to a Vec cannot fail.
            let _ = write!(self.scratch, "{tid}");
        }
        self.scratch.push(b'\n');
        out.write_all(&self.scratch)?;
        Ok(())
    }

    /// Runs a scan into the scratch buffer, then writes all its lines and `END`; on an index
    /// error writes only the `ERR` line.
    fn scan(
        &mut self,
        lower: Bound<&Vec<u8>>,
        upper: Bound<&Vec<u8>>,
        direction: Direction,
        limit: usize,
        out: &mut impl Write,
    ) -> Result<(), CommandError> {
        let buf = &mut self.scratch;
        buf.clear();
        if limit > 0 {
            let mut visit = |key: &[u8], tid: u64| {
                push_hex(buf, key);
                // Writing to a Vec cannot fail.
                let _ = writeln!(buf, " {tid}");
            };
            self.index.scan(
                lower.map(Vec::as_slice),
                upper.map(Vec::as_slice),
                direction,
                limit,
                &mut visit,
            )?;
        }
        buf.extend_from_slice(b"END\n");
        out.write_all(buf)?;
        // Do not keep the memory of one huge scan for the rest of the session.
        if buf.capacity() > SCRATCH_KEEP {
            buf.clear();
            buf.shrink_to(SCRATCH_KEEP);
        }
        Ok(())
    }
}

fn write_opt(out: &mut impl Write, tid: Option<u64>) -> io::Result<()> {
    match tid {
        Some(tid) => writeln!(out, "{tid}"),
        None => out.write_all(b"NONE\n"),
    }
}

/// What can go wrong while running one command.
enum CommandError {
    /// Writing the reply failed: ends the session.
    Io(io::Error),
    /// The command does not fit the index (a reply).
    Parse(ParseError),
    /// The index refused the operation (a reply).
    Index(elastree::Error),
    /// The command contradicts the table (a reply).
    Conflict(String),
}

impl From<io::Error> for CommandError {
    fn from(err: io::Error) -> Self {
        CommandError::Io(err)
    }
}

impl From<ParseError> for CommandError {
    fn from(err: ParseError) -> Self {
        CommandError::Parse(err)
    }
}

impl From<elastree::Error> for CommandError {
    fn from(err: elastree::Error) -> Self {
        CommandError::Index(err)
    }
}

#[cfg(test)]
mod tests;
