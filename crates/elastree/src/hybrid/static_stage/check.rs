//! The invariant walker of the static stage.

use super::block::Pairs;
use super::StaticStage;
use crate::Error;

fn corrupt(what: String) -> Result<(), Error> {
    Err(Error::Corrupt(format!("static stage: {what}")))
}

impl StaticStage {
    /// Walks the whole stage and reports the first invariant that does not hold: pair
    /// order, key lengths, directory and fence keys, counts, block sizes and decoding.
    pub fn check(&self) -> Result<(), Error> {
        let c = &self.config;
        if self.directory.len() != self.segments.len()
            || self.directory_tids.len() != if c.unique { 0 } else { self.segments.len() }
        {
            return corrupt("directory length differs from the segment count".into());
        }
        let mut prev: Option<(Vec<u8>, u64)> = None;
        let (mut pairs_total, mut keys_total) = (0usize, 0usize);
        let mut scratch = Vec::new();
        let mut pairs = Pairs::default();
        let (mut first, mut dir) = (Vec::new(), Vec::new());
        for (s, seg) in self.segments.iter().enumerate() {
            let nblocks = seg.nblocks();
            if seg.fences.len() != nblocks
                || seg.fence_tids.len() != if c.unique { 0 } else { nblocks }
                || nblocks == 0
            {
                return corrupt(format!("segment {s}: fence count differs from block count"));
            }
            if seg.offsets.windows(2).any(|w| w[0] > w[1])
                || seg.offsets[0] != 0
                || seg.offsets[nblocks] as usize != seg.data.len()
            {
                return corrupt(format!(
                    "segment {s}: block offsets not ascending to the end"
                ));
            }
            if seg.pairs == 0 || seg.pairs as usize > c.segment_entries {
                return corrupt(format!("segment {s}: {} pairs", seg.pairs));
            }
            dir.clear();
            self.directory.key(s).write(c.mode, &mut dir);
            first.clear();
            seg.fence(0).write(c.mode, &mut first);
            if dir != first || self.directory_tids.get(s).copied().unwrap_or(0) != seg.fence_tid(0)
            {
                return corrupt(format!(
                    "directory entry {s} differs from the segment's first pair"
                ));
            }
            let (mut seg_pairs, mut seg_keys) = (0usize, 0usize);
            for b in 0..nblocks {
                pairs.clear();
                if self
                    .decode_uncached(s, b, &mut scratch, &mut pairs)
                    .is_none()
                {
                    return corrupt(format!("segment {s} block {b} does not decode"));
                }
                let n = pairs.npairs();
                if n > c.block_entries || (b + 1 < nblocks && n != c.block_entries) {
                    return corrupt(format!("segment {s} block {b}: {n} pairs"));
                }
                first.clear();
                seg.fence(b).write(c.mode, &mut first);
                if pairs.key(0) != first.as_slice()
                    || (!c.unique && pairs.tids[0] != seg.fence_tid(b))
                {
                    return corrupt(format!(
                        "segment {s} block {b}: fence differs from the first pair"
                    ));
                }
                for j in 0..pairs.nkeys() {
                    let key = pairs.key(j);
                    if c.mode.fixed_len().is_some_and(|len| len != key.len()) {
                        return corrupt(format!(
                            "segment {s} block {b}: key of {} bytes",
                            key.len()
                        ));
                    }
                    for p in pairs.key_starts[j] as usize..pairs.key_end_pair(j) {
                        let tid = pairs.tids[p];
                        let new_key = match &prev {
                            None => true,
                            Some((pk, pt)) => {
                                let ok = match key.cmp(pk) {
                                    std::cmp::Ordering::Greater => true,
                                    std::cmp::Ordering::Equal => !c.unique && tid > *pt,
                                    std::cmp::Ordering::Less => false,
                                };
                                if !ok {
                                    return corrupt(format!(
                                        "segment {s} block {b}: ({key:?}, {tid}) does not follow ({pk:?}, {pt})"
                                    ));
                                }
                                key != pk.as_slice()
                            }
                        };
                        if new_key {
                            keys_total += 1;
                        }
                        if new_key || seg_pairs == 0 {
                            seg_keys += 1;
                        }
                        seg_pairs += 1;
                        match &mut prev {
                            Some((pk, pt)) => {
                                if new_key {
                                    pk.clear();
                                    pk.extend_from_slice(key);
                                }
                                *pt = tid;
                            }
                            None => prev = Some((key.to_vec(), tid)),
                        }
                    }
                }
            }
            if seg_pairs != seg.pairs as usize || seg_keys != seg.keys as usize {
                return corrupt(format!(
                    "segment {s}: counts {} pairs {} keys, holds {seg_pairs} pairs {seg_keys} keys",
                    seg.pairs, seg.keys
                ));
            }
            let (pk, pt) = prev.as_ref().expect("a segment holds a pair");
            if **pk != *seg.last_key || *pt != seg.last_tid {
                return corrupt(format!("segment {s}: last pair recorded wrongly"));
            }
            pairs_total += seg_pairs;
        }
        if pairs_total != self.len || keys_total != self.key_count {
            return corrupt(format!(
                "counts {} pairs {} keys, holds {pairs_total} pairs {keys_total} keys",
                self.len, self.key_count
            ));
        }
        Ok(())
    }
}
