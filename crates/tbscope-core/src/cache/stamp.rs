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
//! A file hard-linked into the next generation (a segment no load rewrote) keeps its bytes but
//! not its ctime: the link, and the removal of the generation before, move it. Its stamp is
//! carried over ([`Carry`]) when nothing else can have changed meanwhile: the file is held
//! under a read lease (whoever opens it for writing waits) from before the stamp is found to
//! vouch for it, through the removal and the link, until the clock has moved past the ctime
//! the link gave it; then the new generation's stamp names that ctime. A write after the lease
//! lands in a later clock tick and moves the ctime, as for any stamp. Where the kernel grants
//! no lease, or the filesystem's times are too coarse to tell the ticks apart (whole
//! milliseconds or coarser), nothing is carried and the file is checked on its next open.
//!
//! The stamp file has its own CRC-32C: a damaged one vouches for nothing (every file is checked
//! again and the stamp rewritten). Writing it is best effort (a read-only cache is checked on
//! every open): tmp file and rename, no fsync (a stamp lost in a crash costs one more check).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{self, File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{lease, unique_name};

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

    /// The same bytes as far as a hard link or an unlink can tell: they move only the ctime.
    fn same_but_ctime(&self, other: &Identity) -> bool {
        Identity {
            ctime: other.ctime,
            ..*self
        } == *other
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

    /// `path`, a file of this generation the next one hard-links with the manifest's `sum`,
    /// opened and leased when these stamps vouch for it as it is now (see [`Carry`]); None
    /// when they do not or no lease is granted (it is checked on its next open).
    pub(super) fn lease_vouched(&self, path: &Path, sum: &FileSum) -> Option<Leased> {
        let name = path.file_name()?.to_str()?;
        let file = File::open(path).ok()?;
        // The lease first: once it is held nobody writes the file until it is given up, so
        // what the stamp vouches for now still holds when the stamp is carried.
        if !lease::hold(&file) {
            return None;
        }
        let before = Identity::of(&file.metadata().ok()?);
        self.vouches(name, &before, sum).then_some(Leased {
            file,
            before,
            sum: *sum,
        })
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

/// A stamped file under a read lease, about to be hard-linked into a new generation.
pub(super) struct Leased {
    file: File,
    before: Identity,
    sum: FileSum,
}

/// The stamps to carry into a new generation for the files hard-linked into it (see the
/// module docs): each file's lease is held until [`Carry::record`].
#[derive(Default)]
pub(super) struct Carry {
    linked: Vec<(String, Leased, Identity)>,
}

impl Carry {
    /// `l` was hard-linked as `dest`: its stamp is carried if the link is the same file with
    /// the same bytes (only its ctime moved).
    pub(super) fn linked(&mut self, l: Leased, dest: &Path) {
        let Some(name) = dest.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        let (Ok(at_dest), Ok(held)) = (fs::metadata(dest), l.file.metadata()) else {
            return;
        };
        let (at_dest, held) = (Identity::of(&at_dest), Identity::of(&held));
        if at_dest == held && l.before.same_but_ctime(&held) {
            self.linked.push((name.to_string(), l, at_dest));
        }
    }

    /// Records the carried stamps in `into` (the new generation's, flushed by the caller) once
    /// the clock has moved past every new ctime, for the files whose lease nobody broke; gives
    /// the leases up.
    pub(super) fn record(self, into: &Stamps) {
        // Times in whole milliseconds or coarser: a later write might share the tick.
        let fine = |id: &Identity| id.ctime.1 % 1_000_000 != 0;
        let last = self
            .linked
            .iter()
            .filter(|(_, _, id)| fine(id))
            .map(|(_, _, id)| id.ctime)
            .max();
        let Some(last) = last else { return };
        // The filesystem takes its times from the coarse clock (or a finer one): once that
        // reads a millisecond past the last ctime, every later change has a later ctime.
        let past = nanos(last) + 1_000_000;
        let waited = std::time::Instant::now();
        while coarse_now() < past {
            if waited.elapsed() > Duration::from_millis(50) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut e = into.entries.lock().unwrap_or_else(|e| e.into_inner());
        for (name, l, id) in &self.linked {
            if fine(id) && lease::held(&l.file) {
                let stamp = Stamp {
                    id: *id,
                    bytes: l.sum.bytes,
                    crc: l.sum.crc,
                };
                e.0.insert(name.clone(), stamp);
                e.1 = true;
            }
        }
    }
}

fn nanos((s, ns): (i64, i64)) -> i128 {
    i128::from(s) * 1_000_000_000 + i128::from(ns)
}

/// CLOCK_REALTIME_COARSE in nanoseconds, as [`nanos`] gives a ctime.
fn coarse_now() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    nanos((ts.tv_sec, ts.tv_nsec))
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

    /// A stamped file hard-linked into another generation's directory under a lease carries
    /// its stamp there (its ctime moved by the link and by the removal of the first name);
    /// written in place afterwards, its mtime put back, the carried stamp vouches for nothing.
    /// A write attempted while the lease is held (it waits for it) carries nothing.
    #[test]
    fn a_stamp_carried_over_a_hard_link_vouches_until_a_write() {
        use std::os::unix::fs::FileExt;
        let (a, b) = (scratch("carry-a"), scratch("carry-b"));
        let src = a.join("s.scalars.arrow");
        fs::write(&src, b"0123456789").unwrap();
        let probe = File::open(&src).unwrap();
        if !lease::hold(&probe) {
            eprintln!("no leases on {}: skipped", src.display());
            return;
        }
        drop(probe);
        let sum = sum(10, 7);
        let old = Stamps::load(&a);
        let id = Identity::of(&fs::metadata(&src).unwrap());
        old.record_with("s.scalars.arrow", &id, &sum, Duration::ZERO);
        // Another name of the file, removed as an older generation is while the lease is held.
        let other = a.join("older");
        fs::hard_link(&src, &other).unwrap();
        let id = Identity::of(&fs::metadata(&src).unwrap());
        old.record_with("s.scalars.arrow", &id, &sum, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(20));

        let l = old.lease_vouched(&src, &sum).expect("vouched and leased");
        fs::remove_file(&other).unwrap();
        let dest = b.join("s.scalars.arrow");
        fs::hard_link(&src, &dest).unwrap();
        let linked = Identity::of(&fs::metadata(&dest).unwrap());
        assert_ne!(linked, id, "the link moves the ctime");
        let mut carry = Carry::default();
        carry.linked(l, &dest);
        let new = Stamps::load(&b);
        carry.record(&new);
        new.flush();
        let new = Stamps::load(&b);
        if linked.ctime.1 % 1_000_000 == 0 {
            eprintln!("times in whole milliseconds here: nothing is carried");
            assert!(!new.vouches("s.scalars.arrow", &linked, &sum));
            return;
        }
        assert!(new.vouches("s.scalars.arrow", &linked, &sum));
        assert!(!new.vouches("s.scalars.arrow", &linked, &FileSum { crc: 8, ..sum }));

        // Written in place, mtime restored: another ctime, vouched for by nothing.
        let mtime = fs::metadata(&dest).unwrap().modified().unwrap();
        let h = fs::OpenOptions::new().write(true).open(&dest).unwrap();
        h.write_all_at(b"X", 3).unwrap();
        h.set_modified(mtime).unwrap();
        drop(h);
        let written = Identity::of(&fs::metadata(&dest).unwrap());
        assert!(!new.vouches("s.scalars.arrow", &written, &sum));

        // A writer arriving while the lease is held: nothing carried.
        new.record_with("s.scalars.arrow", &written, &sum, Duration::ZERO);
        let third = scratch("carry-c");
        let l = new.lease_vouched(&dest, &sum).expect("vouched and leased");
        let writer = {
            let dest = dest.clone();
            std::thread::spawn(move || {
                let h = fs::OpenOptions::new().write(true).open(&dest).unwrap();
                h.write_all_at(b"Y", 4).unwrap();
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        let dest3 = third.join("s.scalars.arrow");
        fs::hard_link(&dest, &dest3).unwrap();
        let mut carry = Carry::default();
        carry.linked(l, &dest3);
        let newer = Stamps::load(&third);
        carry.record(&newer);
        writer.join().unwrap();
        let now = Identity::of(&fs::metadata(&dest3).unwrap());
        assert!(!newer.vouches("s.scalars.arrow", &now, &sum));
        assert!(!newer.vouches(
            "s.scalars.arrow",
            &Identity::of(&fs::metadata(&dest3).unwrap()),
            &sum
        ));
        {
            let e = newer.entries.lock().unwrap();
            assert!(e.0.is_empty(), "a stamp carried over a broken lease");
        }
        for d in [a, b, third] {
            fs::remove_dir_all(&d).unwrap();
        }
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
