//! Cache files in memory: read, or mapped under a lease, and checked.
//!
//! A file truncated under a mapping kills the process (SIGBUS) on the next access, and no
//! checksum verified earlier protects against that. So a cache file is held in memory nobody
//! can change under us, then its size and CRC-32C are checked against the manifest, and only
//! then is it decoded:
//!
//! - a file of at least MAP_BYTES is mapped when the kernel grants us a read lease on it
//!   (fcntl F_SETLEASE). While we hold it, whoever opens the file for writing or truncates it
//!   is held back, and the kernel signals our watcher thread (`lease`), which copies the
//!   mapping into memory of our own, puts that memory in its place at the same address
//!   (mremap), and only then gives the lease up. Buffers pointing into the mapping keep their
//!   bytes, and a warm open still copies nothing.
//! - anything else (small files, and files the kernel grants no lease on: another user's, a
//!   network filesystem, a file someone has open for writing) is read (pread) into a buffer of
//!   our own.

use std::fs::File;
use std::path::Path;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::Schema;

use super::ipc;
use super::lease;
use super::stamp::{FileSum, Identity, Stamps};

/// Files at least this large are mapped (under a lease) rather than read; the environment
/// variable `TBSCOPE_CACHE_MAP_BYTES` changes it (tests map small files).
const MAP_BYTES: u64 = 1 << 20;

pub(super) fn map_bytes() -> u64 {
    std::env::var("TBSCOPE_CACHE_MAP_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(MAP_BYTES)
}

/// The whole of `f` (`path` names it in errors) in memory nobody can change under us: mapped
/// under a lease when it has at least `map_at` bytes and the kernel grants one, else read into
/// a 64-byte aligned buffer of our own (says which). A file that ends before its size said
/// (truncated meanwhile) is damaged.
pub(super) fn hold(
    f: File,
    path: &Path,
    map_at: u64,
) -> std::result::Result<(Buffer, &'static str), RestoreError> {
    let bad = |e: String| RestoreError::Bad(format!("{}: {e}", path.display()));
    let len = f.metadata().map_err(RestoreError::io)?.len();
    let len = usize::try_from(len).map_err(|_| bad("too large".into()))?;
    let f = if len > 0 && len as u64 >= map_at {
        match lease::map(f, len) {
            Ok(buf) => return Ok((buf, "mapped")),
            Err(back) => back,
        }
    } else {
        f
    };
    let buf = read_into(&f, len).map_err(|e| bad(e.to_string()))?;
    Ok((buf, "read"))
}

/// `len` bytes of `f` from its start, read into a buffer of our own.
fn read_into(f: &File, len: usize) -> std::io::Result<Buffer> {
    use std::os::unix::fs::FileExt;
    // Zeroed memory from the allocator is fresh pages; backed in bulk before the kernel copies
    // the file into them.
    let mut buf = arrow_buffer::MutableBuffer::from_len_zeroed(len);
    let bytes = buf.as_slice_mut();
    crate::mem::populate(bytes.as_mut_ptr() as usize, len);
    let mut at = 0;
    while at < len {
        match f.read_at(&mut bytes[at..], at as u64) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("ends at byte {at} of {len} (truncated)"),
                ))
            }
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf.into())
}

/// CRC-32C of `bytes`, in shares on up to `threads` threads when it is large.
fn crc32c_of(bytes: &[u8], threads: usize) -> u32 {
    const SHARE: usize = 16 << 20;
    let shares = threads.clamp(1, bytes.len().div_ceil(SHARE).max(1));
    let per = bytes.len().div_ceil(shares).max(1);
    let mut parts = bytes.chunks(per);
    let Some(first) = parts.next() else {
        return crc32c::crc32c(bytes);
    };
    std::thread::scope(|s| {
        // The other shares on helper threads while this one checks the first (it has the CPU
        // already); a share whose thread cannot start is checked here too.
        let helpers: Vec<_> = parts
            .map(|c| {
                let h = std::thread::Builder::new().spawn_scoped(s, move || crc32c::crc32c(c));
                (h, c)
            })
            .collect();
        let mut crc = crc32c::crc32c(first);
        for (h, c) in helpers {
            let part = match h {
                Ok(h) => h.join().unwrap_or_else(|_| crc32c::crc32c(c)),
                Err(_) => crc32c::crc32c(c),
            };
            crc = crc32c::crc32c_combine(crc, part, c.len());
        }
        crc
    })
}

