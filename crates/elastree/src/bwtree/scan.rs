//! Range scans, a page at a time: each page is read from one snapshot of its chain
//! (consolidated into a private image), its entries in range are visited, and the scan goes
//! on from the page's high fence (ascending, to its right sibling) or below its low fence
//! (descending, from the root). Keys therefore never go backwards or repeat, and a pair
//! present throughout the scan is visited: the pages read cover the range without gaps.

use std::ops::Bound;

use super::key::Key;
use super::shim;
use super::view::{level_of, Probe, Step};
use super::{BwTree, NO_SIBLING};
use crate::index::Direction;
use crate::node::page::PageImage;
use crate::node::slotted::VarKey;

/// An owned scan bound.
type OwnedBound = Bound<VarKey>;

fn owned(bound: Bound<Key<'_>>, pairs: bool) -> OwnedBound {
    match bound {
        Bound::Included(k) => Bound::Included(k.to_owned(pairs)),
        Bound::Excluded(k) => Bound::Excluded(k.to_owned(pairs)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether `key` is at or after `lower`.
fn above(key: Key<'_>, lower: &OwnedBound) -> bool {
    match lower {
        Bound::Included(l) => key >= Key::of(l),
        Bound::Excluded(l) => key > Key::of(l),
        Bound::Unbounded => true,
    }
}

/// Whether `key` is at or before `upper`.
fn below(key: Key<'_>, upper: &OwnedBound) -> bool {
    match upper {
        Bound::Included(u) => key <= Key::of(u),
        Bound::Excluded(u) => key < Key::of(u),
        Bound::Unbounded => true,
    }
}

impl BwTree {
    /// Visits up to `limit` entries within `(lower, upper)` in `direction` order; returns how
    /// many it visited.
    pub(super) fn scan(
        &self,
        lower: Bound<Key<'_>>,
        upper: Bound<Key<'_>>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize {
        if limit == 0 {
            return 0;
        }
        let (mut lower, mut upper) = (owned(lower, self.pairs), owned(upper, self.pairs));
        let ascending = direction == Direction::Ascending;
        let mut guard = shim::pin();
        let mut image = PageImage::default();
        let mut count = 0;
        // The page to read next, when known without a descent (an ascending scan's right
        // sibling).
        let mut next = None;
        loop {
            let probe = if ascending {
                match &lower {
                    Bound::Included(k) | Bound::Excluded(k) => Probe::at(Key::of(k)),
                    Bound::Unbounded => Probe::at(Key::MIN),
                }
            } else {
                match &upper {
                    Bound::Included(k) => Probe::at(Key::of(k)),
                    Bound::Excluded(k) => Probe {
                        key: Some(Key::of(k)),
                        below: true,
                    },
                    Bound::Unbounded => Probe {
                        key: None,
                        below: false,
                    },
                }
            };
            if probe.below && probe.key == Some(Key::MIN) {
                // Nothing sorts below the smallest key.
                return count;
            }
            let mut id = match next.take() {
                Some(id) => id,
                None => self.descend(probe, 0, false, &guard).0,
            };
            let top = loop {
                let top = self.table.get(id);
                // SAFETY: read from the mapping table under `guard`.
                if unsafe { level_of(top) } != Some(0) {
                    // The root grew since the descent read it.
                    break None;
                }
                match self.covers(top, probe) {
                    Step::Here(_) => break Some(top),
                    Step::Right(right, _) => id = right,
                    Step::Left(remove) => {
                        // A removed page: its range is (once helped) in its left sibling.
                        self.help_remove(remove, &guard);
                        break None;
                    }
                    Step::Child(_) | Step::Restart => break None,
                }
            };
            let Some(shape) = top.and_then(|top| self.collect(top, &mut image)) else {
                continue;
            };
            let n = image.len();
            let key = |i: usize| Key {
                bytes: image.key(i),
                tid: image.tid(i),
            };
            if ascending {
                for i in 0..n {
                    if !above(key(i), &lower) {
                        continue;
                    }
                    if !below(key(i), &upper) {
                        return count;
                    }
                    visit(image.key(i), image.value(i));
                    count += 1;
                    if count == limit {
                        return count;
                    }
                }
                match shape.high {
                    None => return count,
                    Some(high) => {
                        if !below(Key::of(&high), &upper) {
                            return count;
                        }
                        lower = Bound::Included(high);
                        next = (shape.right != NO_SIBLING).then_some(shape.right);
                    }
                }
            } else {
                for i in (0..n).rev() {
                    if !below(key(i), &upper) {
                        continue;
                    }
                    if !above(key(i), &lower) {
                        return count;
                    }
                    visit(image.key(i), image.value(i));
                    count += 1;
                    if count == limit {
                        return count;
                    }
                }
                match shape.low {
                    None => return count,
                    Some(low) => {
                        if !above(Key::of(&low), &lower) {
                            return count;
                        }
                        upper = Bound::Excluded(low);
                    }
                }
            }
            // Nothing read is held across pages: let the epoch advance on long scans.
            guard.repin();
        }
    }
}
