//! Key sets, generated deterministically from a seed.
//!
//! * `rand64`: distinct pseudo-random 64-bit integers in random order;
//! * `mono64`: strictly increasing 64-bit integers with small random gaps, in increasing order
//!   (time-series style ingestion);
//! * `rand128`: distinct uniform random 16-byte strings in random order;
//! * `email`: realistic, distinct e-mail addresses (about 30 bytes on average) with skewed
//!   name and domain frequencies, in random order;
//! * `docterm`: distinct `<field path>/<term>` strings (about 32 bytes on average) as a JSON
//!   document index holds them, paths and terms drawn from skewed vocabularies, in random order;
//! * `url`: distinct web addresses (about 60 bytes on average): a skewed mix of sites,
//!   subdomains and sections, then path words, ids and slugs, sometimes a file ending and a
//!   query, in random order;
//! * `words`: the words of a real dictionary, `/usr/share/dict/words` (Debian's `wamerican`,
//!   about 100,000 words), then two-word phrases past its size, in random order; a machine
//!   without the file cannot generate it and says so ([`KeySetKind::available`]);
//! * `prefix28`: 28-byte keys, an 8-byte prefix shared by runs of 1,000 consecutive keys (in load
//!   order and in key order) and a 20-byte random suffix;
//! * `sha1`: 20-byte hash values of a counter (a 160-bit mix, not the SHA-1 function: the
//!   statistics are the same and nothing needs the real digest), in random order;
//! * `tsensor`: 8-byte time-series keys, a 6-byte big-endian millisecond timestamp and a 2-byte
//!   sensor id below 1,024, loaded in time order except for a configurable fraction of delayed
//!   readings (`tsensor:0.2`; default 5%) that arrive 16 to 16,384 readings late;
//! * `objlog`: 16-byte keys of an object-store access log, an 8-byte big-endian microsecond
//!   timestamp and an 8-byte object id (Zipf-popular objects), loaded in time order, with a
//!   daily volume that stays within ±30% of the mean on most days and reaches 2-3.5x on a few.
//!
//! 8-byte key sets are held as `Vec<u64>`; an index that works on bytes sees the big-endian
//! encoding ([`u64::to_be_bytes`]), whose byte order equals the numeric order, so every index
//! scans the same sequence. Other fixed-length key sets are held in one flat byte buffer
//! ([`FixedKeys`], no per-key overhead); variable-length ones in one flat byte buffer plus
//! offsets ([`VarKeys`]), which costs a few bytes per key beyond the key bytes themselves.
//!
//! Widths ([`KeyWidth`]): 8-byte sets are [`KeyWidth::Fixed8`] (peers with `u64` keys,
//! elastree with `KeyLen::Fixed(8)`); 16-byte sets are [`KeyWidth::Fixed16`] (peers with
//! `Vec<u8>` keys, elastree with `KeyLen::Fixed(16)`, its integer-compared 16-byte layout); the
//! 20- and 28-byte sets and the variable-length ones are [`KeyWidth::Variable`] (peers with
//! `Vec<u8>` keys, elastree with `KeyLen::Variable`: elastree has dedicated layouts only for 8
//! and 16 bytes, so `KeyLen::Fixed(20)` would only add a length check).

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

mod numeric;
mod series;
mod strings;
mod tables;
pub mod web;

pub use numeric::PREFIX28_GROUP;
use numeric::{mono64, prefix28, rand128, rand64, sha1, PREFIX28_LEN, SHA1_LEN};
use series::{objlog, tsensor};
pub use series::{OBJLOG_DAY_US, TSENSOR_SENSORS};
use strings::{docterm, email};

/// One key as the benchmark hands it to an index: an 8-byte integer key or a byte string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key<'a> {
    /// An 8-byte key, as an integer; its bytes are the big-endian encoding.
    U64(u64),
    /// A byte-string key (fixed or variable length).
    Bytes(&'a [u8]),
}

impl<'a> Key<'a> {
    /// The key's bytes in index order (big-endian for integer keys).
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            Key::U64(v) => v.to_be_bytes().to_vec(),
            Key::Bytes(b) => b.to_vec(),
        }
    }

    /// Calls `f` with the key's bytes in index order (big-endian for integer keys), without
    /// allocating.
    #[inline]
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Key::U64(v) => f(&v.to_be_bytes()),
            Key::Bytes(b) => f(b),
        }
    }

    /// The key of a key set of `width` whose bytes in index order are `bytes`: the inverse of
    /// [`Key::to_bytes`]. Panics if `width` is [`KeyWidth::Fixed8`] and `bytes` is not 8 bytes
    /// long.
    #[inline]
    pub fn from_bytes(width: KeyWidth, bytes: &'a [u8]) -> Self {
        match width {
            KeyWidth::Fixed8 => Key::U64(u64::from_be_bytes(
                bytes.try_into().expect("an 8-byte key is 8 bytes long"),
            )),
            KeyWidth::Fixed16 | KeyWidth::Variable => Key::Bytes(bytes),
        }
    }
}

