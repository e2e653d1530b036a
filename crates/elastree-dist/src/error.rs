//! The typed errors of the distributed index and of the local-cluster tooling.

/// Everything that can go wrong talking to a Redis Cluster or managing a local one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// No node answered within the configured timeout (the cluster is down, unreachable or
    /// still failing over).
    #[error("cluster unavailable: {0}")]
    Unavailable(String),
    /// A Redis node answered with an error the client cannot recover from.
    #[error("redis error: {0}")]
    Redis(String),
    /// The stored tree or a reply does not have the shape the client expects.
    #[error("corrupt distributed index: {0}")]
    Corrupt(String),
    /// The request or the configuration is not valid.
    #[error("invalid: {0}")]
    Invalid(String),
    /// A local cluster could not be started, inspected or stopped.
    #[error("local cluster: {0}")]
    Local(String),
    /// A program the local cluster needs (`redis-server`, `redis-cli`) is not installed.
    #[error("{program} is not installed; install it with `sudo apt-get install -y redis-server redis-tools` (Debian/Ubuntu) or run scripts/install-deps.sh")]
    Missing {
        /// The missing program.
        program: &'static str,
    },
    /// An index-level error (a key too long, an unsupported operation).
    #[error(transparent)]
    Index(#[from] elastree::Error),
}

impl From<std::io::Error> for DistError {
    fn from(e: std::io::Error) -> Self {
        DistError::Local(e.to_string())
    }
}

impl DistError {
    /// The distributed error an [`elastree::Error`] from the [`elastree::Index`] trait
    /// carries, if it carries one.
    pub fn of(error: &elastree::Error) -> Option<&DistError> {
        match error {
            elastree::Error::External(external) => external.downcast_ref(),
            _ => None,
        }
    }
}

/// Why the cluster was unavailable, if `error` (from the [`elastree::Index`] trait) says it
/// was: no node answered within the timeout, or a write was applied on its master but not
/// confirmed by the replicas it waits for. Whether a write that failed this way took effect
/// is unknown; writes are idempotent, so retrying it is safe.
pub fn unavailable(error: &elastree::Error) -> Option<&str> {
    match DistError::of(error)? {
        DistError::Unavailable(why) => Some(why),
        _ => None,
    }
}
