//! placeholder
pub mod error;
pub mod local;
