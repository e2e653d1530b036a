//! Reading a page through its delta chain: the walks that answer "is the key here, and what
//! is its value" (leaves), "which child holds it" (inner pages) and "does this page cover
//! it" (fences), each from one snapshot of the chain (one mapping-table read).
//!
//! A walk goes from the newest delta down to the base page. A Split delta whose range holds
//! the key sends it to the right sibling (B-link); so does a base page whose high fence is
//! at or below it. A page whose low fence is above the key was reached through a stale route:
//! the operation starts again from the root. A Merge delta whose range holds the key sends
//! the walk down the absorbed page's chain; an Unlink delta on an inner page routes its
//! range as the keys just below it (to the left sibling that absorbs the removed child); a
//! Remove delta (a removed page) ends the walk: the caller helps the merge finish and starts
//! again from the root, whose routes no longer lead there.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU64, Ordering};

use super::consolidate::READ_CHAIN;
use super::delta::{Delta, Kind, Link, Spot, Target};
use super::key::Key;
use super::shim::Guard;
use super::table::PageId;
use super::{sibling, BwTree};
use crate::node::page::{fence, PageConfig, PageView};
use crate::node::slotted::VarKey;
use crate::node::{NodeHeader, SearchResult};

/// What a walk is looking for: the page holding `key` (or, `below`, the page holding the
/// keys just below it); `key` `None` stands for a key above every other (the last page).
#[derive(Debug, Clone, Copy)]
pub(super) struct Probe<'a> {
    pub key: Option<Key<'a>>,
    pub below: bool,
}

impl<'a> Probe<'a> {
    /// The page holding the keys just below `key`.
    pub fn below(key: Key<'a>) -> Self {
        Probe {
            key: Some(key),
            below: true,
        }
    }

    /// The page holding `key`.
    pub fn at(key: Key<'a>) -> Self {
        Probe {
            key: Some(key),
            below: false,
        }
    }

    /// Whether a page ending at `high` (exclusive) lies before the probe.
    #[inline]
    fn past(self, high: Key<'_>) -> bool {
        match self.key {
            None => true,
            Some(key) if self.below => key.order(high).is_gt(),
            Some(key) => key.order(high).is_ge(),
        }
    }

    /// Whether a range starting at `low` (inclusive) lies after the probe.
    #[inline]
    fn before(self, low: Key<'_>) -> bool {
        match self.key {
            None => false,
            Some(key) if self.below => key.order(low).is_le(),
            Some(key) => key.order(low).is_lt(),
        }
    }

    /// Whether a base page's high fence (`cmp`: the fence against the key) lies before the
    /// probe.
    #[inline]
    pub(super) fn past_fence(self, page: &PageView<'_>) -> bool {
        match self.key {
            None => page.fence_cmp(false, &[], 0).is_some(),
            Some(key) => match page.fence_cmp(false, key.bytes, key.tid) {
                None => false,
                Some(CmpOrdering::Less) => true,
                Some(CmpOrdering::Equal) => !self.below,
                Some(CmpOrdering::Greater) => false,
            },
        }
    }

    /// Whether a base page's low fence lies after the probe.
    #[inline]
    fn before_fence(self, page: &PageView<'_>) -> bool {
        match self.key {
            None => false,
            Some(key) => match page.fence_cmp(true, key.bytes, key.tid) {
                None => false,
                Some(CmpOrdering::Greater) => true,
                Some(CmpOrdering::Equal) => self.below,
                Some(CmpOrdering::Less) => false,
            },
        }
    }
}

/// Where a walk ends.
pub(super) enum Step<'g> {
    /// The page covers the probe (fence walks), or the key's value (leaf lookups: `Some`
    /// present, `None` absent) with its spot in the base page (known when the walk read the
    /// key's state there, not in a delta).
    Here(Option<u64>, Spot),
    /// The probe is in child page `id` (inner pages).
    Child(PageId),
    /// The probe is right of this page: in `id`, the right sibling, reached through the
    /// Split delta given (or through the base page's side link).
    Right(PageId, Option<&'g Delta>),
    /// The page is left of the probe's page (a stale route): start again from the root.
    Restart,
    /// The page is removed (this Remove delta tops its chain): its keys are in its left
    /// sibling once the merge finishes; help it finish and start again from the root.
    Left(&'g Delta),
}

/// What a walk does at the base page and at the deltas that hold entries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// Only whether the page covers the probe.
    Fences,
    /// The value of the probe's key (a leaf).
    Lookup,
    /// The child that holds the probe (an inner page).
    Route,
}

