//! The invariant walk ([`BwTree::check`]), for a tree at rest: from the root down, every
//! page's chain is well formed (depths count down to a base page of the right level, deltas
//! of the right kinds, within the page's fences; the chains Merge deltas absorbed too), its
//! consolidated entries are strictly ascending and within its fences, a child's fences are
//! exactly the range its parent routes to it, each level's pages are linked left to right
//! through their sibling ids and their fences are contiguous (the first unbounded below, the
//! last above: no range covered twice or not at all), every page id reached once, no
//! removed page routed to, and the mapping table holds nothing else but removed pages
//! waiting for their parent's Unlink to be consolidated away: each named by an Unlink on a
//! reached parent and frozen by a Remove (and, the level walk shows, no longer any page's
//! sibling: its merge finished). Every base page reached has a range stamp of its own (not 0,
//! no other live base page's).

use std::collections::HashSet;

use super::delta::{Kind, Link, Target};
use super::key::Key;
use super::shim;
use super::table::PageId;
use super::{stamp_of, BwTree, NO_SIBLING, ROOT};
use crate::node::page::{PageImage, PageRepr};
use crate::node::slotted::VarKey;
use crate::node::NodeRepr;
use crate::Error;

fn corrupt(what: String) -> Error {
    Error::Corrupt(format!("bwtree: {what}"))
}

/// What the walk carries down: the range a page must cover.
struct Range {
    low: Option<VarKey>,
    high: Option<VarKey>,
}

/// What the walk gathers: pages reached, each level's pages left to right (id, right
/// sibling, fences), the removed pages that reached Unlinks name, the entries counted, the
/// range stamps of the base pages reached.
#[derive(Default)]
struct Walk {
    seen: HashSet<PageId>,
    stamps: HashSet<u64>,
    levels: Vec<Vec<(PageId, PageId, Range)>>,
    unlinked: HashSet<PageId>,
    entries: usize,
}

impl BwTree {
    /// Checks every invariant (see the module docs); call while no writer runs.
    pub(super) fn check(&self) -> Result<(), Error> {
        let _guard = shim::pin();
        let mut walk = Walk::default();
        let range = Range {
            low: None,
            high: None,
        };
        let top = self.table.get(ROOT);
        // SAFETY: read from the table while pinned.
        let Some(height) = (unsafe { super::view::level_of(top) }) else {
            return Err(corrupt("no root".into()));
        };
        walk.levels.resize_with(usize::from(height) + 1, Vec::new);
        self.check_page(ROOT, height, &range, &mut walk)?;
        for (level, pages) in walk.levels.iter().enumerate() {
            for pair in pages.windows(2) {
                let ((left, right, before), (next, _, after)) = (&pair[0], &pair[1]);
                if right != next {
                    return Err(corrupt(format!(
                        "level {level}: page {left} names sibling {right}, the next page is {next}"
                    )));
                }
                if before.high.is_none() || before.high != after.low {
                    return Err(corrupt(format!(
                        "level {level}: page {left} ends at {:?}, page {next} starts at {:?}",
                        before.high, after.low
                    )));
                }
            }
            let (Some(first), Some(last)) = (pages.first(), pages.last()) else {
                continue;
            };
            if first.2.low.is_some() || last.2.high.is_some() || last.1 != NO_SIBLING {
                return Err(corrupt(format!(
                    "level {level}: pages {} to {} do not cover every key or {} names \
                     sibling {}",
                    first.0, last.0, last.0, last.1
                )));
            }
        }
        for id in 0..self.table.end() {
            let top = self.table.get(id);
            if walk.seen.contains(&id) || top == Link::NULL {
                continue;
            }
            self.check_removed(id, top, &walk)?;
        }
        if walk.entries != self.len.get() {
            return Err(corrupt(format!(
                "{} entries, len says {}",
                walk.entries,
                self.len.get()
            )));
        }
        Ok(())
    }

