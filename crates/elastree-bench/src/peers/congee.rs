//! The `congee` crate.

use super::{BenchIndex, Peer};
use crate::keys::{Key, KeySetKind, KeyWidth};
use crate::workload::Workload;

// congee keys and values are `usize`; the benchmark's 8-byte keys are `u64`.
const _: () = assert!(usize::BITS == 64, "the congee adapter needs 64-bit usize");

/// Why congee skips descending scans.
const CONGEE_NO_REVERSE: &str =
    "congee 0.4 has no reverse iteration (its only scan, `range`, is ascending)";

/// `congee::Congee` (ART with OLC), 8-byte keys only. Every operation pins an epoch, as the
/// crate's examples do; congee's range end is exclusive, so scans end at `u64::MAX` (which the
/// key generators never produce).
pub struct Art {
    tree: congee::Congee<usize, usize>,
}

impl Art {
    /// An empty tree.
    pub fn new() -> Self {
        Self {
            tree: congee::Congee::default(),
        }
    }

    #[inline]
    fn key(key: Key<'_>) -> usize {
        match key {
            Key::U64(v) => v as usize,
            Key::Bytes(_) => panic!("congee got a variable-length key"),
        }
    }
}

impl Default for Art {
    fn default() -> Self {
        Self::new()
    }
}

impl BenchIndex for Art {
    fn name(&self) -> &str {
        Peer::Congee.name()
    }

    fn concurrent(&self) -> bool {
        true
    }

    fn supports_workload(&self, workload: Workload) -> Result<(), String> {
        match workload {
            Workload::ScanDesc => Err(CONGEE_NO_REVERSE.to_string()),
            _ => Ok(()),
        }
    }

    fn supports(&self, keys: KeySetKind) -> Result<(), String> {
        match keys.width() {
            KeyWidth::Fixed8 => Ok(()),
            KeyWidth::Fixed16 | KeyWidth::Variable => Err(format!(
                "congee (ART) supports only 8-byte integer keys; key set {keys} has {} keys",
                match keys.key_len() {
                    Some(len) => format!("{len}-byte"),
                    None => "variable-length".to_string(),
                }
            )),
        }
    }

    #[inline]
    fn insert(&self, key: Key<'_>, value: u64) {
        let guard = self.tree.pin();
        self.tree
            .insert(Self::key(key), value as usize, &guard)
            .expect("congee insert: out of memory");
    }

    #[inline]
    fn get(&self, key: Key<'_>) -> Option<u64> {
        let guard = self.tree.pin();
        self.tree.get(&Self::key(key), &guard).map(|v| v as u64)
    }

    #[inline]
    fn scan(&self, start: Key<'_>, n: usize, visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        const CHUNK: usize = 32;
        let guard = self.tree.pin();
        let mut buffer = [(0usize, 0usize); CHUNK];
        let mut from = Self::key(start);
        let mut count = 0;
        while count < n {
            let want = (n - count).min(CHUNK);
            let got = self
                .tree
                .range(&from, &usize::MAX, &mut buffer[..want], &guard);
            for &(key, value) in &buffer[..got] {
                visit(Key::U64(key as u64), value as u64);
            }
            count += got;
            if got < want {
                break;
            }
            match buffer[got - 1].0.checked_add(1) {
                Some(next) => from = next,
                None => break,
            }
        }
        count
    }

    /// Never called: congee refuses [`Workload::ScanDesc`].
    fn scan_desc(&self, _start: Key<'_>, _n: usize, _visit: &mut dyn FnMut(Key<'_>, u64)) -> usize {
        panic!("{CONGEE_NO_REVERSE}");
    }

    #[inline]
    fn remove(&self, key: Key<'_>) -> bool {
        let guard = self.tree.pin();
        self.tree.remove(&Self::key(key), &guard).is_some()
    }
}
