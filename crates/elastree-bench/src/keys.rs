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

use std::cmp::Reverse;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BinaryHeap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::dist;

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
            KeySetKind::Email | KeySetKind::DocTerm | KeySetKind::Prefix28 | KeySetKind::Sha1 => {
                KeyWidth::Variable
            }
        }
    }

    /// The length of every key for fixed-length sets, `None` for variable-length ones.
    pub fn key_len(self) -> Option<usize> {
        match self {
            KeySetKind::Rand64 | KeySetKind::Mono64 | KeySetKind::TSensor { .. } => Some(8),
            KeySetKind::Rand128 | KeySetKind::ObjLog => Some(16),
            KeySetKind::Sha1 => Some(SHA1_LEN),
            KeySetKind::Prefix28 => Some(PREFIX28_LEN),
            KeySetKind::Email | KeySetKind::DocTerm => None,
        }
    }

    /// Generates `n` distinct keys of this set from `seed`. The same `(kind, n, seed)` always
    /// gives the same keys in the same order.
    pub fn generate(self, n: usize, seed: u64) -> KeySet {
        let data = match self {
            KeySetKind::Rand64 => KeyData::U64(rand64(n, seed)),
            KeySetKind::Mono64 => KeyData::U64(mono64(n, seed)),
            KeySetKind::Rand128 => KeyData::Fixed(rand128(n, seed)),
            KeySetKind::Email => KeyData::Var(email(n, seed)),
            KeySetKind::DocTerm => KeyData::Var(docterm(n, seed)),
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

/// `n` distinct pseudo-random keys: a bijective mix of a seeded counter, so distinct by
/// construction. `u64::MAX` is left out: some peers (congee) take an exclusive scan end bound and
/// could never return it.
fn rand64(n: usize, seed: u64) -> Vec<u64> {
    let base = mix64(seed ^ 0x5eed_0000_0000_0001);
    let mut keys = Vec::with_capacity(n);
    let mut counter = base;
    while keys.len() < n {
        let key = mix64(counter);
        counter = counter.wrapping_add(1);
        if key != u64::MAX {
            keys.push(key);
        }
    }
    keys
}

/// `n` strictly increasing keys starting below 2^40 with random gaps of 1..=8, like timestamps
/// or sequence numbers with holes.
fn mono64(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d6f_6e6f);
    let mut key = rng.gen_range(0..1u64 << 40);
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        keys.push(key);
        key += rng.gen_range(1..=8);
    }
    keys
}

/// Two more independent 64-bit lanes of a counter, for keys wider than 8 bytes.
const LANE_1: u64 = 0x243f_6a88_85a3_08d3;
const LANE_2: u64 = 0x1319_8a2e_0370_7344;

/// `n` distinct uniform random 16-byte keys: the first 8 bytes are a bijective mix of a seeded
/// counter (so the keys are distinct by construction), the last 8 an independent mix of it.
fn rand128(n: usize, seed: u64) -> FixedKeys {
    let base = mix64(seed ^ 0x0072_616e_6431_3238);
    let mut keys = FixedKeys::with_capacity(16, n);
    let mut key = [0u8; 16];
    for i in 0..n as u64 {
        let counter = base.wrapping_add(i);
        key[..8].copy_from_slice(&mix64(counter).to_be_bytes());
        key[8..].copy_from_slice(&mix64(counter.rotate_left(23) ^ LANE_1).to_be_bytes());
        keys.push(&key);
    }
    keys
}

const SHA1_LEN: usize = 20;

/// `n` distinct 20-byte hash values: a 160-bit mix of a seeded counter (three independent
/// splitmix lanes; the first is a bijection of the counter, so the values are distinct).
fn sha1(n: usize, seed: u64) -> FixedKeys {
    let base = mix64(seed ^ 0x7368_6131);
    let mut keys = FixedKeys::with_capacity(SHA1_LEN, n);
    let mut key = [0u8; SHA1_LEN];
    for i in 0..n as u64 {
        let counter = base.wrapping_add(i);
        key[..8].copy_from_slice(&mix64(counter).to_be_bytes());
        key[8..16].copy_from_slice(&mix64(counter.rotate_left(17) ^ LANE_1).to_be_bytes());
        let tail = mix64(counter.rotate_left(41) ^ LANE_2).to_be_bytes();
        key[16..].copy_from_slice(&tail[..4]);
        keys.push(&key);
    }
    keys
}

