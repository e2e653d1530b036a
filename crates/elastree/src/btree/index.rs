//! [`BTreeIndex`]: the [`Index`] face of the OLC B+-tree, choosing the node representation
//! from the key length and mapping non-unique indexes onto unique trees.
//!
//! | keys | unique | non-unique |
//! |---|---|---|
//! | fixed 8 bytes | `Sorted<u64>`: key as a big-endian integer | `Sorted<u128>`: (key, tid) as one integer |
//! | fixed 16 bytes | `Sorted<u128>` | `Slotted` with a tid suffix |
//! | variable | `PageRepr` (optimized pages; `Slotted` in [`PageOrganization::Base`]) | the same with a tid |
//!
//! A non-unique index stores each pair once, as the key `(key, tid)` of a unique tree whose
//! value is the tid again; so a key's tids are adjacent and ascending, and `get_all` is a
//! range scan.

use std::ops::Bound;

use super::policy::LeafPolicy;
use super::{LevelShape, Tree};
use crate::index::{pair_bound, Direction, Index, KeyLen};
use crate::kind::KindOptions;
use crate::mem::MemoryUsage;
use crate::node::batch::with_thread_scratch;
use crate::node::page::{MidWidth, PageConfig, PageRepr, MAX_PAGE_KEY_LEN};
use crate::node::slotted::{Slotted, SlottedConfig, VarKey, VarProbe};
use crate::node::sorted::{Sorted, SortedConfig, MAX_CAPACITY, MIN_CAPACITY};
use crate::node::NodeRepr;
use crate::{Error, IndexKind, IndexOptions, KindStats};

/// Default leaf capacity of sorted (fixed-key) nodes: 128 entries of 16 bytes (2 KiB) keeps
/// the per-leaf header under 1% of the leaf and binary search within a few cache lines; with
/// random inserts leaves average ~69% full, about 23.5 bytes per 8-byte key.
const SORTED_LEAF_CAPACITY: usize = 128;
/// Default inner capacity of sorted nodes (fan-out 129).
const SORTED_INNER_CAPACITY: usize = 128;
/// Default capacities of slotted (variable-key) nodes, whose entries are larger.
const SLOTTED_LEAF_CAPACITY: usize = 64;
const SLOTTED_INNER_CAPACITY: usize = 64;

/// Default capacities of optimized pages: their bytes bound them before their entry count
/// does for all but the shortest keys.
const PAGE_LEAF_CAPACITY: usize = 128;
const PAGE_INNER_CAPACITY: usize = 128;
/// Default bytes of an optimized page (leaf and inner).
pub const DEFAULT_PAGE_BYTES: usize = 4096;
/// The smallest and largest page an index accepts.
pub const MIN_PAGE_BYTES: usize = 256;
pub const MAX_PAGE_BYTES: usize = 64 * 1024;

/// How the B+-tree lays out nodes of variable-length keys: the page organizations the
/// Bw-tree paper compares (fixed 8- and 16-byte keys always use integer-compared nodes). The
/// default is [`PageOrganization::PrefixSplit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PageOrganization {
    /// Slotted nodes: an 8-byte head word per key compared as an integer, the rest of the
    /// key in a heap of words.
    Base,
    /// Optimized pages (`node::page`): the keys' common prefix factored out, a 4-byte mid-key
    /// vector compared as integers, suffixes in a bin; nodes split in the middle.
    Prefix,
    /// Optimized pages whose splits choose their point (between the .33 and the .67 entry)
    /// for long prefixes and short separators, and post the shortest separator of a leaf
    /// split.
    #[default]
    PrefixSplit,
}

impl PageOrganization {
    /// Every organization, in the order the paper lists them.
    pub const ALL: &'static [PageOrganization] = &[
        PageOrganization::Base,
        PageOrganization::Prefix,
        PageOrganization::PrefixSplit,
    ];

    /// The name used in options, reports and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            PageOrganization::Base => "base",
            PageOrganization::Prefix => "prefix",
            PageOrganization::PrefixSplit => "prefix-split",
        }
    }
}

