//! What changed in a logdir since it was last looked at, told with one stat per directory and
//! per event file and nothing else: the one change check that the cache's warm open (against
//! a restored generation, `cache/check.rs`) and a reader's reload (against its last
//! discovery, [`Tree`]) both use.
//!
//! A directory's mtime moves whenever an entry is added, removed or renamed in it: while its
//! (device, inode, mtime) stay what they were when it was listed, and that listing was settled
//! (taken [`SETTLED`](crate::logdir::SETTLED) after its last change), so does its listing.
//! Appends move no directory: each known event file is stat'ed (identity, size, mtime). A
//! reader's own listings also keep the directory's ctime, which `utime` cannot set back: a
//! file added to a directory whose mtime was then set back is still seen.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::logdir::{time_parts, Listing, Walked};

/// One directory of what was last seen, as the check needs it.
#[derive(Clone, Copy)]
pub(crate) struct KnownDir<'a> {
    /// Index of the parent directory (`u32::MAX` for the root).
    pub(crate) parent: u32,
    pub(crate) name: &'a [u8],
    /// The run whose files it holds: [`NO_RUN`] for none (or one that cannot be told),
    /// [`NOT_READ`] for a run the reader's filter leaves out (its files are not looked at).
    pub(crate) run: u32,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) mtime: (i64, u64),
    /// Its ctime when it was listed, when known (the cache's listings do not keep it).
    pub(crate) ctime: Option<(i64, u64)>,
    pub(crate) unsure: bool,
    pub(crate) links: bool,
    pub(crate) has_files: bool,
    /// How many subdirectories and odd entries its listing held.
    pub(crate) subdirs: u32,
    pub(crate) odd: u32,
}

/// A directory holding no run's files (or whose run cannot be told).
pub(crate) const NO_RUN: u32 = u32::MAX;
/// A directory whose run the reader's run filter leaves out.
pub(crate) const NOT_READ: u32 = u32::MAX - 1;

/// What one known event file should still stat as.
pub(crate) struct Expect<'a> {
    /// Its name in its run's directory.
    pub(crate) name: &'a [u8],
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mtime: (i64, u64),
}

/// What was last seen of a logdir: its directories' listings as a tree in depth-first order
/// (each directory after its parent, a directory's subtree contiguous), and per run its files.
/// Whether a pending tail (a file whose last record is incomplete) last changed at `mtime` has
/// waited `timeout` by `now`: its file then counts as moved, and the next read settles it.
pub(crate) fn tail_expired(
    pending: bool,
    mtime: SystemTime,
    now: SystemTime,
    timeout: std::time::Duration,
) -> bool {
    pending && now.duration_since(mtime).is_ok_and(|age| age >= timeout)
}

pub(crate) trait Known: Sync {
    fn dir_count(&self) -> usize;
    fn dir(&self, i: usize) -> KnownDir<'_>;
    /// How many runs the listings must account for, each in exactly one directory.
    fn run_count(&self) -> usize;
    /// How many event files the runs hold (the check's stats besides the directories').
    fn file_count(&self) -> usize;
    /// Run `run`'s event files as a stat should find them, as of `now`; `None` for a file a
    /// stat cannot vouch for (it failed, was never stat'ed, or a pending tail whose timeout
    /// passed): its run has then moved. Empty: the directory says nothing of its files (the
    /// check then cannot tell).
    fn files(&self, run: u32, now: SystemTime) -> Vec<Option<Expect<'_>>>;
}

/// What [`changes`] found.
pub(crate) enum Checked {
    /// The check cannot tell (see [`changes`]): discovery decides.
    Unknown,
    /// Every directory but `dirs` as listed, and these runs' files moved. Both are indices
    /// (directories in the tree, runs as [`Known`] numbers them), ascending; `runs` leaves out
    /// the runs of `dirs` (their files are listed again with them). Both empty: nothing changed.
    Moved { runs: Vec<u32>, dirs: Vec<u32> },
}

