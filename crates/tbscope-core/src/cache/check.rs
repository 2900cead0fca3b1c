//! What changed in the logdir since a generation was written: the warm open's check that
//! proves "nothing changed" with one stat per directory and per event file, the discovery that
//! lists only directories that changed, and which runs' cached rows cannot be continued
//! (docs/cache.md, "When the logdir changes").

use std::collections::HashMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::manifest::{time_of, DirListing, FileIndex};
use super::Cache;
use crate::load::{stat_found, Found, Reader, RunState};
use crate::logdir::{discover, walk, Discovered, Listing};

/// What [`discover_with`] finds: runs and their event files, problems, every directory's
/// listing by its path below the root, and how many directories it listed (did not reuse).
pub(super) type Discovery = (
    Discovered,
    Vec<(PathBuf, std::io::Error)>,
    HashMap<PathBuf, DirListing>,
    usize,
);

/// TensorBoard's run discovery (`logdir::walk`, unfiltered), reusing the listings of
/// directories that did not change since `prev` was taken: a directory's mtime moves whenever
/// an entry is added, removed or renamed in it, so while (device, inode, mtime) stay the same
/// and the listing was settled, its listing does too, and its files are the run's as the
/// reader has them.
pub(super) fn discover_with(
    r: &Reader,
    prev: &HashMap<PathBuf, DirListing>,
    pool: Option<&rayon::ThreadPool>,
) -> std::io::Result<Discovery> {
    let root = &r.root;
    if fs::metadata(root)?.is_file() {
        let (found, errors) = discover(root, None)?;
        return Ok((found, errors, HashMap::new(), 0));
    }
    // Every known directory's stat up front, in parallel: most of them will only need that.
    let known: Vec<&PathBuf> = prev.keys().collect();
    let stat = |rel: &&PathBuf| ((*rel).clone(), fs::metadata(root.join(rel)));
    let stats: HashMap<PathBuf, std::io::Result<fs::Metadata>> = match pool {
        Some(p) => {
            use rayon::prelude::*;
            p.install(|| known.par_iter().with_min_len(256).map(stat).collect())
        }
        None => known.iter().map(stat).collect(),
    };
    let mut reused = 0usize;
    let mut reuse = |rel: &Path, meta: &fs::Metadata, mtime: (i64, u64), run: &str| {
        let l = prev.get(rel)?;
        if l.unsure || (l.dev, l.ino, l.mtime) != (meta.dev(), meta.ino(), mtime) {
            return None;
        }
        let files: Vec<PathBuf> = if l.has_files {
            let state = r.runs.get(run).filter(|s| !s.files.is_empty())?;
            state.files.keys().cloned().collect()
        } else {
            Vec::new()
        };
        reused += 1;
        Some(Listing {
            dev: l.dev,
            ino: l.ino,
            mtime: l.mtime,
            unsure: false,
            links: false,
            has_files: l.has_files,
            files,
            subdirs: l.subdirs.clone(),
            odd: l.odd.clone(),
        })
    };
    let w = walk(root, None, stats, Some(&mut reuse));
    let listed = w.listings.len() - reused;
    let listings = w
        .listings
        .into_iter()
        .map(|(rel, l)| (rel, DirListing::of(l)))
        .collect();
    Ok((w.found, w.errors, listings, listed))
}

/// Two listings that say the same (the reader's state need not be written again for them).
pub(super) fn same_listing(a: &DirListing, b: &DirListing) -> bool {
    (a.dev, a.ino, a.mtime, a.unsure, a.links, a.has_files)
        == (b.dev, b.ino, b.mtime, b.unsure, b.links, b.has_files)
        && a.subdirs == b.subdirs
        && a.odd == b.odd
}

/// Runs whose cached rows cannot be continued: gone from the logdir, or with a file that was
/// deleted, replaced (another inode), truncated, or that grew while a later file exists (its
/// new rows would come after rows they precede); also runs with a new file sorting before one
/// already read. Everything else is continued from the saved cursors, as a reload does.
///
/// Also says, per entry of `found`, whether the run is untouched (every file as it was): the
/// plan can skip those, which is most of a warm open of a logdir of many runs.
pub(super) fn stale_runs(r: &Reader, found: &Found) -> (Vec<String>, Vec<bool>) {
    let mut stale = Vec::new();
    let mut untouched = vec![false; found.len()];
    // Both in run-name order.
    let mut found_iter = found.iter().enumerate().peekable();
    for (run, state) in &r.runs {
        while found_iter.next_if(|(_, (f, _))| f < run).is_some() {}
        let Some((i, (_, files))) = found_iter.next_if(|(_, (f, _))| f == run) else {
            stale.push(run.clone());
            continue;
        };
        match run_change(state, files) {
            Change::None => untouched[i] = true,
            Change::Appended => {}
            Change::Stale => stale.push(run.clone()),
        }
    }
    (stale, untouched)
}

