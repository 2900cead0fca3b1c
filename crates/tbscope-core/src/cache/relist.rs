//! The directories a warm open's check found changed, listed again, and nothing else: a new
//! run, a new event file in a run, a run removed or renamed costs the directories it touched
//! (and the new subtrees, walked whole), not a discovery of the logdir. What the other
//! directories hold is known from the generation, proven current by the check's stats.
//!
//! Whatever cannot be told this way exactly as a full discovery would tell it (a listing that
//! fails, symlinks, entries named like event files that are not files, a directory reached by
//! two paths) gives up: the caller then takes the full discovery.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::manifest::{Dec, DirListing};
use super::pending::Pending;
use crate::logdir::{list, run_name, time_parts, walk_new, Discovered};

/// What listing the changed directories again found.
pub(super) struct Relisted {
    /// Runs of the generation (indices, ascending) whose state the load needs: their files
    /// moved, their directory was listed again, or they are gone.
    pub(super) decode: Vec<u32>,
    /// Runs of directories that did not change whose files moved (the check's runs).
    pub(super) moved: Vec<u32>,
    /// The runs of the directories listed again and of new subtrees, with their event files.
    pub(super) listed: Discovered,
    /// The generation's runs that are gone: their directory is, or holds no event file now.
    pub(super) gone: Vec<String>,
    /// Every directory's listing by its path below the root, as a discovery now keeps them
    /// (empty when nothing changed: `decode`, `listed` empty and not `differs`).
    pub(super) listings: HashMap<PathBuf, DirListing>,
    /// A listing differs from the generation's (the next one should hold it).
    pub(super) differs: bool,
    /// How many directories were listed.
    pub(super) listed_dirs: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Same,
    Listed,
    Gone,
}

/// The `n` length-prefixed names at `at` of the manifest, as bytes.
fn names_at(p: &Pending, (at, n): (u32, u32)) -> Option<Vec<&[u8]>> {
    let mut d = Dec {
        buf: &p.manifest,
        pos: at as usize,
    };
    (0..n).map(|_| d.b().ok()).collect()
}

/// Whether `files` (a listing's event files, sorted) are run `run`'s files in the generation,
/// each with the identity, size and mtime recorded (as the check compares them).
fn same_files(p: &Pending, run: usize, files: &[PathBuf]) -> bool {
    let known = p.run_files(run);
    known.len() == files.len()
        && known.iter().zip(files).all(|(f, path)| {
            let Some(mtime) = f.mtime.filter(|_| f.code == 1 && !f.failed && !f.pending) else {
                return false;
            };
            if path.file_name().map(OsStrExt::as_bytes) != Some(p.bytes(f.path)) {
                return false;
            }
            fs::metadata(path).is_ok_and(|m| {
                use std::os::unix::fs::MetadataExt;
                (
                    m.dev(),
                    m.ino(),
                    m.len(),
                    m.modified().map_or((0, 0), time_parts),
                ) == (f.dev, f.ino, f.size, mtime)
            })
        })
}