const PREFIX28_LEN: usize = 28;
/// How many consecutive `prefix28` keys share one 8-byte prefix.
pub const PREFIX28_GROUP: usize = 1_000;

/// `n` distinct 28-byte keys in groups of [`PREFIX28_GROUP`]: every key of a group starts with
/// the group's random 8-byte prefix (distinct per group), followed by a random 20-byte suffix
/// (distinct within the group). Loaded group after group, each group's keys in random order:
/// ingestion by tenant or by table with a key prefix per tenant. The last group may be short.
fn prefix28(n: usize, seed: u64) -> FixedKeys {
    let prefix_base = mix64(seed ^ 0x7072_6566_6978);
    let suffix_base = mix64(seed ^ 0x7375_6666_6978);
    let mut keys = FixedKeys::with_capacity(PREFIX28_LEN, n);
    let mut key = [0u8; PREFIX28_LEN];
    for i in 0..n as u64 {
        let group = i / PREFIX28_GROUP as u64;
        key[..8].copy_from_slice(&mix64(prefix_base.wrapping_add(group)).to_be_bytes());
        let counter = suffix_base.wrapping_add(i);
        key[8..16].copy_from_slice(&mix64(counter).to_be_bytes());
        key[16..24].copy_from_slice(&mix64(counter.rotate_left(29) ^ LANE_1).to_be_bytes());
        let tail = mix64(counter.rotate_left(47) ^ LANE_2).to_be_bytes();
        key[24..].copy_from_slice(&tail[..4]);
        keys.push(&key);
    }
    keys
}

/// The number of sensors of `tsensor`: ids `0..1024`.
pub const TSENSOR_SENSORS: u64 = 1_024;
/// The shortest and longest delay of a delayed `tsensor` key, in readings (about milliseconds:
/// the stream carries about one reading per millisecond).
const TSENSOR_DELAY: (f64, f64) = (16.0, 16_384.0);

/// `n` distinct time-series keys `timestamp_ms << 16 | sensor` (so the big-endian bytes are a
/// 6-byte timestamp and a 2-byte sensor id), readings of 1,024 sensors at about one reading per
/// millisecond, starting on a seeded day of 2024.
///
/// Readings are produced in strictly increasing key order; a fraction `delayed` of them (each
/// independently) is held back and arrives 16 to 16,384 readings later (log-uniform), behind
/// keys larger than itself. Because every delay spans at least 16 readings, the fraction of
/// keys smaller than some earlier key equals `delayed` up to sampling noise (measured on 1M
/// keys: within 0.001 of it for fractions 0.05 to 0.8).
fn tsensor(n: usize, seed: u64, delayed: f64) -> Vec<u64> {
    const DAY_MS: u64 = 86_400_000;
    const JAN_1_2024_MS: u64 = 1_704_067_200_000;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0074_7365_6e73_6f72);
    let mut ms = JAN_1_2024_MS + rng.gen_range(0..366) * DAY_MS + rng.gen_range(0..DAY_MS);
    let mut sensor = rng.gen_range(0..TSENSOR_SENSORS);
    let (min_delay, max_delay) = TSENSOR_DELAY;
    let log_span = (max_delay / min_delay).ln();
    let mut held: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut keys = Vec::with_capacity(n);
    for position in 0..n as u64 {
        if position > 0 {
            let next = rng.gen_range(0..TSENSOR_SENSORS);
            let mut gap = rng.gen_range(0..=2u64);
            if gap == 0 && next <= sensor {
                gap = 1;
            }
            ms += gap;
            sensor = next;
        }
        while let Some(&Reverse((arrival, key))) = held.peek() {
            if arrival > position {
                break;
            }
            held.pop();
            keys.push(key);
        }
        let key = (ms << 16) | sensor;
        if delayed > 0.0 && rng.gen_bool(delayed) {
            let delay = (min_delay * (rng.gen::<f64>() * log_span).exp()) as u64;
            held.push(Reverse((position + delay, key)));
        } else {
            keys.push(key);
        }
    }
    while let Some(Reverse((_, key))) = held.pop() {
        keys.push(key);
    }
    keys
}