/// [`stale_runs`] for a `found` that holds only some of the runs (those the change check says
/// moved; every other run is untouched): which of them cannot be continued.
pub(super) fn stale_among(r: &Reader, found: &Found) -> Vec<String> {
    found
        .iter()
        .filter_map(|(run, files)| {
            let state = r.runs.get(run)?;
            matches!(run_change(state, files), Change::Stale).then(|| run.clone())
        })
        .collect()
}

enum Change {
    None,
    /// New bytes or new files that continue the run in order.
    Appended,
    Stale,
}

fn run_change(state: &RunState, files: &[(PathBuf, Option<fs::Metadata>)]) -> Change {
    let last = state.files.keys().next_back();
    // Both in path order: every cached file must still be there.
    let mut found_paths = files.iter().map(|(p, _)| p).peekable();
    for p in state.files.keys() {
        while found_paths.next_if(|f| *f < p).is_some() {}
        if found_paths.next_if(|f| *f == p).is_none() {
            return Change::Stale;
        }
    }
    let mut change = Change::None;
    for (path, meta) in files {
        match (state.files.get(path), meta) {
            (None, _) => {
                if last.is_some_and(|l| path < l) {
                    return Change::Stale;
                }
                change = Change::Appended;
            }
            (Some(_), None) => return Change::Stale,
            (Some(f), Some(m)) => {
                let grew = m.len() != f.size;
                if (m.dev(), m.ino()) != (f.dev, f.ino)
                    || m.len() < f.size
                    || (grew && Some(path) != last)
                {
                    return Change::Stale;
                }
                if grew || f.failed || f.pending || m.modified().ok() != f.mtime {
                    change = Change::Appended;
                }
            }
        }
    }
    change
}

/// What [`Cache::changes`] found.
pub(super) enum Checked {
    /// The check cannot tell (see [`Cache::changes`]): discovery decides.
    Unknown,
    /// Every directory but `dirs` as listed, and these runs' files moved. Both are indices in
    /// the generation, ascending; `runs` leaves out the runs of `dirs` (their files are
    /// listed again with them). Both empty: nothing changed.
    Moved { runs: Vec<u32>, dirs: Vec<u32> },
}

/// At most this many directories (or a quarter of a larger logdir's) are listed again after
/// a warm open's check: past that, the full discovery is about as cheap.
const RELIST_MOST: usize = 1024;

