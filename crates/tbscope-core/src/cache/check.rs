//! What changed in the logdir since a generation was written: the warm open's check that
//! proves "nothing changed" with one stat per directory and per event file (the reader's own
//! reload check, `load::changes`, on the generation's listings), the discovery that lists only
//! directories that changed, and which runs' cached rows cannot be continued (docs/cache.md,
//! "When the logdir changes").

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::manifest::{time_of, DirListing, FileIndex};
use super::pending::Pending;
use super::Cache;
pub(super) use crate::load::changes::Checked;
use crate::load::changes::{changes, tail_expired, Expect, Known, KnownDir, Tree};
use crate::load::{stat_found, Found, Reader, RunState};
use crate::logdir::{discover, walk, Discovered, Listing};

/// What [`discover_with`] finds: runs and their event files, problems, every directory's
/// listing by its path below the root, how many directories it listed (did not reuse), and
/// what the next load's change check compares with (`load::changes::Tree`).
pub(super) type Discovery = (
    Discovered,
    Vec<(PathBuf, std::io::Error)>,
    HashMap<PathBuf, DirListing>,
    usize,
    Option<Tree>,
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
        return Ok((found, errors, HashMap::new(), 0, None));
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
            ctime: (meta.ctime(), meta.ctime_nsec() as u64),
            ctime_recent: false,
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
    // What the next load checks against (`load::changes`) while the state stays decoded.
    let tree = Tree::of(&w, &mut |run| w.found.get(run).cloned());
    let listings = w
        .listings
        .into_iter()
        .map(|(rel, l)| (rel, DirListing::of(l)))
        .collect();
    Ok((w.found, w.errors, listings, listed, tree))
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

/// A restored generation as the change check (`load::changes`) sees it.
struct PendingKnown<'a> {
    p: &'a Pending,
    tail_timeout: std::time::Duration,
}

impl Known for PendingKnown<'_> {
    fn dir_count(&self) -> usize {
        self.p.dirs.len()
    }
    fn dir(&self, i: usize) -> KnownDir<'_> {
        let d = &self.p.dirs[i];
        KnownDir {
            parent: d.parent,
            name: self.p.bytes(d.name),
            // (u32::MAX: no run, as the check numbers them.)
            run: d.run,
            dev: d.dev,
            ino: d.ino,
            mtime: d.mtime,
            ctime: None,
            unsure: d.unsure,
            links: d.links,
            has_files: d.has_files,
            subdirs: d.subdirs.1,
            odd: d.odd.1,
        }
    }
    fn run_count(&self) -> usize {
        self.p.nruns
    }
    fn file_count(&self) -> usize {
        self.p.index.files.len()
    }
    fn files(&self, run: u32, now: SystemTime) -> Vec<Option<Expect<'_>>> {
        // Only a run's own files, each stat'ed last time (a file that failed, or one found
        // elsewhere, is discovery's business). A pending tail stays pending while nothing
        // changes, until its file's timeout passes (a newer file would have changed a
        // listing).
        self.p
            .run_files(run as usize)
            .iter()
            .map(|f: &FileIndex| {
                let mtime = f.mtime?;
                let expired =
                    tail_expired(f.pending, time_of(mtime.0, mtime.1), now, self.tail_timeout);
                if f.code != 1 || f.failed || expired {
                    return None;
                }
                Some(Expect {
                    name: self.p.bytes(f.path),
                    dev: f.dev,
                    ino: f.ino,
                    size: f.size,
                    mtime,
                })
            })
            .collect()
    }
}

impl Cache {
    /// What changed since the pending generation was written (`load::changes::changes`
    /// against its listings and file index): [`Checked::Unknown`] without one.
    pub(super) fn changes(&self, r: &Reader, threads: usize) -> Checked {
        let Some(p) = self.pending.as_deref() else {
            return Checked::Unknown;
        };
        let known = PendingKnown {
            p,
            tail_timeout: r.opts.tail_timeout,
        };
        changes(&known, &r.root, threads, "cache")
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