/// Microseconds per day.
pub const OBJLOG_DAY_US: u64 = 86_400_000_000;
/// `objlog`'s keys per day on average (so `n / OBJLOG_KEYS_PER_DAY` days, 1 to 365).
const OBJLOG_KEYS_PER_DAY: usize = 1_000;

/// The relative volume of each of `days` days, summing to 1. Weekdays draw from
/// `[0.9, 1.1]` of a base level and weekends from 0.9 times that; about 6% of the days (none
/// under 10 days) are bursts of 2.1-3.3 times the mean day, the mean taken over all days
/// bursts included, so ordinary days land within 0.75-1.05 of the mean.
fn objlog_day_shares(days: usize, rng: &mut StdRng) -> Vec<f64> {
    let first_weekday = rng.gen_range(0..7);
    let mut shares: Vec<f64> = (0..days)
        .map(|d| {
            let weekend = (first_weekday + d) % 7 >= 5;
            rng.gen_range(0.9..1.1) * if weekend { 0.9 } else { 1.0 }
        })
        .collect();
    let bursts = if days >= 10 {
        ((days as f64 * 0.06).round() as usize).max(1)
    } else {
        0
    };
    let mut order: Vec<usize> = (0..days).collect();
    order.shuffle(rng);
    let burst_days = &order[..bursts];
    let factors: Vec<f64> = burst_days.iter().map(|_| rng.gen_range(2.1..3.3)).collect();
    // With `S` the sum of the ordinary days and `F` the sum of the burst factors, the mean day
    // `M` satisfies `D * M = S + F * M`.
    let ordinary: f64 = (0..days)
        .filter(|d| !burst_days.contains(d))
        .map(|d| shares[d])
        .sum();
    let mean = ordinary / (days as f64 - factors.iter().sum::<f64>());
    for (&d, &factor) in burst_days.iter().zip(&factors) {
        shares[d] = factor * mean;
    }
    let total: f64 = shares.iter().sum();
    shares.iter().map(|s| s / total).collect()
}

/// `n` distinct access-log keys `(timestamp_us, object_id)`, both 8-byte big-endian, in time
/// order over `n / 1000` days (1 to 365) starting on a seeded day of 2024, with the day volumes
/// of [`objlog_day_shares`]. Within a day the accesses fall at uniform random, distinct
/// microseconds; objects are drawn from a Zipfian (theta 0.99) over `max(n / 10, 1000)` objects,
/// object ids hashed so popular objects are not neighbours. Timestamps strictly increase, so
/// the keys are distinct whatever the object.
fn objlog(n: usize, seed: u64) -> FixedKeys {
    const JAN_1_2024_US: u64 = 1_704_067_200_000_000;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6f62_6a6c_6f67);
    let days = (n / OBJLOG_KEYS_PER_DAY).clamp(1, 365);
    let shares = objlog_day_shares(days, &mut rng);
    let start = JAN_1_2024_US + rng.gen_range(0..366) * OBJLOG_DAY_US;
    let objects =
        dist::Zipfian::with_default_theta((n as u64 / 10).max(1_000)).expect("a valid Zipfian");
    let object_salt = rng.gen::<u64>();
    let mut keys = FixedKeys::with_capacity(16, n);
    let mut offsets: Vec<u64> = Vec::new();
    let mut cumulative = 0.0;
    let mut emitted = 0usize;
    let mut key = [0u8; 16];
    for (day, share) in shares.iter().enumerate() {
        cumulative += share;
        let until = if day + 1 == days {
            n
        } else {
            ((cumulative * n as f64).round() as usize).min(n)
        };
        let volume = until.saturating_sub(emitted) as u64;
        // `volume` distinct sorted offsets in the day: sorted draws from a range shortened by
        // `volume`, plus their rank.
        offsets.clear();
        offsets.extend((0..volume).map(|_| rng.gen_range(0..OBJLOG_DAY_US - volume)));
        offsets.sort_unstable();
        let day_start = start + day as u64 * OBJLOG_DAY_US;
        for (rank, &offset) in (0u64..).zip(&offsets) {
            let object = mix64(objects.sample(&mut rng) ^ object_salt);
            key[..8].copy_from_slice(&(day_start + offset + rank).to_be_bytes());
            key[8..].copy_from_slice(&object.to_be_bytes());
            keys.push(&key);
        }
        emitted += volume as usize;
    }
    keys
}