/// How the keys of a key set are shaped, which decides how an index is built for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyWidth {
    /// Every key is 8 bytes (an integer, big-endian encoded for byte-keyed indexes).
    Fixed8,
    /// Every key is a 16-byte string ([`Key::Bytes`]).
    Fixed16,
    /// Keys are byte strings of other or varying lengths ([`Key::Bytes`]).
    Variable,
}

/// `tsensor`'s default fraction of delayed keys, in parts per million: 5%.
pub const TSENSOR_DEFAULT_DELAYED_PPM: u32 = 50_000;

/// The key sets the benchmark can generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySetKind {
    /// Uniformly spread, distinct 64-bit integers, loaded in random order.
    Rand64,
    /// Strictly increasing 64-bit integers, loaded in increasing order.
    Mono64,
    /// Uniformly random, distinct 16-byte strings, loaded in random order.
    Rand128,
    /// Realistic e-mail addresses, variable length, loaded in random order.
    Email,
    /// JSON document terms `<field path>/<term>`, variable length, loaded in random order.
    DocTerm,
    /// Web addresses (scheme, host, path, sometimes a query), about 60 bytes, loaded in
    /// random order.
    Url,
    /// The words of a real dictionary (`/usr/share/dict/words`, Debian's `wamerican`), then
    /// two-word phrases past its size, loaded in random order.
    Words,
    /// 28-byte keys: 8-byte prefixes shared by 1,000 consecutive keys, 20-byte suffixes.
    Prefix28,
    /// 20-byte hash values, loaded in random order.
    Sha1,
    /// 8-byte (6-byte timestamp, 2-byte sensor id) keys, mostly in time order.
    TSensor {
        /// The fraction of delayed (out-of-order) keys, in parts per million (`50_000` = 5%).
        delayed_ppm: u32,
    },
    /// 16-byte (8-byte timestamp, 8-byte object id) access-log keys, loaded in time order.
    ObjLog,
}

impl KeySetKind {
    /// `rand64`, `mono64` and `email`: the key sets of the `btree-baseline` experiment and
    /// the smoke tests (the other sets have their own tests in `tests/keys.rs`).
    pub const BASELINE: &'static [KeySetKind] =
        &[KeySetKind::Rand64, KeySetKind::Mono64, KeySetKind::Email];