impl std::fmt::Display for PageOrganization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PageOrganization {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        PageOrganization::ALL
            .iter()
            .copied()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "unknown page organization {s:?} (known: base, prefix, prefix-split)"
                ))
            })
    }
}

/// The B+-tree kind's own options: how it lays out nodes of variable-length keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BTreeOptions {
    /// The node layout for variable-length keys; `None` (the default) chooses
    /// [`PageOrganization::PrefixSplit`], or [`PageOrganization::Base`] for keys longer than
    /// optimized pages hold ([`MAX_PAGE_KEY_LEN`]).
    pub pages: Option<PageOrganization>,
    /// Bytes of a leaf page (optimized pages only; default
    /// [`DEFAULT_PAGE_BYTES`]); a page always has room for two keys of the longest length.
    pub leaf_page_bytes: usize,
    /// Bytes of an inner page (optimized pages only).
    pub inner_page_bytes: usize,
    /// The width of optimized pages' mid-keys: the paper's 4 bytes, or 8 (the default: on
    /// real keys 4 bytes after a page prefix tie often, and a tie costs a suffix compare).
    pub mid_key: MidWidth,
}

impl Default for BTreeOptions {
    fn default() -> Self {
        Self {
            pages: None,
            leaf_page_bytes: DEFAULT_PAGE_BYTES,
            inner_page_bytes: DEFAULT_PAGE_BYTES,
            mid_key: MidWidth::default(),
        }
    }
}

impl BTreeOptions {
    /// These options with page organization `pages`.
    pub fn pages(self, pages: PageOrganization) -> Self {
        Self {
            pages: Some(pages),
            ..self
        }
    }

    /// The organization an index with the shared `options` gets.
    pub fn organization(&self, options: &IndexOptions) -> PageOrganization {
        self.pages
            .unwrap_or(if options.max_key_len <= MAX_PAGE_KEY_LEN {
                PageOrganization::default()
            } else {
                PageOrganization::Base
            })
    }

    /// Checks the options against the shared ones.
    fn validate(&self, options: &IndexOptions) -> Result<(), Error> {
        if self.organization(options) == PageOrganization::Base {
            return Ok(());
        }
        for (what, bytes) in [
            ("leaf", self.leaf_page_bytes),
            ("inner", self.inner_page_bytes),
        ] {
            if !(MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&bytes) {
                return Err(Error::InvalidConfig(format!(
                    "{what} page bytes must be between {MIN_PAGE_BYTES} and {MAX_PAGE_BYTES}, \
                     not {bytes}"
                )));
            }
        }
        if options.max_key_len > MAX_PAGE_KEY_LEN {
            return Err(Error::InvalidConfig(format!(
                "optimized pages hold keys of at most {MAX_PAGE_KEY_LEN} bytes, not {} (use \
                 the base organization for longer keys)",
                options.max_key_len
            )));
        }
        Ok(())
    }
}

impl KindOptions for BTreeOptions {
    fn kind(&self) -> IndexKind {
        IndexKind::BTree
    }

    fn build(&self, options: &IndexOptions) -> Result<Box<dyn Index>, Error> {
        Ok(Box::new(BTreeIndex::with_options(options, self)?))
    }
}

