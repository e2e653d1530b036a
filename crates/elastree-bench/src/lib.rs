//! elastree-bench: measures elastree's index kinds side by side with peer indexes in one run.
//!
//! * [`keys`]: deterministic key sets (`rand64`, `mono64`, `email`, ...): their names and
//!   storage, the generators apart from the word lists they draw from;
//! * [`peers`]: the [`peers::BenchIndex`] trait and its adapters for elastree and the peers;
//! * [`workload`]: operation streams, workloads (`load`, `lookup`, `lookup-zipf`, `scan`,
//!   `scan-desc`, `delete`, `ycsb-a` ... `ycsb-f`) and the runner that times them on 1..N
//!   threads;
//! * [`ycsb`]: the YCSB core workloads' operation streams;
//! * [`alloc`]: the counting global allocator and RSS readings for memory figures (from
//!   `elastree-testkit`, which the memory tests share);
//! * [`runner`]: a run measured with a progress bar, what `bench` and `repro` share;
//! * [`output`]: the one writer of measured rows (JSON lines, CSV, the results files);
//! * [`report`]: the bench command's table and its rows;
//! * [`cluster`]: the distributed kinds (`dist`, `dist-baseline`): their cluster, their
//!   clients and their round-trip counters;
//! * [`cli`]: the command line ([`cli::BenchArgs`], [`cli::run`]) of `elastree-bench` and
//!   `elastree bench`;
//! * [`growshrink`]: the grow-then-shrink (data spike) driver;
//! * [`repro`]: named experiments (`elastree repro <experiment>`) that write a Markdown
//!   report, PNG plots and the raw rows.
//!
//! The binaries `elastree-bench` and `elastree bench` wire them to a command line; run them
//! from a release build:
//! `cargo run --release -p elastree-bench -- --index btree,btreemap --keys rand64 --n 1M`.

pub use elastree_testkit::alloc;
pub mod cli;
pub mod cluster;
pub mod dist;
pub mod growshrink;
pub mod keys;
pub mod mixed;
pub mod output;
pub mod peers;
pub mod report;
pub mod repro;
pub mod runner;
pub mod workload;
pub mod ycsb;

/// Exit code for arguments that make no run (the same as clap's usage errors).
pub const EXIT_USAGE: u8 = 2;

/// Parses a count with an optional decimal suffix: `K` (10^3), `M` (10^6) or `G` (10^9),
/// case-insensitive, and `_` separators: `200K`, `10M`, `1_000`, `1.5M`.
pub fn parse_count(text: &str) -> Result<usize, String> {
    let cleaned: String = text.trim().chars().filter(|&c| c != '_').collect();
    let (number, multiplier) = match cleaned.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&cleaned[..cleaned.len() - 1], 1e3),
        Some('M') => (&cleaned[..cleaned.len() - 1], 1e6),
        Some('G') => (&cleaned[..cleaned.len() - 1], 1e9),
        _ => (cleaned.as_str(), 1.0),
    };
    if let Ok(whole) = number.parse::<usize>() {
        return whole
            .checked_mul(multiplier as usize)
            .ok_or_else(|| format!("{text:?} is too large"));
    }
    match number.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.0 => {
            let count = value * multiplier;
            if count.fract() != 0.0 {
                Err(format!("{text:?} is not a whole number"))
            } else if count > usize::MAX as f64 {
                Err(format!("{text:?} is too large"))
            } else {
                Ok(count as usize)
            }
        }
        _ => Err(format!(
            "{text:?} is not a count (examples: 2000, 200K, 10M)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_count;

    #[test]
    fn counts_with_suffixes() {
        assert_eq!(parse_count("2000"), Ok(2000));
        assert_eq!(parse_count("200K"), Ok(200_000));
        assert_eq!(parse_count("200k"), Ok(200_000));
        assert_eq!(parse_count("10M"), Ok(10_000_000));
        assert_eq!(parse_count("1.5M"), Ok(1_500_000));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert_eq!(parse_count("2G"), Ok(2_000_000_000));
        assert!(parse_count("").is_err());
        assert!(parse_count("M").is_err());
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("ten").is_err());
        assert!(parse_count("-5").is_err());
    }
}
