//! The invariant walk ([`BwTree::check`]), for a tree at rest: from the root down, every
//! page's chain is well formed (depths count down to a base page of the right level, deltas
//! of the right kinds, within the page's fences), its consolidated entries are strictly
//! ascending and within its fences, a child's fences are exactly the range its parent routes
//! to it, each level's pages are linked left to right through their sibling ids, every page
//! id reached once, and the mapping table holds nothing else.

use std::collections::HashSet;

use super::delta::{Kind, Link, Target};
use super::key::Key;
use super::shim;
use super::table::PageId;
use super::{BwTree, NO_SIBLING, ROOT};
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

impl BwTree {
    /// Checks every invariant (see the module docs); call while no writer runs.
    pub(super) fn check(&self) -> Result<(), Error> {
        let _guard = shim::pin();
        let mut seen = HashSet::new();
        // The pages of each level, left to right, with the sibling each names.
        let mut levels: Vec<Vec<(PageId, PageId)>> = Vec::new();
        let mut entries = 0;
        let range = Range {
            low: None,
            high: None,
        };
        let top = self.table.get(ROOT);
        // SAFETY: read from the table while pinned.
        let Some(height) = (unsafe { super::view::level_of(top) }) else {
            return Err(corrupt("no root".into()));
        };
        levels.resize(usize::from(height) + 1, Vec::new());
        self.check_page(ROOT, height, &range, &mut seen, &mut levels, &mut entries)?;
        for (level, pages) in levels.iter().enumerate() {
            for pair in pages.windows(2) {
                if pair[0].1 != pair[1].0 {
                    return Err(corrupt(format!(
                        "level {level}: page {} names sibling {}, the next page is {}",
                        pair[0].0, pair[0].1, pair[1].0
                    )));
                }
            }
            if let Some(&(id, right)) = pages.last() {
                if right != NO_SIBLING {
                    return Err(corrupt(format!(
                        "level {level}: last page {id} names sibling {right}"
                    )));
                }
            }
        }
        for id in 0..self.table.end() {
            if !seen.contains(&id) && self.table.get(id) != Link::NULL {
                return Err(corrupt(format!(
                    "page {id} is in the table but unreachable"
                )));
            }
        }
        if entries != self.len.get() {
            return Err(corrupt(format!(
                "{entries} entries, len says {}",
                self.len.get()
            )));
        }
        Ok(())
    }

    /// Checks page `id` at `level`, which must cover exactly `range`, and its subtree.
    fn check_page(
        &self,
        id: PageId,
        level: u16,
        range: &Range,
        seen: &mut HashSet<PageId>,
        levels: &mut [Vec<(PageId, PageId)>],
        entries: &mut usize,
    ) -> Result<(), Error> {
        if !seen.insert(id) {
            return Err(corrupt(format!("page {id} is reached twice")));
        }
        let top = self.table.get(id);
        self.check_chain(id, level, top)?;
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
        levels[usize::from(level)].push((id, shape.right));
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
            *entries += image.len();
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
            self.check_page(*child, level - 1, &child_range, seen, levels, entries)?;
        }
        Ok(())
    }

    /// Checks the chain of page `id` at `level`: depths, kinds and the base page.
    fn check_chain(&self, id: PageId, level: u16, top: Link) -> Result<(), Error> {
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
                    let leaf_kind = matches!(d.kind(), Kind::Insert | Kind::Delete);
                    if leaf_kind != (level == 0) && d.kind() != Kind::Split {
                        return Err(corrupt(format!(
                            "page {id}: {:?} at level {level}",
                            d.kind()
                        )));
                    }
                    if usize::from(depth) > usize::from(self.max_chain) + 2 {
                        return Err(corrupt(format!("page {id}: chain of {depth} deltas")));
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
                    return PageRepr::check_node(node, &self.config)
                        .map_err(|e| corrupt(format!("page {id}: {e}")));
                }
            }
        }
    }
}
