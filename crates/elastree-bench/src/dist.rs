//! Request distributions for pre-generated operation streams.
//!
//! [`Zipfian`] is the YCSB generator (Gray et al., "Quickly generating billion-record synthetic
//! databases", SIGMOD 1994): item `i` of `n` (rank 0 the most popular) is drawn with probability
//! close to `(1 / (i + 1)^theta) / zeta(n, theta)`, in O(1) per draw after an O(n) precomputation
//! of `zeta(n, theta) = sum_{i=1..n} 1 / i^theta`. Ranks 0 and 1 have exactly their Zipf
//! probabilities; the rest follow the generator's continuous approximation, as in YCSB, which
//! gives ranks 2..10 2-18% more than their exact Zipf share (theta 0.99) and converges beyond.
//!
//! [`ScrambledZipfian`] spreads the popular ranks over the item space (YCSB's
//! `ScrambledZipfianGenerator`): the popularity profile stays Zipfian, but the hot items are not
//! the lowest-numbered ones, so in a key set loaded in key order they are not neighbours.
//!
//! Draws take any [`Rng`]; streams built with [`Zipfian::positions`] are deterministic in the
//! seed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::keys::mix64;

/// YCSB's default skew.
pub const DEFAULT_THETA: f64 = 0.99;

/// A Zipfian distribution over the items `0..n`, item 0 the most popular.
#[derive(Debug, Clone, PartialEq)]
pub struct Zipfian {
    n: u64,
    theta: f64,
    zeta_n: f64,
    alpha: f64,
    eta: f64,
    /// `1 + 0.5^theta`: the cumulative weight of ranks 0 and 1.
    half_pow_theta_plus_one: f64,
}

impl Zipfian {
    /// A Zipfian over `n` items with skew `theta`, `0 <= theta < 1` (the YCSB formula has a pole
    /// at 1). Computing `zeta(n, theta)` takes O(n): about 0.1 s for 10M items.
    pub fn new(n: u64, theta: f64) -> Result<Self, String> {
        if n == 0 {
            return Err("a Zipfian needs at least one item".to_string());
        }
        if !(0.0..1.0).contains(&theta) {
            return Err(format!("Zipfian theta must be in [0, 1), got {theta}"));
        }
        let zeta_n = zeta(n, theta);
        Ok(Self {
            n,
            theta,
            zeta_n,
            alpha: 1.0 / (1.0 - theta),
            eta: eta(n, theta, zeta_n),
            half_pow_theta_plus_one: 1.0 + 0.5f64.powf(theta),
        })
    }

    /// Extends the distribution to `n` items (no change if it already has that many), as
    /// YCSB's "latest" generator does while records are inserted: `zeta` grows by the new
    /// terms only, so growing one item at a time costs O(1) per item.
    pub fn grow(&mut self, n: u64) {
        if n <= self.n {
            return;
        }
        let theta = self.theta;
        self.zeta_n += (self.n + 1..=n)
            .map(|i| 1.0 / (i as f64).powf(theta))
            .sum::<f64>();
        self.n = n;
        self.eta = eta(n, theta, self.zeta_n);
    }

    /// A Zipfian over `n` items with YCSB's default skew, 0.99.
    pub fn with_default_theta(n: u64) -> Result<Self, String> {
        Self::new(n, DEFAULT_THETA)
    }

    /// The number of items.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The skew.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// `zeta(n, theta)`, the normalising constant.
    pub fn zeta_n(&self) -> f64 {
        self.zeta_n
    }

    /// The exact Zipf probability of rank `rank` (0-based): `1 / ((rank + 1)^theta * zeta_n)`.
    /// The sampler matches it exactly for ranks 0 and 1 and approximately beyond.
    pub fn probability(&self, rank: u64) -> f64 {
        1.0 / ((rank as f64 + 1.0).powf(self.theta) * self.zeta_n)
    }