    /// Every key set, in the order the CLI lists them (`tsensor` with its default 5%). Every
    /// one parses from its name ([`FromStr`]).
    pub const ALL: &'static [KeySetKind] = &[
        KeySetKind::Rand64,
        KeySetKind::Mono64,
        KeySetKind::Rand128,
        KeySetKind::Email,
        KeySetKind::DocTerm,
        KeySetKind::Url,
        KeySetKind::Words,
        KeySetKind::Prefix28,
        KeySetKind::Sha1,
        KeySetKind::TSensor {
            delayed_ppm: TSENSOR_DEFAULT_DELAYED_PPM,
        },
        KeySetKind::ObjLog,
    ];

    /// `tsensor` with `fraction` (in `[0, 1)`) of its keys delayed.
    pub fn tsensor(fraction: f64) -> Result<Self, String> {
        if !(0.0..1.0).contains(&fraction) {
            return Err(format!(
                "tsensor's delayed fraction must be in [0, 1), got {fraction}"
            ));
        }
        Ok(KeySetKind::TSensor {
            delayed_ppm: (fraction * 1e6).round() as u32,
        })
    }

    /// Whether the key set is a stream of readings in arrival order (`tsensor`, `objlog`):
    /// loads on several threads take consecutive batches of it in turn, as ingest workers
    /// consuming one queue do, instead of one contiguous part each.
    pub fn is_stream(self) -> bool {
        matches!(self, KeySetKind::TSensor { .. } | KeySetKind::ObjLog)
    }

    /// The fraction of delayed keys of a `tsensor` set; 0 for every other set.
    pub fn delayed_fraction(self) -> f64 {
        match self {
            KeySetKind::TSensor { delayed_ppm } => f64::from(delayed_ppm) / 1e6,
            _ => 0.0,
        }
    }

    /// The set's name without its parameter: `tsensor` for every `tsensor:<fraction>`.
    pub fn base_name(self) -> &'static str {
        match self {
            KeySetKind::Rand64 => "rand64",
            KeySetKind::Mono64 => "mono64",
            KeySetKind::Rand128 => "rand128",
            KeySetKind::Email => "email",
            KeySetKind::DocTerm => "docterm",
            KeySetKind::Url => "url",
            KeySetKind::Words => "words",
            KeySetKind::Prefix28 => "prefix28",
            KeySetKind::Sha1 => "sha1",
            KeySetKind::TSensor { .. } => "tsensor",
            KeySetKind::ObjLog => "objlog",
        }
    }

    /// The key set's name as the CLI and the reports spell it: the base name, and for a
    /// `tsensor` set whose delayed fraction is not the default, `tsensor:<fraction>`
    /// (`tsensor:0.2`), which parses back to the same set.
    pub fn name(self) -> &'static str {
        match self {
            KeySetKind::TSensor { delayed_ppm } if delayed_ppm != TSENSOR_DEFAULT_DELAYED_PPM => {
                tsensor_name(delayed_ppm)
            }
            _ => self.base_name(),
        }
    }

    /// How the keys are shaped (see the module docs for how each width is indexed).
    pub fn width(self) -> KeyWidth {
        match self {
            KeySetKind::Rand64 | KeySetKind::Mono64 | KeySetKind::TSensor { .. } => {
                KeyWidth::Fixed8
            }
            KeySetKind::Rand128 | KeySetKind::ObjLog => KeyWidth::Fixed16,
            KeySetKind::Email
            | KeySetKind::DocTerm
            | KeySetKind::Url
            | KeySetKind::Words
            | KeySetKind::Prefix28
            | KeySetKind::Sha1 => KeyWidth::Variable,
        }
    }

    /// The length of every key for fixed-length sets, `None` for variable-length ones.
    pub fn key_len(self) -> Option<usize> {
        match self {
            KeySetKind::Rand64 | KeySetKind::Mono64 | KeySetKind::TSensor { .. } => Some(8),
            KeySetKind::Rand128 | KeySetKind::ObjLog => Some(16),
            KeySetKind::Sha1 => Some(SHA1_LEN),
            KeySetKind::Prefix28 => Some(PREFIX28_LEN),
            KeySetKind::Email | KeySetKind::DocTerm | KeySetKind::Url | KeySetKind::Words => None,
        }
    }

    /// Whether this machine can generate the set, or why not (`words` needs its dictionary).
    pub fn available(self) -> Result<(), String> {
        match self {
            KeySetKind::Words => web::dictionary().map(|_| ()),
            _ => Ok(()),
        }
    }

    /// Generates `n` distinct keys of this set from `seed`. The same `(kind, n, seed)` always
    /// gives the same keys in the same order.
    ///
    /// # Panics
    ///
    /// If the set is not [`KeySetKind::available`] on this machine (commands check first and
    /// say why).
    pub fn generate(self, n: usize, seed: u64) -> KeySet {
        let data = match self {
            KeySetKind::Rand64 => KeyData::U64(rand64(n, seed)),
            KeySetKind::Mono64 => KeyData::U64(mono64(n, seed)),
            KeySetKind::Rand128 => KeyData::Fixed(rand128(n, seed)),
            KeySetKind::Email => KeyData::Var(email(n, seed)),
            KeySetKind::DocTerm => KeyData::Var(docterm(n, seed)),
            KeySetKind::Url => KeyData::Var(web::url(n, seed)),
            KeySetKind::Words => {
                KeyData::Var(web::words(n, seed).unwrap_or_else(|why| panic!("{why}")))
            }
            KeySetKind::Prefix28 => KeyData::Fixed(prefix28(n, seed)),
            KeySetKind::Sha1 => KeyData::Fixed(sha1(n, seed)),
            KeySetKind::TSensor { delayed_ppm } => {
                KeyData::U64(tsensor(n, seed, f64::from(delayed_ppm) / 1e6))
            }
            KeySetKind::ObjLog => KeyData::Fixed(objlog(n, seed)),
        };
        KeySet {
            kind: self,
            data: Arc::new(data),
        }
    }
}

/// `tsensor:<fraction>` as a `&'static str`: one leaked string per distinct fraction used in
/// the process (a handful at most, from the command line).
fn tsensor_name(delayed_ppm: u32) -> &'static str {
    static NAMES: Mutex<Vec<(u32, &'static str)>> = Mutex::new(Vec::new());
    let mut names = NAMES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&(_, name)) = names.iter().find(|&&(ppm, _)| ppm == delayed_ppm) {
        return name;
    }
    let text = format!("tsensor:{}", f64::from(delayed_ppm) / 1e6);
    let name: &'static str = Box::leak(text.into_boxed_str());
    names.push((delayed_ppm, name));
    name
}

