//! placeholder
pub mod error;
