//! Dead bits: one bit per entry of a run's blocks, set while the entry is deleted.
//!
//! Writers change bits under their run's lock (a load and a store, not a read-modify-write:
//! no two writers at once); readers load them relaxed and validate what they read the way
//! they validate the entries themselves.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A fixed number of bits, all clear at first.
pub struct DeadBits {
    words: Box<[AtomicU64]>,
    /// Whether any bit was ever set: until one is (until the first delete, which most runs
    /// never see), range tests and moves cost one load.
    ever: AtomicBool,
}

impl DeadBits {
    /// `bits` clear bits.
    pub fn new(bits: usize) -> Self {
        Self {
            words: (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            ever: AtomicBool::new(false),
        }
    }

    /// Bytes of the bits of a set of `bits`.
    pub fn bytes(bits: usize) -> usize {
        bits.div_ceil(64) * 8
    }

    /// Whether bit `bit` is set.
    #[inline]
    pub fn get(&self, bit: usize) -> bool {
        self.words[bit / 64].load(Ordering::Relaxed) & (1 << (bit % 64)) != 0
    }

    /// Under the owner's lock: sets or clears bit `bit`.
    pub fn set(&self, bit: usize, dead: bool) {
        if dead {
            self.ever.store(true, Ordering::Relaxed);
        }
        let word = &self.words[bit / 64];
        let mask = 1 << (bit % 64);
        let was = word.load(Ordering::Relaxed);
        word.store(
            if dead { was | mask } else { was & !mask },
            Ordering::Relaxed,
        );
    }

    /// Whether any of the bits `from..to` is set (a word at a time).
    pub fn any(&self, from: usize, to: usize) -> bool {
        if !self.ever.load(Ordering::Relaxed) {
            return false;
        }
        let mut bit = from;
        while bit < to {
            let (word, shift) = (bit / 64, bit % 64);
            let span = (64 - shift).min(to - bit);
            let mask = if span == 64 {
                u64::MAX
            } else {
                ((1u64 << span) - 1) << shift
            };
            if self.words[word].load(Ordering::Relaxed) & mask != 0 {
                return true;
            }
            bit += span;
        }
        false
    }

    /// Under the owner's lock: moves bits `from..from + len` to `to..to + len` (the ranges
    /// may overlap), when any of them is set (rarely: only deletes set them). Inlined down
    /// to the test that no bit was ever set (a late insert moves bits every time).
    #[inline(always)]
    pub fn move_range(&self, from: usize, to: usize, len: usize) {
        if self.ever.load(Ordering::Relaxed) {
            self.move_set_range(from, to, len);
        }
    }

    /// [`DeadBits::move_range`] once some bit has been set.
    #[cold]
    #[inline(never)]
    fn move_set_range(&self, from: usize, to: usize, len: usize) {
        if !self.any(from, from + len) && !self.any(to, to + len) {
            return;
        }
        let bits: Vec<bool> = (from..from + len).map(|b| self.get(b)).collect();
        for (i, dead) in bits.into_iter().enumerate() {
            self.set(to + i, dead);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `any` sees exactly the bits of its range, within a word and across words.
    #[test]
    fn any_checks_exactly_its_range() {
        let bits = DeadBits::new(256);
        assert!(!bits.any(0, 256));
        for bit in [0, 63, 64, 130, 255] {
            bits.set(bit, true);
            assert!(bits.any(bit, bit + 1), "bit {bit} alone");
            assert!(bits.any(0, 256), "bit {bit} in everything");
            assert!(!bits.any(0, bit), "bits below {bit}");
            assert!(!bits.any(bit + 1, 256), "bits above {bit}");
            assert!(!bits.any(bit, bit), "an empty range at {bit}");
            bits.set(bit, false);
        }
    }

    /// Moves up and down, overlapping or not, carry every bit and clear the ones they
    /// leave only where the target covers them.
    #[test]
    fn moves_carry_every_bit() {
        for (from, to) in [(3, 4), (4, 3), (10, 100), (100, 10), (60, 70)] {
            let bits = DeadBits::new(256);
            let pattern = |i: usize| i.is_multiple_of(3) || i == 7;
            for i in 0..20 {
                bits.set(from + i, pattern(i));
            }
            bits.move_range(from, to, 20);
            for i in 0..20 {
                assert_eq!(bits.get(to + i), pattern(i), "{from}->{to}: bit {i}");
            }
        }
        let clear = DeadBits::new(128);
        clear.move_range(0, 64, 64);
        assert!(!clear.any(0, 128));
    }
}