/// `f` held ([`hold`]) and checked against what the manifest says: its size, then its
/// CRC-32C, unless `stamps` vouch that this very file was checked before and has not been
/// written since (see `stamp`). Says how it was held and whether it was checked or trusted.
fn read_checked(
    f: File,
    path: &Path,
    sum: FileSum,
    threads: usize,
    map_at: u64,
    stamps: Option<&Stamps>,
) -> std::result::Result<(Buffer, &'static str, bool), RestoreError> {
    let bad = |e: String| RestoreError::Bad(format!("{}: {e}", path.display()));
    let meta = f.metadata().map_err(RestoreError::io)?;
    let on_disk = meta.len();
    if on_disk != sum.bytes {
        return Err(bad(format!(
            "{on_disk} bytes, the manifest says {} (damaged)",
            sum.bytes
        )));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let before = Identity::of(&meta);
    let vouched = stamps.is_some_and(|s| s.vouches(name, &before, &sum));
    // The same open file, asked again once its bytes are held: a write meanwhile (before a
    // lease was granted, or to a file read rather than mapped) moves its ctime.
    let again = stamps.and_then(|_| f.try_clone().ok());
    let (buf, how) = hold(f, path, map_at)?;
    if buf.len() as u64 != sum.bytes {
        return Err(bad("checksum mismatch (damaged)".into()));
    }
    let after = again
        .and_then(|g| g.metadata().ok())
        .map(|m| Identity::of(&m));
    let unchanged = after == Some(before);
    if vouched && unchanged {
        return Ok((buf, how, false));
    }
    if crc32c_of(&buf, threads) != sum.crc {
        return Err(bad("checksum mismatch (damaged)".into()));
    }
    if let (Some(s), true) = (stamps, unchanged) {
        s.record(name, &before, &sum);
    }
    Ok((buf, how, true))
}

/// The one record batch of the IPC file `f` (`path` names it in errors), read and checked
/// against `sum` ([`read_checked`]), decoded ([`ipc::decode`]), and held to the
/// schema its consumers take for granted and the rows the manifest says.
pub(super) fn read_ipc_file(
    f: File,
    path: &Path,
    sum: FileSum,
    schema: &Schema,
    threads: usize,
    stamps: Option<&Stamps>,
) -> std::result::Result<RecordBatch, RestoreError> {
    let t0 = std::time::Instant::now();
    let (buf, how, checked) = read_checked(f, path, sum, threads, map_bytes(), stamps)?;
    let checked = if checked {
        "checked"
    } else {
        "trusted (verified before)"
    };
    let t_read = t0.elapsed();
    let bad = |e: String| RestoreError::Bad(format!("{}: {e}", path.display()));
    let len = buf.len();
    let b = ipc::decode(&buf, schema).map_err(bad)?;
    if std::env::var_os("TBSCOPE_TRACE").is_some() {
        eprintln!(
            "tbscope cache file {}: {len} bytes {how} and {checked} in {t_read:?}, decoded in {:?}",
            path.display(),
            t0.elapsed() - t_read
        );
    }
    if b.num_rows() as u64 != sum.rows {
        return Err(bad(format!(
            "{} rows, the manifest says {}",
            b.num_rows(),
            sum.rows
        )));
    }
    Ok(b)
}

/// The errors of holding a cache file.
pub(super) enum RestoreError {
    /// A file of the generation is missing: it was removed as we read it.
    Gone,
    Bad(String),
}

impl RestoreError {
    pub(super) fn io(e: std::io::Error) -> RestoreError {
        if e.kind() == std::io::ErrorKind::NotFound {
            RestoreError::Gone
        } else {
            RestoreError::Bad(e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// A file of `len` bytes that are not all alike, with its checksum.
    fn pattern_file(name: &str, len: usize) -> (PathBuf, Vec<u8>, FileSum) {
        let path =
            std::env::temp_dir().join(format!("tbscope-lease-{name}-{}", std::process::id()));
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
        fs::write(&path, &bytes).unwrap();
        let sum = FileSum {
            rows: 0,
            bytes: len as u64,
            crc: crc32c::crc32c(&bytes),
        };
        (path, bytes, sum)
    }

    /// The kernel grants this process leases on its own files in the temporary directory
    /// (not every filesystem has leases; where it has none, files are read and this is moot).
    fn leases_here(path: &Path) -> bool {
        lease::map(File::open(path).unwrap(), 1).is_ok()
    }

    /// A mapped cache file truncated, or rewritten in place, by someone else keeps its bytes in
    /// the buffers pointing into it: the lease holds the other side back until the watcher has
    /// put a private copy in the mapping's place. (Before leases, touching the buffer after the
    /// truncation killed the process with SIGBUS.)
    #[test]
    fn a_mapped_file_changed_under_us_keeps_its_bytes() {
        for change in ["truncate", "open_truncate", "write_in_place"] {
            let (path, want, sum) = pattern_file(change, 3 << 20);
            if !leases_here(&path) {
                eprintln!("no leases on {}: skipped", path.display());
                return;
            }
            let Ok((buf, how, _)) =
                read_checked(File::open(&path).unwrap(), &path, sum, 2, 0, None)
            else {
                panic!("{change}: not taken");
            };
            assert_eq!(how, "mapped");
            let other = {
                let path = path.clone();
                std::thread::spawn(move || match change {
                    "truncate" => fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .unwrap()
                        .set_len(0)
                        .unwrap(),
                    "open_truncate" => {
                        File::create(&path).unwrap();
                    }
                    _ => {
                        use std::os::unix::fs::FileExt;
                        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
                        f.write_all_at(b"changed", 1000).unwrap();
                    }
                })
            };
            other.join().unwrap();
            assert!(
                fs::metadata(&path).unwrap().len() < want.len() as u64
                    || change == "write_in_place"
            );
            assert!(
                buf.as_slice() == want.as_slice(),
                "{change}: the mapped bytes changed"
            );
            drop(buf);
            fs::remove_file(&path).unwrap();
        }
    }

    /// The checksum in shares on several threads is the checksum of the whole.
    #[test]
    fn crc_in_shares_is_the_crc_of_the_whole() {
        let bytes: Vec<u8> = (0..(33 << 20) + 3)
            .map(|i: usize| (i * 31 + i / 977) as u8)
            .collect();
        for len in [0, 1, 4096, (16 << 20) + 1, bytes.len()] {
            let want = crc32c::crc32c(&bytes[..len]);
            for threads in 1..=4 {
                assert_eq!(
                    crc32c_of(&bytes[..len], threads),
                    want,
                    "{len} bytes, {threads} threads"
                );
            }
        }
    }

    /// A file its generation's stamps vouch for is taken without its checksum pass, and only
    /// while it is unchanged: one byte changed in place, even with the mtime put back, is
    /// checked and found, and the stamp vouches for nothing again.
    #[test]
    fn a_stamped_file_is_trusted_until_it_is_written() {
        use super::super::stamp::{Identity, Stamps};
        use std::os::unix::fs::FileExt;
        let (file, _, sum) = pattern_file("stamped", 2 << 20);
        // A directory of its own: the stamps of a generation live beside its files.
        let dir = &file.with_extension("gen");
        fs::create_dir_all(dir).unwrap();
        let path = dir.join("s1.scalars.arrow");
        fs::rename(&file, &path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        for map_at in [0, u64::MAX] {
            let stamps = Stamps::load(dir);
            let open = || File::open(&path).unwrap();
            let Ok((_, _, checked)) = read_checked(open(), &path, sum, 2, map_at, Some(&stamps))
            else {
                panic!("a good file was not taken");
            };
            assert!(checked, "nothing vouched for it yet");
            // (read_checked records only settled files; this one was just written.)
            let id = Identity::of(&fs::metadata(&path).unwrap());
            stamps.record_with(name, &id, &sum, std::time::Duration::ZERO);
            let Ok((_, _, checked)) = read_checked(open(), &path, sum, 2, map_at, Some(&stamps))
            else {
                panic!("a good file was not taken");
            };
            assert!(!checked, "the stamp was not used");
            // Another manifest checksum for the same file: checked (and found wrong).
            let other = FileSum {
                crc: sum.crc ^ 1,
                ..sum
            };
            assert!(read_checked(open(), &path, other, 2, map_at, Some(&stamps)).is_err());
            // Damaged in place, its mtime restored: the ctime moved, so it is checked.
            let mtime = fs::metadata(&path).unwrap().modified().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let mut b = [0u8; 1];
            f.read_at(&mut b, 12345).unwrap();
            f.write_all_at(&[b[0] ^ 0x20], 12345).unwrap();
            f.set_modified(mtime).unwrap();
            drop(f);
            match read_checked(open(), &path, sum, 2, map_at, Some(&stamps)) {
                Err(RestoreError::Bad(why)) => assert!(why.contains("damaged"), "{why}"),
                _ => panic!("a damaged file was taken on the word of its stamp"),
            }
            // Put right again for the next round (the bytes, not the stamp).
            let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all_at(&b, 12345).unwrap();
        }
        fs::remove_dir_all(dir).unwrap();
    }

    /// A file truncated before it is held is damaged, not a crash; one whose bytes differ from
    /// the manifest's checksum too.
    #[test]
    fn short_or_changed_files_are_damaged() {
        let (path, _, sum) = pattern_file("damaged", 2 << 20);
        for map_at in [0, u64::MAX] {
            let short = FileSum {
                bytes: sum.bytes + 1,
                ..sum
            };
            let other = FileSum {
                crc: sum.crc ^ 1,
                ..sum
            };
            for s in [short, other] {
                match read_checked(File::open(&path).unwrap(), &path, s, 2, map_at, None) {
                    Err(RestoreError::Bad(why)) => assert!(why.contains("damaged"), "{why}"),
                    _ => panic!("a damaged file was taken"),
                }
            }
            assert!(read_checked(File::open(&path).unwrap(), &path, sum, 2, map_at, None).is_ok());
        }
        fs::remove_file(&path).unwrap();
    }
}
