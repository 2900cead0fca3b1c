//! Finding runs and event files, with TensorBoard's rules.
//!
//! A run is any directory (the logdir itself included) that directly holds a file whose name
//! contains `tfevents`. Its name is the path relative to the logdir with `/` separators on every
//! OS, `.` for the root. Files are read in name order, which is creation order thanks to the
//! zero-padded timestamp in the name.
//!
//! One walker does it ([`walk`]); a caller that remembers what directories held (the cache)
//! can answer a directory's listing itself instead of having it read again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use regex::Regex;

/// The substring that marks an event file (TensorBoard's `EVENT_FILE_BASENAME_INFIX`).
pub const EVENT_FILE_INFIX: &str = "tfevents";

/// Runs found under a path: run name → event files in read order.
pub type Discovered = BTreeMap<String, Vec<PathBuf>>;

pub fn is_event_file_name(name: &str) -> bool {
    name.contains(EVENT_FILE_INFIX)
}

/// Finds the runs under `root`, keeping those whose name `runs` matches.
///
/// `root` may be a single event file (one run named `.`). A missing path is an error; a
/// directory that cannot be listed is skipped and returned in the second value.
pub fn discover(
    root: &Path,
    runs: Option<&Regex>,
) -> io::Result<(Discovered, Vec<(PathBuf, io::Error)>)> {
    let meta = fs::metadata(root)?;
    if meta.is_file() {
        let mut out = Discovered::new();
        if runs.is_none_or(|re| re.is_match(".")) {
            out.insert(".".into(), vec![root.to_path_buf()]);
        }
        return Ok((out, Vec::new()));
    }
    if rayon::current_thread_index().is_some() {
        if let Some(w) = par_walk(root, &meta, runs, false) {
            return Ok((w.found, w.errors));
        }
    }
    let w = walk(root, runs, HashMap::new(), None);
    Ok((w.found, w.errors))
}

/// [`discover`] keeping every directory's listing (with its identity and times, one stat per
/// directory more): what a reader's next reload checks the logdir against
/// (`load::changes::Tree`). A single event file has no listings.
pub(crate) fn discover_listed(root: &Path, runs: Option<&Regex>) -> io::Result<Walked> {
    let meta = fs::metadata(root)?;
    if meta.is_file() {
        let (found, errors) = discover(root, runs)?;
        return Ok(Walked {
            found,
            errors,
            listings: HashMap::new(),
        });
    }
    if rayon::current_thread_index().is_some() {
        if let Some(w) = par_walk(root, &meta, runs, true) {
            return Ok(w);
        }
    }
    let mut fresh = |_: &Path, _: &fs::Metadata, _: (i64, u64), _: &str| None;
    Ok(walk(root, runs, HashMap::new(), Some(&mut fresh)))
}

/// What a subtree of [`par_walk`] found, in walk order.
#[derive(Default)]
struct Part {
    found: Vec<(String, Vec<PathBuf>)>,
    errors: Vec<(PathBuf, io::Error)>,
    listings: Vec<(PathBuf, Listing)>,
}

