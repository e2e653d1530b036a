//! The time-ordered key sets: `tsensor` (timestamp + sensor id, some readings late) and
//! `objlog` (an object-store access log).

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{mix64, FixedKeys};
use crate::dist;

/// The number of sensors of `tsensor`: ids `0..1024`.
pub const TSENSOR_SENSORS: u64 = 1_024;
/// The shortest and longest delay of a delayed `tsensor` key, in readings (about milliseconds:
/// the stream carries about one reading per millisecond).
pub(super) const TSENSOR_DELAY: (f64, f64) = (16.0, 16_384.0);

/// `n` distinct time-series keys `timestamp_ms << 16 | sensor` (so the big-endian bytes are a
/// 6-byte timestamp and a 2-byte sensor id), readings of 1,024 sensors at about one reading per
/// millisecond, starting on a seeded day of 2024.
///
/// Readings are produced in strictly increasing key order; a fraction `delayed` of them (each
/// independently) is held back and arrives 16 to 16,384 readings later (log-uniform), behind
/// keys larger than itself. Because every delay spans at least 16 readings, the fraction of
/// keys smaller than some earlier key equals `delayed` up to sampling noise (measured on 1M
/// keys: within 0.001 of it for fractions 0.05 to 0.8).
pub(super) fn tsensor(n: usize, seed: u64, delayed: f64) -> Vec<u64> {
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
pub(super) const OBJLOG_KEYS_PER_DAY: usize = 1_000;

/// The relative volume of each of `days` days, summing to 1. Weekdays draw from
/// `[0.9, 1.1]` of a base level and weekends from 0.9 times that; about 6% of the days (none
/// under 10 days) are bursts of 2.1-3.3 times the mean day, the mean taken over all days
/// bursts included, so ordinary days land within 0.75-1.05 of the mean.
pub(super) fn objlog_day_shares(days: usize, rng: &mut StdRng) -> Vec<f64> {
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
pub(super) fn objlog(n: usize, seed: u64) -> FixedKeys {
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
