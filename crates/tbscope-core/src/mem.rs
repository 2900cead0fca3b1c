//! Memory and thread helpers for building columns: backing a column's pages in bulk before
//! it is written, reserving what the system can give, and running two halves of a job side
//! by side on a worker pool without ever starting one.

/// Backs the next `rows` unused slots of `v` with memory now, in one system call.
///
/// Columns are written front to back right after this, and each first touch of a 4 KiB page
/// is otherwise a page fault: under virtualisation a few microseconds each, which for ten
/// million rows was a third of the whole read. `MADV_POPULATE_WRITE` (Linux 5.14+) maps the
/// pages in bulk; elsewhere, or if it fails, nothing changes but speed. Only the slots about to
/// be written are populated, so resident memory does not grow beyond what is used.
pub fn prefault<T>(v: &Vec<T>, rows: usize) {
    let size = std::mem::size_of::<T>();
    let rows = rows.min(v.capacity() - v.len());
    populate(v.as_ptr() as usize + v.len() * size, rows * size);
}

/// [`prefault`] for `bytes` bytes from address `start`, which must lie inside one allocation
/// whose contents there the caller is about to overwrite (or which reads back as zeros).
pub(crate) fn populate(start: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let end = start + bytes;
        let lo = start.div_ceil(PAGE) * PAGE;
        let hi = end / PAGE * PAGE;
        if hi > lo + 16 * PAGE {
            // SAFETY: [lo, hi) lies within the caller's allocation; populating changes no
            // contents (untouched anonymous pages read back as zeros either way).
            unsafe {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_POPULATE_WRITE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

/// Reserves room for `n` more rows if the system gives that much address space, and nothing
/// otherwise: reservations are sized for the smallest records of a whole logdir, which for one
/// of hundreds of gigabytes is more than a machine's memory, and the columns can still grow.
pub fn reserve<T>(v: &mut Vec<T>, n: usize) {
    let _ = v.try_reserve(n);
}

/// Runs `a` and `b` side by side when called on a worker pool's thread, one after the other
/// otherwise (never starting rayon's global pool, which would not survive a fork).
pub fn both(a: impl FnOnce() + Send, b: impl FnOnce() + Send) {
    if rayon::current_thread_index().is_some() {
        rayon::join(a, b);
    } else {
        a();
        b();
    }
}

/// [`both`] for two computations with results.
pub fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if rayon::current_thread_index().is_some() {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}
