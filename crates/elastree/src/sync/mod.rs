//! Synchronisation primitives: the optimistic version lock behind optimistic lock coupling
//! (OLC), its guard types, and the atomics shim that lets `shuttle` explore the protocol.
//!
//! Reclamation of unlinked nodes uses `crossbeam-epoch` directly (see `btree`).

pub mod atomic;
mod version_lock;

pub use version_lock::{Optimistic, Restart, VersionLock, WriteGuard};