    /// Draws a rank in `0..n`.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.half_pow_theta_plus_one {
            return 1.min(self.n - 1);
        }
        let rank = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.n - 1)
    }

    /// `len` draws from `seed`, as `u32` positions (the workloads' operation-stream type).
    /// Panics if `n` exceeds `2^32`.
    pub fn positions(&self, len: usize, seed: u64) -> Vec<u32> {
        assert!(
            self.n <= 1 << 32,
            "positions are u32: n = {} is too large",
            self.n
        );
        let mut rng = StdRng::seed_from_u64(seed);
        (0..len).map(|_| self.sample(&mut rng) as u32).collect()
    }
}

/// The generator's `eta` for `n` items: `(1 - (2 / n)^(1 - theta)) / (1 - zeta(2) / zeta(n))`.
/// With one or two items it is never used (the draw ends at the rank-0/rank-1 tests), and 1 avoids
/// dividing by zero there.
fn eta(n: u64, theta: f64, zeta_n: f64) -> f64 {
    if n > 2 {
        (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta(2, theta) / zeta_n)
    } else {
        1.0
    }
}

/// `sum_{i=1..n} 1 / i^theta`.
fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// A [`Zipfian`] whose ranks are scattered over `0..n` by a hash, as YCSB's scrambled
/// generator does: rank `r` maps to `hash(r) mod n`. Like YCSB's, the mapping is not a
/// permutation (a few ranks share an item, a few items are never drawn); the popularity of the
/// hottest items is unaffected for any practical `n`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrambledZipfian {
    zipf: Zipfian,
    salt: u64,
}

impl ScrambledZipfian {
    /// A scrambled Zipfian over `n` items with skew `theta`; `salt` picks the scattering.
    pub fn new(n: u64, theta: f64, salt: u64) -> Result<Self, String> {
        Ok(Self {
            zipf: Zipfian::new(n, theta)?,
            salt,
        })
    }

    /// The item rank `rank` lands on.
    #[inline]
    pub fn item_of_rank(&self, rank: u64) -> u64 {
        mix64(rank ^ self.salt) % self.zipf.n
    }

