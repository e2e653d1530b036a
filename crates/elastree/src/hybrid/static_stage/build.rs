//! Bulk loading: sorted pairs in, full segments out (the Compaction rule: every segment but
//! the last, or one cut by [`StageBuilder::cut`], holds exactly `segment_entries` pairs).

use std::sync::Arc;

use super::segment::{Config, Segment, SegmentWriter};
use crate::{Error, MAX_KEY_LEN_LIMIT};

/// Refuses keys longer than any index accepts ([`MAX_KEY_LEN_LIMIT`]): block headers
/// store prefix lengths in 16 bits.
pub(crate) fn check_key_len(key: &[u8]) -> Result<(), Error> {
    if key.len() > MAX_KEY_LEN_LIMIT {
        return Err(Error::InvalidConfig(format!(
            "static stage input: key of {} bytes exceeds {MAX_KEY_LEN_LIMIT} bytes",
            key.len()
        )));
    }
    Ok(())
}

/// Builds the segments of a stage from pairs in (key, tid) order.
#[derive(Debug)]
pub(crate) struct StageBuilder {
    writer: SegmentWriter,
    pub(crate) segments: Vec<Arc<Segment>>,
    last_key: Vec<u8>,
    last_tid: u64,
    started: bool,
}

impl StageBuilder {
    pub(crate) fn new(config: Config) -> Self {
        Self {
            writer: SegmentWriter::new(config),
            segments: Vec::new(),
            last_key: Vec::new(),
            last_tid: 0,
            started: false,
        }
    }

    /// Appends a pair after checking its key length and that it follows the previous pair.
    pub(crate) fn push_checked(&mut self, key: &[u8], tid: u64) -> Result<(), Error> {
        let config = self.writer.config;
        check_key_len(key)?;
        if let Some(n) = config.mode.fixed_len() {
            if key.len() != n {
                return Err(Error::InvalidConfig(format!(
                    "static stage input: key of {} bytes in a stage of fixed {n}-byte keys",
                    key.len()
                )));
            }
        }
        if self.started {
            let ord = key.cmp(&self.last_key);
            let bad = match ord {
                std::cmp::Ordering::Less => Some("keys out of order"),
                std::cmp::Ordering::Equal if config.unique => {
                    Some("duplicate key in a unique stage")
                }
                std::cmp::Ordering::Equal if tid <= self.last_tid => {
                    Some("pairs of one key out of order or duplicated")
                }
                _ => None,
            };
            if let Some(what) = bad {
                return Err(Error::InvalidConfig(format!(
                    "static stage input must be strictly ascending by (key, tid): {what} at \
                     ({key:?}, {tid}) after ({:?}, {})",
                    self.last_key, self.last_tid
                )));
            }
        }
        self.started = true;
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.last_tid = tid;
        self.push(key, tid);
        Ok(())
    }

    /// Appends a pair known to follow the previous one; returns whether a segment was
    /// completed.
    #[inline]
    pub(crate) fn push(&mut self, key: &[u8], tid: u64) -> bool {
        self.writer.push(key, tid);
        if self.writer.is_full() {
            self.segments.push(Arc::new(self.writer.finish()));
            true
        } else {
            false
        }
    }

    /// Ends the current segment early (if it holds any pair).
    pub(crate) fn cut(&mut self) {
        if self.writer.len() > 0 {
            self.segments.push(Arc::new(self.writer.finish()));
        }
    }

    /// The segments of the stage.
    pub(crate) fn finish(mut self) -> Vec<Arc<Segment>> {
        self.cut();
        self.segments
    }
}