impl BwTree {
    /// Walks the chain at `top` (read from the mapping table under `'g`'s pin) for `probe`.
    fn walk<'g>(&self, top: Link, probe: Probe<'_>, goal: Goal) -> Step<'g> {
        match self.config.common_form() {
            Some(config) => self.walk_in(top, probe, goal, &config),
            None => self.walk_in(top, probe, goal, &self.config),
        }
    }

    /// [`Self::walk`], reading the base page with `config` (the tree's, or its copy with the
    /// form as constants: [`PageConfig::common_form`]).
    #[inline(always)]
    fn walk_in<'g>(
        &self,
        top: Link,
        probe: Probe<'_>,
        goal: Goal,
        config: &PageConfig,
    ) -> Step<'g> {
        let mut link = top;
        // SAFETY: as in the loop below.
        if let Target::Delta(d) = unsafe { top.target::<'g>() } {
            match (goal, probe.key) {
                // No delta holds the key: straight to the base page.
                (Goal::Lookup, Some(key)) => match d.past_deltas(key.mark()) {
                    Some(base) => link = base,
                    // One may: the walk goes through them all.
                    None => d.start_loading_chain(),
                },
                // Only Inserts and Deletes above the base page: none moves the fences.
                (Goal::Fences, _) => {
                    if let Some(base) = d.entries_over() {
                        link = base;
                    }
                }
                _ => {}
            }
        }
        let mut probe = probe;
        loop {
            // SAFETY: `top` was read from the mapping table while pinned for `'g`, and every
            // link below it from a published (immutable) delta of the same chain; the chain
            // is retired only after being unlinked, so it outlives the pin.
            match unsafe { link.target::<'g>() } {
                Target::Null => return Step::Restart,
                Target::Delta(d) => {
                    match d.kind() {
                        Kind::Split if probe.past(d.key()) => {
                            return Step::Right(d.value(), Some(d));
                        }
                        Kind::Insert | Kind::Delete
                            if goal == Goal::Lookup
                                && probe.key.is_some_and(|k| k.same(d.key())) =>
                        {
                            let value = (d.kind() == Kind::Insert).then(|| d.value());
                            return Step::Here(value, Spot::UNKNOWN);
                        }
                        Kind::IndexEntry
                            if goal == Goal::Route
                                && !probe.before(d.key())
                                && d.high().is_none_or(|h| !probe.past(h)) =>
                        {
                            return Step::Child(d.value());
                        }
                        Kind::Unlink
                            if goal == Goal::Route
                                && !probe.before(d.key())
                                && d.high().is_none_or(|h| !probe.past(h)) =>
                        {
                            // The removed child's range goes where the keys just below it go.
                            probe = Probe::below(d.key());
                        }
                        Kind::Merge if !probe.before(d.key()) => {
                            link = Link(d.value() as usize);
                            continue;
                        }
                        Kind::Remove => return Step::Left(d),
                        _ => {}
                    }
                    link = d.next();
                }
                Target::Base(node) => return self.at_base(node, probe, goal, config),
            }
        }
    }

    /// The end of a walk at base page `node`.
    ///
    /// A lookup or a route searches the page first and reads a fence only when the search
    /// ends at an edge of the page: a probe with an entry of the page on each side lies
    /// within the fences (the page's keys do), so a page is usually left without reading its
    /// fences, which lie at the bin's end, on a line of their own. `config` is the tree's,
    /// or its copy with the form as constants ([`PageConfig::common_form`]).
    #[inline(always)]
    fn at_base<'g>(
        &self,
        node: &'g NodeHeader,
        probe: Probe<'_>,
        goal: Goal,
        config: &PageConfig,
    ) -> Step<'g> {
        let page = PageView::of(node, config);
        let key = match (goal, probe.key) {
            (Goal::Lookup | Goal::Route, Some(key)) => key,
            _ => return self.at_fences(node, probe, goal),
        };
        // The header and mid-keys are loading already: the mapping-table read that led here
        // asked for them (`Link::prefetch`, from the link's line class; of an inner page
        // fuller than its largest class, 32 lines, the rest are left to the search, which
        // finds them in cache more often than not: inner pages are few and read by every
        // operation). Asking again cost 128 instructions per lookup, asking for the rest of
        // a full inner page 125 (`examples/bw_ops.rs` under callgrind, 200K keys).
        let found = page.search_loaded(key.probe(self.pairs));
        let count = page.count();
        if goal == Goal::Lookup {
            // A key the base page holds is the page's, as the chain read says (a base page
            // holds keys of its own range only, and the deltas above it, which could have
            // moved the key away or changed it, have been walked).
            if found.found {
                return Step::Here(Some(page.value(found.pos)), Spot::at(found.pos, true));
            }
            // Not found: below every entry it may lie before the low fence, above every
            // entry past the high fence.
            if found.pos >= count && probe.past_fence(&page) {
                return Step::Right(sibling(node), None);
            }
            if found.pos == 0 && probe.before_fence(&page) {
                return Step::Restart;
            }
            return Step::Here(None, Spot::at(found.pos, false));
        }
        match child_slot(node, &page, probe, found) {
            Ok(slot) => Step::Child(page.value(slot)),
            Err(step) => step,
        }
    }

    /// A lookup's step down from inner base page `node` (read with `config`, as in
    /// [`Self::get_fast`]): the child that holds `key`, and its hint in `node`'s sidecar,
    /// whose page has started loading (give both to
    /// [`MappingTable::get_hinted`](super::table::MappingTable::get_hinted)); else where to
    /// look instead.
    #[inline(always)]
    fn route_hinted<'g>(
        &self,
        node: &'g NodeHeader,
        key: Key<'_>,
        config: &PageConfig,
    ) -> Result<(PageId, Option<&'g AtomicU64>), Step<'g>> {
        let page = PageView::of(node, config);
        let found = page.search_routing(key.probe(self.pairs));
        let slot = child_slot(node, &page, Probe::at(key), found)?;
        let hint = page.child_hint(slot);
        if let Some(hint) = hint {
            Link(hint.load(Ordering::Relaxed) as usize).prefetch();
        }
        Ok((page.value(slot), hint))
    }

    /// [`Self::at_base`] for a fence walk, or for a probe without a key (after every key):
    /// the fences first. Out of line, with a view of its own (see [`PageView::fence_cmp`]).
    #[inline(never)]
    fn at_fences<'g>(&self, node: &'g NodeHeader, probe: Probe<'_>, goal: Goal) -> Step<'g> {
        let page = &PageView::of(node, &self.config);
        if probe.past_fence(page) {
            return Step::Right(sibling(node), None);
        }
        if probe.before_fence(page) {
            return Step::Restart;
        }
        match goal {
            Goal::Fences | Goal::Lookup => Step::Here(None, Spot::UNKNOWN),
            Goal::Route => match page.count() {
                0 => Step::Restart,
                count => Step::Child(page.value(count - 1)),
            },
        }
    }

    /// The value of `key` in the leaf chain at `top`, or where to look instead.
    #[inline]
    pub(super) fn lookup<'g>(&self, top: Link, key: Key<'_>) -> Step<'g> {
        self.walk(top, Probe::at(key), Goal::Lookup)
    }

    /// The child of the inner chain at `top` that holds `probe`, or where to look instead.
    #[inline]
    pub(super) fn route<'g>(&self, top: Link, probe: Probe<'_>) -> Step<'g> {
        self.walk(top, probe, Goal::Route)
    }

    /// The child of inner base page `node` (a chain that is its base page alone) that
    /// holds `probe`, or where to look instead: [`Self::route`] without the chain's walk,
    /// searched in place as [`Self::get_fast`] searches it.
    #[inline(always)]
    pub(super) fn route_base<'g>(&self, node: &'g NodeHeader, probe: Probe<'_>) -> Step<'g> {
        match self.config.common_form() {
            Some(config) => self.at_base(node, probe, Goal::Route, &config),
            None => self.at_base(node, probe, Goal::Route, &self.config),
        }
    }

    /// Whether the chain at `top` covers `probe` (`Here`), or where to look instead.
    #[inline]
    pub(super) fn covers<'g>(&self, top: Link, probe: Probe<'_>) -> Step<'g> {
        self.walk(top, probe, Goal::Fences)
    }
}

