//! [`Error`]: every way an index operation or build can fail.

use std::fmt;
use std::sync::Arc;

/// Every way an index operation or build can fail. An operation that returns an error has
/// changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key is longer than the index's configured maximum.
    #[error("key of {len} bytes exceeds the maximum key length of {max} bytes")]
    KeyTooLong {
        /// Length of the rejected key.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The index was built for fixed-length keys and this key has another length.
    #[error("key of {len} bytes does not match the index's fixed key length of {expected} bytes")]
    KeyLenMismatch {
        /// Length of the rejected key.
        len: usize,
        /// The fixed key length of the index.
        expected: usize,
    },
    /// The operation does not apply to this index (for example `remove(key)` on a
    /// non-unique index, which removes pairs).
    #[error("{operation} is not supported here: {reason}")]
    Unsupported {
        /// The operation that was refused.
        operation: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The builder's options cannot be honoured.
    #[error("invalid index configuration: {0}")]
    InvalidConfig(String),
    /// [`crate::Index::check`] found a structural invariant that does not hold.
    #[error("invariant violated: {0}")]
    Corrupt(String),
    /// An index kind implemented outside this crate failed in a way of its own (the
    /// distributed index: an unreachable cluster). [`ExternalError::downcast_ref`] gives that
    /// crate's own error; what the failure means for the operation is that crate's to say.
    #[error("{0}")]
    External(ExternalError),
}

/// The error of an index kind implemented outside this crate, carried through the
/// [`crate::Index`] trait. Cloning shares it; two are equal when they are the same error.
#[derive(Clone)]
pub struct ExternalError(Arc<dyn std::error::Error + Send + Sync>);

impl ExternalError {
    /// Wraps another crate's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The wrapped error as `T`, if it is one.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl fmt::Debug for ExternalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ExternalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl PartialEq for ExternalError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ExternalError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the cluster is gone")]
    struct Gone;

    #[test]
    fn an_external_error_keeps_its_type_and_message() {
        let error = Error::External(ExternalError::new(Gone));
        assert_eq!(error.to_string(), "the cluster is gone");
        let Error::External(external) = &error else {
            unreachable!()
        };
        assert!(external.downcast_ref::<Gone>().is_some());
        assert!(external.downcast_ref::<std::io::Error>().is_none());
        assert_eq!(error.clone(), error);
        assert_ne!(error, Error::External(ExternalError::new(Gone)));
    }
}