/// [`walk`] (without `stats`; with `keep`, keeping every listing as a walk with `reuse`
/// does, each directory stat'ed before it is listed) on the current rayon pool's threads, each subtree
/// listed by whichever thread takes it: listing is what a walk of many runs spends its time
/// on (a path lookup, an open and a read per directory). The runs found and the problems, in
/// their order, are the serial walk's as long as each directory is reached once; a link to a
/// directory, or a directory reached twice (a bind mount), makes which path names it depend on
/// the walk's order: then this gives up (None) and the serial walk decides.
fn par_walk(root: &Path, meta: &fs::Metadata, runs: Option<&Regex>, keep: bool) -> Option<Walked> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    struct Walk<'a> {
        root: &'a Path,
        runs: Option<&'a Regex>,
        keep: bool,
        /// Inodes of the directories taken (all on the root's device, as [`walk`] takes
        /// real subdirectories to be).
        seen: Mutex<HashSet<u64>>,
        linked: AtomicBool,
    }
    fn go(w: &Walk<'_>, rel: PathBuf) -> Part {
        let mut part = Part::default();
        if w.linked.load(Ordering::Relaxed) {
            return part;
        }
        let dir = if rel.as_os_str().is_empty() {
            w.root.to_path_buf()
        } else {
            w.root.join(&rel)
        };
        let meta = if w.keep {
            match fs::metadata(&dir) {
                Ok(m) => Some(m),
                Err(e) => {
                    part.errors.push((dir, e));
                    return part;
                }
            }
        } else {
            None
        };
        let mtime = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .map_or((0, 0), time_parts);
        let (mut listing, inos) = match list(&dir, meta.as_ref(), mtime) {
            Ok(l) => l,
            Err(e) => {
                part.errors.push((dir, e));
                return part;
            }
        };
        for odd in &listing.odd {
            part.errors.push((dir.join(odd), io::Error::other(ODD)));
        }
        let name = run_name(&rel);
        if listing.has_files && w.runs.is_none_or(|re| re.is_match(&name)) {
            part.found.push((name, std::mem::take(&mut listing.files)));
        }
        let mut subs = Vec::with_capacity(listing.subdirs.len());
        {
            let mut seen = w.seen.lock().unwrap_or_else(|e| e.into_inner());
            for (s, ino) in listing.subdirs.iter().zip(inos) {
                // A link's target (no inode from the entry) may be reached by another path.
                if !ino.is_some_and(|i| seen.insert(i)) {
                    w.linked.store(true, Ordering::Relaxed);
                    return part;
                }
                subs.push(rel.join(s));
            }
        }
        if w.keep {
            part.listings.push((rel, listing));
        }
        let parts: Vec<Part> = subs.into_par_iter().map(|s| go(w, s)).collect();
        for p in parts {
            part.found.extend(p.found);
            part.errors.extend(p.errors);
            part.listings.extend(p.listings);
        }
        part
    }
    let w = Walk {
        root,
        runs,
        keep,
        seen: Mutex::new(HashSet::from([meta.ino()])),
        linked: AtomicBool::new(false),
    };
    let part = go(&w, PathBuf::new());
    if w.linked.load(Ordering::Relaxed) {
        return None;
    }
    Some(Walked {
        found: part.found.into_iter().collect(),
        errors: part.errors,
        listings: part.listings.into_iter().collect(),
    })
}

/// What a directory held when it was listed.
#[derive(Debug, Clone)]
pub(crate) struct Listing {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) mtime: (i64, u64),
    /// Its ctime (`utime` cannot set it back), and whether it was listed within [`SETTLED`]
    /// of it: the reader's own listings go by both (`load::changes`).
    pub(crate) ctime: (i64, u64),
    pub(crate) ctime_recent: bool,
    /// Listed within [`SETTLED`] of its last change (a change in the same clock tick would not
    /// move the mtime), or holding symlinks (their targets change without the directory
    /// knowing): a listing not to be reused.
    pub(crate) unsure: bool,
    /// It holds symlinks (part of `unsure`; not kept in the cache's listings).
    pub(crate) links: bool,
    /// Its event files (regular files, links to them, dangling links), sorted; a walk moves
    /// them into what it found.
    pub(crate) files: Vec<PathBuf>,
    /// It holds event files.
    pub(crate) has_files: bool,
    pub(crate) subdirs: Vec<OsString>,
    /// Entries named like event files that are not regular files (reported, not read).
    pub(crate) odd: Vec<OsString>,
}

/// A directory listed this long after its mtime is taken as settled.
pub(crate) const SETTLED: Duration = Duration::from_secs(2);
const ODD: &str = "named like an event file but not a regular file; skipped";

/// What a walk found: runs (filtered), problems, and (when asked for) every directory's
/// listing by its path below the root.
pub(crate) struct Walked {
    pub(crate) found: Discovered,
    pub(crate) errors: Vec<(PathBuf, io::Error)>,
    pub(crate) listings: HashMap<PathBuf, Listing>,
}

/// A directory's listing answered without reading it: given its path below the root, its
/// metadata and mtime, and the name of the run it would be.
pub(crate) type Reuse<'a> =
    dyn FnMut(&Path, &fs::Metadata, (i64, u64), &str) -> Option<Listing> + 'a;