    /// Draws an item in `0..n`.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.item_of_rank(self.zipf.sample(rng))
    }

    /// `len` draws from `seed`, as `u32` positions. Panics if `n` exceeds `2^32`.
    pub fn positions(&self, len: usize, seed: u64) -> Vec<u32> {
        assert!(
            self.zipf.n <= 1 << 32,
            "positions are u32: n = {} is too large",
            self.zipf.n
        );
        let mut rng = StdRng::seed_from_u64(seed);
        (0..len).map(|_| self.sample(&mut rng) as u32).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(zipf: &Zipfian, draws: usize, seed: u64) -> Vec<usize> {
        let mut counts = vec![0usize; zipf.n() as usize];
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..draws {
            counts[zipf.sample(&mut rng) as usize] += 1;
        }
        counts
    }

    #[test]
    fn top_ranks_follow_theory() {
        const DRAWS: usize = 400_000;
        let zipf = Zipfian::new(10_000, 0.99).unwrap();
        let counts = counts(&zipf, DRAWS, 42);
        // Ranks 0 and 1 are exact in the generator: within 3% of theory.
        for rank in 0..2 {
            let expected = zipf.probability(rank) * DRAWS as f64;
            let got = counts[rank as usize] as f64;
            assert!(
                (got - expected).abs() < expected * 0.03,
                "rank {rank}: {got} draws, theory {expected:.0}"
            );
        }
        // Beyond rank 1 the draw is the continuous approximation, whose CDF is
        // `P(rank < k) = 1 - (1 - (k / n)^(1 - theta)) / eta`: ranks 2..20 within 5% of it.
        let cdf = |k: u64| 1.0 - (1.0 - (k as f64 / 10_000.0).powf(0.01)) / zipf.eta;
        for rank in 2..20u64 {
            let expected = (cdf(rank + 1) - cdf(rank)) * DRAWS as f64;
            let got = counts[rank as usize] as f64;
            assert!(
                (got - expected).abs() < expected * 0.05,
                "rank {rank}: {got} draws, generator's CDF {expected:.0}"
            );
        }
        // That approximation overweights ranks 2..10 by 2-18% over pure Zipf (YCSB's too): the
        // ten hottest items get within 6% of their Zipf share.
        let top10: usize = counts[..10].iter().sum();
        let top10_theory: f64 = (0..10).map(|r| zipf.probability(r)).sum::<f64>() * DRAWS as f64;
        assert!(
            (top10 as f64 - top10_theory).abs() < top10_theory * 0.06,
            "top 10: {top10} draws, theory {top10_theory:.0}"
        );
        assert!(counts[0] > counts[1] && counts[1] > counts[4] && counts[4] > counts[50]);
    }

    #[test]
    fn theta_zero_is_uniform() {
        let zipf = Zipfian::new(10, 0.0).unwrap();
        let counts = counts(&zipf, 100_000, 1);
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{c}");
        }
    }

    #[test]
    fn draws_stay_in_range() {
        for n in [1u64, 2, 3, 17, 1000] {
            for theta in [0.0, 0.5, 0.99] {
                let zipf = Zipfian::new(n, theta).unwrap();
                let scrambled = ScrambledZipfian::new(n, theta, 9).unwrap();
                let mut rng = StdRng::seed_from_u64(n);
                for _ in 0..10_000 {
                    assert!(zipf.sample(&mut rng) < n);
                    assert!(scrambled.sample(&mut rng) < n);
                }
            }
        }
    }

    #[test]
    fn streams_are_deterministic_from_the_seed() {
        let zipf = Zipfian::with_default_theta(1_000).unwrap();
        assert_eq!(zipf.positions(5_000, 3), zipf.positions(5_000, 3));
        assert_ne!(zipf.positions(5_000, 3), zipf.positions(5_000, 4));
        let scrambled = ScrambledZipfian::new(1_000, DEFAULT_THETA, 7).unwrap();
        assert_eq!(scrambled.positions(5_000, 3), scrambled.positions(5_000, 3));
    }

    #[test]
    fn scrambling_moves_the_hot_items_but_keeps_the_skew() {
        let scrambled = ScrambledZipfian::new(100_000, 0.99, 5).unwrap();
        let hot = scrambled.item_of_rank(0);
        let stream = scrambled.positions(100_000, 1);
        let hot_share = stream.iter().filter(|&&p| u64::from(p) == hot).count() as f64 / 1e5;
        let theory = scrambled.zipf.probability(0);
        assert!(
            (hot_share - theory).abs() < theory * 0.1,
            "{hot_share} vs {theory}"
        );
        // The ten hottest items are spread, not the first ten.
        let top: Vec<u64> = (0..10).map(|r| scrambled.item_of_rank(r)).collect();
        assert!(top.iter().filter(|&&i| i < 10).count() < 3, "{top:?}");
    }

    #[test]
    fn growing_matches_a_fresh_distribution() {
        let mut grown = Zipfian::new(1, 0.99).unwrap();
        for n in [2u64, 3, 10, 1_000, 5_000] {
            grown.grow(n);
            let fresh = Zipfian::new(n, 0.99).unwrap();
            assert_eq!(grown.n(), n);
            assert!((grown.zeta_n() - fresh.zeta_n()).abs() < 1e-9 * fresh.zeta_n());
            assert!((grown.eta - fresh.eta).abs() < 1e-9);
        }
        grown.grow(10);
        assert_eq!(grown.n(), 5_000, "growing never shrinks");
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Zipfian::new(0, 0.5).is_err());
        assert!(Zipfian::new(10, 1.0).is_err());
        assert!(Zipfian::new(10, -0.1).is_err());
        assert!(Zipfian::new(10, f64::NAN).is_err());
    }
}
