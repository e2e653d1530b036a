//! The variable-length string key sets: `email` and `docterm`, drawn from the word lists of
//! [`super::tables`] with skewed (Zipf-like) frequencies.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::tables::{DOMAINS, FIELD_PATHS, FIRST_NAMES, LAST_NAMES, SYLLABLES};
use super::{mix64, VarKeys};
use crate::dist;

/// A Zipf-like sampler over `len` ranks: rank `r` has weight `1 / (r + 1)`.
pub(super) struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    /// Ranks weighted `weights[r]` each.
    pub(super) fn weighted(weights: impl Iterator<Item = u32>) -> Self {
        Self::new(weights.map(f64::from))
    }

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

    pub(super) fn harmonic(len: usize) -> Self {
        Self::new((0..len).map(|r| 1.0 / (r as f64 + 1.0)))
    }

    pub(super) fn sample(&self, rng: &mut StdRng) -> usize {
        let total = *self.cumulative.last().expect("non-empty");
        let x = rng.gen::<f64>() * total;
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1)
    }
}

pub(super) struct EmailGen {
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
pub(super) fn email(n: usize, seed: u64) -> VarKeys {
    let mut gen = EmailGen::new(seed);
    distinct_strings(n, 32, |candidate| gen.next(candidate))
}

/// `n` distinct strings from `next`, which writes a candidate into the buffer it is given; a
/// candidate that repeats an earlier one is dropped and another drawn. `avg_len` sizes the
/// buffer.
pub(super) fn distinct_strings(
    n: usize,
    avg_len: usize,
    mut next: impl FnMut(&mut String),
) -> VarKeys {
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

/// Words of the `docterm` vocabulary: rank `r`'s word is built from syllables picked by a hash
/// of `r` (short words at the popular ranks, as in real text).
pub(super) fn vocabulary_word(rank: u64, out: &mut String) {
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
pub(super) const DOCTERM_VOCABULARY: u64 = 1 << 16;

pub(super) struct DocTermGen {
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
pub(super) fn docterm(n: usize, seed: u64) -> VarKeys {
    let mut gen = DocTermGen::new(seed);
    distinct_strings(n, 33, |candidate| gen.next(candidate))
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

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
}
