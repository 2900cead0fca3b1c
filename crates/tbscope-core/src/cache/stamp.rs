//! Verified stamps: a generation's files are checked against their CRC-32C once, not on every
//! open.
//!
//! Checking the checksum of a large segment is most of a warm open's work (every page of it
//! read). Generations are never written again once published, so once a file has been checked,
//! what matters is whether it is still the same bytes: a process that verified a file records
//! its identity in `gen-<id>/verified` (device, inode, size, mtime, ctime, and the size and
//! CRC-32C the manifest gives it), and a later open that finds the file with that identity takes
//! it without reading it through.
//!
//! The ctime is what makes this sound: the kernel sets it to the current time on every write,
//! truncation, `utime` or link count change, and no system call sets it back (restoring an
//! mtime with `touch -d` or `os.utime` moves the ctime). A stamp is only recorded for a file
//! whose ctime lies at least `SETTLE` in the past, so a later write cannot land in the same
//! clock tick as the stamped ctime (filesystems store times at up to 2 s granularity). The file's
//! identity is read from the descriptor that is then held, before and after holding its bytes:
//! a write in between shows, and the file is checked in full.
//!
//! What a stamp cannot see: bytes changed without going through the filesystem (the disk's
//! own bit rot under a filesystem that keeps no data checksums, writes to the block device,
//! memory errors in the page cache), a filesystem that does not maintain ctime, or a clock set
//! back to hit a stamped ctime exactly. Those were caught by checking every open; now they are
//! caught only by the first open of a generation (docs/cache.md, "Damage").
//!
//! The stamp file has its own CRC-32C: a damaged one vouches for nothing (every file is checked
//! again and the stamp rewritten). Writing it is best effort (a read-only cache is checked on
//! every open): tmp file and rename, no fsync (a stamp lost in a crash costs one more check).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::unique_name;

/// What the manifest says about one file of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileSum {
    pub(super) rows: u64,
    pub(super) bytes: u64,
    pub(super) crc: u32,
}

/// The name of the stamp file in a generation's directory.
pub(super) const STAMP_FILE: &str = "verified";

const MAGIC: &str = "tbscope-verified 1";

/// A file's ctime must be this far in the past for a stamp to be recorded. Not adjustable from
/// outside: a value under the filesystem clock's tick would make stamps unsound (unit tests
/// pass their own to [`Stamps::record_with`]).
const SETTLE: Duration = Duration::from_secs(2);

/// What identifies one state of a file's bytes, and the checksum they were checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    pub(super) fn of(m: &Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether the last change of the file lies at least `settle` before `now`.
    fn settled(&self, now: SystemTime, settle: Duration) -> bool {
        let (s, ns) = self.ctime;
        let Ok(now) = now.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let Ok(s) = u64::try_from(s) else {
            return false;
        };
        let changed =
            Duration::from_secs(s) + Duration::from_nanos(ns.clamp(0, 999_999_999) as u64);
        now.checked_sub(changed).is_some_and(|age| age >= settle)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    id: Identity,
    bytes: u64,
    crc: u32,
}

/// The stamps of one generation's directory.
pub(super) struct Stamps {
    dir: PathBuf,
    /// By file name; whether anything was recorded since the file was read or written.
    entries: Mutex<(HashMap<String, Stamp>, bool)>,
}

impl Stamps {
    /// The stamps recorded in `dir` (none when there is no stamp file, or a damaged one).
    pub(super) fn load(dir: &Path) -> Stamps {
        let entries = fs::read(dir.join(STAMP_FILE))
            .ok()
            .and_then(|b| decode(&b))
            .unwrap_or_default();
        Stamps {
            dir: dir.to_path_buf(),
            entries: Mutex::new((entries, false)),
        }
    }

    /// The generation directory these stamps are about.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether file `name`, with identity `id`, was verified against `sum` (the manifest's size
    /// and checksum) in this identity.
    pub(super) fn vouches(&self, name: &str, id: &Identity, sum: &FileSum) -> bool {
        let e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        e.0.get(name)
            .is_some_and(|s| s.id == *id && s.bytes == sum.bytes && s.crc == sum.crc)
    }

    /// Records that file `name` was verified against `sum` in identity `id`, if that identity is
    /// settled (see the module docs); written by [`Stamps::flush`].
    pub(super) fn record(&self, name: &str, id: &Identity, sum: &FileSum) {
        self.record_with(name, id, sum, SETTLE);
    }

    pub(super) fn record_with(&self, name: &str, id: &Identity, sum: &FileSum, settle: Duration) {
        if !id.settled(SystemTime::now(), settle) {
            return;
        }
        let stamp = Stamp {
            id: *id,
            bytes: sum.bytes,
            crc: sum.crc,
        };
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if e.0.get(name) != Some(&stamp) {
            e.0.insert(name.to_string(), stamp);
            e.1 = true;
        }
    }

