//! [`Source`]: the bytes a walk reads, from a file or from memory.

use std::io;

/// Where a walk's bytes come from: a file, read with `pread` (never mapped: a file truncated
/// under a mapping kills the process with SIGBUS), or memory (tests, fuzzing).
pub trait Source {
    /// Reads bytes at `offset` into `buf`; fewer (or 0) at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl Source for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
}

impl Source for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let from = offset.min(self.len() as u64) as usize;
        let n = buf.len().min(self.len() - from);
        buf[..n].copy_from_slice(&self[from..from + n]);
        Ok(n)
    }
}