/// A family of node representations, one per key form, that a [`TreeIndex`] is built
/// from: the plain B+-tree's ([`Plain`]) or the elastic tree's ([`Elastic`](super::Elastic)).
pub trait Family: Send + Sync + Sized + 'static {
    /// For unique 8-byte keys.
    type U64: for<'a> LeafPolicy<Probe<'a> = u64, Owned = u64>;
    /// For unique 16-byte keys and non-unique 8-byte keys (key, tid).
    type U128: for<'a> LeafPolicy<Probe<'a> = u128, Owned = u128>;
    /// For every other key.
    type Var: for<'a> LeafPolicy<Probe<'a> = VarProbe<'a>, Owned = VarKey>;
    /// The kind's own options.
    type Options;
    /// What the family keeps beside the tree.
    type Extra: Send + Sync;

    /// Validates the kind's own options against the shared ones.
    fn extra(
        options: &IndexOptions,
        own: &Self::Options,
        leaf_capacity: usize,
    ) -> Result<Self::Extra, Error>;
    /// The index kind.
    fn kind(extra: &Self::Extra) -> IndexKind;
    /// Node settings of the `U64` tree.
    fn u64_config(base: SortedConfig, extra: &Self::Extra) -> <Self::U64 as NodeRepr>::Config;
    /// Node settings of the `U128` tree; `composite` when keys are (key, tid) pairs.
    fn u128_config(
        base: SortedConfig,
        extra: &Self::Extra,
        composite: bool,
    ) -> <Self::U128 as NodeRepr>::Config;
    /// Node settings of the `Var` tree.
    fn var_config(base: SlottedConfig, extra: &Self::Extra) -> <Self::Var as NodeRepr>::Config;
    /// Bytes held by `extra` outside the index object.
    fn extra_bytes(extra: &Self::Extra) -> usize;
    /// The node layout for variable-length keys (the B+-tree's options, resolved).
    fn pages(_extra: &Self::Extra) -> Option<BTreeOptions> {
        None
    }
    /// What the kind's own algorithm has done, for families that keep statistics.
    fn stats(_extra: &Self::Extra) -> Option<Box<dyn KindStats>> {
        None
    }
}

/// The plain B+-tree's representations.
pub struct Plain;

impl Family for Plain {
    type U64 = Sorted<u64>;
    type U128 = Sorted<u128>;
    type Var = Slotted;
    type Options = BTreeOptions;
    type Extra = BTreeOptions;

    fn extra(options: &IndexOptions, own: &BTreeOptions, _: usize) -> Result<BTreeOptions, Error> {
        own.validate(options)?;
        Ok(BTreeOptions {
            pages: Some(own.organization(options)),
            ..*own
        })
    }
    fn kind(_: &BTreeOptions) -> IndexKind {
        IndexKind::BTree
    }
    fn u64_config(base: SortedConfig, _: &BTreeOptions) -> SortedConfig {
        base
    }
    fn u128_config(base: SortedConfig, _: &BTreeOptions, _: bool) -> SortedConfig {
        base
    }
    fn var_config(base: SlottedConfig, _: &BTreeOptions) -> SlottedConfig {
        base
    }
    fn pages(own: &BTreeOptions) -> Option<BTreeOptions> {
        Some(*own)
    }
    fn extra_bytes(_: &BTreeOptions) -> usize {
        0
    }
}

/// The tree behind the index, by node representation.
enum Trees<F: Family> {
    U64(Tree<F::U64>),
    U128(Tree<F::U128>),
    Var(Tree<F::Var>),
    /// Variable-length keys in optimized pages ([`PageOrganization::Prefix`] and
    /// [`PageOrganization::PrefixSplit`]).
    Page(Tree<PageRepr>),
}

/// In a non-unique tree of variable-length keys, the first pair whose value is not its tid.
fn tids_repeated<R>(tree: &Tree<R>) -> Option<String>
where
    R: for<'a> LeafPolicy<Probe<'a> = VarProbe<'a>, Owned = VarKey>,
{
    let mut bad = None;
    let all = Bound::Unbounded;
    tree.scan_ascending(all, all, usize::MAX, &mut |k, v| {
        if k.tid != Some(v) && bad.is_none() {
            bad = Some(format!("pair {k:?} holds value {v}"));
        }
    });
    bad
}

/// The concurrent OLC B+-tree over the representations of family `F`, as an [`Index`].
pub struct TreeIndex<F: Family> {
    unique: bool,
    max_key_len: usize,
    key_len: KeyLen,
    tree: Trees<F>,
    pub(super) extra: F::Extra,
}

/// The concurrent OLC B+-tree as an [`Index`].
pub type BTreeIndex = TreeIndex<Plain>;

/// `key` as a big-endian integer of exactly `N` bytes.
fn fixed<const N: usize>(key: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(key);
    out
}