const FIRST_NAMES: &[&str] = &[
    "james",
    "mary",
    "john",
    "patricia",
    "robert",
    "jennifer",
    "michael",
    "linda",
    "william",
    "elizabeth",
    "david",
    "barbara",
    "richard",
    "susan",
    "joseph",
    "jessica",
    "thomas",
    "sarah",
    "charles",
    "karen",
    "christopher",
    "nancy",
    "daniel",
    "lisa",
    "matthew",
    "betty",
    "anthony",
    "margaret",
    "mark",
    "sandra",
    "donald",
    "ashley",
    "steven",
    "kimberly",
    "paul",
    "emily",
    "andrew",
    "donna",
    "joshua",
    "michelle",
    "kenneth",
    "dorothy",
    "kevin",
    "carol",
    "brian",
    "amanda",
    "george",
    "melissa",
    "timothy",
    "deborah",
    "ronald",
    "stephanie",
    "edward",
    "rebecca",
    "jason",
    "sharon",
    "jeffrey",
    "laura",
    "ryan",
    "cynthia",
    "jacob",
    "kathleen",
    "gary",
    "amy",
    "nicholas",
    "angela",
    "eric",
    "shirley",
    "jonathan",
    "anna",
    "stephen",
    "brenda",
    "larry",
    "pamela",
    "justin",
    "emma",
    "scott",
    "nicole",
    "brandon",
    "helen",
    "benjamin",
    "samantha",
    "samuel",
    "katherine",
    "gregory",
    "christine",
    "alexander",
    "debra",
    "frank",
    "rachel",
    "patrick",
    "carolyn",
    "raymond",
    "janet",
    "jack",
    "catherine",
    "dennis",
    "maria",
    "jerry",
    "heather",
    "wei",
    "mohammed",
    "olga",
    "giulia",
    "lukas",
    "sofia",
    "hiroshi",
    "priya",
    "mateo",
    "fatima",
    "aleksandr",
    "ingrid",
    "pierre",
    "yuki",
    "chen",
    "ana",
];

const LAST_NAMES: &[&str] = &[
    "smith",
    "johnson",
    "williams",
    "brown",
    "jones",
    "garcia",
    "miller",
    "davis",
    "rodriguez",
    "martinez",
    "hernandez",
    "lopez",
    "gonzalez",
    "wilson",
    "anderson",
    "thomas",
    "taylor",
    "moore",
    "jackson",
    "martin",
    "lee",
    "perez",
    "thompson",
    "white",
    "harris",
    "sanchez",
    "clark",
    "ramirez",
    "lewis",
    "robinson",
    "walker",
    "young",
    "allen",
    "king",
    "wright",
    "scott",
    "torres",
    "nguyen",
    "hill",
    "flores",
    "green",
    "adams",
    "nelson",
    "baker",
    "hall",
    "rivera",
    "campbell",
    "mitchell",
    "carter",
    "roberts",
    "gomez",
    "phillips",
    "evans",
    "turner",
    "diaz",
    "parker",
    "cruz",
    "edwards",
    "collins",
    "reyes",
    "stewart",
    "morris",
    "morales",
    "murphy",
    "cook",
    "rogers",
    "gutierrez",
    "ortiz",
    "morgan",
    "cooper",
    "peterson",
    "bailey",
    "reed",
    "kelly",
    "howard",
    "ramos",
    "kim",
    "cox",
    "ward",
    "richardson",
    "watson",
    "brooks",
    "chavez",
    "wood",
    "james",
    "bennett",
    "gray",
    "mendoza",
    "ruiz",
    "hughes",
    "price",
    "alvarez",
    "castillo",
    "sanders",
    "patel",
    "myers",
    "long",
    "ross",
    "foster",
    "jimenez",
    "mueller",
    "schmidt",
    "schneider",
    "fischer",
    "weber",
    "rossi",
    "russo",
    "ferrari",
    "dubois",
    "moreau",
    "ivanov",
    "kowalski",
    "novak",
    "tanaka",
    "suzuki",
    "wang",
    "zhang",
    "singh",
    "kumar",
    "andersson",
    "johansson",
    "nielsen",
    "jensen",
    "silva",
    "santos",
    "oliveira",
    "pereira",
];

