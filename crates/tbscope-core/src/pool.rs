//! Worker threads: how many a call uses ([`thread_count`]) and the one builder of the per-call
//! rayon pools ([`worker_pool`]) that reads, discovery, the cache's checks, rewrites and
//! downsampling run on, so that every pool is named and refused the same way.

use crate::error::{Error, Result};

/// Most worker threads a call uses, whatever is asked: a pool is made per call, and asking for
/// a million threads (a typo, or a value from elsewhere) made that call spend minutes
/// starting them.
pub const MAX_THREADS: usize = 1024;

/// Worker threads for one call, named `tbscope-{prefix}{i}` (nothing outlives the call, so a
/// fork() in between is safe); none for a single thread. When the system refuses threads the
/// caller decides: discovery, the cache's change check and downsampling work on their own
/// thread (`.unwrap_or(None)`), a read and a rewrite fail with this error.
pub(crate) fn worker_pool(
    threads: usize,
    prefix: &'static str,
) -> Result<Option<rayon::ThreadPool>> {
    if threads <= 1 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("tbscope-{prefix}{i}"))
        .build()
        .map(Some)
        .map_err(|e| Error::Other(format!("cannot start worker threads: {e}")))
}

/// The number of worker threads for `requested` (0 = automatic), at most [`MAX_THREADS`].
pub fn thread_count(requested: usize) -> usize {
    if requested > 0 {
        return requested.min(MAX_THREADS);
    }
    if let Some(n) = std::env::var("TBSCOPE_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        if n > 0 {
            return n.min(MAX_THREADS);
        }
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_named_and_one_thread_needs_none() {
        assert!(worker_pool(1, "t-").unwrap().is_none());
        assert!(worker_pool(0, "t-").unwrap().is_none());
        let pool = worker_pool(2, "t-").unwrap().unwrap();
        let mut names: Vec<String> = pool.broadcast(|_| {
            std::thread::current()
                .name()
                .unwrap_or_default()
                .to_string()
        });
        names.sort();
        assert_eq!(names, ["tbscope-t-0", "tbscope-t-1"]);
    }

    #[test]
    fn thread_counts_are_capped() {
        assert_eq!(thread_count(3), 3);
        assert_eq!(thread_count(MAX_THREADS * 1000), MAX_THREADS);
        assert!(thread_count(0) >= 1);
    }
}