/// Maps a scan bound on arbitrary byte strings to the equivalent bound on keys of exactly
/// `out.len()` bytes, writing the bound's key to `out`: a shorter bound is zero-padded (the
/// smallest full-width key above it), a longer one truncated (the largest full-width key
/// below it). Returns whether the mapped bound is inclusive, or `None` for no bound.
fn fit_bound(bound: Bound<&[u8]>, lower: bool, out: &mut [u8]) -> Option<bool> {
    let (b, inclusive) = match bound {
        Bound::Unbounded => return None,
        Bound::Included(b) => (b, true),
        Bound::Excluded(b) => (b, false),
    };
    let n = b.len().min(out.len());
    out[..n].copy_from_slice(&b[..n]);
    out[n..].fill(0);
    Some(if b.len() == out.len() {
        inclusive
    } else {
        (b.len() < out.len()) == lower
    })
}

/// [`fit_bound`] into a key of `K` (an integer of `N` big-endian bytes).
fn width_bound<const N: usize, K>(
    bound: Bound<&[u8]>,
    lower: bool,
    to_key: impl Fn([u8; N]) -> K,
) -> Bound<K> {
    let mut key = [0u8; N];
    match fit_bound(bound, lower, &mut key) {
        None => Bound::Unbounded,
        Some(true) => Bound::Included(to_key(key)),
        Some(false) => Bound::Excluded(to_key(key)),
    }
}

fn scan_tree<R: LeafPolicy>(
    tree: &Tree<R>,
    lower: Bound<R::Owned>,
    upper: Bound<R::Owned>,
    direction: Direction,
    limit: usize,
    visit: &mut dyn FnMut(&R::Owned, u64),
) -> usize {
    let (lower, upper) = (lower.as_ref(), upper.as_ref());
    match direction {
        Direction::Ascending => tree.scan_ascending(lower, upper, limit, visit),
        Direction::Descending => tree.scan_descending(lower, upper, limit, visit),
    }
}

/// The keys of a scan's bounds on a tree of variable-length keys, kept per thread so that a
/// scan allocates nothing for them.
#[derive(Default)]
struct VarBounds {
    lower: VarKey,
    upper: VarKey,
}

/// Writes into `out` the key that bounds a scan of a tree of variable-length keys as `bound`
/// bounds the user's keys (fitted to the width of fixed-length keys, paired with a tid in a
/// non-unique tree); returns how it bounds (`Unbounded`, or inclusive or exclusive of `out`).
fn var_bound(
    bound: Bound<&[u8]>,
    lower: bool,
    (key_len, unique): (KeyLen, bool),
    out: &mut VarKey,
) -> Bound<()> {
    out.bytes.clear();
    let inclusive = match (bound, key_len) {
        (Bound::Unbounded, _) => return Bound::Unbounded,
        (Bound::Included(_) | Bound::Excluded(_), KeyLen::Fixed(width)) => {
            out.bytes.resize(width, 0);
            fit_bound(bound, lower, &mut out.bytes).expect("a bound")
        }
        (Bound::Included(b), KeyLen::Variable) => {
            out.bytes.extend_from_slice(b);
            true
        }
        (Bound::Excluded(b), KeyLen::Variable) => {
            out.bytes.extend_from_slice(b);
            false
        }
    };
    // A non-unique tree's keys are (key, tid) pairs: the bound takes the tid that includes
    // or excludes every pair of its key.
    out.tid = (!unique).then_some(if inclusive == lower { 0 } else { u64::MAX });
    if inclusive {
        Bound::Included(())
    } else {
        Bound::Excluded(())
    }
}

/// `bound` with `key` as its key.
fn with_key<K>(bound: Bound<()>, key: &K) -> Bound<&K> {
    match bound {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(()) => Bound::Included(key),
        Bound::Excluded(()) => Bound::Excluded(key),
    }
}

impl BTreeIndex {
    /// An empty B+-tree with these options.
    pub fn new(options: &IndexOptions) -> Result<Self, Error> {
        Self::with_options(options, &BTreeOptions::default())
    }
}

