//! What the tree does with a full leaf page: replace it by a larger page, or by two pages
//! sized to their halves ([`split::replacement`]); the last leaf splits in place, so that
//! keys appended in order leave full leaves behind.

use std::ptr::NonNull;

use super::super::NodeHeader;
use super::layout::Page;
use super::{split, PageConfig, PageRepr};
use crate::btree::{LeafPolicy, Overflow, Replacement};

impl LeafPolicy for PageRepr {
    /// Replace the page (grow it, or split it into two pages sized to their halves), except
    /// the last leaf at the largest size, which the tree splits in place (an append leaves
    /// it full and starts a new last leaf). A page of the largest size always has room for
    /// a second entry, so a page with fewer than two has room to grow.
    #[inline]
    fn overflow(node: &NodeHeader, config: &PageConfig, _index_bytes: usize) -> Overflow {
        let full_size = Page::bytes_of(node) >= config.max_bytes(0);
        if full_size && node.link().is_null() && node.count() >= 2 {
            Overflow::Split
        } else {
            Overflow::Replace
        }
    }

    fn replacement(
        node: &NodeHeader,
        config: &PageConfig,
        _index_bytes: usize,
    ) -> Option<Replacement<Self>> {
        let (first, second, bytes): (NonNull<NodeHeader>, _, usize) =
            split::replacement(node, config);
        Some(Replacement {
            first,
            second,
            bytes,
        })
    }
}
