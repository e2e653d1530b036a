//! THROWAWAY stand-in (never committed): a sorted Vec with the static stage's API.
#![allow(missing_docs)]
use crate::{Direction, Error, KeyLen, MemoryUsage};
use std::ops::Bound;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
}
#[derive(Debug, Clone)]
pub struct StaticOptions {
    pub unique: bool,
    pub key_len: KeyLen,
    pub compression: Compression,
    pub cache_blocks: usize,
}
impl StaticOptions {
    pub fn new(unique: bool, key_len: KeyLen) -> Self {
        Self {
            unique,
            key_len,
            compression: Compression::None,
            cache_blocks: 1024,
        }
    }
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Put,
    Delete,
}
pub struct StaticStage {
    options: StaticOptions,
    pairs: Vec<(Vec<u8>, u64)>,
}
impl StaticStage {
    pub fn empty(options: StaticOptions) -> Self {
        Self {
            options,
            pairs: Vec::new(),
        }
    }
    pub fn build(
        options: StaticOptions,
        pairs: &mut dyn Iterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Self, Error> {
        Ok(Self {
            options,
            pairs: pairs.collect(),
        })
    }
    pub fn options(&self) -> &StaticOptions {
        &self.options
    }
    pub fn len(&self) -> usize {
        self.pairs.len()
    }
    pub fn key_count(&self) -> usize {
        self.pairs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
    fn first(&self, key: &[u8]) -> usize {
        self.pairs.partition_point(|(k, _)| k.as_slice() < key)
    }
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.pairs
            .get(self.first(key))
            .filter(|(k, _)| k == key)
            .map(|p| p.1)
    }
    pub fn get_all(&self, key: &[u8], out: &mut Vec<u64>) {
        let mut i = self.first(key);
        while i < self.pairs.len() && self.pairs[i].0 == key {
            out.push(self.pairs[i].1);
            i += 1;
        }
    }
    pub fn contains_pair(&self, key: &[u8], tid: u64) -> bool {
        self.pairs
            .binary_search_by(|(k, t)| (k.as_slice(), *t).cmp(&(key, tid)))
            .is_ok()
    }
    pub fn cursor(&self, start: Bound<&[u8]>, direction: Direction) -> StaticCursor<'_> {
        let pos = match (start, direction) {
            (Bound::Unbounded, Direction::Ascending) => 0,
            (Bound::Unbounded, Direction::Descending) => self.pairs.len(),
            (Bound::Included(b), Direction::Ascending) => self.first(b),
            (Bound::Excluded(b), Direction::Ascending) => {
                self.pairs.partition_point(|(k, _)| k.as_slice() <= b)
            }
            (Bound::Included(b), Direction::Descending) => {
                self.pairs.partition_point(|(k, _)| k.as_slice() <= b)
            }
            (Bound::Excluded(b), Direction::Descending) => self.first(b),
        };
        StaticCursor {
            stage: self,
            pos,
            direction,
        }
    }
    pub fn merge(
        &self,
        updates: &mut dyn Iterator<Item = (Vec<u8>, u64, Change)>,
        _publish_every: usize,
        _publish: &mut dyn FnMut(StaticStage),
    ) -> Result<StaticStage, Error> {
        let mut map: std::collections::BTreeMap<(Vec<u8>, u64), ()> = self
            .pairs
            .iter()
            .map(|(k, t)| ((k.clone(), *t), ()))
            .collect();
        let mut uniq: std::collections::BTreeMap<Vec<u8>, u64> =
            self.pairs.iter().cloned().collect();
        for (k, t, c) in updates {
            if self.options.unique {
                match c {
                    Change::Put => {
                        uniq.insert(k, t);
                    }
                    Change::Delete => {
                        uniq.remove(&k);
                    }
                }
            } else {
                match c {
                    Change::Put => {
                        map.insert((k, t), ());
                    }
                    Change::Delete => {
                        map.remove(&(k, t));
                    }
                }
            }
        }
        let pairs = if self.options.unique {
            uniq.into_iter().collect()
        } else {
            map.into_keys().collect()
        };
        Ok(Self {
            options: self.options.clone(),
            pairs,
        })
    }
    pub fn memory(&self) -> MemoryUsage {
        MemoryUsage {
            inner: 0,
            leaves: self.pairs.iter().map(|p| p.0.len() + 32).sum(),
            aux: 0,
        }
    }
    pub fn check(&self) -> Result<(), Error> {
        Ok(())
    }
}
pub struct StaticCursor<'a> {
    stage: &'a StaticStage,
    pos: usize,
    direction: Direction,
}
impl StaticCursor<'_> {
    pub fn next(&mut self, key: &mut Vec<u8>) -> Option<u64> {
        let p = match self.direction {
            Direction::Ascending => {
                let p = self.stage.pairs.get(self.pos)?;
                self.pos += 1;
                p
            }
            Direction::Descending => {
                if self.pos == 0 {
                    return None;
                }
                self.pos -= 1;
                &self.stage.pairs[self.pos]
            }
        };
        key.clear();
        key.extend_from_slice(&p.0);
        Some(p.1)
    }
}
