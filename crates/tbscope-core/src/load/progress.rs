//! How far loads have got, for a progress display: the pieces of event files loads were given
//! to read and those read so far. Process-wide and only ever growing, so that a display reads
//! them without holding the reader a load borrows: it takes the counts when its load starts
//! and shows what was added since (loads running at the same time add up).

use std::sync::atomic::{AtomicU64, Ordering};

static TOTAL: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicU64 = AtomicU64::new(0);

/// A load was given `n` more pieces of files to read.
pub(crate) fn planned(n: usize) {
    TOTAL.fetch_add(n as u64, Ordering::Relaxed);
}

/// A load has read one more piece.
pub(crate) fn read_one() {
    DONE.fetch_add(1, Ordering::Relaxed);
}

/// (pieces read, pieces given) since the process started.
pub fn counts() -> (u64, u64) {
    // Done first: a display never sees more read than given.
    let done = DONE.load(Ordering::Relaxed);
    (done, TOTAL.load(Ordering::Relaxed))
}
