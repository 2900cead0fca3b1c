//! Generations on disk: a generation is written into a temporary directory, renamed and made
//! current by an atomic replacement of `CURRENT` under the lock; readers see the old generation
//! or the new one, never part of one. Restoring reads `CURRENT` and checks everything it opens
//! (docs/cache.md, "Several processes, and crashes").

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;

use super::carry::Written;
use super::files::{hold, map_bytes, read_ipc_file, RestoreError};
use super::ipc::write_ipc;
use super::manifest::{decode_body, decode_header, encode_manifest};
use super::pending::Pending;
use super::segments::Segment;
use super::stamp::{Carry, FileSum, Leased, Stamps};
use super::unique_name;
use super::Cache;
use crate::data_compat::Kind;
use crate::load::{thread_count, Reader};
use crate::runstats::stats_schema;
use crate::sys::sync_dir;

/// Why a write that was abandoned published nothing.
pub(super) const ABANDONED: &str = "abandoned";

/// Temporary directories of a process on another host (whose liveness cannot be checked) are
/// removed once they are this old.
const STALE_TMP: Duration = Duration::from_secs(24 * 3600);

pub(super) enum Restore {
    Restored,
    /// No cache yet, or one that cannot serve this scan: read everything.
    Missing,
}

/// This host's name as part of a temporary directory's name (`sys::hostname`, the one every
/// part of tbscope uses), with every character but ASCII letters and digits made `_`: the name
/// is split at dashes again by `clean_tmp`.
fn host_part() -> String {
    crate::sys::hostname()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn valid_generation(name: &str) -> bool {
    name.starts_with("gen-")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Test hook: `TBSCOPE_CACHE_TEST_STALL=<phase>:<seconds>` sleeps at `written` (a generation
/// complete in its temporary directory) or `renamed` (renamed, not yet current), so tests can
/// kill a writer or race two of them at a known point.
fn stall(phase: &str) {
    if let Ok(v) = std::env::var("TBSCOPE_CACHE_TEST_STALL") {
        if let Some((p, secs)) = v.split_once(':') {
            if p == phase {
                if let Ok(s) = secs.parse::<f64>() {
                    std::thread::sleep(Duration::from_secs_f64(s.max(0.0)));
                }
            }
        }
    }
}

/// Test hook: `TBSCOPE_CACHE_TEST_HOLD=<path>` holds a deferred write (`deferred.rs`) before
/// it writes anything until `<path>` exists or the write is abandoned, so tests can look at a
/// server whose answer came before its cache, or stop it mid-write, without timing.
pub(super) fn write_hold(abandon: &AtomicBool) {
    let Some(path) = std::env::var_os("TBSCOPE_CACHE_TEST_HOLD") else {
        return;
    };
    while !abandon.load(Ordering::Relaxed) && !Path::new(&path).exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes temporary directories left by processes that died while writing (this host's, by
/// process id; others' once a day old). A live writer's directory is never touched.
pub(super) fn clean_tmp(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let host = host_part();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("tmp-") else {
            continue;
        };
        let mut parts = rest.splitn(3, '-');
        let (h, pid) = (parts.next(), parts.next());
        let dead = match (h, pid.and_then(|p| p.parse::<i32>().ok())) {
            (Some(h), Some(pid)) if h == host => {
                // SAFETY: kill with signal 0 only checks whether the process exists.
                let rc = unsafe { libc::kill(pid, 0) };
                rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
            }
            _ => e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TMP),
        };
        if dead {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// An exclusive flock on `<dir>/.lock`, released on drop (and by the kernel if we die).
struct Lock(File);

impl Lock {
    fn take(dir: &Path) -> std::io::Result<Lock> {
        use std::os::fd::AsRawFd;
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".lock"))?;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Lock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking a descriptor we own; closing it would release it anyway.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Removes the generations of `dir` other than those `keep` names (under the lock).
fn prune(dir: &Path, keep: &dyn Fn(&str) -> bool) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("gen-") && !keep(&name) {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

pub(super) fn segment_file(seg: &str, kind: Kind) -> String {
    format!("{seg}.{}.arrow", kind.name())
}

/// Per segment, what the manifest says about its file of each kind.
type SegmentSums = Vec<[Option<FileSum>; 8]>;

/// The stored tables of a generation: the runs' facts and the scalar series' statistics.
const FACTS: &str = "facts.arrow";
const STATS: &str = "stats.arrow";

impl Cache {
    /// Writes a generation into a temporary directory, then makes it current: a rename of the
    /// directory and an atomic replacement of CURRENT, under the lock. Readers see the old
    /// generation or the new one, never a part of one.
    pub(super) fn publish(&mut self, r: &Reader) -> std::result::Result<String, String> {
        self.publish_unless(r, &AtomicBool::new(false))
    }

    /// [`Cache::publish`], abandoned (nothing published, the temporary directory removed) once
    /// `abandon` is set: it is looked at before each file and before the generation is made
    /// current.
    pub(super) fn publish_unless(
        &mut self,
        r: &Reader,
        abandon: &AtomicBool,
    ) -> std::result::Result<String, String> {
        let io = |what: &str, p: &Path, e: std::io::Error| format!("{what} {}: {e}", p.display());
        fs::create_dir_all(&self.dir).map_err(|e| io("cannot create", &self.dir, e))?;
        // tmp-<host>-<pid>-<nonce>: the host (no dashes in it) and the process tell a later
        // run whether the writer is dead (see clean_tmp).
        let tmp = self.dir.join(format!(
            "tmp-{}-{}-{}",
            host_part(),
            std::process::id(),
            unique_name("").replace('-', "")
        ));
        fs::create_dir(&tmp).map_err(|e| io("cannot create", &tmp, e))?;
        let files = match self.write_into(r, &tmp, abandon) {
            Ok(files) if abandon.load(Ordering::Relaxed) => {
                drop(files);
                let _ = fs::remove_dir_all(&tmp);
                return Err(ABANDONED.to_string());
            }
            Ok((files, written)) => {
                // A partial load continues from what it wrote (`Cache::repend`).
                self.written = self.partial.is_some().then_some(written);
                files
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        stall("written");
        let generation = unique_name("gen-");
        let gdir = self.dir.join(&generation);
        let published = (|| {
            let _lock = Lock::take(&self.dir).map_err(|e| io("cannot lock", &self.dir, e))?;
            let previous = fs::read_to_string(self.dir.join("CURRENT"))
                .ok()
                .map(|s| s.trim().to_string());
            fs::rename(&tmp, &gdir).map_err(|e| io("cannot rename", &tmp, e))?;
            stall("renamed");
            let pointer = self.dir.join(format!("CURRENT.{}", unique_name("tmp-")));
            let written = (|| {
                let mut f = File::create(&pointer)?;
                f.write_all(format!("{generation}\n").as_bytes())?;
                f.sync_all()?;
                fs::rename(&pointer, self.dir.join("CURRENT"))?;
                sync_dir(&self.dir)
            })();
            if let Err(e) = written {
                let _ = fs::remove_file(&pointer);
                let _ = fs::remove_dir_all(&gdir);
                return Err(io("cannot publish in", &self.dir, e));
            }
            // Older generations go, except the one that was current until now: a reader may
            // have just read its name and not opened it yet.
            prune(&self.dir, &|name| {
                name == generation || previous.as_deref() == Some(name)
            });
            Ok(())
        })();
        if let Err(e) = published {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
        for (s, files) in self.segments.iter_mut().zip(files) {
            s.home = Some(gdir.clone());
            s.files = files;
        }
        // The stamps carried into it speak for the files linked there.
        self.stamps = Some(Arc::new(Stamps::load(&gdir)));
        Ok(generation)
    }

    /// Writes the generation's files into `tmp` (segments kept from the generation they live
    /// in are hard-linked, with the size and checksum recorded there); returns what the
    /// manifest says about each segment's files.
    fn write_into(
        &self,
        r: &Reader,
        tmp: &Path,
        abandon: &AtomicBool,
    ) -> std::result::Result<(SegmentSums, Written), String> {
        let t0 = std::time::Instant::now();
        let mut marks: Vec<(&str, std::time::Duration)> = Vec::new();
        let mut sums: Vec<[Option<FileSum>; 8]> = Vec::with_capacity(self.segments.len());
        let mut carry = Carry::default();
        let mut leased = self.lease_linked();
        marks.push(("leased and pruned", t0.elapsed()));
        for s in &self.segments {
            let mut files: [Option<FileSum>; 8] = Default::default();
            for k in Kind::ALL {
                if !s.has(k) {
                    continue;
                }
                if abandon.load(Ordering::Relaxed) {
                    return Err(ABANDONED.to_string());
                }
                let name = segment_file(&s.name, k);
                let dest = tmp.join(&name);
                let linked = match (&s.home, s.files[k as usize]) {
                    (Some(h), Some(sum)) => {
                        let src = h.join(&name);
                        let held = leased.remove(&src);
                        let ok = fs::hard_link(&src, &dest).is_ok();
                        if let (true, Some(l)) = (ok, held) {
                            carry.linked(l, &dest);
                        }
                        ok.then_some(sum)
                    }
                    _ => None,
                };
                files[k as usize] = Some(match linked {
                    Some(sum) => sum,
                    None => {
                        let b = s.batches[k as usize]
                            .as_ref()
                            .ok_or_else(|| format!("segment {} was not decoded", s.name))?;
                        write_ipc(&dest, b)
                            .map_err(|e| format!("cannot write {}: {e}", dest.display()))?
                    }
                });
            }
            sums.push(files);
        }
        marks.push(("segments", t0.elapsed()));
        let stamps = Stamps::load(tmp);
        carry.record(&stamps);
        stamps.flush();
        marks.push(("stamps carried", t0.elapsed()));
        // The stored tables answer a warm open that finds nothing changed (see the module
        // docs): computed by the reader, which holds the unfiltered load.
        let facts = self
            .facts_to_store(r)
            .map_err(|e| format!("cannot compute the runs' facts: {e}"))?;
        marks.push(("facts", t0.elapsed()));
        let stats = self
            .stats_to_store()
            .map_err(|e| format!("cannot compute scalar statistics: {e}"))?;
        marks.push(("statistics", t0.elapsed()));
        let mut derived = [None; 2];
        for (slot, (name, b)) in derived.iter_mut().zip([(FACTS, &facts), (STATS, &stats)]) {
            let dest = tmp.join(name);
            *slot = Some(
                write_ipc(&dest, b).map_err(|e| format!("cannot write {}: {e}", dest.display()))?,
            );
        }
        marks.push(("stored tables written", t0.elapsed()));
        let manifest = encode_manifest(
            r,
            &self.segments,
            &sums,
            &self.pieces,
            &self.dirs,
            derived,
            self.kept.as_ref(),
        )?;
        marks.push(("manifest encoded", t0.elapsed()));
        let path = tmp.join("manifest");
        (|| {
            let mut f = File::create_new(&path)?;
            f.write_all(&manifest)?;
            f.sync_all()?;
            sync_dir(tmp)
        })()
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        marks.push(("manifest written", t0.elapsed()));
        // Where a publish spends its time: on a logdir of many runs, most of a small change.
        super::trace_marks("publish", &marks);
        Ok((
            sums,
            Written {
                manifest,
                facts,
                stats,
            },
        ))
    }

    /// The segment files the next generation hard-links that the stamps of the generation
    /// they live in vouch for, each opened under a read lease (`stamp::Carry`), by path. When
    /// there are any, the generations other than the current one and theirs are removed now
    /// rather than after the publish: removing a generation that also links a file moves the
    /// file's ctime, and must happen while the lease shows nobody wrote it.
    fn lease_linked(&self) -> HashMap<PathBuf, Leased> {
        let mut out = HashMap::new();
        let Some(st) = &self.stamps else {
            return out;
        };
        for s in &self.segments {
            if s.home.as_deref() != Some(st.dir()) {
                continue;
            }
            for k in Kind::ALL {
                let (Some(h), Some(sum)) = (&s.home, s.files[k as usize]) else {
                    continue;
                };
                if !s.has(k) {
                    continue;
                }
                let src = h.join(segment_file(&s.name, k));
                if let Some(l) = st.lease_vouched(&src, &sum) {
                    out.insert(src, l);
                }
            }
        }
        if !out.is_empty() {
            if let Ok(_lock) = Lock::take(&self.dir) {
                let current = fs::read_to_string(self.dir.join("CURRENT")).unwrap_or_default();
                let current = current.trim();
                let home = st.dir().file_name().and_then(|n| n.to_str());
                prune(&self.dir, &|name| name == current || home == Some(name));
            }
        }
        out
    }

    /// Restores the reader from the current generation.
    pub(super) fn restore(&mut self, r: &mut Reader) -> std::result::Result<Restore, String> {
        for attempt in 0..2 {
            let current = match fs::read_to_string(self.dir.join("CURRENT")) {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Restore::Missing),
                Err(e) => return Err(format!("cannot read CURRENT: {e}")),
            };
            let generation = current.trim();
            if !valid_generation(generation) {
                return Err("CURRENT does not name a generation".into());
            }
            let gdir = self.dir.join(generation);
            match self.restore_from(r, &gdir) {
                // Removed between reading CURRENT and opening it (two newer generations were
                // published meanwhile): read CURRENT again.
                Err(RestoreError::Gone) if attempt == 0 => continue,
                Err(RestoreError::Gone) => return Err(format!("generation {generation} vanished")),
                Err(RestoreError::Bad(why)) => return Err(why),
                Ok(Restore::Restored) => {
                    self.info.generation = Some(generation.to_string());
                    return Ok(Restore::Restored);
                }
                Ok(other) => return Ok(other),
            }
        }
        Ok(Restore::Missing)
    }

    fn restore_from(
        &mut self,
        r: &mut Reader,
        gdir: &Path,
    ) -> std::result::Result<Restore, RestoreError> {
        let t0 = std::time::Instant::now();
        // Held whole and checked (its checksum covers every byte) before anything in it is
        // used; only the change check's part of it is decoded unless something changed.
        let path = gdir.join("manifest");
        let (manifest, _) = hold(
            File::open(&path).map_err(RestoreError::io)?,
            &path,
            map_bytes(),
        )?;
        let bad = |e: String| RestoreError::Bad(format!("manifest: {e}"));
        if manifest.is_empty() {
            return Err(bad("empty".into()));
        }
        let (h, body) = decode_header(&manifest).map_err(bad)?;
        if h.tbscope != env!("CARGO_PKG_VERSION") {
            return Err(RestoreError::Bad(format!(
                "written by tbscope {}, this is {}",
                h.tbscope,
                env!("CARGO_PKG_VERSION")
            )));
        }
        let root = fs::canonicalize(&r.root).map_err(|e| RestoreError::Bad(e.to_string()))?;
        if h.root != root.as_os_str().as_bytes() {
            return Err(RestoreError::Bad(format!(
                "it belongs to {}",
                String::from_utf8_lossy(&h.root)
            )));
        }
        let o = &r.opts.file;
        if h.verify != o.verify || h.max_len != o.max_len {
            return Err(RestoreError::Bad(format!(
                "written with verify={} max_record_bytes={}, this scan uses verify={} max_record_bytes={}",
                h.verify, h.max_len, o.verify, o.max_len
            )));
        }
        if self.view.provenance && !h.provenance {
            // Not a problem, just a cache without the columns asked for: build one with them.
            return Ok(Restore::Missing);
        }
        let t_read = t0.elapsed();
        let mut m = decode_body(body).map_err(bad)?;
        let t_decode = t0.elapsed();
        let mut segments = Vec::with_capacity(m.segments.len());
        for (name, files) in &m.segments {
            // Opened (so that a writer removing this generation takes nothing away) and
            // checked for size here; read, checked and decoded when first needed.
            let mut s = Segment::new(name.clone(), Some(gdir.to_path_buf()));
            for k in Kind::ALL {
                let Some(sum) = files[k as usize] else {
                    continue;
                };
                let path = gdir.join(segment_file(name, k));
                let f = File::open(&path).map_err(RestoreError::io)?;
                let len = f.metadata().map_err(RestoreError::io)?.len();
                if len != sum.bytes {
                    return Err(RestoreError::Bad(format!(
                        "{} is {len} bytes, the manifest says {}",
                        path.display(),
                        sum.bytes
                    )));
                }
                s.unread[k as usize] = Some(f);
                s.files[k as usize] = Some(sum);
            }
            segments.push(s);
        }
        // The stored tables are small: read and checked now.
        let facts_schema = r
            .facts_from(r.runs_table_with(&|_, _| None), &|_, _, _, _| None)
            .schema();
        let threads = thread_count(r.opts.threads);
        let stamps = Arc::new(Stamps::load(gdir));
        let mut derived: [Option<RecordBatch>; 2] = [None, None];
        for ((slot, sum), (name, schema)) in derived
            .iter_mut()
            .zip(m.derived)
            .zip([(FACTS, facts_schema), (STATS, stats_schema())])
        {
            let Some(sum) = sum else { continue };
            let path = gdir.join(name);
            let f = File::open(&path).map_err(RestoreError::io)?;
            *slot = Some(read_ipc_file(
                f,
                &path,
                sum,
                &schema,
                threads,
                Some(&stamps),
            )?);
        }
        stamps.flush();
        if let Some(f) = &derived[0] {
            if f.num_rows() != m.nruns {
                return Err(RestoreError::Bad("facts of other runs".into()));
            }
        }
        let t_segments = t0.elapsed();
        // Everything checked: take it. The runs' state stays encoded until it is needed.
        let [facts, stats] = derived;
        r.opts.file.provenance = h.provenance;
        r.runs.clear();
        // Names and pieces too are decoded when first needed.
        r.run_names.clear();
        r.file_names.clear();
        r.report = std::mem::take(&mut m.report);
        self.segments = segments;
        self.stamps = Some(stamps);
        self.pieces = Default::default();
        // Kept as the pending index until discovery needs them as a map.
        self.dirs.clear();
        self.pending = Some(Box::new(Pending::of(manifest, m, true, facts, stats)));
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope cache restore: read {t_read:?}, decode {:?}, segments {:?}",
                t_decode - t_read,
                t_segments - t_decode,
            );
        }
        Ok(Restore::Restored)
    }
}
