//! Inserts and removes: find the leaf, read the key's state from one snapshot of its chain,
//! and prepend an Insert or Delete delta against that snapshot. A lost compare-and-swap
//! reads the page again (a concurrent split may have moved the key right, a merge frozen
//! the page). A write whose consolidation leaves the leaf under the merge threshold starts
//! its merge.

use super::delta::{Kind, NewDelta};
use super::key::Key;
use super::shim::{self, Guard};
use super::view::{level_of, Probe, Step};
use super::BwTree;

/// What a write does given the key's current value (`None`: absent): the delta to prepend
/// (`Some(Some(value))` an insert, `Some(None)` a delete, `None` nothing), and the
/// operation's result.
pub(super) type Decide<'a, T> = &'a mut dyn FnMut(Option<u64>) -> (Option<Option<u64>>, T);

impl BwTree {
    /// Applies `decide` to `key`'s current value and installs the delta it asks for;
    /// returns its result. Linearizable: the value decided on is the one the delta replaces.
    pub(super) fn write<T>(&self, key: Key<'_>, decide: Decide<'_, T>) -> T {
        let guard = &shim::pin();
        let (mut id, _) = self.descend(Probe::at(key), 0, true, guard);
        loop {
            let top = self.table.get(id);
            // SAFETY: read from the mapping table under `guard`.
            if unsafe { level_of(top) } != Some(0) {
                // The root grew since the descent read it.
                id = self.descend(Probe::at(key), 0, true, guard).0;
                continue;
            }
            let (current, spot) = match self.lookup(top, key) {
                Step::Here(value, spot) => (value, spot),
                Step::Right(right, split) => {
                    if let Some(split) = split {
                        self.help_split(0, split, guard);
                    }
                    id = right;
                    continue;
                }
                Step::Left(remove) => {
                    self.help_remove(remove, guard);
                    id = self.descend(Probe::at(key), 0, true, guard).0;
                    continue;
                }
                Step::Child(_) | Step::Restart => {
                    id = self.descend(Probe::at(key), 0, true, guard).0;
                    continue;
                }
            };
            let (change, result) = decide(current);
            let Some(change) = change else {
                return result;
            };
            let new = NewDelta {
                kind: if change.is_some() {
                    Kind::Insert
                } else {
                    Kind::Delete
                },
                level: 0,
                key,
                high: None,
                value: change.unwrap_or(0),
                spot,
            };
            if let Some(delta) = self.install(id, top, &new) {
                match (current.is_some(), change.is_some()) {
                    (false, true) => self.len.add(1),
                    (true, false) => self.len.add(-1),
                    _ => {}
                }
                self.settle(id, delta, guard);
                return result;
            }
        }
    }

    /// The value of `key`. Writes shared memory only to finish a merge it meets or to
    /// consolidate the leaf chain it read (see [`Self::get_fast`]).
    pub(super) fn get(&self, key: Key<'_>, guard: &Guard) -> Option<u64> {
        if let Some(value) = self.get_fast(key, guard) {
            return value;
        }
        let mut top = self.descend(Probe::at(key), 0, false, guard).1;
        loop {
            let id = match self.lookup(top, key) {
                Step::Here(value, _) => return value,
                Step::Right(right, _) => right,
                Step::Left(remove) => {
                    // A write a reader makes: finishing a merge it would otherwise
                    // wait for.
                    self.help_remove(remove, guard);
                    self.descend(Probe::at(key), 0, false, guard).0
                }
                Step::Child(_) | Step::Restart => self.descend(Probe::at(key), 0, false, guard).0,
            };
            top = self.table.get(id);
            // SAFETY: read from the mapping table under `guard`.
            if unsafe { level_of(top) } != Some(0) {
                // The root grew since the descent read it.
                top = self.descend(Probe::at(key), 0, false, guard).1;
            }
        }
    }
}
