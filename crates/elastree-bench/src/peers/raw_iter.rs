//! Scans and the drain through the raw shared iterator that bplustree and ferntree share.

/// Removes every key in ascending order, in batches read by a short-lived shared iterator.
macro_rules! drain_ascending {
    ($tree:expr) => {
        loop {
            let batch: Vec<K> = {
                let mut iter = $tree.raw_iter();
                iter.seek_to_first();
                std::iter::from_fn(|| iter.next().map(|(key, _)| key.clone()))
                    .take($crate::peers::raw_iter::DRAIN_BATCH)
                    .collect()
            };
            if batch.is_empty() {
                break;
            }
            for key in &batch {
                $tree.remove(key);
            }
        }
    };
}

/// Visits up to `$n` pairs ascending from the first key `>= $start` with the raw shared
/// iterator of a bplustree or ferntree tree (`seek`, then `next`).
macro_rules! raw_scan_ascending {
    ($tree:expr, $start:expr, $n:expr, $visit:expr) => {
        K::with_ref($start, |k| {
            let mut iter = $tree.raw_iter();
            iter.seek(k);
            let mut count = 0;
            while count < $n {
                match iter.next() {
                    Some((key, &value)) => $visit(key.key(), value),
                    None => break,
                }
                count += 1;
            }
            count
        })
    };
}

/// Visits up to `$n` pairs descending from the last key `<= $start` with the raw shared
/// iterator of a bplustree or ferntree tree (`seek_for_prev`, then `prev`).
///
/// bplustree 0.1's `seek_for_prev` of a key that is absent and falls inside a leaf leaves the
/// cursor after the next *larger* key (ferntree 0.7 fixed this), so a first key above the start
/// is skipped; with ferntree, or a start key that is present, that never happens.
macro_rules! raw_scan_descending {
    ($tree:expr, $start:expr, $n:expr, $visit:expr) => {
        K::with_ref($start, |k| {
            let mut iter = $tree.raw_iter();
            iter.seek_for_prev(k);
            let mut count = 0;
            let mut first = true;
            while count < $n {
                match iter.prev() {
                    Some((key, _)) if first && Borrow::<K::Ref>::borrow(key) > k => {
                        first = false;
                        continue;
                    }
                    Some((key, &value)) => $visit(key.key(), value),
                    None => break,
                }
                first = false;
                count += 1;
            }
            count
        })
    };
}

/// Keys removed per batch when emptying a tree before dropping it.
pub(super) const DRAIN_BATCH: usize = 4096;

pub(super) use {drain_ascending, raw_scan_ascending, raw_scan_descending};