/// Mail domains with a weight each: a few providers dominate, then a long tail of company,
/// university and national domains.
const DOMAINS: &[(&str, u32)] = &[
    ("gmail.com", 240),
    ("yahoo.com", 100),
    ("hotmail.com", 80),
    ("outlook.com", 50),
    ("icloud.com", 25),
    ("aol.com", 15),
    ("protonmail.com", 12),
    ("live.com", 10),
    ("yahoo.co.uk", 10),
    ("msn.com", 6),
    ("comcast.net", 8),
    ("gmx.de", 8),
    ("web.de", 7),
    ("mail.ru", 7),
    ("orange.fr", 6),
    ("btinternet.com", 5),
    ("hotmail.co.uk", 5),
    ("libero.it", 4),
    ("yandex.ru", 4),
    ("qq.com", 4),
    ("163.com", 4),
    ("t-online.de", 3),
    ("sbcglobal.net", 3),
    ("verizon.net", 3),
    ("att.net", 3),
    // Work and university addresses: fewer domains, longer names.
    ("acme-industries.com", 30),
    ("globex-corporation.com", 25),
    ("initech-software.com", 22),
    ("northwind-traders.com", 20),
    ("contoso-consulting.com", 18),
    ("fabrikam-engineering.com", 16),
    ("umbrella-pharma.co.uk", 14),
    ("students.berkeley.edu", 14),
    ("alumni.stanford.edu", 12),
    ("cs.stanford.edu", 10),
    ("student.ethz.ch", 10),
    ("mail.utoronto.ca", 10),
    ("mail.wayneenterprises.com", 9),
    ("research.cyberdyne-systems.com", 8),
    ("engineering.stark-industries.com", 8),
    ("hospital.university-medical.org", 7),
    ("city-council.gov.uk", 6),
    ("post.harvard.edu", 6),
    ("mit.edu", 5),
];

const SYLLABLES: &[&str] = &[
    "ka", "ri", "to", "mo", "na", "le", "sa", "vi", "do", "ran", "el", "an", "bor", "ste", "lin",
    "mar", "ko", "zu", "fe", "ga", "nor", "tha", "qui", "bel", "dra", "phi", "ser", "wen", "ul",
];

/// A Zipf-like sampler over `len` ranks: rank `r` has weight `1 / (r + 1)`.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(weights: impl Iterator<Item = f64>) -> Self {
        let mut total = 0.0;
        let cumulative = weights
            .map(|w| {
                total += w;
                total
            })
            .collect();
        Self { cumulative }
    }

    fn harmonic(len: usize) -> Self {
        Self::new((0..len).map(|r| 1.0 / (r as f64 + 1.0)))
    }

    fn sample(&self, rng: &mut StdRng) -> usize {
        let total = *self.cumulative.last().expect("non-empty");
        let x = rng.gen::<f64>() * total;
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1)
    }
}

struct EmailGen {
    rng: StdRng,
    first: Zipf,
    last: Zipf,
    domain: Zipf,
}