impl<F: Family> TreeIndex<F> {
    /// Builds an empty index from the shared options and the kind's own.
    pub fn with_options(options: &IndexOptions, own: &F::Options) -> Result<Self, Error> {
        options.validate()?;
        let capacity = |given: Option<usize>, default: usize, what: &str| -> Result<usize, Error> {
            let cap = given.unwrap_or(default);
            if !(MIN_CAPACITY..=MAX_CAPACITY).contains(&cap) {
                return Err(Error::InvalidConfig(format!(
                    "{what} capacity must be between {MIN_CAPACITY} and {MAX_CAPACITY}, not {cap}"
                )));
            }
            Ok(cap)
        };
        let sorted = || -> Result<SortedConfig, Error> {
            Ok(SortedConfig {
                leaf_capacity: capacity(options.leaf_capacity, SORTED_LEAF_CAPACITY, "leaf")?,
                inner_capacity: capacity(options.inner_capacity, SORTED_INNER_CAPACITY, "inner")?,
            })
        };
        let slotted = |with_tid: bool| -> Result<SlottedConfig, Error> {
            Ok(SlottedConfig {
                leaf_capacity: capacity(options.leaf_capacity, SLOTTED_LEAF_CAPACITY, "leaf")?,
                inner_capacity: capacity(options.inner_capacity, SLOTTED_INNER_CAPACITY, "inner")?,
                max_key_len: options.max_key_len,
                with_tid,
            })
        };
        let leaf_capacity = match options.key_len {
            KeyLen::Fixed(8 | 16) => sorted()?.leaf_capacity,
            KeyLen::Fixed(_) | KeyLen::Variable => slotted(false)?.leaf_capacity,
        };
        let extra = F::extra(options, own, leaf_capacity)?;
        let tree = match (options.key_len, options.unique) {
            (KeyLen::Fixed(8), true) => Trees::U64(Tree::new(F::u64_config(sorted()?, &extra))),
            (KeyLen::Fixed(8), false) => {
                Trees::U128(Tree::new(F::u128_config(sorted()?, &extra, true)))
            }
            (KeyLen::Fixed(16), true) => {
                Trees::U128(Tree::new(F::u128_config(sorted()?, &extra, false)))
            }
            (_, unique) => match F::pages(&extra) {
                Some(
                    own @ BTreeOptions {
                        pages: Some(pages), ..
                    },
                ) if pages != PageOrganization::Base => {
                    let capacities = (
                        capacity(options.leaf_capacity, PAGE_LEAF_CAPACITY, "leaf")?,
                        capacity(options.inner_capacity, PAGE_INNER_CAPACITY, "inner")?,
                    );
                    let bytes = (own.leaf_page_bytes, own.inner_page_bytes);
                    let short_splits = pages == PageOrganization::PrefixSplit;
                    let config = PageConfig::new(
                        capacities,
                        bytes,
                        options.max_key_len,
                        (!unique, short_splits, own.mid_key),
                    );
                    Trees::Page(Tree::new(config))
                }
                _ => Trees::Var(Tree::new(F::var_config(slotted(!unique)?, &extra))),
            },
        };
        Ok(Self {
            unique: options.unique,
            max_key_len: options.max_key_len,
            key_len: options.key_len,
            tree,
            extra,
        })
    }

