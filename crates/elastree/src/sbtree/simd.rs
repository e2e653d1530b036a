//! The counting kernels of the N-ary search: how many keys of a short sorted slice (a bucket
//! of a data block, or its N-ary table) are below a probe. Counting every key instead of
//! stopping at the first larger one has no data-dependent branch, so the slice is compared
//! with a few vector instructions.
//!
//! Two implementations: AVX2 (`std::arch`, eight 32-bit or four 64-bit keys per compare),
//! chosen at run time when the CPU has it, and a portable one, used otherwise (the compiler
//! vectorizes it with the target's baseline instructions). Both are tested on the same
//! inputs; [`Kernel::detect`] picks one once per process.

use std::sync::atomic::{AtomicU8, Ordering};

/// An implementation of the counting kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Plain Rust, any CPU.
    Portable,
    /// AVX2 intrinsics (x86_64 CPUs that have AVX2).
    Avx2,
}

/// The kernel this process uses: 0 until detected, then 1 + the kernel's index.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

impl Kernel {
    /// The kernels this CPU can run, fastest last.
    pub fn available() -> Vec<Kernel> {
        let mut kernels = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            kernels.push(Kernel::Avx2);
        }
        kernels
    }

    /// The fastest kernel this CPU runs, detected on first use.
    #[inline]
    pub fn detect() -> Kernel {
        match CHOSEN.load(Ordering::Relaxed) {
            1 => Kernel::Portable,
            2 => Kernel::Avx2,
            _ => {
                let best = *Kernel::available().last().expect("the portable kernel");
                CHOSEN.store(if best == Kernel::Avx2 { 2 } else { 1 }, Ordering::Relaxed);
                best
            }
        }
    }

    /// The number of keys in `keys` that are below `x` (`strict`) or at most `x`.
    #[inline]
    pub fn count_u32(self, keys: &[u32], x: u32, strict: bool) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::Avx2` exists only where `available` detected AVX2.
            Kernel::Avx2 => unsafe { avx2::count_u32(keys, x, strict) },
            _ => portable_count(keys, x, strict),
        }
    }

    /// [`Kernel::count_u32`] for 64-bit keys.
    #[inline]
    pub fn count_u64(self, keys: &[u64], x: u64, strict: bool) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `count_u32`.
            Kernel::Avx2 => unsafe { avx2::count_u64(keys, x, strict) },
            _ => portable_count(keys, x, strict),
        }
    }
}

/// The portable kernel: a branch-free count.
#[inline]
pub fn portable_count<T: Ord + Copy>(keys: &[T], x: T, strict: bool) -> usize {
    if strict {
        keys.iter().map(|&k| usize::from(k < x)).sum()
    } else {
        keys.iter().map(|&k| usize::from(k <= x)).sum()
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// AVX2 compares signed integers; flipping the top bit maps unsigned order onto signed.
    const FLIP32: i32 = i32::MIN;
    const FLIP64: i64 = i64::MIN;

    /// See [`super::Kernel::count_u32`].
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn count_u32(keys: &[u32], x: u32, strict: bool) -> usize {
        let flip = _mm256_set1_epi32(FLIP32);
        let probe = _mm256_xor_si256(_mm256_set1_epi32(x as i32), flip);
        let mut count = 0usize;
        let mut chunks = keys.chunks_exact(8);
        for chunk in &mut chunks {
            // SAFETY: the chunk holds 8 u32s; the load is unaligned.
            let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
            let v = _mm256_xor_si256(v, flip);
            let mask = if strict {
                // key < x  <=>  x > key
                _mm256_cmpgt_epi32(probe, v)
            } else {
                // key <= x  <=>  !(key > x)
                _mm256_andnot_si256(_mm256_cmpgt_epi32(v, probe), _mm256_set1_epi32(-1))
            };
            count += (_mm256_movemask_ps(_mm256_castsi256_ps(mask)) as u32).count_ones() as usize;
        }
        count + super::portable_count(chunks.remainder(), x, strict)
    }

    /// See [`super::Kernel::count_u64`].
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn count_u64(keys: &[u64], x: u64, strict: bool) -> usize {
        let flip = _mm256_set1_epi64x(FLIP64);
        let probe = _mm256_xor_si256(_mm256_set1_epi64x(x as i64), flip);
        let mut count = 0usize;
        let mut chunks = keys.chunks_exact(4);
        for chunk in &mut chunks {
            // SAFETY: the chunk holds 4 u64s; the load is unaligned.
            let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
            let v = _mm256_xor_si256(v, flip);
            let mask = if strict {
                _mm256_cmpgt_epi64(probe, v)
            } else {
                _mm256_andnot_si256(_mm256_cmpgt_epi64(v, probe), _mm256_set1_epi64x(-1))
            };
            count += (_mm256_movemask_pd(_mm256_castsi256_pd(mask)) as u32).count_ones() as usize;
        }
        count + super::portable_count(chunks.remainder(), x, strict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Every available kernel counts like the portable one on sorted slices of every length
    /// up to 70, with probes below, inside (hits and misses) and above them, and keys across
    /// the sign bit (where a signed compare would go wrong).
    #[test]
    fn every_kernel_counts_like_the_portable_one() {
        let mut rng = StdRng::seed_from_u64(11);
        for kernel in Kernel::available() {
            for len in 0..70usize {
                let mut k32: Vec<u32> = (0..len).map(|_| rng.gen()).collect();
                k32.sort_unstable();
                let mut k64: Vec<u64> = (0..len).map(|_| rng.gen()).collect();
                k64.sort_unstable();
                let mut probes32 = vec![0, u32::MAX, 1 << 31, (1 << 31) - 1, rng.gen()];
                probes32.extend(k32.iter().copied());
                let mut probes64 = vec![0, u64::MAX, 1 << 63, (1 << 63) - 1, rng.gen()];
                probes64.extend(k64.iter().copied());
                for strict in [true, false] {
                    for &x in &probes32 {
                        assert_eq!(
                            kernel.count_u32(&k32, x, strict),
                            portable_count(&k32, x, strict),
                            "{kernel:?} u32 len {len} x {x} strict {strict}"
                        );
                    }
                    for &x in &probes64 {
                        assert_eq!(
                            kernel.count_u64(&k64, x, strict),
                            portable_count(&k64, x, strict),
                            "{kernel:?} u64 len {len} x {x} strict {strict}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_portable_kernel_counts_below_and_at_most() {
        let keys = [1u32, 3, 3, 7];
        assert_eq!(portable_count(&keys, 3, true), 1);
        assert_eq!(portable_count(&keys, 3, false), 3);
        assert_eq!(portable_count(&keys, 0, false), 0);
        assert_eq!(portable_count(&keys, 9, true), 4);
        assert!(Kernel::available().contains(&Kernel::detect()));
    }
}
