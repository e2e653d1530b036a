//! elastree: in-memory ordered indexes for database systems.
//!
//! An index maps byte-string keys, ordered lexicographically, to tuple ids (`u64`).
//! Every index kind implements the [`Index`] trait, so a program can choose the kind at
//! run time and use it as a `Box<dyn Index>`; [`IndexBuilder`] builds one from the options
//! every kind shares ([`IndexOptions`]) and the kind's own ([`KindOptions`]).
//!
//! ```
//! use elastree::{IndexBuilder, IndexKind, Direction};
//! use std::ops::Bound;
//!
//! let index = IndexBuilder::new(IndexKind::BTree).build().unwrap();
//! assert_eq!(index.insert(b"apple", 1).unwrap(), None);
//! assert_eq!(index.insert(b"apple", 2).unwrap(), Some(1)); // unique: replaces
//! index.insert(b"banana", 3).unwrap();
//! assert_eq!(index.get(b"apple").unwrap(), Some(2));
//!
//! let mut seen = Vec::new();
//! index
//!     .scan(Bound::Included(&b"a"[..]), Bound::Unbounded, Direction::Ascending, 10,
//!           &mut |key, tid| seen.push((key.to_vec(), tid)))
//!     .unwrap();
//! assert_eq!(seen, vec![(b"apple".to_vec(), 2), (b"banana".to_vec(), 3)]);
//! ```
//!
//! # The contract every kind keeps
//!
//! * **Unique index**: [`Index::insert`] inserts or replaces and returns the previous tid;
//!   [`Index::get`] returns the tid; [`Index::remove`] returns the removed tid.
//! * **Non-unique index**: [`Index::insert`] adds the pair (adding an existing pair changes
//!   nothing); [`Index::get_all`] returns all tids of a key in ascending order;
//!   [`Index::remove_pair`] removes one pair.
//! * **Scan**: [`Index::scan`] visits pairs in (key, tid) order, ascending or descending,
//!   within two bounds and up to a limit. Under concurrent writers every visited pair was
//!   present at some moment during the scan, keys never go backwards or repeat, and a pair
//!   present throughout the scan and in the range is visited unless the limit is reached
//!   first.
//! * **Errors** are typed ([`Error`]); an operation that returns an error changed nothing.
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]

pub mod btree;
pub mod bwtree;
pub mod elastic;
pub mod hybrid;
pub mod key;
pub mod mem;
pub mod node;
pub mod sbtree;
pub mod sync;
pub mod table;

mod counter;
mod error;
mod index;
mod kind;
mod options;
mod stats;

pub use btree::{BTreeOptions, PageOrganization};
pub use bwtree::BwTreeOptions;
pub use elastic::{ElasticOptions, SeqTreeOptions};
pub use error::{Error, ExternalError};
pub use hybrid::HybridOptions;
pub use index::{check_key, BTreeIndex, Direction, ElasticIndex, HybridIndex, Index, KeyLen};
pub use kind::{IndexKind, KindOptions};
pub use mem::MemoryUsage;
pub use node::page::MidWidth;
pub use options::{IndexBuilder, IndexOptions, DEFAULT_MAX_KEY_LEN, MAX_KEY_LEN_LIMIT};
pub use sbtree::SbTreeOptions;
pub use stats::KindStats;