impl Cache {
    /// What changed since the pending generation was written, told with one stat per
    /// directory and per event file and nothing else. [`Checked::Moved`] with the directories
    /// whose listing is not current (another device, inode or mtime: an entry was added,
    /// removed or renamed; gone; or listed too soon after a change to be sure of, which is
    /// always listed again) and the runs of the other directories that have a file whose
    /// identity, size or mtime moved, or that cannot be told this way (a file that failed, one
    /// found outside the run's directory, a pending tail whose timeout passed): neither is
    /// "nothing changed". [`Checked::Unknown`] when the listings cannot be trusted (a
    /// single-file logdir, odd entries, a directory whose listing does not account for its
    /// subdirectories), or more than [`RELIST_MOST`] directories (or a quarter) changed; the
    /// full discovery then decides.
    ///
    /// Paths are stat'ed relative to their parent directory (one `open` per directory that has
    /// subdirectories) rather than from the root: on a logdir of many runs the kernel's walk
    /// down the full path is most of a stat.
    pub(super) fn changes(&self, r: &Reader, threads: usize) -> Checked {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let Some(p) = self.pending.as_deref() else {
            return Checked::Unknown;
        };
        // A single-file logdir, or a root that could not be listed: leave it to discovery.
        if p.dirs.first().is_none_or(|d| d.parent != u32::MAX) {
            return Checked::Unknown;
        }
        let open_dir = |at: Option<i32>, path: &[u8]| -> Option<OwnedFd> {
            let c = std::ffi::CString::new(path).ok()?;
            let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
            // SAFETY: a valid NUL-terminated path and (for openat) a descriptor we hold open.
            let fd = unsafe {
                match at {
                    None => libc::open(c.as_ptr(), flags),
                    Some(dirfd) => libc::openat(dirfd, c.as_ptr(), flags),
                }
            };
            // SAFETY: `fd` is a descriptor we just opened (checked non-negative).
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
        };
        const NONE: i32 = -1;
        let t0 = std::time::Instant::now();
        let now = std::time::SystemTime::now();
        // First pass: what the listings promise (complete, every run in its directory).
        let mut children: Vec<u32> = vec![0; p.dirs.len()];
        let mut seen = vec![false; p.nruns];
        for (i, d) in p.dirs.iter().enumerate() {
            // (A directory holding symlinks would be listed again only to find them there.)
            if d.odd.1 > 0 || d.links {
                return Checked::Unknown;
            }
            if i > 0 {
                children[d.parent as usize] += 1;
            }
            if d.has_files {
                // (Its files are looked at in the second pass.)
                if d.run == u32::MAX || std::mem::replace(&mut seen[d.run as usize], true) {
                    return Checked::Unknown;
                }
            }
        }
        if p.dirs.iter().zip(&children).any(|(d, &n)| d.subdirs.1 != n) || seen.contains(&false) {
            return Checked::Unknown;
        }
        let Some(root_fd) = open_dir(None, r.root.as_os_str().as_bytes()) else {
            return Checked::Unknown;
        };
        // A directory that could not be opened (gone, most likely): its subtree is listed again.
        const MISSING: i32 = -2;
        let most = RELIST_MOST.max(p.dirs.len() / 4);
        let mut fd_of: Vec<i32> = vec![NONE; p.dirs.len()];
        fd_of[0] = root_fd.as_raw_fd();
        let mut opened_total = 1usize;
        // Second pass, on `threads` threads over contiguous ranges of directories: one stat
        // of each directory and of each of its event files, relative to the nearest descriptor.
        let same = AtomicBool::new(true);
        // Runs with a file that moved, and directories to list again, found on any thread
        // (few, usually).
        let changed: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        let relist: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        let to_relist = |i: usize| {
            let mut v = relist.lock().unwrap_or_else(|e| e.into_inner());
            v.push(i as u32);
            if v.len() > most {
                same.store(false, Ordering::Relaxed);
            }
        };
        let stat_is =
            |fd: i32, path: &[u8], dev: u64, ino: u64, mtime: (i64, u64), size: Option<u64>| {
                // SAFETY: an all-zero stat is a valid value for fstatat to overwrite.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: the descriptor is open for the whole check; `path` ends with a NUL.
                let rc = unsafe { libc::fstatat(fd, path.as_ptr().cast(), &mut st, 0) };
                rc == 0
                    && st.st_dev as u64 == dev
                    && st.st_ino as u64 == ino
                    && (st.st_mtime as i64, st.st_mtime_nsec as u64) == mtime
                    && size.is_none_or(|n| st.st_size as u64 == n)
            };
        let check = |range: std::ops::Range<usize>, fd_of: &[i32]| {
            let mut buf: Vec<u8> = Vec::with_capacity(512);
            for i in range {
                if !same.load(Ordering::Relaxed) {
                    return;
                }
                let d = &p.dirs[i];
                let name = p.bytes(d.name);
                let own = fd_of[i];
                let parent = if i == 0 {
                    NONE
                } else {
                    fd_of[d.parent as usize]
                };
                buf.clear();
                let fd = if own >= 0 {
                    buf.push(b'.');
                    own
                } else if own == NONE && parent >= 0 {
                    buf.extend_from_slice(name);
                    parent
                } else {
                    to_relist(i);
                    continue;
                };
                buf.push(0);
                // (A listing taken too soon after a change is listed again whatever its stat.)
                if d.unsure || !stat_is(fd, &buf, d.dev, d.ino, d.mtime, None) {
                    to_relist(i);
                    continue;
                }
                if !d.has_files {
                    continue;
                }
                let files = p.run_files(d.run as usize);
                // Only a run's own files, each stat'ed last time (a file that failed, or one
                // found elsewhere, is discovery's business).
                // A pending tail stays pending while nothing changes, until its file's
                // timeout passes (a newer file would have changed a listing).
                let expired = |f: &FileIndex| {
                    f.pending
                        && f.mtime.is_none_or(|(s, n)| {
                            now.duration_since(time_of(s, n))
                                .is_ok_and(|age| age >= r.opts.tail_timeout)
                        })
                };
                // (The run's directory then says nothing of its files: discovery decides.)
                if files.is_empty() {
                    same.store(false, Ordering::Relaxed);
                    return;
                }
                let moved = |buf: &mut Vec<u8>| {
                    if files
                        .iter()
                        .any(|f| f.code != 1 || f.failed || f.mtime.is_none() || expired(f))
                    {
                        return true;
                    }
                    files.iter().any(|f| {
                        buf.clear();
                        if own == NONE {
                            buf.extend_from_slice(name);
                            buf.push(b'/');
                        }
                        buf.extend_from_slice(p.bytes(f.path));
                        buf.push(0);
                        let mtime = f.mtime.expect("checked above");
                        !stat_is(fd, buf, f.dev, f.ino, mtime, Some(f.size))
                    })
                };
                if moved(&mut buf) {
                    changed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(d.run);
                }
            }
        };
        let total = p.dirs.len() + p.index.files.len();
        let threads = if total < 4096 { 1 } else { threads.clamp(1, 8) };
        let t1 = std::time::Instant::now();
        // Directories in windows of consecutive ones (the listings are depth first) that hold at
        // most FD_BUDGET descriptors at a time: a logdir of thousands of sweep directories must
        // not run into the process's limit on open files.
        const FD_BUDGET: usize = 256;
        let parent_of = |i: usize| p.dirs[i].parent as usize;
        let mut a = 1usize.min(p.dirs.len());
        // The root first, alone (its descriptor is open throughout).
        check(0..a, &fd_of);
        while a < p.dirs.len() && same.load(Ordering::Relaxed) {
            let mut held: Vec<(usize, OwnedFd)> = Vec::new();
            // The window's first directory's ancestors (below the root), from the top down: its
            // directories' parents are among them or in the window.
            let mut chain = Vec::new();
            let mut x = parent_of(a);
            while x != 0 {
                chain.push(x);
                x = parent_of(x);
            }
            let mut missing: Vec<usize> = Vec::new();
            let open_at = |i: usize, fd_of: &[i32]| -> Option<OwnedFd> {
                let at = fd_of[parent_of(i)];
                (at >= 0).then(|| open_dir(Some(at), p.bytes(p.dirs[i].name)))?
            };
            for &anc in chain.iter().rev() {
                match open_at(anc, &fd_of) {
                    Some(fd) => {
                        fd_of[anc] = fd.as_raw_fd();
                        held.push((anc, fd));
                    }
                    None => {
                        fd_of[anc] = MISSING;
                        missing.push(anc);
                    }
                }
            }
            let mut budget = FD_BUDGET.saturating_sub(chain.len()).max(1);
            let mut b = a;
            while b < p.dirs.len() {
                if p.dirs[b].subdirs.1 > 0 {
                    if budget == 0 {
                        break;
                    }
                    budget -= 1;
                    match open_at(b, &fd_of) {
                        Some(fd) => {
                            fd_of[b] = fd.as_raw_fd();
                            held.push((b, fd));
                        }
                        None => {
                            fd_of[b] = MISSING;
                            missing.push(b);
                        }
                    }
                }
                b += 1;
            }
            opened_total += held.len();
            if threads == 1 || b - a < 1024 {
                check(a..b, &fd_of);
            } else {
                // Equal ranges of directories (run directories hold a file or a few each).
                let per = (b - a).div_ceil(threads);
                let (fds, check) = (&fd_of, &check);
                std::thread::scope(|s| {
                    for t in 0..threads {
                        let range = (a + t * per).min(b)..(a + (t + 1) * per).min(b);
                        s.spawn(move || check(range, fds));
                    }
                });
            }
            for i in held.iter().map(|(i, _)| *i).chain(missing) {
                fd_of[i] = NONE;
            }
            drop(held);
            a = b;
        }
        drop(root_fd);
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope cache check: {total} stats on {threads} threads, {} directories opened; \
                 listings {:?}, stats {:?}",
                opened_total,
                t1 - t0,
                t1.elapsed()
            );
        }
        if !same.load(Ordering::Relaxed) {
            return Checked::Unknown;
        }
        let mut runs = changed.into_inner().unwrap_or_else(|e| e.into_inner());
        runs.sort_unstable();
        let mut dirs = relist.into_inner().unwrap_or_else(|e| e.into_inner());
        dirs.sort_unstable();
        Checked::Moved { runs, dirs }
    }
}

/// Stats the discovered event files (`load::stat_found`), on the pool's threads when a pool
/// is given.
pub(super) fn stat_found_with(
    found: crate::logdir::Discovered,
    pool: Option<&rayon::ThreadPool>,
) -> Found {
    match pool {
        Some(p) => p.install(|| stat_found(found)),
        None => stat_found(found),
    }
}