/// At most this many directories (or a quarter of a larger logdir's) are listed again after
/// the check: past that, the full discovery is about as cheap.
const RELIST_MOST: usize = 1024;

/// What changed in the logdir at `root` since `k` was seen, told with one stat per directory
/// and per event file and nothing else. [`Checked::Moved`] with the directories whose listing
/// is not current (another device, inode, mtime or ctime: an entry was added, removed or
/// renamed; gone; or listed too soon after a change to be sure of, which is always listed
/// again) and the runs of the other directories that have a file whose identity, size or mtime
/// moved, or that cannot be told this way: neither is "nothing changed". [`Checked::Unknown`]
/// when the listings cannot be trusted (a single-file logdir, odd entries, symlinks, a
/// directory whose listing does not account for its subdirectories), or more than
/// [`RELIST_MOST`] directories (or a quarter) changed; the full discovery then decides.
///
/// Paths are stat'ed relative to their parent directory (one `open` per directory that has
/// subdirectories) rather than from the root: on a logdir of many runs the kernel's walk
/// down the full path is most of a stat. `threads`: threads to spread the stats over.
/// `what` names the check in `TBSCOPE_TRACE=1`'s line (`tbscope <what> check: ...`).
pub(crate) fn changes(k: &dyn Known, root: &Path, threads: usize, what: &str) -> Checked {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let n = k.dir_count();
    // A single-file logdir, or a root that could not be listed: leave it to discovery.
    if n == 0 || k.dir(0).parent != u32::MAX {
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
    let now = SystemTime::now();
    // First pass: what the listings promise (complete, every run in its directory).
    let mut children: Vec<u32> = vec![0; n];
    let mut seen = vec![false; k.run_count()];
    for i in 0..n {
        let d = k.dir(i);
        // (A directory holding symlinks would be listed again only to find them there.)
        if d.odd > 0 || d.links {
            return Checked::Unknown;
        }
        if i > 0 {
            children[d.parent as usize] += 1;
        }
        if d.has_files && d.run != NOT_READ {
            // (Its files are looked at in the second pass.)
            let Some(s) = seen.get_mut(d.run as usize) else {
                return Checked::Unknown;
            };
            if std::mem::replace(s, true) {
                return Checked::Unknown;
            }
        }
    }
    if (0..n).any(|i| k.dir(i).subdirs != children[i]) || seen.contains(&false) {
        return Checked::Unknown;
    }
    let Some(root_fd) = open_dir(None, root.as_os_str().as_bytes()) else {
        return Checked::Unknown;
    };
    // A directory that could not be opened (gone, most likely): its subtree is listed again.
    const MISSING: i32 = -2;
    let most = RELIST_MOST.max(n / 4);
    let mut fd_of: Vec<i32> = vec![NONE; n];
    fd_of[0] = root_fd.as_raw_fd();
    let mut opened_total = 1usize;
    // Second pass, on `threads` threads over contiguous ranges of directories: one stat of
    // each directory and of each of its event files, relative to the nearest descriptor.
    let same = AtomicBool::new(true);
    // Runs with a file that moved, and directories to list again, found on any thread (few,
    // usually).
    let changed: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let relist: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    let to_relist = |i: usize| {
        let mut v = relist.lock().unwrap_or_else(|e| e.into_inner());
        v.push(i as u32);
        if v.len() > most {
            same.store(false, Ordering::Relaxed);
        }
    };
    // The stat of `path` (relative to `fd`), or None.
    let stat_at = |fd: i32, path: &[u8]| -> Option<libc::stat> {
        // SAFETY: an all-zero stat is a valid value for fstatat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open for the whole check; `path` ends with a NUL.
        let rc = unsafe { libc::fstatat(fd, path.as_ptr().cast(), &mut st, 0) };
        (rc == 0).then_some(st)
    };
    let id_is = |st: &libc::stat, dev: u64, ino: u64, mtime: (i64, u64)| {
        st.st_dev == dev && st.st_ino == ino && (st.st_mtime, st.st_mtime_nsec as u64) == mtime
    };
    let check = |range: std::ops::Range<usize>, fd_of: &[i32]| {
        let mut buf: Vec<u8> = Vec::with_capacity(512);
        for i in range {
            if !same.load(Ordering::Relaxed) {
                return;
            }
            let d = k.dir(i);
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
                buf.extend_from_slice(d.name);
                parent
            } else {
                to_relist(i);
                continue;
            };
            buf.push(0);
            // (A listing taken too soon after a change is listed again whatever its stat.)
            let current = !d.unsure
                && stat_at(fd, &buf).is_some_and(|st| {
                    id_is(&st, d.dev, d.ino, d.mtime)
                        && d.ctime
                            .is_none_or(|c| (st.st_ctime, st.st_ctime_nsec as u64) == c)
                });
            if !current {
                to_relist(i);
                continue;
            }
            if !d.has_files || d.run == NOT_READ {
                continue;
            }
            let files = k.files(d.run, now);
            // (The run's directory then says nothing of its files: discovery decides.)
            if files.is_empty() {
                same.store(false, Ordering::Relaxed);
                return;
            }
            let moved = files.iter().any(|f| {
                let Some(f) = f else { return true };
                buf.clear();
                if own == NONE {
                    buf.extend_from_slice(d.name);
                    buf.push(b'/');
                }
                buf.extend_from_slice(f.name);
                buf.push(0);
                !stat_at(fd, &buf).is_some_and(|st| {
                    id_is(&st, f.dev, f.ino, f.mtime) && st.st_size as u64 == f.size
                })
            });
            if moved {
                changed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(d.run);
            }
        }
    };
    let total = n + k.file_count();
    let threads = if total < 4096 { 1 } else { threads.clamp(1, 8) };
    let t1 = std::time::Instant::now();
    // Directories in windows of consecutive ones (the listings are depth first) that hold at
    // most FD_BUDGET descriptors at a time: a logdir of thousands of sweep directories must
    // not run into the process's limit on open files.
    const FD_BUDGET: usize = 256;
    let parent_of = |i: usize| k.dir(i).parent as usize;
    let mut a = 1usize.min(n);
    // The root first, alone (its descriptor is open throughout).
    check(0..a, &fd_of);
    while a < n && same.load(Ordering::Relaxed) {
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
        // Opens directory `i` below its (open) parent: its descriptor is held for the window,
        // or it is marked missing.
        let mut open = |i: usize, fd_of: &mut Vec<i32>| {
            let at = fd_of[parent_of(i)];
            match (at >= 0)
                .then(|| open_dir(Some(at), k.dir(i).name))
                .flatten()
            {
                Some(fd) => {
                    fd_of[i] = fd.as_raw_fd();
                    held.push((i, fd));
                }
                None => {
                    fd_of[i] = MISSING;
                    missing.push(i);
                }
            }
        };
        for &anc in chain.iter().rev() {
            open(anc, &mut fd_of);
        }
        let mut budget = FD_BUDGET.saturating_sub(chain.len()).max(1);
        let mut b = a;
        while b < n {
            if k.dir(b).subdirs > 0 {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                open(b, &mut fd_of);
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
            "tbscope {what} check: {total} stats on {threads} threads, {opened_total} \
             directories opened; listings {:?}, stats {:?}",
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

/// A directory of a [`Tree`].
#[derive(Clone, Copy)]
struct TreeDir {
    parent: u32,
    name: (u32, u32),
    run: u32,
    dev: u64,
    ino: u64,
    mtime: (i64, u64),
    ctime: (i64, u64),
    unsure: bool,
    links: bool,
    has_files: bool,
    subdirs: u32,
    odd: u32,
}

impl TreeDir {
    /// A directory as `l` lists it, below `parent` and named `name`, holding run `run`.
    fn new(parent: u32, name: (u32, u32), run: u32, l: &Listing) -> TreeDir {
        TreeDir {
            parent,
            name,
            run,
            dev: l.dev,
            ino: l.ino,
            mtime: l.mtime,
            ctime: l.ctime,
            unsure: l.unsure || l.ctime_recent,
            links: l.links,
            has_files: l.has_files,
            subdirs: l.subdirs.len() as u32,
            odd: l.odd.len() as u32,
        }
    }
}

/// What a reader's last discovery saw: every directory's listing (in depth-first order) and
/// each run's event files as listed, against which a reload's [`changes`] checks the logdir
/// instead of discovering it again. The files' expected stats are the reader's own state
/// (`Reader::runs`), as the last load left it.
pub(crate) struct Tree {
    names: Vec<u8>,
    dirs: Vec<TreeDir>,
    /// Per run read (as [`KnownDir::run`] numbers them): its name and event files as listed.
    runs: Vec<(String, Vec<PathBuf>)>,
}

impl Tree {
    /// The tree of a walk that kept its listings (`found`: the runs it kept, with their
    /// files). None when a listing is missing (a directory that could not be listed, or was
    /// reached twice): the next reload then discovers again.
    pub(crate) fn of(
        walked: &Walked,
        files: &mut dyn FnMut(&str) -> Option<Vec<PathBuf>>,
    ) -> Option<Tree> {
        let mut t = Tree {
            names: Vec::new(),
            dirs: Vec::with_capacity(walked.listings.len()),
            runs: Vec::new(),
        };
        // Depth first, subdirectories in listing (name) order.
        let mut stack: Vec<(PathBuf, u32, (u32, u32))> = vec![(PathBuf::new(), u32::MAX, (0, 0))];
        while let Some((rel, parent, name)) = stack.pop() {
            let l: &Listing = walked.listings.get(&rel)?;
            let i = t.dirs.len() as u32;
            let run = if !l.has_files {
                NO_RUN
            } else {
                let run_name = crate::logdir::run_name(&rel);
                match files(&run_name) {
                    Some(f) => {
                        t.runs.push((run_name, f));
                        (t.runs.len() - 1) as u32
                    }
                    None => NOT_READ,
                }
            };
            t.dirs.push(TreeDir::new(parent, name, run, l));
            for s in l.subdirs.iter().rev() {
                let at = t.names.len() as u32;
                t.names.extend_from_slice(s.as_bytes());
                stack.push((rel.join(s), i, (at, s.len() as u32)));
            }
        }
        Some(t)
    }

    /// [`changes`] against this tree, the reader `r`'s state saying what its files should
    /// stat as.
    pub(crate) fn check(&self, r: &super::Reader, threads: usize) -> Checked {
        let known = ReaderKnown {
            tree: self,
            runs: &r.runs,
            tail_timeout: r.opts.tail_timeout,
        };
        changes(&known, &r.root, threads, "reload")
    }

    /// The runs `runs` (as [`changes`] numbers them) with their files as listed, each stat'ed,
    /// in run name order.
    pub(crate) fn found_of(&self, runs: &[u32]) -> super::Found {
        let mut found = super::stat_found(runs.iter().map(|&i| self.runs[i as usize].clone()));
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }
}

/// Where [`Tree::relisted`] takes a directory of the new tree from.
enum Source {
    /// The old tree's directory, unchanged.
    Same(u32),
    /// The old tree's directory, listed again.
    Again(u32),
    /// A directory that appeared: walked (`logdir::walk_new`).
    New,
}

/// What [`Tree::relisted`] found.
pub(crate) struct Relisted {
    /// The logdir as it is now, what the next reload checks against.
    pub(crate) tree: Tree,
    /// What to plan: the runs whose files moved in unchanged directories, and those of the
    /// directories listed again and of the new ones, each file stat'ed, in run name order.
    pub(crate) found: super::Found,
    /// How many directories were listed.
    pub(crate) listed: usize,
    /// The listings taken (directories listed again and new ones) by path below the root,
    /// their event files moved into `found`.
    pub(crate) listings: Vec<(PathBuf, Listing)>,
    /// The directories of the old tree that are gone, by path below the root.
    pub(crate) gone_dirs: Vec<PathBuf>,
    /// The runs of the old tree that are gone: their directory went, or holds no event file
    /// now (a reader keeps what it read of them; the cache drops them, as a cold read has
    /// none of them).
    pub(crate) gone_runs: Vec<String>,
}

impl Tree {
    /// What a reload looks at: this tree's [`Tree::check`] against the reader `r`, then the
    /// runs whose files moved ([`Tree::found_of`]) or, when directories changed, those of the
    /// directories listed again ([`Tree::relisted`]). None when the check cannot tell, or the
    /// relisting declines: only a discovery can then.
    pub(crate) fn reload(self, r: &super::Reader, threads: usize) -> Option<Relisted> {
        match self.check(r, threads) {
            Checked::Moved { runs, dirs } if dirs.is_empty() => {
                let found = self.found_of(&runs);
                Some(Relisted {
                    tree: self,
                    found,
                    listed: 0,
                    listings: Vec::new(),
                    gone_dirs: Vec::new(),
                    gone_runs: Vec::new(),
                })
            }
            Checked::Moved { runs, dirs } => self.relisted(r, &dirs, &runs),
            Checked::Unknown => None,
        }
    }

    /// This tree with the directories `dirs` (as [`changes`] names them) listed again and the
    /// subdirectories that appeared in them walked, what to plan (the runs of `moved`, files
    /// that moved in unchanged directories, and those of the directories listed and walked),
    /// and what went. None when the answer would not be a discovery's own (a listing that
    /// fails, symlinks, odd entries, a directory reached by two paths): the caller discovers
    /// then.
    pub(crate) fn relisted(
        mut self,
        r: &super::Reader,
        dirs: &[u32],
        moved: &[u32],
    ) -> Option<Relisted> {
        use crate::logdir::{list, run_name, walk_new};
        let root = &r.root;
        let n = self.dirs.len();
        let mut changed = vec![false; n];
        for &i in dirs {
            *changed.get_mut(i as usize)? = true;
        }
        // Children in order (the tree is depth first, siblings by name): first child and next
        // sibling of each directory.
        let mut first = vec![u32::MAX; n];
        let mut next = vec![u32::MAX; n];
        for j in (1..n).rev() {
            let p = self.dirs[j].parent as usize;
            next[j] = first[p];
            first[p] = j as u32;
        }
        let mut moved_runs = vec![false; self.runs.len()];
        for &m in moved {
            *moved_runs.get_mut(m as usize)? = true;
        }
        let mut t = Tree {
            names: Vec::with_capacity(self.names.len()),
            dirs: Vec::with_capacity(n),
            runs: Vec::with_capacity(self.runs.len()),
        };
        let mut plan: Vec<(String, Vec<PathBuf>)> = Vec::new();
        let mut fresh: std::collections::HashMap<PathBuf, Listing> = Default::default();
        // (A walk moves the files it finds out of its listings, into what it found.)
        let mut fresh_files: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
        let mut listed = 0usize;
        let mut listings: Vec<(PathBuf, Listing)> = Vec::new();
        // Old directories no longer listed by their parent: the tops of the subtrees that went.
        let mut went: Vec<(u32, PathBuf)> = Vec::new();
        let mut gone_runs: Vec<String> = Vec::new();
        let keep = |run: &str| r.opts.runs.as_ref().is_none_or(|re| re.is_match(run));
        // (source, path below the root, new parent, name)
        let mut stack: Vec<(Source, PathBuf, u32, Vec<u8>)> = vec![(
            if changed[0] {
                Source::Again(0)
            } else {
                Source::Same(0)
            },
            PathBuf::new(),
            u32::MAX,
            Vec::new(),
        )];
        while let Some((src, rel, parent, name)) = stack.pop() {
            let at = t.names.len() as u32;
            t.names.extend_from_slice(&name);
            let name = (at, name.len() as u32);
            let me = t.dirs.len() as u32;
            let mut push_run = |t: &mut Tree, run: (String, Vec<PathBuf>), planned: bool| {
                if planned {
                    plan.push(run.clone());
                }
                t.runs.push(run);
                (t.runs.len() - 1) as u32
            };
            match src {
                Source::Same(i) => {
                    let d = &self.dirs[i as usize];
                    let run = if d.run < NOT_READ {
                        let run = std::mem::take(&mut self.runs[d.run as usize]);
                        push_run(&mut t, run, moved_runs[d.run as usize])
                    } else {
                        d.run
                    };
                    t.dirs.push(TreeDir {
                        parent,
                        name,
                        run,
                        ..*d
                    });
                    let mut kids = Vec::new();
                    let mut c = first[i as usize];
                    while c != u32::MAX {
                        let (a, len) = self.dirs[c as usize].name;
                        let cname = self.names[a as usize..(a + len) as usize].to_vec();
                        let crel = rel.join(std::ffi::OsStr::from_bytes(&cname));
                        let s = if changed[c as usize] {
                            Source::Again(c)
                        } else {
                            Source::Same(c)
                        };
                        kids.push((s, crel, me, cname));
                        c = next[c as usize];
                    }
                    stack.extend(kids.into_iter().rev());
                }
                Source::Again(_) | Source::New => {
                    let mut l = match (&src, fresh.remove(&rel)) {
                        (Source::New, Some(l)) => l,
                        (Source::New, None) => {
                            let w = walk_new(root, &rel);
                            if !w.errors.is_empty() {
                                return None;
                            }
                            listed += w.listings.len();
                            fresh.extend(w.listings);
                            fresh_files.extend(w.found);
                            fresh.remove(&rel)?
                        }
                        _ => {
                            let dir = if rel.as_os_str().is_empty() {
                                root.clone()
                            } else {
                                root.join(&rel)
                            };
                            let meta = std::fs::metadata(&dir).ok().filter(|m| m.is_dir())?;
                            let mtime = meta.modified().map_or((0, 0), time_parts);
                            listed += 1;
                            list(&dir, Some(&meta), mtime).ok()?.0
                        }
                    };
                    if l.links || !l.odd.is_empty() {
                        return None;
                    }
                    let run = if !l.has_files {
                        NO_RUN
                    } else {
                        let name = run_name(&rel);
                        if keep(&name) {
                            let files = match fresh_files.remove(&name) {
                                Some(f) => f,
                                None => std::mem::take(&mut l.files),
                            };
                            push_run(&mut t, (name, files), true)
                        } else {
                            NOT_READ
                        }
                    };
                    t.dirs.push(TreeDir::new(parent, name, run, &l));
                    // The old children by name (sorted, as listings are), for those still there.
                    let mut old: Vec<(&[u8], u32)> = Vec::new();
                    if let Source::Again(i) = src {
                        let old_run = self.dirs[i as usize].run;
                        if old_run < NOT_READ && run >= NOT_READ {
                            gone_runs.push(std::mem::take(&mut self.runs[old_run as usize].0));
                        }
                        let mut c = first[i as usize];
                        while c != u32::MAX {
                            let (a, len) = self.dirs[c as usize].name;
                            old.push((&self.names[a as usize..(a + len) as usize], c));
                            c = next[c as usize];
                        }
                        old.sort_unstable();
                    }
                    // Both by name: a merge (a directory of 100,000 runs is listed again
                    // whenever one is added).
                    let mut old = old.into_iter().peekable();
                    let mut kids = Vec::new();
                    for s in &l.subdirs {
                        let b = s.as_bytes();
                        while let Some((o, c)) = old.next_if(|(o, _)| *o < b) {
                            went.push((c, rel.join(std::ffi::OsStr::from_bytes(o))));
                        }
                        let src = match old.next_if(|(o, _)| *o == b) {
                            Some((_, c)) if changed[c as usize] => Source::Again(c),
                            Some((_, c)) => Source::Same(c),
                            None => Source::New,
                        };
                        kids.push((src, rel.join(s), me, b.to_vec()));
                    }
                    for (o, c) in old {
                        went.push((c, rel.join(std::ffi::OsStr::from_bytes(o))));
                    }
                    stack.extend(kids.into_iter().rev());
                    listings.push((rel, l));
                }
            }
        }
        // A directory reached by two paths is named by the first a walk reaches: which one
        // that is depends on the whole walk.
        let mut ids = std::collections::HashSet::with_capacity(t.dirs.len());
        if !t.dirs.iter().all(|d| ids.insert((d.dev, d.ino))) {
            return None;
        }
        // The subtrees that went, whole.
        let mut gone_dirs = Vec::new();
        while let Some((i, rel)) = went.pop() {
            let run = self.dirs[i as usize].run;
            if run < NOT_READ {
                gone_runs.push(std::mem::take(&mut self.runs[run as usize].0));
            }
            let mut c = first[i as usize];
            while c != u32::MAX {
                let (a, len) = self.dirs[c as usize].name;
                let cname = &self.names[a as usize..(a + len) as usize];
                went.push((c, rel.join(std::ffi::OsStr::from_bytes(cname))));
                c = next[c as usize];
            }
            gone_dirs.push(rel);
        }
        let mut found = super::stat_found(plan);
        found.sort_by(|a, b| a.0.cmp(&b.0));
        Some(Relisted {
            tree: t,
            found,
            listed,
            listings,
            gone_dirs,
            gone_runs,
        })
    }
}

/// A [`Tree`] with the reader's state that says what its files should stat as.
struct ReaderKnown<'a> {
    tree: &'a Tree,
    runs: &'a std::collections::BTreeMap<String, super::RunState>,
    tail_timeout: std::time::Duration,
}

impl Known for ReaderKnown<'_> {
    fn dir_count(&self) -> usize {
        self.tree.dirs.len()
    }
    fn dir(&self, i: usize) -> KnownDir<'_> {
        let d = &self.tree.dirs[i];
        let (at, len) = d.name;
        KnownDir {
            parent: d.parent,
            name: &self.tree.names[at as usize..(at + len) as usize],
            run: d.run,
            dev: d.dev,
            ino: d.ino,
            mtime: d.mtime,
            ctime: Some(d.ctime),
            unsure: d.unsure,
            links: d.links,
            has_files: d.has_files,
            subdirs: d.subdirs,
            odd: d.odd,
        }
    }
    fn run_count(&self) -> usize {
        self.tree.runs.len()
    }
    fn file_count(&self) -> usize {
        self.tree.runs.iter().map(|(_, files)| files.len()).sum()
    }
    fn files(&self, run: u32, now: SystemTime) -> Vec<Option<Expect<'_>>> {
        let (name, files) = &self.tree.runs[run as usize];
        let Some(state) = self.runs.get(name) else {
            return Vec::new();
        };
        files
            .iter()
            .map(|p| {
                let f = state.files.get(p)?;
                let mtime = f.mtime?;
                if f.failed || tail_expired(f.pending, mtime, now, self.tail_timeout) {
                    return None;
                }
                Some(Expect {
                    name: p.file_name()?.as_bytes(),
                    dev: f.dev,
                    ino: f.ino,
                    size: f.size,
                    mtime: time_parts(mtime),
                })
            })
            .collect()
    }
}