/// Lists again the directories `dirs` (indices of the pending generation's listings,
/// ascending) and walks the subdirectories that appeared in them; `moved` are the runs the
/// check found with files that moved. None when the answer would not be discovery's own.
pub(super) fn relist(p: &Pending, root: &Path, moved: Vec<u32>, dirs: &[u32]) -> Option<Relisted> {
    let t0 = std::time::Instant::now();
    let mut marks: Vec<(&str, std::time::Duration)> = Vec::new();
    let n = p.dirs.len();
    let mut changed = vec![false; n];
    for &i in dirs {
        *changed.get_mut(i as usize)? = true;
    }
    let rel_of = |mut i: usize| -> PathBuf {
        let mut parts: Vec<&[u8]> = Vec::new();
        while i != 0 {
            parts.push(p.bytes(p.dirs[i].name));
            i = p.dirs[i].parent as usize;
        }
        parts
            .iter()
            .rev()
            .map(|b| std::ffi::OsStr::from_bytes(b))
            .collect()
    };
    let mut state = vec![Dir::Same; n];
    // Per directory listed again: the names of subdirectories it no longer has.
    let mut dropped: HashMap<usize, HashSet<Vec<u8>>> = HashMap::new();
    let mut out = Relisted {
        decode: Vec::new(),
        moved,
        listed: Discovered::new(),
        gone: Vec::new(),
        listings: HashMap::new(),
        differs: false,
        listed_dirs: 0,
    };
    // What changed in the listings: directories gone, listings put in place.
    let mut removed: Vec<PathBuf> = Vec::new();
    let mut put: Vec<(PathBuf, DirListing)> = Vec::new();
    let mut fresh: Vec<PathBuf> = Vec::new();
    // Identities of directories listed again or walked: new or changed, and unchanged.
    let mut ids: Vec<(u64, u64)> = Vec::new();
    let mut same_ids: Vec<(u64, u64)> = Vec::new();
    // Depth first: a parent comes before its subtree.
    for i in 0..n {
        let d = &p.dirs[i];
        if i > 0 {
            let parent = d.parent as usize;
            let gone = match state[parent] {
                Dir::Gone => true,
                Dir::Listed => dropped
                    .get(&parent)
                    .is_some_and(|s| s.contains(p.bytes(d.name))),
                Dir::Same => false,
            };
            if gone {
                state[i] = Dir::Gone;
                let rel = rel_of(i);
                if d.has_files {
                    out.decode.push(d.run);
                    out.gone.push(run_name(&rel));
                }
                removed.push(rel);
                out.differs = true;
                continue;
            }
        }
        if !changed[i] {
            continue;
        }
        let rel = rel_of(i);
        let dir = if i == 0 {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let meta = fs::metadata(&dir).ok().filter(|m| m.is_dir())?;
        let mtime = meta.modified().map_or((0, 0), time_parts);
        let (mut l, _) = list(&dir, Some(&meta), mtime).ok()?;
        if l.links || !l.odd.is_empty() {
            return None;
        }
        // (A directory under its old identity is no new path to anything.)
        if (l.dev, l.ino) != (d.dev, d.ino) {
            ids.push((l.dev, l.ino));
        } else {
            same_ids.push((l.dev, l.ino));
        }
        // Both sorted by name (bytes): what went, what came.
        let old = names_at(p, d.subdirs)?;
        let (mut a, mut b) = (old.iter().peekable(), l.subdirs.iter().peekable());
        let mut went: HashSet<Vec<u8>> = HashSet::new();
        loop {
            match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if **x == y.as_bytes() => {
                    a.next();
                    b.next();
                }
                (Some(x), Some(y)) if **x < y.as_bytes() => {
                    went.insert(x.to_vec());
                    a.next();
                }
                (Some(x), None) => {
                    went.insert(x.to_vec());
                    a.next();
                }
                (_, Some(y)) => {
                    fresh.push(rel.join(y));
                    b.next();
                }
                (None, None) => break,
            }
        }
        let run = run_name(&rel);
        if d.has_files && l.has_files && same_files(p, d.run as usize, &l.files) {
            // The run's files as they were: nothing to look at (a directory listed again
            // because it was listed too soon after its last change, most often).
        } else if l.has_files {
            if d.has_files {
                out.decode.push(d.run);
            }
            out.listed.insert(run, std::mem::take(&mut l.files));
        } else if d.has_files {
            out.decode.push(d.run);
            out.gone.push(run);
        }
        let before = (d.dev, d.ino, d.mtime, d.unsure, d.has_files);
        out.differs |= before != (l.dev, l.ino, l.mtime, l.unsure, l.has_files)
            || !went.is_empty()
            || old.len() != l.subdirs.len();
        state[i] = Dir::Listed;
        out.listed_dirs += 1;
        dropped.insert(i, went);
        put.push((rel, DirListing::of(l)));
    }
    marks.push(("listed", t0.elapsed()));
    for rel in fresh {
        let w = walk_new(root, &rel);
        if !w.errors.is_empty() {
            return None;
        }
        for (rel, l) in w.listings {
            if l.links || !l.odd.is_empty() {
                return None;
            }
            ids.push((l.dev, l.ino));
            out.listed_dirs += 1;
            put.push((rel, DirListing::of(l)));
        }
        out.listed.extend(w.found);
        out.differs = true;
    }
    marks.push(("walked", t0.elapsed()));
    // A directory reached by two paths (a bind mount) is named by the first a walk reaches:
    // which one that is depends on the whole walk. Only the directories that did not change
    // need a look besides those new (or another directory under an old name).
    if !ids.is_empty() {
        let mut known: HashSet<(u64, u64)> = HashSet::with_capacity(n);
        let same = (0..n).filter(|&i| state[i] == Dir::Same);
        let same = same.map(|i| (p.dirs[i].dev, p.dirs[i].ino));
        for id in same.chain(same_ids).chain(ids) {
            if !known.insert(id) {
                return None;
            }
        }
    }
    marks.push(("identities", t0.elapsed()));
    if !out.decode.is_empty() || !out.listed.is_empty() || out.differs {
        out.listings = p.listings().ok()?;
        for rel in &removed {
            out.listings.remove(rel);
        }
        out.listings.extend(put);
    }
    marks.push(("listings", t0.elapsed()));
    super::trace_marks("relist", &marks);
    // A run whose directory went with its parent is gone, not moved.
    out.moved.retain(|i| !out.decode.contains(i));
    out.decode.extend(out.moved.iter().copied());
    out.decode.sort_unstable();
    out.decode.dedup();
    Some(out)
}