impl BwTree {
    /// A lookup's descent over base pages: from the root, every page whose chain is its base
    /// page alone is searched in place (no walk of a chain, no fence read unless the search
    /// ends at an edge of the page), and a leaf's chain is walked. `None` when the descent
    /// meets anything else (a delta on an inner page, a split, a stale route, a removed page,
    /// a level that does not descend): the caller takes the general path, which handles
    /// them all. A leaf chain of [`READ_CHAIN`] deltas or more that answered the lookup is
    /// consolidated once it has ([`Self::consolidate_read`]).
    #[inline]
    pub(super) fn get_fast(&self, key: Key<'_>, guard: &Guard) -> Option<Option<u64>> {
        match self.config.common_form() {
            Some(config) => self.get_fast_in(key, guard, &config),
            None => self.get_fast_in(key, guard, &self.config),
        }
    }

    /// [`Self::get_fast`], reading base pages with `config` (the tree's, or its copy with
    /// the form as constants).
    #[inline(always)]
    fn get_fast_in(&self, key: Key<'_>, guard: &Guard, config: &PageConfig) -> Option<Option<u64>> {
        let probe = Probe::at(key);
        let mut id = super::ROOT;
        let mut hint = None;
        let mut above = u16::MAX;
        loop {
            let top = match hint {
                Some(hint) => self.table.get_hinted(id, hint),
                None => self.table.get(id),
            };
            // SAFETY: read from the mapping table under the caller's pin (as in `walk`).
            match unsafe { top.target::<'_>() } {
                Target::Base(node) => {
                    let level = node.level();
                    if level >= above {
                        return None;
                    }
                    above = level;
                    if level > 0 {
                        (id, hint) = self.route_hinted(node, key, config).ok()?;
                        continue;
                    }
                    return match self.at_base(node, probe, Goal::Lookup, config) {
                        Step::Here(value, _) => Some(value),
                        _ => None,
                    };
                }
                Target::Delta(d) if d.level() == 0 && above > 0 => {
                    return match self.walk(top, probe, Goal::Lookup) {
                        Step::Here(value, _) => {
                            if d.depth() >= READ_CHAIN {
                                self.consolidate_read(id, top, guard);
                            }
                            Some(value)
                        }
                        _ => None,
                    };
                }
                _ => return None,
            }
        }
    }
}

