//! The merge: moves the dynamic stages' entries into a new static stage (module docs of
//! [`super`] describe how it runs alongside other operations).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_epoch as epoch;

use super::bloom::key_hash;
use super::dynamic::{Codec, Dynamic, LIVE};
use super::index::{MergeRecord, Shared, View};
use super::layers::{DynamicStream, Layered, Stream};
use super::static_stage::{Change, StaticStage};
use super::{MergeMode, MergeStrategy};
use crate::{Direction, Error};

/// Merge records kept in [`super::HybridStats`].
const RECORDS_KEPT: usize = 4096;

/// Clears the `merging` flag when the merge ends, however it ends.
struct Running<'a>(&'a AtomicBool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Runs one merge. The caller has set `shared.merging`; this clears it.
pub(super) fn run(s: &Shared) -> Result<(), Error> {
    let _running = Running(&s.merging);
    let _exclusive = (s.options.mode == MergeMode::Blocking)
        .then(|| s.gate.write().unwrap_or_else(|e| e.into_inner()));
    let started = Instant::now();

    // 1. Freeze the active stage behind a fresh one, then wait for its writers to leave.
    let (base, frozen) = {
        let _publishing = s.publish.lock().unwrap_or_else(|e| e.into_inner());
        let guard = epoch::pin();
        let view = s.view(&guard);
        let expected_static = view.base.len() + view.dynamics_len();
        // Writers may outpace merges: size the new filter for as many keys as the stage
        // being frozen took too, so it stays selective.
        let fresh = Dynamic::new(
            &s.tree,
            s.codec,
            s.options
                .filter_keys(expected_static)
                .max(view.active.len()),
            s.options.bloom_bits_per_key,
            s.options.strategy == MergeStrategy::Cold,
        )?;
        let frozen: Vec<Arc<Dynamic>> = std::iter::once(&view.active)
            .chain(&view.frozen)
            .cloned()
            .collect();
        let base = Arc::clone(&view.base);
        s.set_view(
            View {
                base: Arc::clone(&base),
                frozen: frozen.clone(),
                active: Arc::new(fresh),
            },
            &guard,
        );
        (base, frozen)
    };
    frozen[0].seal();
    let static_before = base.len();
    let frozen_len: usize = frozen.iter().map(|d| d.len()).sum();

    // 2. Stream the frozen stages in key order, newest entry of each key winning; under
    //    merge-cold, recently used live entries go to a carried stage instead.
    let carry = match s.options.strategy {
        MergeStrategy::All => None,
        MergeStrategy::Cold => Some(Dynamic::new(
            &s.tree,
            s.codec,
            frozen_len,
            s.options.bloom_bits_per_key,
            true,
        )?),
    };
    let streams = frozen
        .iter()
        .map(|stage| {
            Stream::Dynamic(DynamicStream::new(
                stage,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                Direction::Ascending,
                512,
            ))
        })
        .collect();
    let mut updates = Updates {
        layered: Layered::new(streams, Direction::Ascending, s.unique),
        frozen: &frozen,
        carry: carry.as_ref(),
        codec: s.codec,
        tree_key: Vec::new(),
        merged: 0,
        carried: 0,
    };

    // 3. Build the next static stage, publishing progress so consumed segments are freed.
    let mut publish = |stage: StaticStage| {
        let _publishing = s.publish.lock().unwrap_or_else(|e| e.into_inner());
        let guard = epoch::pin();
        let active = Arc::clone(&s.view(&guard).active);
        s.set_view(
            View {
                base: Arc::new(stage),
                frozen: frozen.clone(),
                active,
            },
            &guard,
        );
    };
    let next = base.merge(&mut updates, s.options.publish_every, &mut publish)?;
    let (merged, carried) = (updates.merged, updates.carried);
    drop(updates);
    let static_after = next.len();

    // 4. Publish the result: the frozen stages are gone (or reduced to the carried entries).
    {
        let _publishing = s.publish.lock().unwrap_or_else(|e| e.into_inner());
        let guard = epoch::pin();
        let active = Arc::clone(&s.view(&guard).active);
        let frozen = carry
            .filter(|c| !c.is_empty())
            .map(Arc::new)
            .into_iter()
            .collect();
        s.set_view(
            View {
                base: Arc::new(next),
                frozen,
                active,
            },
            &guard,
        );
    }
    let duration = started.elapsed();
    let record = MergeRecord {
        static_before,
        static_after,
        merged,
        carried,
        started: started.duration_since(s.created),
        duration,
    };
    let mut stats = s.stats.lock().unwrap_or_else(|e| e.into_inner());
    stats.merges += 1;
    stats.merge_time += record.duration;
    if stats.records.len() == RECORDS_KEPT {
        stats.records.remove(0);
    }
    stats.records.push(record);
    Ok(())
}

/// The frozen stages' entries as the static stage's merge input.
struct Updates<'a> {
    layered: Layered<'a>,
    frozen: &'a [Arc<Dynamic>],
    carry: Option<&'a Dynamic>,
    codec: Codec,
    tree_key: Vec<u8>,
    merged: usize,
    carried: usize,
}

impl Iterator for Updates<'_> {
    type Item = (Vec<u8>, u64, Change);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let head = self.layered.next_entry()?;
            if !head.live {
                self.merged += 1;
                return Some((head.key.to_vec(), head.tid, Change::Delete));
            }
            if let Some(carry) = self.carry {
                let hash = key_hash(head.key);
                if self.frozen.iter().any(|stage| stage.was_touched(hash)) {
                    self.codec.encode(head.key, head.tid, &mut self.tree_key);
                    let value = if self.codec == Codec::Unique {
                        head.tid
                    } else {
                        LIVE
                    };
                    carry.load(&self.tree_key, hash, value);
                    self.carried += 1;
                    continue;
                }
            }
            self.merged += 1;
            return Some((head.key.to_vec(), head.tid, Change::Put));
        }
    }
}