/// TensorBoard's run discovery below the directory `root`, keeping runs that `runs` matches.
/// Symlinks are followed (as TensorBoard does), a directory seen twice is a cycle. `stats`
/// holds directories' metadata taken beforehand (by path below the root; the others are
/// stat'ed here). With `reuse`, it may answer a directory's listing instead of reading it, and
/// the walk keeps every listing.
pub(crate) fn walk(
    root: &Path,
    runs: Option<&Regex>,
    stats: HashMap<PathBuf, io::Result<fs::Metadata>>,
    reuse: Option<&mut Reuse<'_>>,
) -> Walked {
    let mut w = Walker {
        root,
        runs,
        stats,
        reuse,
        out: Walked {
            found: Discovered::new(),
            errors: Vec::new(),
            listings: HashMap::new(),
        },
        seen: HashSet::new(),
    };
    w.walk(PathBuf::new(), None);
    w.out
}

/// [`walk`] of the subtree `rel` below `root` alone (a directory the cache found new),
/// keeping every listing. Which path names a directory reached twice depends on the whole
/// walk's order: the caller checks that none of these directories is known elsewhere.
pub(crate) fn walk_new(root: &Path, rel: &Path) -> Walked {
    let mut fresh = |_: &Path, _: &fs::Metadata, _: (i64, u64), _: &str| None;
    let mut w = Walker {
        root,
        runs: None,
        stats: HashMap::new(),
        reuse: Some(&mut fresh),
        out: Walked {
            found: Discovered::new(),
            errors: Vec::new(),
            listings: HashMap::new(),
        },
        seen: HashSet::new(),
    };
    w.walk(rel.to_path_buf(), None);
    w.out
}

struct Walker<'a, 'r> {
    root: &'a Path,
    runs: Option<&'a Regex>,
    stats: HashMap<PathBuf, io::Result<fs::Metadata>>,
    reuse: Option<&'a mut Reuse<'r>>,
    out: Walked,
    seen: HashSet<(u64, u64)>,
}

impl Walker<'_, '_> {
    /// Walks the directory `rel` below the root. `id`: its device and inode when its parent's
    /// listing already told them (a real directory, not a link) and nothing needs its
    /// metadata (no `reuse`): a logdir of many runs then costs no stat per directory.
    fn walk(&mut self, rel: PathBuf, id: Option<(u64, u64)>) {
        let dir = if rel.as_os_str().is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(&rel)
        };
        let name = run_name(&rel);
        // With the listing, each subdirectory's inode when it is a real directory.
        let (mut listing, inos, dev) = match id {
            Some((dev, ino)) if self.reuse.is_none() && !self.stats.contains_key(&rel) => {
                if !self.seen.insert((dev, ino)) {
                    return;
                }
                match list(&dir, None, (0, 0)) {
                    Ok((l, inos)) => (l, inos, dev),
                    Err(e) => {
                        self.out.errors.push((dir, e));
                        return;
                    }
                }
            }
            _ => {
                let meta = match self
                    .stats
                    .remove(&rel)
                    .unwrap_or_else(|| fs::metadata(&dir))
                {
                    Ok(m) => m,
                    Err(e) => {
                        self.out.errors.push((dir, e));
                        return;
                    }
                };
                if !self.seen.insert((meta.dev(), meta.ino())) {
                    return;
                }
                let mtime = meta.modified().map_or((0, 0), time_parts);
                let reused = self
                    .reuse
                    .as_mut()
                    .and_then(|f| f(&rel, &meta, mtime, &name));
                let (listing, inos) = match reused {
                    Some(l) => (l, Vec::new()),
                    None => match list(&dir, Some(&meta), mtime) {
                        Ok(l) => l,
                        Err(e) => {
                            self.out.errors.push((dir, e));
                            return;
                        }
                    },
                };
                (listing, inos, meta.dev())
            }
        };
        for odd in &listing.odd {
            self.out.errors.push((dir.join(odd), io::Error::other(ODD)));
        }
        if listing.has_files && self.runs.is_none_or(|re| re.is_match(&name)) {
            self.out
                .found
                .insert(name, std::mem::take(&mut listing.files));
        }
        // A real subdirectory is on its parent's device (a mount point below the logdir is
        // taken as one too: only a link's target needs a stat to be known).
        let subs: Vec<(PathBuf, Option<(u64, u64)>)> = listing
            .subdirs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    rel.join(s),
                    inos.get(i).copied().flatten().map(|n| (dev, n)),
                )
            })
            .collect();
        if self.reuse.is_some() {
            self.out.listings.insert(rel, listing);
        }
        for (sub, id) in subs {
            self.walk(sub, id);
        }
    }
}