    /// The tree level by level, root first: nodes, entries and the bytes spent on keys.
    /// Walks every node; call it with no writer running.
    pub fn shape(&self) -> Vec<LevelShape> {
        match &self.tree {
            Trees::U64(tree) => tree.shape(),
            Trees::U128(tree) => tree.shape(),
            Trees::Var(tree) => tree.shape(),
            Trees::Page(tree) => tree.shape(),
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        crate::index::check_key(key, self.max_key_len, self.key_len)
    }

    /// The (key, tid) integer of a non-unique index over 8-byte keys.
    fn pair128(key: &[u8], tid: u64) -> u128 {
        ((u64::from_be_bytes(fixed(key)) as u128) << 64) | tid as u128
    }

    /// Visits pairs of the tree in key order; `visit` returns the user's (key, tid).
    fn scan_pairs(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize {
        let unique = self.unique;
        match &self.tree {
            Trees::U64(tree) => {
                let lo = width_bound(lower, true, u64::from_be_bytes);
                let hi = width_bound(upper, false, u64::from_be_bytes);
                scan_tree(tree, lo, hi, direction, limit, &mut |k, v| {
                    visit(&k.to_be_bytes(), v)
                })
            }
            Trees::U128(tree) if unique => {
                let lo = width_bound(lower, true, u128::from_be_bytes);
                let hi = width_bound(upper, false, u128::from_be_bytes);
                scan_tree(tree, lo, hi, direction, limit, &mut |k, v| {
                    visit(&k.to_be_bytes(), v)
                })
            }
            Trees::U128(tree) => {
                let to_key = |b: [u8; 8]| Self::pair128(&b, 0);
                let pair = |k: u128, tid: u64| k | tid as u128;
                let lo = pair_bound(width_bound(lower, true, to_key), true, pair);
                let hi = pair_bound(width_bound(upper, false, to_key), false, pair);
                scan_tree(tree, lo, hi, direction, limit, &mut |k, v| {
                    visit(&((k >> 64) as u64).to_be_bytes(), v)
                })
            }
            Trees::Var(tree) => self.scan_var(tree, (lower, upper), direction, limit, visit),
            Trees::Page(tree) => self.scan_var(tree, (lower, upper), direction, limit, visit),
        }
    }

    /// [`Self::scan_pairs`] over a tree of variable-length keys, whichever node form it uses.
    fn scan_var<R>(
        &self,
        tree: &Tree<R>,
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize
    where
        R: for<'a> LeafPolicy<Probe<'a> = VarProbe<'a>, Owned = VarKey>,
    {
        let form = (self.key_len, self.unique);
        with_thread_scratch(|bounds: &mut VarBounds| {
            let lo = var_bound(lower, true, form, &mut bounds.lower);
            let hi = var_bound(upper, false, form, &mut bounds.upper);
            let (lo, hi) = (with_key(lo, &bounds.lower), with_key(hi, &bounds.upper));
            let mut visit_bytes = |k: &VarKey, v: u64| visit(&k.bytes, v);
            match direction {
                Direction::Ascending => tree.scan_ascending(lo, hi, limit, &mut visit_bytes),
                Direction::Descending => tree.scan_descending(lo, hi, limit, &mut visit_bytes),
            }
        })
    }
}

impl<F: Family> Index for TreeIndex<F> {
    fn kind(&self) -> &'static str {
        F::kind(&self.extra).name()
    }

    fn is_unique(&self) -> bool {
        self.unique
    }

    fn max_key_len(&self) -> usize {
        self.max_key_len
    }

    fn insert(&self, key: &[u8], tid: u64) -> Result<Option<u64>, Error> {
        self.check_key(key)?;
        Ok(match (&self.tree, self.unique) {
            (Trees::U64(tree), _) => tree.insert(u64::from_be_bytes(fixed(key)), tid),
            (Trees::U128(tree), true) => tree.insert(u128::from_be_bytes(fixed(key)), tid),
            (Trees::U128(tree), false) => tree.insert_if_absent(Self::pair128(key, tid), tid),
            (Trees::Var(tree), true) => tree.insert(VarProbe::new(key, None), tid),
            (Trees::Var(tree), false) => tree.insert_if_absent(VarProbe::new(key, Some(tid)), tid),
            (Trees::Page(tree), true) => tree.insert(VarProbe::new(key, None), tid),
            (Trees::Page(tree), false) => tree.insert_if_absent(VarProbe::new(key, Some(tid)), tid),
        })
    }

    fn get(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        self.check_key(key)?;
        Ok(match (&self.tree, self.unique) {
            (Trees::U64(tree), _) => tree.get(u64::from_be_bytes(fixed(key))),
            (Trees::U128(tree), true) => tree.get(u128::from_be_bytes(fixed(key))),
            (Trees::Var(tree), true) => tree.get(VarProbe::new(key, None)),
            (Trees::Page(tree), true) => tree.get(VarProbe::new(key, None)),
            (_, false) => {
                let mut first = None;
                let bound = Bound::Included(key);
                self.scan_pairs(bound, bound, Direction::Ascending, 1, &mut |_, tid| {
                    first = Some(tid)
                });
                first
            }
        })
    }

    fn get_all(&self, key: &[u8], out: &mut Vec<u64>) -> Result<(), Error> {
        if self.unique {
            out.extend(self.get(key)?);
            return Ok(());
        }
        self.check_key(key)?;
        let bound = Bound::Included(key);
        self.scan_pairs(
            bound,
            bound,
            Direction::Ascending,
            usize::MAX,
            &mut |_, tid| out.push(tid),
        );
        Ok(())
    }

    fn remove(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        self.check_key(key)?;
        Ok(match (&self.tree, self.unique) {
            (Trees::U64(tree), _) => tree.remove(u64::from_be_bytes(fixed(key))),
            (Trees::U128(tree), true) => tree.remove(u128::from_be_bytes(fixed(key))),
            (Trees::Var(tree), true) => tree.remove(VarProbe::new(key, None)),
            (Trees::Page(tree), true) => tree.remove(VarProbe::new(key, None)),
            (_, false) => {
                return Err(Error::Unsupported {
                    operation: "remove(key)",
                    reason: "a non-unique index removes (key, tid) pairs: use remove_pair",
                })
            }
        })
    }

    fn remove_pair(&self, key: &[u8], tid: u64) -> Result<bool, Error> {
        self.check_key(key)?;
        let matches = |v: u64| v == tid;
        Ok(match (&self.tree, self.unique) {
            (Trees::U64(tree), _) => tree.remove_if(u64::from_be_bytes(fixed(key)), matches),
            (Trees::U128(tree), true) => tree.remove_if(u128::from_be_bytes(fixed(key)), matches),
            (Trees::U128(tree), false) => tree.remove(Self::pair128(key, tid)),
            (Trees::Var(tree), true) => tree.remove_if(VarProbe::new(key, None), matches),
            (Trees::Var(tree), false) => tree.remove(VarProbe::new(key, Some(tid))),
            (Trees::Page(tree), true) => tree.remove_if(VarProbe::new(key, None), matches),
            (Trees::Page(tree), false) => tree.remove(VarProbe::new(key, Some(tid))),
        }
        .is_some())
    }

    fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Result<usize, Error> {
        Ok(self.scan_pairs(lower, upper, direction, limit, visit))
    }

    fn len(&self) -> usize {
        match &self.tree {
            Trees::U64(tree) => tree.len(),
            Trees::U128(tree) => tree.len(),
            Trees::Var(tree) => tree.len(),
            Trees::Page(tree) => tree.len(),
        }
    }

    fn memory(&self) -> MemoryUsage {
        let tree = match &self.tree {
            Trees::U64(tree) => tree.memory(),
            Trees::U128(tree) => tree.memory(),
            Trees::Var(tree) => tree.memory(),
            Trees::Page(tree) => tree.memory(),
        };
        MemoryUsage {
            // The index object (boxed by the builder) holds the tree and its counters inline.
            aux: tree.aux + std::mem::size_of::<Self>() + F::extra_bytes(&self.extra),
            ..tree
        }
    }

    fn stats(&self) -> Option<Box<dyn KindStats>> {
        F::stats(&self.extra)
    }

    fn check(&self) -> Result<(), Error> {
        let structure = match &self.tree {
            Trees::U64(tree) => tree.check(),
            Trees::U128(tree) => tree.check(),
            Trees::Var(tree) => tree.check(),
            Trees::Page(tree) => tree.check(),
        };
        structure.map_err(Error::Corrupt)?;
        if !self.unique {
            // Every pair's value repeats its tid.
            let mut bad = None;
            match &self.tree {
                Trees::U128(tree) => {
                    let all = Bound::Unbounded;
                    tree.scan_ascending(all, all, usize::MAX, &mut |k, v| {
                        if *k as u64 != v && bad.is_none() {
                            bad = Some(format!("pair {k:#x} holds value {v}"));
                        }
                    });
                }
                Trees::Var(tree) => bad = tids_repeated(tree),
                Trees::Page(tree) => bad = tids_repeated(tree),
                Trees::U64(_) => {}
            }
            if let Some(what) = bad {
                return Err(Error::Corrupt(what));
            }
        }
        Ok(())
    }
}
