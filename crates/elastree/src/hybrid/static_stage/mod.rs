//! The static stage of the hybrid index: a compact, read-only B+-tree built from a sorted
//! stream (the paper's Compaction and Structural Reduction rules, optionally Compression).
