//! The rolling merge: a new stage = an old stage with a sorted batch of updates applied,
//! built segment by segment while the old segments are consumed (the paper's section 5.1,
//! with segments in the role of its sorted arrays).
//!
//! Every `publish_every` new segments, at the next old-segment boundary `B` (the first key
//! of the next old segment, chosen where no key straddles the boundary), the merge applies
//! every update below `B`, cuts the segment it is writing, and publishes the stage
//! `new segments ++ old segments from B on`: merged content below `B`, old content from `B`
//! on. It shares every segment (`Arc`) with the old and the new stage, so once the caller
//! drops the stages it no longer needs, the consumed old segments are freed: the merge's
//! temporary memory is about `publish_every` segments, not a copy of the index.

use std::sync::Arc;

use super::block::Pairs;
use super::build::StageBuilder;
use super::segment::Segment;
use super::segment::{self, Config, Stored};
use super::{Change, StaticStage};
use crate::Error;

/// One update: key, tid, change.
type Update = (Vec<u8>, u64, Change);

/// The update stream, checked as it is read: strictly ascending by (key, tid), keys of the
/// stage's fixed length, and (unique stages) one update per key.
struct Updates<'u> {
    iter: &'u mut dyn Iterator<Item = Update>,
    config: Config,
    next: Option<Update>,
    prev: Option<(Vec<u8>, u64)>,
}

impl Updates<'_> {
    /// The next update, not consumed.
    fn peek(&mut self) -> Result<Option<&Update>, Error> {
        if self.next.is_none() {
            if let Some(u) = self.iter.next() {
                self.validate(&u)?;
                self.next = Some(u);
            }
        }
        Ok(self.next.as_ref())
    }

    fn validate(&self, (key, tid, _): &Update) -> Result<(), Error> {
        super::build::check_key_len(key)?;
        if let Some(n) = self.config.mode.fixed_len() {
            if key.len() != n {
                return Err(Error::InvalidConfig(format!(
                    "static stage merge: key of {} bytes in a stage of fixed {n}-byte keys",
                    key.len()
                )));
            }
        }
        if let Some((pk, pt)) = &self.prev {
            let ordered = match key.cmp(pk) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => !self.config.unique && tid > pt,
                std::cmp::Ordering::Less => false,
            };
            if !ordered {
                return Err(Error::InvalidConfig(format!(
                    "static stage merge: updates must be strictly ascending by (key, tid) \
                     (one per key in a unique stage): ({key:?}, {tid}) after ({pk:?}, {pt})"
                )));
            }
        }
        Ok(())
    }

    /// Consumes the peeked update.
    fn advance(&mut self) {
        if let Some((key, tid, _)) = self.next.take() {
            self.prev = Some((key, tid));
        }
    }
}

