//! Giving freed memory back to the operating system.
//!
//! glibc's allocator keeps the memory of freed objects in its arenas for reuse, which after a burst
//! (a large list, thousands of workspaces created and deleted) leaves the process's resident size
//! at its peak long after the work is done, and a shard's memory is what a managed service pays
//! for. A periodic `malloc_trim(0)` returns the free pages at the top and in the middle of the
//! heap; it costs a few milliseconds and nothing at all when there is nothing to return.
//!
//! Trimming only returns pages with nothing live on them. glibc gives threads up to eight arenas
//! per core, and the server's threads (tokio's workers, its blocking pool, the store's writer)
//! spread a burst over all of them; what stays alive afterwards (a cache entry here, a connection
//! buffer there) is then scattered over sixteen arenas and pins a page in each. With 10,000
//! workspaces created and deleted, that was +19 to +39% above idle after compaction with only
//! 2.5 MB more in use; with one arena per core it is back at idle (docs/performance.md).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often free memory is returned.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// The environment variable with which glibc users choose the number of arenas themselves.
const ARENA_MAX_ENV: &str = "MALLOC_ARENA_MAX";

/// Lets threads share one allocator arena per core, unless `MALLOC_ARENA_MAX` chose otherwise.
/// Call before the runtime starts its threads. Returns the limit set, if any.
pub fn limit_arenas() -> Option<usize> {
    if std::env::var_os(ARENA_MAX_ENV).is_some() {
        return None;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    set_arena_max(cores).then_some(cores)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(arenas: usize) -> bool {
    let arenas = libc::c_int::try_from(arenas).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only sets a tunable of glibc's allocator; M_ARENA_MAX takes effect for arenas
    // created afterwards and is safe to change at any time.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: usize) -> bool {
    false
}

/// Returns free heap memory to the operating system every `interval` until `stop`.
pub async fn trim_periodically(interval: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => trim(),
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks and releases glibc's own free lists; it takes no pointers
    // from us and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn arenas_are_limited_to_the_cores_unless_the_environment_chose() {
        let limit = limit_arenas();
        if std::env::var_os(ARENA_MAX_ENV).is_some() {
            assert_eq!(limit, None);
        } else {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            assert_eq!(limit, Some(cores));
        }
    }
}
