//! [`IndexOptions`], the options every kind shares, and [`IndexBuilder`], which joins them
//! with one kind's own options ([`KindOptions`]) and builds the index.

use std::any::Any;
use std::sync::Arc;

use crate::kind::{IndexKind, KindOptions};
use crate::{Error, Index, KeyLen};

/// Default maximum key length in bytes (1 KiB).
pub const DEFAULT_MAX_KEY_LEN: usize = 1024;

/// The largest maximum key length an index accepts (32 KiB). Variable-length nodes store key
/// lengths and offsets in 16 bits, and a node must hold at least two maximal keys.
pub const MAX_KEY_LEN_LIMIT: usize = 32 * 1024;

/// The options every kind shares. Each kind's constructor takes them with its own options;
/// [`IndexOptions::validate`] checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexOptions {
    /// Unique (`true`, the default) or non-unique (`false`).
    pub unique: bool,
    /// The longest key accepted (default [`DEFAULT_MAX_KEY_LEN`], at most
    /// [`MAX_KEY_LEN_LIMIT`]); longer keys are refused with [`Error::KeyTooLong`].
    pub max_key_len: usize,
    /// Whether every key has one length: [`KeyLen::Fixed`]`(8)` and `(16)` select the
    /// integer-compared node layouts.
    pub key_len: KeyLen,
    /// The most entries a leaf node holds, or the kind's default. Small values (down to 4)
    /// make splits and merges constant, which is what tests want.
    pub leaf_capacity: Option<usize>,
    /// The most separators an inner node holds (at least 4), or the kind's default.
    pub inner_capacity: Option<usize>,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            unique: true,
            max_key_len: DEFAULT_MAX_KEY_LEN,
            key_len: KeyLen::Variable,
            leaf_capacity: None,
            inner_capacity: None,
        }
    }
}

impl IndexOptions {
    /// Checks the options that every kind shares.
    pub fn validate(&self) -> Result<(), Error> {
        if self.max_key_len == 0 || self.max_key_len > MAX_KEY_LEN_LIMIT {
            return Err(Error::InvalidConfig(format!(
                "max key length must be between 1 and {MAX_KEY_LEN_LIMIT} bytes, not {}",
                self.max_key_len
            )));
        }
        if let KeyLen::Fixed(len) = self.key_len {
            if len == 0 || len > self.max_key_len {
                return Err(Error::InvalidConfig(format!(
                    "fixed key length {len} must be between 1 and the maximum key length {}",
                    self.max_key_len
                )));
            }
        }
        Ok(())
    }
}

/// Builds an index: one kind's own options ([`KindOptions`]: an [`IndexKind`] for a kind's
/// defaults, or a kind's options type such as [`crate::elastic::ElasticOptions`]) and the
/// options every kind shares, set here. [`IndexBuilder::build`] validates them.
///
/// ```
/// use elastree::{IndexBuilder, IndexKind, KeyLen};
///
/// let index = IndexBuilder::new(IndexKind::BTree)
///     .unique(false)
///     .key_len(KeyLen::Fixed(8))
///     .build()
///     .unwrap();
/// assert!(!index.is_unique());
/// ```
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    options: IndexOptions,
    kind: Arc<dyn KindOptions>,
}

impl IndexBuilder {
    /// A unique index of the kind `kind` describes, with variable-length keys of at most
    /// [`DEFAULT_MAX_KEY_LEN`] bytes and the kind's default node sizes.
    pub fn new(kind: impl KindOptions) -> Self {
        Self {
            options: IndexOptions::default(),
            kind: Arc::new(kind),
        }
    }

    /// The kind this builder builds.
    pub fn kind(&self) -> IndexKind {
        self.kind.kind()
    }

    /// The kind's own options.
    pub fn kind_options(&self) -> &dyn KindOptions {
        &*self.kind
    }

    /// The kind's own options as `T`, if they are a `T`.
    pub fn kind_options_as<T: KindOptions>(&self) -> Option<&T> {
        let any: &dyn Any = &*self.kind;
        any.downcast_ref()
    }

    /// The same shared options with another kind's own options.
    pub fn with_kind(mut self, kind: impl KindOptions) -> Self {
        self.kind = Arc::new(kind);
        self
    }