/// Reads the directory `dir` (whose metadata and mtime are given, when known: a listing
/// without them is not one to keep). With it, each subdirectory's inode when it is a real
/// directory (not a link), from the directory entry itself.
pub(crate) fn list(
    dir: &Path,
    meta: Option<&fs::Metadata>,
    mtime: (i64, u64),
) -> io::Result<(Listing, Vec<Option<u64>>)> {
    use std::os::unix::fs::DirEntryExt;
    let listed_at = SystemTime::now();
    let mut files = Vec::new();
    let mut subdirs = Vec::new();
    let mut odd = Vec::new();
    let mut links = false;
    for entry in fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        links |= ft.is_symlink();
        let is_dir = ft.is_dir() || (ft.is_symlink() && path.is_dir());
        if is_dir {
            subdirs.push((entry.file_name(), ft.is_dir().then(|| entry.ino())));
        } else if is_event_file_name(&entry.file_name().to_string_lossy()) {
            // Only regular files (or links to them): opening a FIFO or device would block or
            // read forever. A dangling link is kept: reading it fails and is reported against
            // the file.
            let dangling = ft.is_symlink() && fs::metadata(&path).is_err();
            if ft.is_file() || path.is_file() || dangling {
                files.push(path);
            } else {
                odd.push(entry.file_name());
            }
        }
    }
    files.sort();
    subdirs.sort();
    odd.sort();
    let settled_since = |t: Option<SystemTime>| {
        t.and_then(|t| listed_at.duration_since(t).ok())
            .is_some_and(|age| age >= SETTLED)
    };
    let settled = settled_since(meta.and_then(|m| m.modified().ok()));
    let ctime = meta.map_or((0, 0), |m| (m.ctime(), m.ctime_nsec() as u64));
    let ctime_recent = meta.is_some() && {
        let (s, n) = ctime;
        let t = if s >= 0 {
            UNIX_EPOCH.checked_add(Duration::new(s as u64, n as u32))
        } else {
            None
        };
        !settled_since(t)
    };
    let (subdirs, inos) = subdirs.into_iter().unzip();
    let listing = Listing {
        dev: meta.map_or(0, |m| m.dev()),
        ino: meta.map_or(0, |m| m.ino()),
        mtime,
        ctime,
        ctime_recent,
        unsure: links || !settled,
        links,
        has_files: !files.is_empty(),
        files,
        subdirs,
        odd,
    };
    Ok((listing, inos))
}