impl fmt::Display for KeySetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeySetKind {
    type Err = String;

    /// A key-set name, `tsensor:<fraction>` with a fraction in `[0, 1)` written as a decimal
    /// (`tsensor:0.2`) or a percentage (`tsensor:20%`).
    fn from_str(s: &str) -> Result<Self, String> {
        let (base, param) = match s.split_once(':') {
            Some((base, param)) => (base, Some(param)),
            None => (s, None),
        };
        let kind = KeySetKind::ALL
            .iter()
            .copied()
            .find(|k| k.base_name() == base)
            .ok_or_else(|| {
                let names: Vec<_> = KeySetKind::ALL.iter().map(|k| k.base_name()).collect();
                format!(
                    "unknown key set {s:?} (known: {}; tsensor takes a delayed fraction, \
                     e.g. tsensor:0.2)",
                    names.join(", ")
                )
            })?;
        match (kind, param) {
            (_, None) => Ok(kind),
            (KeySetKind::TSensor { .. }, Some(param)) => {
                let param = param.trim();
                let fraction = match param.strip_suffix('%') {
                    Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
                    None => param.parse::<f64>(),
                }
                .map_err(|_| {
                    format!("{s:?}: the delayed fraction {param:?} is not a number (e.g. 0.2)")
                })?;
                KeySetKind::tsensor(fraction).map_err(|e| format!("{s:?}: {e}"))
            }
            (_, Some(_)) => Err(format!(
                "{s:?}: key set {base} takes no parameter (only tsensor:<fraction> does)"
            )),
        }
    }
}

/// Fixed-length keys in one flat buffer: key `i` is `data[i * len..(i + 1) * len]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedKeys {
    len: usize,
    data: Vec<u8>,
}

impl FixedKeys {
    /// An empty set of `len`-byte keys with room for `keys` keys.
    pub fn with_capacity(len: usize, keys: usize) -> Self {
        assert!(len > 0, "fixed-length keys need a length");
        Self {
            len,
            data: Vec::with_capacity(len * keys),
        }
    }

    /// Appends a key; panics if it is not `key_len()` bytes long.
    pub fn push(&mut self, key: &[u8]) {
        assert_eq!(key.len(), self.len, "fixed-length key of the wrong length");
        self.data.extend_from_slice(key);
    }

