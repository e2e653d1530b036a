//! Key sets, generated deterministically from a seed.
//!
//! * `rand64`: distinct pseudo-random 64-bit integers in random order;
//! * `mono64`: strictly increasing 64-bit integers with small random gaps, in increasing order
//!   (time-series style ingestion);
//! * `email`: realistic, distinct e-mail addresses (about 30 bytes on average) with skewed
//!   name and domain frequencies, in random order.
//!
//! 8-byte key sets are held as `Vec<u64>`; an index that works on bytes sees the big-endian
//! encoding ([`u64::to_be_bytes`]), whose byte order equals the numeric order, so every index
//! scans the same sequence. Variable-length key sets are held in one flat byte buffer plus
//! offsets ([`VarKeys`]), which costs a few bytes per key beyond the key bytes themselves.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One key as the benchmark hands it to an index: an 8-byte integer key or a byte string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key<'a> {
    /// An 8-byte key, as an integer; its bytes are the big-endian encoding.
    U64(u64),
    /// A variable-length key.
    Bytes(&'a [u8]),
}

impl Key<'_> {
    /// The key's bytes in index order (big-endian for integer keys).
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            Key::U64(v) => v.to_be_bytes().to_vec(),
            Key::Bytes(b) => b.to_vec(),
        }
    }
}

/// How the keys of a key set are shaped, which decides how an index is built for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyWidth {
    /// Every key is 8 bytes (an integer, big-endian encoded for byte-keyed indexes).
    Fixed8,
    /// Keys are byte strings of varying length.
    Variable,
}

/// The key sets the benchmark can generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySetKind {
    /// Uniformly spread, distinct 64-bit integers, loaded in random order.
    Rand64,
    /// Strictly increasing 64-bit integers, loaded in increasing order.
    Mono64,
    /// Realistic e-mail addresses, variable length, loaded in random order.
    Email,
}

impl KeySetKind {
    /// Every key set, in the order the CLI lists them.
    pub const ALL: &'static [KeySetKind] =
        &[KeySetKind::Rand64, KeySetKind::Mono64, KeySetKind::Email];

    /// The key set's name as the CLI and the reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            KeySetKind::Rand64 => "rand64",
            KeySetKind::Mono64 => "mono64",
            KeySetKind::Email => "email",
        }
    }

    /// Whether the keys are 8-byte integers or variable-length strings.
    pub fn width(self) -> KeyWidth {
        match self {
            KeySetKind::Rand64 | KeySetKind::Mono64 => KeyWidth::Fixed8,
            KeySetKind::Email => KeyWidth::Variable,
        }
    }

    /// Generates `n` distinct keys of this set from `seed`. The same `(kind, n, seed)` always
    /// gives the same keys in the same order.
    pub fn generate(self, n: usize, seed: u64) -> KeySet {
        let data = match self {
            KeySetKind::Rand64 => KeyData::U64(rand64(n, seed)),
            KeySetKind::Mono64 => KeyData::U64(mono64(n, seed)),
            KeySetKind::Email => KeyData::Var(email(n, seed)),
        };
        KeySet { kind: self, data }
    }
}

impl fmt::Display for KeySetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeySetKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        KeySetKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = KeySetKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown key set {s:?} (known: {})", names.join(", "))
            })
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
    /// Variable-length keys.
    Var(VarKeys),
}

/// A generated key set: distinct keys in their load order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySet {
    /// Which set this is.
    pub kind: KeySetKind,
    /// The keys, in load order.
    pub data: KeyData,
}

impl KeySet {
    /// The number of keys.
    pub fn len(&self) -> usize {
        match &self.data {
            KeyData::U64(v) => v.len(),
            KeyData::Var(v) => v.len(),
        }
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the keys are 8-byte integers or variable-length strings.
    pub fn width(&self) -> KeyWidth {
        self.kind.width()
    }

    /// Key `i` in load order.
    #[inline]
    pub fn key(&self, i: usize) -> Key<'_> {
        match &self.data {
            KeyData::U64(v) => Key::U64(v[i]),
            KeyData::Var(v) => Key::Bytes(v.get(i)),
        }
    }

    /// The average key length in bytes.
    pub fn avg_key_len(&self) -> f64 {
        match &self.data {
            KeyData::U64(_) => 8.0,
            KeyData::Var(v) if v.is_empty() => 0.0,
            KeyData::Var(v) => v.total_bytes() as f64 / v.len() as f64,
        }
    }

    /// The keys at `positions`, in that order: an operation stream with its keys laid out
    /// in the order the operations read them, so a timed loop reads its keys sequentially
    /// instead of paying a cache miss per operation to fetch the key from a random position.
    pub fn gather(&self, positions: &[u32]) -> KeySet {
        let data = match &self.data {
            KeyData::U64(v) => KeyData::U64(positions.iter().map(|&i| v[i as usize]).collect()),
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
            data,
        }
    }

    /// The key indexes (positions in load order) sorted by key, in the byte order every index
    /// uses. Computed outside timed regions, for choosing scan start keys and checking scans.
    pub fn sorted_order(&self) -> Vec<u32> {
        let n = u32::try_from(self.len()).expect("key sets are limited to 2^32 keys");
        let mut order: Vec<u32> = (0..n).collect();
        match &self.data {
            KeyData::U64(v) => order.sort_unstable_by_key(|&i| v[i as usize]),
            KeyData::Var(v) => {
                order.sort_unstable_by(|&a, &b| v.get(a as usize).cmp(v.get(b as usize)))
            }
        }
        order
    }
}

/// The splitmix64 finalizer: a bijection on `u64` that spreads consecutive inputs uniformly.
fn mix64(mut x: u64) -> u64 {
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
    let mut keys = VarKeys::with_capacity(n, n * 32);
    let mut seen: HashSet<u64> = HashSet::with_capacity(n);
    let mut candidate = String::new();
    while keys.len() < n {
        gen.next(&mut candidate);
        // `DefaultHasher::new()` uses fixed keys, so the result is deterministic. A 64-bit hash
        // collision between two different addresses only costs one more draw.
        let mut hasher = DefaultHasher::new();
        candidate.hash(&mut hasher);
        if seen.insert(hasher.finish()) {
            keys.push(candidate.as_bytes());
        }
    }
    keys
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
