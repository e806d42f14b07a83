//! Giving freed memory back to the operating system.
//!
//! glibc's allocator keeps the memory of freed objects in its arenas for reuse, which after a burst
//! (a large list, thousands of workspaces created and deleted) leaves the process's resident size
//! at its peak long after the work is done, and a shard's memory is what a managed service pays
//! for. A periodic `malloc_trim(0)` returns the free pages at the top and in the middle of the
//! heap; it costs a few milliseconds and nothing at all when there is nothing to return.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often free memory is returned.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(10);

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