/// The name of a path below the logdir: its components joined with `/` on every OS (lossily
/// for names that are not UTF-8), `.` for the logdir itself. TensorBoard's rule for runs: the
/// run of an event file is its directory relative to the logdir, so a run's name is this of
/// its directory. The `file` columns name files by the same rule ([`rel_name`]). The one
/// implementation of path to name: discovery, loading, the cache and rewrites all come here.
pub fn run_name(rel: &Path) -> String {
    use std::path::Component;
    let mut out = String::new();
    for c in rel.components() {
        let part = match c {
            Component::Normal(s) => s.to_string_lossy(),
            Component::ParentDir => "..".into(),
            // `.`, and a root or prefix (not below a logdir): nothing to name.
            Component::CurDir | Component::RootDir | Component::Prefix(_) => continue,
        };
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(&part);
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// A file's name in `file`/`blob_file` columns: its path below the logdir `root` by
/// [`run_name`]'s rule, or its file name when the logdir is that one file (a path not below
/// `root` keeps its whole path).
pub(crate) fn rel_name(root: &Path, root_is_file: bool, path: &Path) -> String {
    if root_is_file {
        return path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    }
    path.strip_prefix(root)
        .map_or_else(|_| path.to_string_lossy().into_owned(), run_name)
}

/// A file time as float seconds since the epoch (negative before it), as `wall_time` is.
pub(crate) fn seconds(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// Seconds and nanoseconds since the epoch, for times before it too.
pub(crate) fn time_parts(t: SystemTime) -> (i64, u64) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, u64::from(d.subsec_nanos())),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, u64::from(d.subsec_nanos()));
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_runs_like_tensorboard() {
        let tmp = std::env::temp_dir().join(format!("tbscope-logdir-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        for p in ["a/b", "c", "d"] {
            fs::create_dir_all(tmp.join(p)).unwrap();
        }
        for f in [
            "events.out.tfevents.2.x",
            "a/b/events.out.tfevents.1.x",
            "c/events.out.tfevents.2.y",
            "c/events.out.tfevents.1.y",
            "d/notes.txt",
        ] {
            fs::write(tmp.join(f), b"").unwrap();
        }
        let (found, errors) = discover(&tmp, None).unwrap();
        assert!(errors.is_empty());
        assert_eq!(
            found.keys().cloned().collect::<Vec<_>>(),
            vec![".", "a/b", "c"]
        );
        let c: Vec<_> = found["c"]
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            c,
            vec!["events.out.tfevents.1.y", "events.out.tfevents.2.y"]
        );
        let re = Regex::new("^a/").unwrap();
        assert_eq!(discover(&tmp, Some(&re)).unwrap().0.len(), 1);
        assert_eq!(
            discover(&tmp.join("missing"), None).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_link_back_up_the_tree_is_walked_once() {
        // Real directories are told apart by the inode of their directory entry (no stat);
        // links by their target's: a cycle through a link must still end.
        let tmp = std::env::temp_dir().join(format!("tbscope-cycle-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(tmp.join("a/b")).unwrap();
        fs::write(tmp.join("a/b/events.out.tfevents.1.h"), b"").unwrap();
        std::os::unix::fs::symlink("../..", tmp.join("a/b/up")).unwrap();
        std::os::unix::fs::symlink("b", tmp.join("a/again")).unwrap();
        let (found, errors) = discover(&tmp, None).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        // "a/again" (sorted before "a/b") reaches b first; "a/b" is then the same directory.
        assert_eq!(found.keys().cloned().collect::<Vec<_>>(), vec!["a/again"]);
        // The same on a pool, whose threads list "a/b" beforehand.
        let pool = crate::pool::worker_pool(2, "walk-").unwrap().unwrap();
        let (found, errors) = pool.install(|| discover(&tmp, None)).unwrap();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(found.keys().cloned().collect::<Vec<_>>(), vec!["a/again"]);
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_walk_on_a_pool_finds_what_a_serial_walk_finds() {
        // Subtrees are listed on the pool's threads in any order; the runs found, the
        // problems in their order, and with links the cycle rule (the first path in walk
        // order to reach a directory names it) must be the serial walk's.
        let tmp = std::env::temp_dir().join(format!("tbscope-parwalk-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        for s in 0..12 {
            for t in 0..15 {
                let d = tmp.join(format!("s{s:02}/t{t:02}"));
                fs::create_dir_all(&d).unwrap();
                if (s + t) % 4 != 0 {
                    fs::write(d.join(format!("events.out.tfevents.{t}.h")), b"").unwrap();
                    fs::write(d.join("events.out.tfevents.0.h"), b"").unwrap();
                }
                if t % 5 == 1 {
                    fs::create_dir_all(d.join("deep/er")).unwrap();
                    fs::write(d.join("deep/er/events.out.tfevents.1.h"), b"").unwrap();
                }
            }
        }
        fs::write(tmp.join("events.out.tfevents.5.root"), b"").unwrap();
        // Problems, reported in walk order: entries named like event files that are not
        // regular files, and a dangling link (kept, as a file that fails to read).
        for (i, d) in ["s07/t03", "s02/t11", "s02/t11/deep/er", "s10/t00"]
            .iter()
            .enumerate()
        {
            let fifo = tmp.join(d).join(format!("events.out.tfevents.{i}.fifo"));
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
        std::os::unix::fs::symlink("missing", tmp.join("s02/t03/events.out.tfevents.9.h")).unwrap();
        let errs = |e: &[(PathBuf, io::Error)]| {
            e.iter()
                .map(|(p, e)| (p.clone(), e.to_string()))
                .collect::<Vec<_>>()
        };
        let meta = fs::metadata(&tmp).unwrap();
        let check = |linked: bool| {
            let serial = walk(&tmp, None, HashMap::new(), None);
            assert_eq!(serial.errors.len(), 4);
            let re = Regex::new("^s0[1-3]/").unwrap();
            let filtered = walk(&tmp, Some(&re), HashMap::new(), None);
            for threads in [2, 3, 8] {
                let pool = crate::pool::worker_pool(threads, "walk-").unwrap().unwrap();
                for _ in 0..5 {
                    let par = pool.install(|| par_walk(&tmp, &meta, None, false));
                    // Without links the pool's walk answers; with them it leaves it to the
                    // serial walk, which `discover` then runs.
                    assert_eq!(par.is_none(), linked);
                    let (found, errors) = pool.install(|| discover(&tmp, None)).unwrap();
                    assert_eq!(found, serial.found);
                    assert_eq!(errs(&errors), errs(&serial.errors));
                    let (found, errors) = pool.install(|| discover(&tmp, Some(&re))).unwrap();
                    assert_eq!(found, filtered.found);
                    assert_eq!(errs(&errors), errs(&filtered.errors));
                }
            }
            serial.found
        };
        let plain = check(false);
        assert_eq!(plain.len(), 12 * 15 - 45 + 36 + 1);
        // Links: back up the tree (a cycle), sideways to a directory walked later (which the
        // link's path then names), and to one walked earlier.
        std::os::unix::fs::symlink("../..", tmp.join("s03/t04/up")).unwrap();
        std::os::unix::fs::symlink("../s09/t02", tmp.join("s01/a_link")).unwrap();
        std::os::unix::fs::symlink("../s00/t01", tmp.join("s05/z_link")).unwrap();
        let linked = check(true);
        assert!(linked.contains_key("s01/a_link") && !linked.contains_key("s09/t02"));
        assert!(linked.contains_key("s00/t01") && !linked.contains_key("s05/z_link"));
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn names_paths_below_the_logdir_like_tensorboard() {
        // The run of a file is its directory relative to the logdir, "." for the logdir.
        assert_eq!(run_name(Path::new("")), ".");
        assert_eq!(run_name(Path::new(".")), ".");
        assert_eq!(run_name(Path::new("a")), "a");
        assert_eq!(run_name(Path::new("a/b/c")), "a/b/c");
        // Spellings of the same path give the same name.
        assert_eq!(run_name(Path::new("./a//b/./c/")), "a/b/c");
        // Not UTF-8: lossy, never dropped.
        use std::os::unix::ffi::OsStrExt;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"a/\xffb"));
        assert_eq!(run_name(odd), "a/\u{fffd}b");

        let root = Path::new("/logs/exp");
        let f = Path::new("/logs/exp/lr=0.1/train/events.out.tfevents.1.h");
        assert_eq!(
            rel_name(root, false, f),
            "lr=0.1/train/events.out.tfevents.1.h"
        );
        assert_eq!(
            rel_name(
                Path::new("/logs/exp/"),
                false,
                Path::new("/logs/exp//x/events.out.tfevents.1.h")
            ),
            "x/events.out.tfevents.1.h"
        );
        // A logdir that is one event file names it by its file name.
        assert_eq!(rel_name(f, true, f), "events.out.tfevents.1.h");
    }

    #[test]
    fn discovered_runs_are_named_by_their_directory() {
        let tmp = std::env::temp_dir().join(format!("tbscope-runname-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        for p in ["x/y z", "x/ü"] {
            fs::create_dir_all(tmp.join(p)).unwrap();
        }
        for f in [
            "events.out.tfevents.1.h",
            "x/y z/events.out.tfevents.1.h",
            "x/ü/events.out.tfevents.1.h",
        ] {
            fs::write(tmp.join(f), b"").unwrap();
        }
        let (found, _) = discover(&tmp, None).unwrap();
        for (run, files) in &found {
            for f in files {
                let dir = f.parent().unwrap().strip_prefix(&tmp).unwrap();
                assert_eq!(*run, run_name(dir));
                let name = rel_name(&tmp, false, f);
                let expect = if run == "." {
                    String::new()
                } else {
                    format!("{run}/")
                };
                assert_eq!(name, expect + "events.out.tfevents.1.h");
            }
        }
        assert_eq!(
            found.keys().cloned().collect::<Vec<_>>(),
            vec![".", "x/y z", "x/ü"]
        );
        fs::remove_dir_all(&tmp).unwrap();
    }
}