    /// The options every kind shares, as set so far.
    pub fn options(&self) -> &IndexOptions {
        &self.options
    }

    /// Unique (`true`, the default) or non-unique (`false`).
    pub fn unique(mut self, unique: bool) -> Self {
        self.options.unique = unique;
        self
    }

    /// The longest key accepted (default [`DEFAULT_MAX_KEY_LEN`], at most
    /// [`MAX_KEY_LEN_LIMIT`]); longer keys are refused with [`Error::KeyTooLong`].
    pub fn max_key_len(mut self, bytes: usize) -> Self {
        self.options.max_key_len = bytes;
        self
    }

    /// Declares that every key has one length: [`KeyLen::Fixed`]`(8)` and `(16)` select the
    /// integer-compared node layouts.
    pub fn key_len(mut self, key_len: KeyLen) -> Self {
        self.options.key_len = key_len;
        self
    }

    /// The most entries a leaf node holds. Small values (down to 4) make splits and merges
    /// constant, which is what tests want; the default suits production.
    pub fn leaf_capacity(mut self, entries: usize) -> Self {
        self.options.leaf_capacity = Some(entries);
        self
    }

    /// The most separators an inner node holds (at least 4).
    pub fn inner_capacity(mut self, entries: usize) -> Self {
        self.options.inner_capacity = Some(entries);
        self
    }

    /// Builds the index, or says which option cannot be honoured.
    pub fn build(&self) -> Result<Box<dyn Index>, Error> {
        self.kind.build(&self.options)
    }

    /// Builds the index holding `pairs`, which must be strictly ascending by (key, tid)
    /// (unique: keys strictly ascending). The `static` kind bulk-loads them; every other kind
    /// is built empty and the pairs inserted one by one, stopping at the first error.
    pub fn build_sorted(
        &self,
        pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Box<dyn Index>, Error> {
        self.kind.build_sorted(&self.options, pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hybrid::{Compression, HybridOptions};

    #[test]
    fn the_builder_keeps_the_shared_options_across_kinds() {
        let builder = IndexBuilder::new(IndexKind::BTree)
            .unique(false)
            .key_len(KeyLen::Fixed(8))
            .leaf_capacity(8);
        assert_eq!(builder.kind(), IndexKind::BTree);
        assert!(builder.kind_options_as::<HybridOptions>().is_none());
        let hybrid = builder.with_kind(HybridOptions::compressed());
        assert_eq!(hybrid.kind(), IndexKind::HybridCompressed);
        let options = hybrid.kind_options_as::<HybridOptions>().unwrap();
        assert_eq!(options.compression, Compression::Lz4);
        assert_eq!(hybrid.options().leaf_capacity, Some(8));
        let index = hybrid.build().unwrap();
        assert_eq!(index.kind(), "hybrid-compressed");
        assert!(!index.is_unique());
    }

    #[test]
    fn every_kind_with_defaults_builds_but_those_that_need_a_key_source() {
        for &kind in IndexKind::ALL {
            let built = IndexBuilder::new(kind)
                .key_len(kind.default_key_len())
                .build();
            match built {
                Ok(index) => {
                    assert!(!kind.needs_key_source(), "{kind}");
                    assert_eq!(index.kind(), kind.name());
                }
                Err(Error::InvalidConfig(why)) => {
                    assert!(kind.needs_key_source(), "{kind}: {why}");
                    assert!(why.contains("Options::new"), "{kind}: {why}");
                }
                Err(e) => panic!("{kind}: {e}"),
            }
        }
    }

    #[test]
    fn a_kind_refuses_key_lengths_it_does_not_take() {
        for &kind in IndexKind::ALL {
            for key_len in [
                KeyLen::Variable,
                KeyLen::Fixed(4),
                KeyLen::Fixed(8),
                KeyLen::Fixed(16),
            ] {
                if kind.takes_key_len(key_len) || kind.needs_key_source() {
                    continue;
                }
                match IndexBuilder::new(kind).key_len(key_len).build() {
                    Err(Error::InvalidConfig(why)) => {
                        assert!(why.contains("Fixed(8)"), "{kind}: {why}")
                    }
                    other => panic!("{kind} with {key_len:?}: {:?}", other.map(|i| i.kind())),
                }
            }
        }
    }
}