    /// Writes the stamps if anything was recorded: a temporary file renamed over the stamp
    /// file. Failures only mean the files are checked again next time.
    pub(super) fn flush(&self) {
        let mut e = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if !e.1 {
            return;
        }
        e.1 = false;
        let bytes = encode(&e.0);
        drop(e);
        let tmp = self
            .dir
            .join(format!(".{STAMP_FILE}.{}", unique_name("tmp-")));
        if fs::write(&tmp, bytes).is_err() || fs::rename(&tmp, self.dir.join(STAMP_FILE)).is_err() {
            let _ = fs::remove_file(&tmp);
        }
    }
}

fn encode(entries: &HashMap<String, Stamp>) -> Vec<u8> {
    let mut names: Vec<&String> = entries.keys().collect();
    names.sort();
    let mut s = format!("{MAGIC}\n");
    for name in names {
        let Stamp { id, bytes, crc } = entries[name];
        let _ = writeln!(
            s,
            "{name} {} {} {} {} {} {} {} {bytes} {crc:08x}",
            id.dev, id.ino, id.size, id.mtime.0, id.mtime.1, id.ctime.0, id.ctime.1
        );
    }
    let crc = crc32c::crc32c(s.as_bytes());
    let _ = writeln!(s, "crc32c {crc:08x}");
    s.into_bytes()
}

fn decode(b: &[u8]) -> Option<HashMap<String, Stamp>> {
    let text = std::str::from_utf8(b).ok()?;
    let body_end = text.trim_end_matches('\n').rfind('\n')? + 1;
    let (body, last) = text.split_at(body_end);
    let crc = u32::from_str_radix(last.trim_end().strip_prefix("crc32c ")?, 16).ok()?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return None;
    }
    let mut lines = body.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let mut out = HashMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        let [name, dev, ino, size, ms, mns, cs, cns, bytes, crc] = f.as_slice() else {
            return None;
        };
        let id = Identity {
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
            size: size.parse().ok()?,
            mtime: (ms.parse().ok()?, mns.parse().ok()?),
            ctime: (cs.parse().ok()?, cns.parse().ok()?),
        };
        let stamp = Stamp {
            id,
            bytes: bytes.parse().ok()?,
            crc: u32::from_str_radix(crc, 16).ok()?,
        };
        out.insert((*name).to_string(), stamp);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(bytes: u64, crc: u32) -> FileSum {
        FileSum {
            rows: 0,
            bytes,
            crc,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tbscope-stamp-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// A stamp vouches for the identity and checksum it was recorded with, and for nothing
    /// else: another ctime (any write), inode, size or manifest checksum is checked again.
    #[test]
    fn a_stamp_vouches_only_for_what_it_recorded() {
        let d = scratch("vouch");
        let f = d.join("a.arrow");
        fs::write(&f, b"0123456789").unwrap();
        let id = Identity::of(&fs::metadata(&f).unwrap());
        let s = Stamps::load(&d);
        // Just written: not settled, so nothing is recorded.
        s.record("a.arrow", &id, &sum(10, 7));
        s.flush();
        assert!(!d.join(STAMP_FILE).exists());
        s.record_with("a.arrow", &id, &sum(10, 7), Duration::ZERO);
        s.flush();
        let again = Stamps::load(&d);
        assert!(again.vouches("a.arrow", &id, &sum(10, 7)));
        assert!(!again.vouches("a.arrow", &id, &sum(10, 8)));
        assert!(!again.vouches("b.arrow", &id, &sum(10, 7)));
        for other in [
            Identity {
                ctime: (id.ctime.0, id.ctime.1 + 1),
                ..id
            },
            Identity {
                ino: id.ino + 1,
                ..id
            },
            Identity { size: 11, ..id },
            Identity {
                mtime: (id.mtime.0 - 1, id.mtime.1),
                ..id
            },
        ] {
            assert!(!again.vouches("a.arrow", &other, &sum(10, 7)));
        }
        // One flipped bit anywhere in the stamp file: it vouches for nothing.
        let good = fs::read(d.join(STAMP_FILE)).unwrap();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x04;
            fs::write(d.join(STAMP_FILE), &b).unwrap();
            assert!(
                !Stamps::load(&d).vouches("a.arrow", &id, &sum(10, 7)),
                "byte {i} flipped"
            );
        }
        fs::remove_dir_all(&d).unwrap();
    }

    /// A write in place moves the ctime even when the writer puts the mtime back.
    #[test]
    fn a_write_with_its_mtime_restored_changes_the_identity() {
        let d = scratch("ctime");
        let f = d.join("a.arrow");
        fs::write(&f, b"0123456789").unwrap();
        let before = fs::metadata(&f).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        {
            use std::os::unix::fs::FileExt;
            let h = fs::OpenOptions::new().write(true).open(&f).unwrap();
            h.write_all_at(b"X", 3).unwrap();
            h.set_modified(before.modified().unwrap()).unwrap();
        }
        let after = fs::metadata(&f).unwrap();
        assert_eq!(after.modified().unwrap(), before.modified().unwrap());
        assert_ne!(Identity::of(&after), Identity::of(&before));
        fs::remove_dir_all(&d).unwrap();
    }
}
