//! [`KindStats`]: what a kind's own algorithm has done, behind one [`crate::Index::stats`].

use std::any::Any;
use std::fmt;

use crate::Index;

/// Statistics of one index kind (the elastic tree's conversions, the hybrid index's merges,
/// the distributed index's round trips): [`Index::stats`] returns them without the trait
/// naming any kind, and [`Index::stats_as`](trait.Index.html#method.stats_as) gives them back
/// as the kind's own type.
pub trait KindStats: Any + fmt::Debug + Send + Sync {}

impl dyn Index + '_ {
    /// The index's statistics as `T` (for example [`crate::elastic::ElasticStats`]), or
    /// `None` when the index keeps none or keeps another type.
    pub fn stats_as<T: KindStats + Clone>(&self) -> Option<T> {
        let stats = self.stats()?;
        let any: &dyn Any = &*stats;
        any.downcast_ref::<T>().cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::elastic::ElasticStats;
    use crate::hybrid::HybridStats;
    use crate::{ElasticOptions, HybridOptions, IndexBuilder, IndexKind};

    #[test]
    fn each_kind_gives_its_own_statistics_and_no_other() {
        let keys = Arc::new(Vec::<Vec<u8>>::new());
        let elastic = IndexBuilder::new(ElasticOptions::new(1 << 20, keys))
            .build()
            .unwrap();
        assert!(elastic.stats_as::<ElasticStats>().is_some());
        assert!(elastic.stats_as::<HybridStats>().is_none());
        let hybrid = IndexBuilder::new(HybridOptions::default()).build().unwrap();
        hybrid.insert(b"k", 1).unwrap();
        assert!(hybrid.stats_as::<HybridStats>().is_some());
        assert!(hybrid.stats_as::<ElasticStats>().is_none());
        let btree = IndexBuilder::new(IndexKind::BTree).build().unwrap();
        assert!(btree.stats().is_none());
    }
}