    /// The length of every key.
    pub fn key_len(&self) -> usize {
        self.len
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.data.len() / self.len
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Key `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        &self.data[i * self.len..(i + 1) * self.len]
    }

    /// Every key in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.data.chunks_exact(self.len)
    }
}

/// Variable-length keys in one flat buffer: key `i` is `data[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VarKeys {
    data: Vec<u8>,
    offsets: Vec<usize>,
}

impl VarKeys {
    /// An empty set with room for `keys` keys of `bytes` bytes in all.
    pub fn with_capacity(keys: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(keys + 1);
        offsets.push(0);
        Self {
            data: Vec::with_capacity(bytes),
            offsets,
        }
    }

    /// Appends a key.
    pub fn push(&mut self, key: &[u8]) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.data.extend_from_slice(key);
        self.offsets.push(self.data.len());
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Key `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }

    /// The total length of all keys, in bytes.
    pub fn total_bytes(&self) -> usize {
        self.data.len()
    }

    /// Every key in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.offsets.windows(2).map(|w| &self.data[w[0]..w[1]])
    }
}

/// The keys of a key set, in the set's representation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyData {
    /// 8-byte keys as integers.
    U64(Vec<u64>),
    /// Fixed-length byte-string keys (16, 20 or 28 bytes).
    Fixed(FixedKeys),
    /// Variable-length keys.
    Var(VarKeys),
}

/// A generated key set: distinct keys in their load order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySet {
    /// Which set this is.
    pub kind: KeySetKind,
    /// The keys, in load order; shared, so a copy of a key set (the table an index with
    /// indirect keys loads from) costs nothing.
    pub data: Arc<KeyData>,
}

impl KeySet {
    /// The number of keys.
    pub fn len(&self) -> usize {
        match &*self.data {
            KeyData::U64(v) => v.len(),
            KeyData::Fixed(v) => v.len(),
            KeyData::Var(v) => v.len(),
        }
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How the keys are shaped.
    pub fn width(&self) -> KeyWidth {
        self.kind.width()
    }

    /// Key `i` in load order.
    #[inline]
    pub fn key(&self, i: usize) -> Key<'_> {
        match &*self.data {
            KeyData::U64(v) => Key::U64(v[i]),
            KeyData::Fixed(v) => Key::Bytes(v.get(i)),
            KeyData::Var(v) => Key::Bytes(v.get(i)),
        }
    }

    /// The average key length in bytes.
    pub fn avg_key_len(&self) -> f64 {
        match &*self.data {
            KeyData::U64(_) => 8.0,
            KeyData::Fixed(v) => v.key_len() as f64,
            KeyData::Var(v) if v.is_empty() => 0.0,
            KeyData::Var(v) => v.total_bytes() as f64 / v.len() as f64,
        }
    }

    /// The keys at `positions`, in that order: an operation stream with its keys laid out
    /// in the order the operations read them, so a timed loop reads its keys sequentially
    /// instead of paying a cache miss per operation to fetch the key from a random position.
    pub fn gather(&self, positions: &[u32]) -> KeySet {
        let data = match &*self.data {
            KeyData::U64(v) => KeyData::U64(positions.iter().map(|&i| v[i as usize]).collect()),
            KeyData::Fixed(v) => {
                let mut out = FixedKeys::with_capacity(v.key_len(), positions.len());
                for &i in positions {
                    out.push(v.get(i as usize));
                }
                KeyData::Fixed(out)
            }
            KeyData::Var(v) => {
                let bytes = positions.iter().map(|&i| v.get(i as usize).len()).sum();
                let mut out = VarKeys::with_capacity(positions.len(), bytes);
                for &i in positions {
                    out.push(v.get(i as usize));
                }
                KeyData::Var(out)
            }
        };
        KeySet {
            kind: self.kind,
            data: Arc::new(data),
        }
    }

    /// The key at position `i` as the bytes an index stores (8-byte keys big-endian).
    pub fn key_bytes(&self, i: usize, out: &mut Vec<u8>) {
        out.clear();
        match self.key(i) {
            Key::U64(v) => out.extend_from_slice(&v.to_be_bytes()),
            Key::Bytes(b) => out.extend_from_slice(b),
        }
    }

    /// The key indexes (positions in load order) sorted by key, in the byte order every index
    /// uses. Computed outside timed regions, for choosing scan start keys and checking scans.
    pub fn sorted_order(&self) -> Vec<u32> {
        let n = u32::try_from(self.len()).expect("key sets are limited to 2^32 keys");
        let mut order: Vec<u32> = (0..n).collect();
        match &*self.data {
            KeyData::U64(v) => order.sort_unstable_by_key(|&i| v[i as usize]),
            KeyData::Fixed(v) => {
                order.sort_unstable_by(|&a, &b| v.get(a as usize).cmp(v.get(b as usize)))
            }
            KeyData::Var(v) => {
                order.sort_unstable_by(|&a, &b| v.get(a as usize).cmp(v.get(b as usize)))
            }
        }
        order
    }
}

/// The splitmix64 finalizer: a bijection on `u64` that spreads consecutive inputs uniformly.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A key set is the table of the benchmark: tid `t` is the tuple at position `t mod 2^32` (the
/// high half of a tid is free for the YCSB runner's update counters), so indexes with
/// indirect keys load their keys from it.
impl elastree::table::KeySource for KeySet {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        let position = (tid & u64::from(u32::MAX)) as usize;
        if position >= self.len() {
            out.clear();
            return false;
        }
        self.key_bytes(position, out);
        true
    }

    #[inline]
    fn prefetch(&self, tid: u64) {
        let position = (tid & u64::from(u32::MAX)) as usize;
        if position < self.len() {
            // Address arithmetic only (no load of the key itself) where the layout allows.
            match &*self.data {
                KeyData::U64(v) => elastree::node::prefetch(&v[position..=position]),
                KeyData::Fixed(v) => elastree::node::prefetch(v.get(position)),
                KeyData::Var(v) => elastree::node::prefetch(v.get(position)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn mix64_is_a_bijection_on_a_sample() {
        let outputs: HashSet<u64> = (0..10_000u64).map(mix64).collect();
        assert_eq!(outputs.len(), 10_000);
    }

    #[test]
    fn var_keys_round_trip() {
        let mut keys = VarKeys::default();
        keys.push(b"abc");
        keys.push(b"");
        keys.push(b"de");
        assert_eq!(keys.len(), 3);
        assert_eq!(keys.get(0), b"abc");
        assert_eq!(keys.get(1), b"");
        assert_eq!(keys.get(2), b"de");
        assert_eq!(
            keys.iter().collect::<Vec<_>>(),
            vec![&b"abc"[..], b"", b"de"]
        );
    }
}
