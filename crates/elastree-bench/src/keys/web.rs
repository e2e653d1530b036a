//! Key sets of text people index: `url`, generated web addresses, and `words`, the words of
//! a real dictionary.

use std::fmt::Write;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::strings::{distinct_strings, vocabulary_word, Zipf};
use super::VarKeys;
use crate::dist;

/// Sites and their weights (a skewed mix: a few hosts hold most pages, as on the web).
const SITES: &[(&str, u32)] = &[
    ("wikipedia.org", 400),
    ("youtube.com", 320),
    ("github.com", 240),
    ("stackoverflow.com", 200),
    ("reddit.com", 180),
    ("amazon.com", 160),
    ("nytimes.com", 120),
    ("medium.com", 100),
    ("bbc.co.uk", 90),
    ("imdb.com", 80),
    ("etsy.com", 70),
    ("arxiv.org", 60),
    ("docs.rs", 55),
    ("theguardian.com", 50),
    ("spiegel.de", 40),
    ("lemonde.fr", 35),
    ("example.com", 30),
    ("craigslist.org", 25),
    ("archive.org", 20),
    ("gov.uk", 18),
    ("npr.org", 15),
    ("quora.com", 12),
    ("kernel.org", 10),
    ("python.org", 9),
    ("rust-lang.org", 8),
    ("apache.org", 7),
    ("mozilla.org", 6),
    ("debian.org", 5),
];

/// Host prefixes and their weights.
const SUBDOMAINS: &[(&str, u32)] = &[
    ("www.", 60),
    ("", 15),
    ("m.", 10),
    ("en.", 5),
    ("api.", 5),
    ("cdn.", 5),
];

/// The first path segment of a site's pages (a section), drawn skewed.
const SECTIONS: &[&str] = &[
    "wiki",
    "watch",
    "questions",
    "r",
    "dp",
    "articles",
    "blog",
    "news",
    "title",
    "listing",
    "abs",
    "pdf",
    "docs",
    "users",
    "products",
    "search",
    "en",
    "2024",
    "2025",
    "static",
];

/// Endings of the last path segment and their weights.
const EXTENSIONS: &[(&str, u32)] = &[
    ("", 50),
    (".html", 25),
    (".php", 10),
    (".jpg", 10),
    (".pdf", 5),
];

/// The size of the word vocabulary of path segments.
const PATH_VOCABULARY: u64 = 1 << 15;

struct UrlGen {
    rng: StdRng,
    sites: Zipf,
    subdomains: Zipf,
    sections: Zipf,
    extensions: Zipf,
    words: dist::Zipfian,
}

impl UrlGen {
    fn new(seed: u64) -> Self {
        let weighted = |list: &[(&str, u32)]| Zipf::weighted(list.iter().map(|&(_, w)| w));
        Self {
            rng: StdRng::seed_from_u64(seed ^ 0x7572_6c00),
            sites: weighted(SITES),
            subdomains: weighted(SUBDOMAINS),
            sections: Zipf::harmonic(SECTIONS.len()),
            extensions: weighted(EXTENSIONS),
            words: dist::Zipfian::new(PATH_VOCABULARY, 0.9).expect("a valid Zipfian"),
        }
    }

    fn word(&mut self, out: &mut String) {
        let rank = self.words.sample(&mut self.rng);
        vocabulary_word(rank, out);
    }

    /// One path segment: a word (most often), a numeric id, or a slug of two to four words.
    fn segment(&mut self, out: &mut String) {
        match self.rng.gen_range(0..10) {
            0..=6 => self.word(out),
            7 | 8 => {
                let digits = self.rng.gen_range(2..=9);
                let id = self.rng.gen_range(1..10u64.pow(digits));
                write!(out, "{id}").expect("writing to a String");
            }
            _ => {
                for i in 0..self.rng.gen_range(2..=4) {
                    if i > 0 {
                        out.push('-');
                    }
                    self.word(out);
                }
            }
        }
    }

    /// One candidate: scheme, host, a section and one to four more segments, sometimes a
    /// file ending and a query.
    fn next(&mut self, out: &mut String) {
        out.clear();
        out.push_str(if self.rng.gen_ratio(92, 100) {
            "https://"
        } else {
            "http://"
        });
        out.push_str(SUBDOMAINS[self.subdomains.sample(&mut self.rng)].0);
        out.push_str(SITES[self.sites.sample(&mut self.rng)].0);
        out.push('/');
        out.push_str(SECTIONS[self.sections.sample(&mut self.rng)]);
        let depth = [1, 2, 2, 3, 3, 3, 4, 4][self.rng.gen_range(0..8)];
        for _ in 0..depth {
            out.push('/');
            self.segment(out);
        }
        out.push_str(EXTENSIONS[self.extensions.sample(&mut self.rng)].0);
        if self.rng.gen_ratio(1, 5) {
            out.push_str("?q=");
            self.word(out);
            let page = self.rng.gen_range(1..50);
            write!(out, "&page={page}").expect("writing to a String");
        }
    }
}

/// `n` distinct URLs, about 60 bytes on average, in random order: a skewed mix of sites and
/// sections (so keys share long prefixes) and skewed path words.
pub(super) fn url(n: usize, seed: u64) -> VarKeys {
    let mut gen = UrlGen::new(seed);
    distinct_strings(n, 64, |candidate| gen.next(candidate))
}

/// Where the `words` key set reads its dictionary: Debian's `wamerican` package.
pub const DICTIONARY: &str = "/usr/share/dict/words";

/// The dictionary's words (distinct, non-empty lines), or why they cannot be read.
pub fn dictionary() -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(DICTIONARY).map_err(|e| {
        format!(
            "the words key set reads {DICTIONARY} ({e}): install the Debian package wamerican \
             (scripts/install-deps.sh does)"
        )
    })?;
    let mut words: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    words.sort_unstable();
    words.dedup();
    if words.is_empty() {
        return Err(format!("{DICTIONARY} holds no words"));
    }
    Ok(words)
}

/// `n` distinct keys from the dictionary, in random order: every word once (a random
/// selection of them when `n` is smaller), then, past the dictionary's size, two-word
/// phrases (`word word`) of random words.
pub(super) fn words(n: usize, seed: u64) -> Result<VarKeys, String> {
    let mut dictionary = dictionary()?;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x776f_7264_7300);
    dictionary.shuffle(&mut rng);
    let singles = n.min(dictionary.len());
    let mut next_single = 0;
    let keys = distinct_strings(n, 12, |candidate| {
        candidate.clear();
        if next_single < singles {
            candidate.push_str(&dictionary[next_single]);
            next_single += 1;
        } else {
            let pick = |rng: &mut StdRng| dictionary[rng.gen_range(0..dictionary.len())].as_str();
            candidate.push_str(pick(&mut rng));
            candidate.push(' ');
            candidate.push_str(pick(&mut rng));
        }
    });
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_look_like_urls_and_share_prefixes() {
        let keys = url(2_000, 7);
        let mut sorted: Vec<&[u8]> = (0..keys.len()).map(|i| keys.get(i)).collect();
        assert!(sorted.iter().all(|k| k.starts_with(b"http")));
        sorted.sort();
        let shared: usize = sorted
            .windows(2)
            .map(|w| w[0].iter().zip(w[1]).take_while(|(a, b)| a == b).count())
            .sum();
        let average = shared as f64 / (sorted.len() - 1) as f64;
        assert!(
            average > 15.0,
            "neighbours share {average:.1} bytes on average"
        );
    }
}