impl EmailGen {
    fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed ^ 0x656d_6169_6c00),
            first: Zipf::harmonic(FIRST_NAMES.len()),
            last: Zipf::harmonic(LAST_NAMES.len()),
            domain: Zipf::new(DOMAINS.iter().map(|&(_, w)| f64::from(w))),
        }
    }

    /// A name: usually a common one (skewed), sometimes a rare one made of syllables.
    fn name(&mut self, list: &[&str], zipf_first: bool, out: &mut String) {
        if self.rng.gen_ratio(1, 8) {
            let syllables = self.rng.gen_range(2..=4);
            for _ in 0..syllables {
                out.push_str(SYLLABLES[self.rng.gen_range(0..SYLLABLES.len())]);
            }
        } else {
            let zipf = if zipf_first { &self.first } else { &self.last };
            out.push_str(list[zipf.sample(&mut self.rng)]);
        }
    }

    fn digits(&mut self, out: &mut String) {
        use std::fmt::Write;
        let n: u32 = match self.rng.gen_range(0..3) {
            0 => self.rng.gen_range(1950..2010),
            1 => self.rng.gen_range(1..100),
            _ => self.rng.gen_range(100..100_000),
        };
        write!(out, "{n}").expect("writing to a String");
    }

    fn next(&mut self, out: &mut String) {
        out.clear();
        let mut first = String::new();
        let mut last = String::new();
        self.name(FIRST_NAMES, true, &mut first);
        self.name(LAST_NAMES, false, &mut last);
        match self.rng.gen_range(0..100) {
            0..=19 => {
                out.push_str(&first);
                out.push('.');
                out.push_str(&last);
            }
            20..=31 => {
                let initial = self.rng.gen_range(b'a'..=b'z');
                out.push_str(&first);
                out.push('.');
                out.push(char::from(initial));
                out.push('.');
                out.push_str(&last);
            }
            32..=39 => {
                out.push_str(&first);
                out.push_str(&last);
            }
            40..=45 => {
                out.push_str(&first[..1]);
                out.push_str(&last);
            }
            46..=55 => {
                out.push_str(&first);
                out.push('_');
                out.push_str(&last);
            }
            56..=79 => {
                out.push_str(&first);
                out.push('.');
                out.push_str(&last);
                self.digits(out);
            }
            80..=89 => {
                out.push_str(&first);
                self.digits(out);
            }
            _ => {
                out.push_str(&last);
                out.push('.');
                out.push_str(&first);
                self.digits(out);
            }
        }
        out.push('@');
        out.push_str(DOMAINS[self.domain.sample(&mut self.rng)].0);
    }
}

/// `n` distinct e-mail addresses. A candidate that repeats an earlier address is replaced by a
/// fresh one, which shifts the popular name combinations towards numbered variants, as real
/// address books do.
fn email(n: usize, seed: u64) -> VarKeys {
    let mut gen = EmailGen::new(seed);
    distinct_strings(n, 32, |candidate| gen.next(candidate))
}

/// `n` distinct strings from `next`, which writes a candidate into the buffer it is given; a
/// candidate that repeats an earlier one is dropped and another drawn. `avg_len` sizes the
/// buffer.
fn distinct_strings(n: usize, avg_len: usize, mut next: impl FnMut(&mut String)) -> VarKeys {
    let mut keys = VarKeys::with_capacity(n, n * avg_len);
    let mut seen: HashSet<u64> = HashSet::with_capacity(n);
    let mut candidate = String::new();
    while keys.len() < n {
        next(&mut candidate);
        // `DefaultHasher::new()` uses fixed keys, so the result is deterministic. A 64-bit hash
        // collision between two different strings only costs one more draw.
        let mut hasher = DefaultHasher::new();
        candidate.hash(&mut hasher);
        if seen.insert(hasher.finish()) {
            keys.push(candidate.as_bytes());
        }
    }
    keys
}

/// JSON field paths of a document collection (orders, users, articles, events), most common
/// first; drawn with weight `1 / (rank + 1)`.
const FIELD_PATHS: &[&str] = &[
    "product.tags[]",
    "product.title",
    "order.status",
    "customer.name.last",
    "article.body.keywords[]",
    "product.category.path",
    "customer.address.city",
    "metadata.content_type",
    "order.items[].sku",
    "order.items[].product.name",
    "article.author.id",
    "article.language",
    "event.created_at.day",
    "customer.address.postal_code",
    "customer.address.country_code",
    "session.events[].type",
    "order.payment.method",
    "order.shipping.carrier.name",
    "customer.email.domain",
    "product.brand.name",
    "product.attributes.color",
    "product.attributes.size",
    "device.os.version",
    "device.model.name",
    "http.request.url.path",
    "http.response.status_code",
    "resource.labels.environment",
    "resource.labels.team",
    "geo.region.name",
    "review.rating.overall",
    "article.comments[].author",
    "article.comments[].keywords[]",
    "order.line_items[].category",
    "session.referrer.domain",
    "kubernetes.pod.namespace",
    "error.exception.class_name",
];

