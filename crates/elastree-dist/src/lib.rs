//! elastree-dist: one ordered index spread over a Redis Cluster, after STI-BT (Diegues et
//! al., "a scalable transactional index for distributed key-value stores").
//!
//! # Design
//!
//! - **Co-located sub-trees.** Below the cut-off, the tree is a set of sub-trees; all nodes of
//!   a sub-tree are Redis keys sharing one hash tag (`{et:<index>:<token>}`), so they live in
//!   one slot on one master (the paper's co-location id).
//! - **Execution migration.** Everything an operation does below the cut-off runs as one
//!   Redis Function (`tree.lua`, loaded on every master when a client connects) on the master
//!   owning the sub-tree: one round trip, atomic.
//! - **Nodes as pages.** Each node is one Redis string in the layout of the `node` module
//!   (fences, their common prefix, a slot array of 4-byte key heads in key order, a heap of
//!   records): the functions search heads as numbers and splice one slot per insert, and
//!   reads return whole leaves for the client to search, so the single-threaded server does
//!   little per entry.
//! - **Fully replicated top.** The levels above the cut-off are one routing entry per
//!   sub-tree in the index's own keys, cached by every client and read without validation.
//!   Sub-tree roots carry fences and right links (B-link): a call routed by a stale copy
//!   moves right inside the function or answers STALE / FWD, and the client refreshes its
//!   copy, so a stale cache costs at most one extra round trip.
//! - **Structure changes.** Splits and merges inside a sub-tree happen inside the function. A
//!   sub-tree root that overflows either grows a level or, while the index has fewer
//!   sub-trees than it aims for, splits into two sub-trees; the client then posts the new
//!   one to the top (idempotent, `HSETNX`).
//! - **Elastic scaling** ([`DistIndex::rebalance`]): lowers the cut-off under sub-tree roots
//!   until every master can hold some, then moves sub-trees (freeze, copy to a fresh tag on
//!   the target master, forwarding marker, top update) until each master holds about the
//!   same number. A client that sees the cluster's masters change runs it on its own, in the
//!   background, once the slot map has settled ([`DistOptions::auto_rebalance`]).
//! - **Bounded sub-trees** ([`DistOptions::subtree_levels`]): a sub-tree root that would
//!   grow past the height limit splits into two sub-trees instead, the new one placed on the
//!   master holding the fewest, so sub-trees stay small enough to move and keys appended in
//!   order spread over the masters.
//!
//! # Consistency and faults
//!
//! - Each single-key operation is linearizable: it is one atomic function on the one master
//!   that owns the key's sub-tree; a migrating sub-tree refuses writes (BUSY, retried) from
//!   the moment it is frozen until its forwarding marker is in place.
//! - A scan never misses or repeats a key present throughout the scan: it runs in chunks,
//!   each atomic on one sub-tree, each starting strictly after the last key returned.
//! - With replicas, a write is acknowledged only after `WAIT` saw
//!   [`RouterOptions::wait_replicas`] replicas take it (capped by the replicas its master
//!   has: those connected to it when the client first reaches it, or listed by the slot map
//!   since), so an acknowledged write survives the loss of one master. A write that fails
//!   (timeout, failover) may or may not have been applied, and the client retries one whose
//!   reply was lost; every write function is idempotent, so a repeat leaves the state it
//!   would have (the tests send every write twice, [`RouterOptions::repeat_writes`]), but
//!   the previous value a repeated write reports may be its own.
//! - An unreachable cluster or a dead node gives [`DistError::Unavailable`]
//!   (an [`elastree::Error::External`] holding it through the [`elastree::Index`] trait;
//!   [`unavailable`] tells) within
//!   [`RouterOptions::op_timeout`], never a hang.
//!
//! The [`baseline`] module is the paper's Baseline: the same tree with every node its own key
//! (no shared tag), traversed from the client one node per round trip.

mod adapter;
mod auto;
mod balance;
pub mod baseline;
mod check;
mod codec;
pub mod error;
mod index;
mod kind;
pub mod local;
mod node;
mod router;
pub mod slots;
mod top;

pub use balance::RebalanceReport;
pub use error::{unavailable, DistError};
pub use index::{DistIndex, DistOptions, DistStats, SUBTREE_ENTRIES};
pub use kind::{open, DistClient, DistKind};
pub use router::{reachable, RouterOptions};
pub use top::TopEntry;