impl StaticStage {
    /// Returns a new stage: this one with `updates` applied. `updates` are strictly
    /// ascending by (key, tid). Unique stage: `Put` inserts or replaces `key -> tid`,
    /// `Delete` removes the key (its tid is ignored; an absent key is a no-op). Non-unique:
    /// `Put` adds the pair (present: no-op), `Delete` removes the pair (absent: no-op).
    ///
    /// Rolling and memory-bounded: every `publish_every` new segments (0: never) `publish`
    /// receives an intermediate stage (see the module documentation of `merge`). The final
    /// stage is returned, not published. Out-of-order updates or keys of the wrong length
    /// are refused with [`Error::InvalidConfig`]; stages already published stay valid.
    ///
    /// The stage is taken by `Arc` so the merge can let go of each old segment once it has
    /// consumed it: when the caller's other handles are gone (a published intermediate
    /// replaced the old stage), consumed segments are freed during the merge.
    pub fn merge(
        self: Arc<Self>,
        updates: &mut dyn Iterator<Item = (Vec<u8>, u64, Change)>,
        publish_every: usize,
        publish: &mut dyn FnMut(StaticStage),
    ) -> Result<StaticStage, Error> {
        let config = self.config;
        let options = self.options.clone();
        let mut segments: Vec<Option<Arc<Segment>>> =
            self.segments.iter().cloned().map(Some).collect();
        drop(self);
        let unique = config.unique;
        let mut out = StageBuilder::new(config);
        let mut ups = Updates {
            iter: updates,
            config,
            next: None,
            prev: None,
        };
        let mut old = Pairs::default();
        let mut scratch = Vec::new();
        let mut published_at = 0;
        let mut boundary = Vec::new();
        for s in 0..segments.len() {
            old.clear();
            let segment = segments[s]
                .take()
                .expect("each old segment is consumed once");
            for b in 0..segment.nblocks() {
                decode_block(&config, &segment, b, &mut scratch, &mut old).ok_or_else(|| {
                    Error::Corrupt(format!("segment {s} block {b} does not decode"))
                })?;
            }
            for j in 0..old.nkeys() {
                let k = old.key(j);
                for p in old.key_starts[j] as usize..old.key_end_pair(j) {
                    let t = old.tids[p];
                    let mut keep = true;
                    while let Some((uk, ut, change)) = ups.peek()? {
                        let ord = if unique {
                            uk.as_slice().cmp(k)
                        } else {
                            (uk.as_slice(), *ut).cmp(&(k, t))
                        };
                        match ord {
                            std::cmp::Ordering::Less => {
                                if *change == Change::Put {
                                    out.push(uk, *ut);
                                }
                                ups.advance();
                            }
                            std::cmp::Ordering::Equal => {
                                if unique && *change == Change::Put {
                                    out.push(k, *ut);
                                }
                                // Non-unique Put of a present pair keeps it; Delete drops it.
                                keep = !unique && *change == Change::Put;
                                ups.advance();
                                break;
                            }
                            std::cmp::Ordering::Greater => break,
                        }
                    }
                    if keep {
                        out.push(k, t);
                    }
                }
            }
            // Publish at this old-segment boundary if enough new segments were made and no
            // key straddles it.
            let Some(Some(next)) = segments.get(s + 1) else {
                break;
            };
            if publish_every == 0 || out.segments.len() - published_at < publish_every {
                continue;
            }
            boundary.clear();
            next.fence(0).write(config.mode, &mut boundary);
            if !unique && *boundary == *segment.last_key {
                continue;
            }
            while let Some((uk, ut, change)) = ups.peek()? {
                if uk.as_slice() >= boundary.as_slice() {
                    break;
                }
                if *change == Change::Put {
                    out.push(uk, *ut);
                }
                ups.advance();
            }
            out.cut();
            published_at = out.segments.len();
            let mut shared = out.segments.clone();
            shared.extend(segments[s + 1..].iter().flatten().cloned());
            publish(StaticStage::from_segments(options.clone(), config, shared));
        }
        while let Some((uk, ut, change)) = ups.peek()? {
            if *change == Change::Put {
                out.push(uk, *ut);
            }
            ups.advance();
        }
        Ok(StaticStage::from_segments(options, config, out.finish()))
    }

    /// Appends the pairs of block `b` of segment `s` to `out`, decompressing into `scratch`
    /// if needed (bypassing the cache); `None` if the block is malformed.
    pub(crate) fn decode_uncached(
        &self,
        s: usize,
        b: usize,
        scratch: &mut Vec<u8>,
        out: &mut Pairs,
    ) -> Option<()> {
        decode_block(&self.config, &self.segments[s], b, scratch, out)
    }
}

/// Appends the pairs of block `b` of `seg` to `out`, decompressing into `scratch` if needed
/// (bypassing any cache); `None` if the block is malformed.
fn decode_block(
    config: &Config,
    seg: &Segment,
    b: usize,
    scratch: &mut Vec<u8>,
    out: &mut Pairs,
) -> Option<()> {
    {
        let bytes: &[u8] = match seg.stored(config.compression, b)? {
            Stored::Plain(bytes) => bytes,
            Stored::Lz4(len, compressed) => {
                scratch.clear();
                scratch.resize(len, 0);
                match lz4_flex::block::decompress_into(compressed, scratch) {
                    Ok(n) if n == len => scratch,
                    _ => return None,
                }
            }
        };
        let block = segment::parse_block(config, seg, b, bytes)?;
        let fence = seg.fence(b);
        let continues = !config.unique && b > 0 && {
            let mut first = Vec::new();
            fence.write(config.mode, &mut first);
            out.last_key() == Some(first.as_slice())
        };
        block.decode_into(bytes, fence, continues, out);
        Some(())
    }
}
