//! Test and measurement machinery shared by the elastree crates' tests and benchmarks (not
//! part of the published API).
//!
//! - [`alloc`]: a counting global allocator (current and peak bytes), for the memory tests
//!   and the benchmarks' bytes per key;
//! - [`churn`]: random updates that change an index's contents, and the freshly built
//!   index with the same contents, for the garbage bound;
//! - [`model`]: the model test every index kind runs against `BTreeMap`, the key
//!   generators and the tuple table (`Registry`) that kinds with indirect keys load from;
//! - [`limit`]: time limits that end a hung test process with a message naming the test;
//! - [`stop`]: a stop flag for helper threads that is set even when the test panics, so a
//!   failing writer cannot leave its scanners spinning forever;
//! - [`process`]: child processes run with a deadline, their output kept for the message;
//! - `cluster` (feature `cluster`): local Redis Clusters for the distributed index's tests,
//!   one shared by every test of a test binary, removed when the process ends.
//!
//! Every helper here reports a failure with what a reader needs to replay it: the
//! operation, the key, the seed, the expected and the actual value.

pub mod alloc;
pub mod churn;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod limit;
pub mod model;
pub mod process;
pub mod stop;

pub use limit::{time_limit, time_limit_of, TimeLimit};
pub use stop::StopFlag;
