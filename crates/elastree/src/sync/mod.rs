//! Synchronisation primitives: the optimistic version lock behind optimistic lock coupling
//! (OLC), its guard types, the writer gate that lets a merge freeze a structure, asymmetric
//! barriers (a cheap one for a hot path, a costly one for the rare side), and the atomics
//! shim that lets `shuttle` explore the protocol.
//!
//! Reclamation of unlinked nodes uses `crossbeam-epoch` directly (see `btree`).

pub mod asymmetric;
pub mod atomic;
mod version_lock;
mod writer_gate;

pub use version_lock::{Optimistic, Restart, VersionLock, WriteGuard};
pub use writer_gate::{Inside, WriterGate};