/// Words of the `docterm` vocabulary: rank `r`'s word is built from syllables picked by a hash
/// of `r` (short words at the popular ranks, as in real text).
fn vocabulary_word(rank: u64, out: &mut String) {
    let mut h = mix64(rank ^ 0x776f_7264);
    let syllables = match rank {
        0..=99 => 2,
        100..=4_999 => 2 + (h % 2),
        _ => 2 + (h % 3),
    };
    for _ in 0..syllables {
        out.push_str(SYLLABLES[(h % SYLLABLES.len() as u64) as usize]);
        h = mix64(h);
    }
}

/// The size of the `docterm` word vocabulary.
const DOCTERM_VOCABULARY: u64 = 1 << 16;

struct DocTermGen {
    rng: StdRng,
    paths: Zipf,
    words: dist::Zipfian,
}

impl DocTermGen {
    fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed ^ 0x0064_6f63_7465_726d),
            paths: Zipf::harmonic(FIELD_PATHS.len()),
            words: dist::Zipfian::new(DOCTERM_VOCABULARY, 0.9).expect("a valid Zipfian"),
        }
    }

    fn word(&mut self, out: &mut String) {
        let rank = self.words.sample(&mut self.rng);
        vocabulary_word(rank, out);
    }

    /// One candidate `<field path>/<term>`: a skewed word (most often), a two-word phrase, a
    /// number, a date or an identifier.
    fn next(&mut self, out: &mut String) {
        use std::fmt::Write;
        out.clear();
        out.push_str(FIELD_PATHS[self.paths.sample(&mut self.rng)]);
        out.push('/');
        match self.rng.gen_range(0..100) {
            0..=37 => self.word(out),
            38..=62 => {
                self.word(out);
                out.push('_');
                self.word(out);
            }
            63..=74 => {
                let magnitude = self.rng.gen_range(1..=9u32);
                let value = self.rng.gen_range(0..10u64.pow(magnitude));
                write!(out, "{value}").expect("writing to a String");
            }
            75..=84 => {
                let (y, mo, d) = (
                    self.rng.gen_range(2015..=2025),
                    self.rng.gen_range(1..=12),
                    self.rng.gen_range(1..=28),
                );
                let (h, mi, sec) = (
                    self.rng.gen_range(0..24),
                    self.rng.gen_range(0..60),
                    self.rng.gen_range(0..60),
                );
                write!(out, "{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}Z")
                    .expect("writing to a String");
            }
            _ => {
                let digits = self.rng.gen_range(12..=16);
                let id = self.rng.gen::<u64>();
                write!(out, "{:0width$x}", id >> (64 - 4 * digits), width = digits)
                    .expect("writing to a String");
            }
        }
    }
}

/// `n` distinct document terms, about 32 bytes on average, in random order. A candidate that
/// repeats an earlier term is replaced by a fresh one, so the most common (path, word) pairs
/// appear once each and the set shifts towards the rarer terms as it grows, as the distinct
/// terms of a growing collection do.
fn docterm(n: usize, seed: u64) -> VarKeys {
    let mut gen = DocTermGen::new(seed);
    distinct_strings(n, 33, |candidate| gen.next(candidate))
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
    use super::*;

    #[test]
    fn mix64_is_a_bijection_on_a_sample() {
        let outputs: HashSet<u64> = (0..10_000u64).map(mix64).collect();
        assert_eq!(outputs.len(), 10_000);
    }

    #[test]
    fn zipf_prefers_low_ranks() {
        let zipf = Zipf::harmonic(10);
        let mut rng = StdRng::seed_from_u64(1);
        let mut counts = [0usize; 10];
        for _ in 0..10_000 {
            counts[zipf.sample(&mut rng)] += 1;
        }
        assert!(counts[0] > counts[9] * 4, "{counts:?}");
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
