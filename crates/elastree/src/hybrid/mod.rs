//! The hybrid index (Zhang et al., SIGMOD 2016, "dual-stage transformation"): a small
//! dynamic stage that takes every write, in front of a compact, read-optimized static stage
//! that holds the bulk of the entries, merged periodically.

pub mod static_index;
pub mod static_stage;