    /// Leaves and inner pages reachable from the root (a walk of the routes; call while no
    /// writer runs).
    pub(super) fn pages(&self) -> (u64, u64) {
        let _guard = shim::pin();
        let mut image = PageImage::default();
        let mut pages = (0, 0);
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            let Some(shape) = self.collect(self.table.get(id), &mut image) else {
                continue;
            };
            if shape.level > 0 {
                pages.1 += 1;
                stack.extend((0..image.len()).map(|i| image.value(i)));
            } else {
                pages.0 += 1;
            }
        }
        pages
    }

    /// Checks unreached page `id` (chain `top`): a removed page that a reached parent's
    /// Unlink names. (A merge left unfinished would show in the level walk: the left
    /// sibling would still name the removed page.)
    fn check_removed(&self, id: PageId, top: Link, walk: &Walk) -> Result<(), Error> {
        // SAFETY: read from the table while pinned (the caller holds the pin).
        match unsafe { top.target() } {
            Target::Delta(d) if d.kind() == Kind::Remove && d.value() == id => {}
            _ => {
                return Err(corrupt(format!(
                    "page {id} is in the table but unreachable"
                )))
            }
        }
        if !walk.unlinked.contains(&id) {
            return Err(corrupt(format!("removed page {id}: no parent unlinks it")));
        }
        Ok(())
    }

    /// Checks page `id` at `level`, which must cover exactly `range`, and its subtree.
    fn check_page(
        &self,
        id: PageId,
        level: u16,
        range: &Range,
        walk: &mut Walk,
    ) -> Result<(), Error> {
        if !walk.seen.insert(id) {
            return Err(corrupt(format!("page {id} is reached twice")));
        }
        let top = self.table.get(id);
        self.check_chain(id, level, top, walk)?;
        let mut image = PageImage::default();
        let shape = self
            .collect(top, &mut image)
            .ok_or_else(|| corrupt(format!("page {id} has no chain")))?;
        if shape.low != range.low || shape.high != range.high {
            return Err(corrupt(format!(
                "page {id} covers {:?}..{:?}, its parent routes {:?}..{:?} to it",
                shape.low, shape.high, range.low, range.high
            )));
        }
        walk.levels[usize::from(level)].push((
            id,
            shape.right,
            Range {
                low: shape.low.clone(),
                high: shape.high.clone(),
            },
        ));
        let key = |i: usize| Key {
            bytes: image.key(i),
            tid: image.tid(i),
        };
        for i in 0..image.len() {
            if i > 0 && key(i - 1) >= key(i) {
                return Err(corrupt(format!(
                    "page {id}: entries {} and {i} out of order",
                    i - 1
                )));
            }
            let low = range.low.as_ref().map_or(Key::MIN, Key::of);
            let inside = key(i) >= low && range.high.as_ref().is_none_or(|h| key(i) < Key::of(h));
            // An inner page's first separator is its low fence (checked below).
            if !(inside || level > 0 && i == 0) {
                return Err(corrupt(format!("page {id}: entry {i} outside its fences")));
            }
        }
        if level == 0 {
            walk.entries += image.len();
            return Ok(());
        }
        if image.is_empty() || key(0) != range.low.as_ref().map_or(Key::MIN, Key::of) {
            return Err(corrupt(format!(
                "inner page {id}: the first separator is not its low fence"
            )));
        }
        let children: Vec<(VarKey, PageId)> = (0..image.len())
            .map(|i| (key(i).to_owned(self.pairs), image.value(i)))
            .collect();
        for (i, (separator, child)) in children.iter().enumerate() {
            let child_range = Range {
                low: (i > 0 || range.low.is_some()).then(|| separator.clone()),
                high: match children.get(i + 1) {
                    Some((next, _)) => Some(next.clone()),
                    None => range.high.clone(),
                },
            };
            self.check_page(*child, level - 1, &child_range, walk)?;
        }
        Ok(())
    }

    /// Checks the chain of page `id` at `level`: depths, kinds and the base page, and the
    /// chains its Merge deltas absorbed; notes the pages its Unlinks name.
    fn check_chain(&self, id: PageId, level: u16, top: Link, walk: &mut Walk) -> Result<(), Error> {
        let mut link = top;
        // SAFETY: read from the table while pinned (the caller holds the pin).
        let mut depth = unsafe { top.depth() };
        loop {
            // SAFETY: as above.
            match unsafe { link.target() } {
                Target::Null => return Err(corrupt(format!("page {id}: null link"))),
                Target::Delta(d) => {
                    if d.depth() != depth || depth == 0 {
                        return Err(corrupt(format!("page {id}: delta depth {}", d.depth())));
                    }
                    if d.level() != level {
                        return Err(corrupt(format!("page {id}: delta of level {}", d.level())));
                    }
                    let fits = match d.kind() {
                        Kind::Insert | Kind::Delete => level == 0,
                        Kind::IndexEntry | Kind::Unlink => level > 0,
                        Kind::Split | Kind::Merge => true,
                        Kind::Remove => {
                            return Err(corrupt(format!("removed page {id} is routed to")))
                        }
                    };
                    if !fits {
                        return Err(corrupt(format!(
                            "page {id}: {:?} at level {level}",
                            d.kind()
                        )));
                    }
                    if usize::from(depth) > usize::from(self.max_chain) + 2 {
                        return Err(corrupt(format!("page {id}: chain of {depth} deltas")));
                    }
                    match d.kind() {
                        Kind::Unlink => {
                            walk.unlinked.insert(d.value());
                        }
                        Kind::Merge => {
                            self.check_chain(id, level, Link(d.value() as usize), walk)?;
                        }
                        _ => {}
                    }
                    depth -= 1;
                    link = d.next();
                }
                Target::Base(node) => {
                    if depth != 0 || node.level() != level {
                        return Err(corrupt(format!(
                            "page {id}: base at level {} under {depth} deltas",
                            node.level()
                        )));
                    }
                    let stamp = stamp_of(node);
                    if stamp == 0 || !walk.stamps.insert(stamp) {
                        return Err(corrupt(format!(
                            "page {id}: base page stamp {stamp} reused"
                        )));
                    }
                    return PageRepr::check_node(node, &self.config)
                        .map_err(|e| corrupt(format!("page {id}: {e}")));
                }
            }
        }
    }
}
