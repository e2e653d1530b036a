//! Time limits for tests.
//!
//! A test that holds a [`TimeLimit`] and is still running when the limit passes ends the
//! whole test process with a message that names it (and the other tests still running),
//! so a hang or a deadlock fails the run in minutes instead of stalling it until the CI's
//! own limit. The harness gives each test a thread named after it; the limit takes that
//! name when it is created.
//!
//! Limits are far above what a test takes on a loaded machine: they catch hangs, never slow
//! runs. `ELASTREE_TEST_TIME_FACTOR` multiplies every limit (the memcheck run sets it:
//! everything runs 20-50 times slower there, on a twentieth of the data).

use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

/// The limit of [`time_limit`]: ten minutes. The slowest test takes under a minute on a
/// 2-core machine with both cores busy elsewhere; a test's own deadlines (a cluster that
/// may take two minutes to become healthy, say) stay well inside it.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(600);

/// The environment variable that multiplies every limit.
pub const FACTOR_VAR: &str = "ELASTREE_TEST_TIME_FACTOR";

/// The exit code of a process ended by a limit (the code `timeout(1)` uses).
pub const EXIT_CODE: i32 = 124;

/// How often the watchdog looks at the limits.
const TICK: Duration = Duration::from_millis(500);

/// A running test's limit.
struct Watched {
    id: u64,
    test: String,
    limit: Duration,
    deadline: Instant,
}

/// Every limit held now, and the next id.
static WATCHED: Mutex<(u64, Vec<Watched>)> = Mutex::new((0, Vec::new()));
static WATCHDOG: Once = Once::new();

fn watched() -> MutexGuard<'static, (u64, Vec<Watched>)> {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The limit of the test running on this thread; dropping it (at the end of the test,
/// also when it panics) lifts it.
#[must_use = "the limit holds only while this value lives: bind it with `let _limit = ...`"]
pub struct TimeLimit {
    id: u64,
}

/// A [`DEFAULT_LIMIT`] for the test running on this thread.
pub fn time_limit() -> TimeLimit {
    time_limit_of(DEFAULT_LIMIT)
}

/// A limit of `limit` (times `ELASTREE_TEST_TIME_FACTOR`) for the test running on this
/// thread.
pub fn time_limit_of(limit: Duration) -> TimeLimit {
    let limit = limit.mul_f64(factor());
    let test = std::thread::current()
        .name()
        .unwrap_or("<a test on an unnamed thread>")
        .to_string();
    WATCHDOG.call_once(|| {
        std::thread::Builder::new()
            .name("elastree-testkit-watchdog".into())
            .spawn(watch)
            .expect("start the test watchdog thread");
    });
    let mut w = watched();
    w.0 += 1;
    let id = w.0;
    w.1.push(Watched {
        id,
        test,
        limit,
        deadline: Instant::now() + limit,
    });
    TimeLimit { id }
}

impl Drop for TimeLimit {
    fn drop(&mut self) {
        watched().1.retain(|w| w.id != self.id);
    }
}

/// `ELASTREE_TEST_TIME_FACTOR`, or 1.
fn factor() -> f64 {
    std::env::var(FACTOR_VAR)
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(1.0)
}

/// The watchdog: ends the process once a limit has passed.
fn watch() {
    loop {
        std::thread::sleep(TICK);
        let w = watched();
        let now = Instant::now();
        if let Some(late) = w.1.iter().find(|t| now >= t.deadline) {
            let others: Vec<&str> =
                w.1.iter()
                    .filter(|t| t.id != late.id)
                    .map(|t| t.test.as_str())
                    .collect();
            eprintln!(
                "\nTIME LIMIT: test `{}` is still running after its limit of {:?}: a hang or \
                 a deadlock. Ending the test process (exit code {EXIT_CODE}). Other tests \
                 with a limit still running: {others:?}",
                late.test, late.limit
            );
            std::process::exit(EXIT_CODE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Set by [`a_test_past_its_limit_ends_the_process_naming_it`] for its child process.
    const CHILD_VAR: &str = "ELASTREE_TESTKIT_LIMIT_CHILD";

    /// Not run on its own: [`a_test_past_its_limit_ends_the_process_naming_it`] runs it in a
    /// child process, where it outlives a 1-second limit (anywhere else, say under
    /// `--include-ignored`, it returns at once).
    #[test]
    #[ignore = "run by a_test_past_its_limit_ends_the_process_naming_it"]
    fn outlives_its_limit() {
        if std::env::var_os(CHILD_VAR).is_none() {
            return;
        }
        let _limit = time_limit_of(Duration::from_secs(1));
        std::thread::sleep(Duration::from_secs(60));
    }

    #[test]
    fn a_test_past_its_limit_ends_the_process_naming_it() {
        let _limit = time_limit();
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "limit::tests::outlives_its_limit",
                "--nocapture",
            ])
            .env_remove(FACTOR_VAR)
            .env(CHILD_VAR, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(EXIT_CODE), "stderr: {stderr}");
        assert!(
            stderr.contains("test `limit::tests::outlives_its_limit`"),
            "stderr: {stderr}"
        );
    }

    #[test]
    fn a_limit_is_lifted_when_it_drops() {
        let limit = time_limit();
        assert!(watched().1.iter().any(|w| w.id == limit.id));
        let id = limit.id;
        drop(limit);
        assert!(watched().1.iter().all(|w| w.id != id));
    }
}