impl BwTree {
    /// The high fence (`None`: unbounded) and right sibling of the page whose chain is at
    /// `top` (read under the caller's pin): the newest Split or Merge delta's, else the base
    /// page's. `None` for a null link or a removed page.
    pub(super) fn bounds(&self, top: Link) -> Option<(Option<VarKey>, PageId)> {
        let mut link = top;
        loop {
            // SAFETY: as in `walk`.
            match unsafe { link.target() } {
                Target::Null => return None,
                Target::Delta(d) => match d.kind() {
                    Kind::Split => return Some((d.high_key(self.pairs, true), d.value())),
                    Kind::Merge => {
                        let (_, right) = self.bounds(Link(d.value() as usize))?;
                        return Some((d.high_key(self.pairs, false), right));
                    }
                    Kind::Remove => return None,
                    _ => link = d.entries_over().unwrap_or(d.next()),
                },
                Target::Base(node) => {
                    return Some((fence(node, &self.config, false), sibling(node)));
                }
            }
        }
    }
}

/// The slot of inner base page `node` (viewed as `page`) whose child holds `probe`, given
/// the probe's search of the page (`found`); else where to look instead.
#[inline(always)]
fn child_slot<'g>(
    node: &'g NodeHeader,
    page: &PageView<'_>,
    probe: Probe<'_>,
    found: SearchResult,
) -> Result<usize, Step<'g>> {
    let count = page.count();
    // The child whose separator is the last one at or below the probe.
    let index = if found.found && !probe.below {
        Some(found.pos)
    } else {
        found.pos.checked_sub(1)
    };
    // Only a probe at or past the last separator can lie past the high fence.
    if index.is_none_or(|i| i + 1 >= count) && probe.past_fence(page) {
        return Err(Step::Right(sibling(node), None));
    }
    match index {
        // Below the first separator (the low fence): the parent was stale.
        None => Err(Step::Restart),
        Some(_) if count == 0 => Err(Step::Restart),
        Some(i) => Ok(i.min(count - 1)),
    }
}

/// The base page at the end of the chain at `top` (read under the caller's pin); `None` for a
/// null entry or a removed page.
pub(super) fn base_of<'g>(top: Link) -> Option<&'g NodeHeader> {
    let mut link = top;
    loop {
        // SAFETY: `top` was read from the mapping table under the caller's pin; every record
        // of its chain outlives the pin. A Remove's `next` is not followed: the frozen chain
        // belongs to the Merge that absorbed it, which may have been retired before the pin
        // (the Remove stays in the table until the parent drops its Unlink).
        match unsafe { link.target::<'g>() } {
            Target::Null => return None,
            Target::Delta(d) if d.kind() == Kind::Remove => return None,
            Target::Delta(d) => link = d.entries_over().unwrap_or(d.next()),
            Target::Base(node) => return Some(node),
        }
    }
}

/// The level of the page whose chain is at `top` (`None` for null).
///
/// # Safety
///
/// As [`Link::target`].
#[inline]
pub(super) unsafe fn level_of(top: Link) -> Option<u16> {
    // SAFETY: the caller's contract.
    match unsafe { top.target() } {
        Target::Null => None,
        Target::Delta(d) => Some(d.level()),
        Target::Base(node) => Some(node.level()),
    }
}

// Loom's stand-ins turn prefetch hints off (`shim::PREFETCH_HINTS`).
#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::bwtree::shim;
    use crate::node::page::MidWidth;

    /// A unique tree of 8-byte keys with small pages (three levels at a few thousand keys)
    /// that keeps child hints.
    fn hinted() -> BwTree {
        let config = PageConfig::new((8, 8), (512, 512), 8, (false, true, MidWidth::Eight))
            .with_child_hints();
        BwTree::new(config, false, 2)
    }

    fn key(bytes: &[u8; 8]) -> Key<'_> {
        Key { bytes, tid: 0 }
    }

    /// After lookups, each inner base page a lookup descends through names the child's
    /// current base page in the hint it routed by (a lookup refreshes a stale one), and
    /// lookups still answer right, before and after the refresh.
    #[test]
    fn lookups_refresh_the_hints_they_route_by() {
        let tree = hinted();
        let n = 3_000u64;
        let bytes: Vec<[u8; 8]> = (0..n)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes())
            .collect();
        for (i, b) in bytes.iter().enumerate() {
            tree.write(key(b), &mut |_| (Some(Some(i as u64)), ()));
        }
        for _ in 0..2 {
            for (i, b) in bytes.iter().enumerate() {
                assert_eq!(tree.get(key(b), &shim::pin()), Some(i as u64));
            }
        }
        let guard = shim::pin();
        let mut checked = 0;
        for b in &bytes {
            let mut id = super::super::ROOT;
            // SAFETY: read under `guard`.
            while let Target::Base(node) = unsafe { tree.table.get(id).target::<'_>() } {
                if node.level() == 0 {
                    break;
                }
                let Ok((child, Some(hint))) = tree.route_hinted(node, key(b), &tree.config) else {
                    break;
                };
                let top = tree.table.get(child);
                if top.is_base() {
                    assert_eq!(hint.load(Ordering::Relaxed), top.0 as u64, "a stale hint");
                    checked += 1;
                }
                id = child;
            }
        }
        assert!(checked >= n, "only {checked} hints checked");
        drop(guard);
        tree.check().expect("a valid tree");
    }
}
