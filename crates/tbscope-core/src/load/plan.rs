//! Which files a load reads and from where: discovery, the change check against what was read
//! before, and whether a file may still be written (its tail then stays pending).

use std::path::{Path, PathBuf};

use super::changes::Tree;
use super::{rel_name, FileState, Found, Reader, ReportEntry, RunState, TAIL_TIMEOUT};
use crate::error::{Error, Result};
use crate::event_file::{Cursor, Severity};
use crate::logdir::{discover, discover_listed};

/// Stats every event file of `found` once (links followed, as reading does), keeping its runs
/// in their order (a run twice stays twice); on a worker pool's thread, on the pool's threads
/// (a stat is a path lookup: on a logdir of many small runs, a good part of the work).
pub(crate) fn stat_found(found: impl IntoIterator<Item = (String, Vec<PathBuf>)>) -> Found {
    let stat = |(run, files): (String, Vec<PathBuf>)| {
        let files = files
            .into_iter()
            .map(|p| {
                let m = std::fs::metadata(&p).ok();
                (p, m)
            })
            .collect();
        (run, files)
    };
    let found = found.into_iter();
    if rayon::current_thread_index().is_some() {
        use rayon::prelude::*;
        let runs: Vec<_> = found.collect();
        if runs.len() > 1 {
            return runs.into_par_iter().with_min_len(256).map(stat).collect();
        }
        return runs.into_iter().map(stat).collect();
    }
    found.map(stat).collect()
}

/// A plan cut into pieces of about `max_bytes` of event file bytes still to read (a piece
/// holds at least one file), in plan order; `size` gives a file's size.
pub(crate) fn cut_pieces(
    work: Vec<(String, PathBuf, Cursor)>,
    max_bytes: u64,
    mut size: impl FnMut(&Path) -> u64,
) -> Vec<Vec<(String, PathBuf, Cursor)>> {
    let mut pieces = Vec::new();
    let mut piece = Vec::new();
    let mut bytes = 0u64;
    for item in work {
        let left = size(&item.1).saturating_sub(item.2.offset);
        if !piece.is_empty() && bytes.saturating_add(left) > max_bytes {
            pieces.push(std::mem::take(&mut piece));
            bytes = 0;
        }
        bytes = bytes.saturating_add(left);
        piece.push(item);
    }
    if !piece.is_empty() {
        pieces.push(piece);
    }
    pieces
}

/// What a load reads: each file with bytes to read, its run and where to start.
pub(crate) type Plan = Vec<(String, PathBuf, Cursor)>;

/// Each planned file's size as `found` stat'ed it, in the plan's order (the plan keeps a
/// subsequence of `found`'s order).
fn sizes_of(work: &Plan, found: &Found) -> Vec<u64> {
    let mut sizes = found
        .iter()
        .flat_map(|(_, files)| files.iter())
        .map(|(p, m)| (p, m.as_ref().map_or(0, |m| m.len())));
    work.iter()
        .map(|(_, path, _)| {
            sizes
                .by_ref()
                .find(|(p, _)| *p == path)
                .map_or(0, |(_, s)| s)
        })
        .collect()
}

impl Reader {
    /// The files with bytes to read, each with where to start: discovery plus change checks.
    /// With [`Reader::read`] on pieces of it, a logdir can be streamed in bounded memory.
    pub fn plan(&mut self) -> Result<Vec<(String, PathBuf, Cursor)>> {
        Ok(self.plan_sized()?.0)
    }

    /// [`Reader::plan`] with each planned file's size as discovery stat'ed it, in the plan's
    /// order: what [`Reader::read_planned`] goes by instead of stat'ing every file again.
    pub(crate) fn plan_sized(&mut self) -> Result<(Plan, Vec<u64>)> {
        let threads = super::thread_count(self.opts.threads);
        let (work, sizes, _) = self.plan_discovered(threads, false)?;
        Ok((work, sizes))
    }

    /// [`Reader::plan_sized`] for [`Reader::load`], with how many directories it listed: a
    /// reload checks the logdir against what the last discovery saw ([`changes`]) and looks
    /// only at the runs whose files moved; any directory that changed (an entry added,
    /// removed or renamed), or a logdir the check cannot vouch for, is discovered again, and
    /// what that discovery sees is kept for the next reload.
    pub(crate) fn plan_checked(&mut self) -> Result<(Plan, Vec<u64>, usize)> {
        let t0 = std::time::Instant::now();
        let threads = super::thread_count(self.opts.threads);
        if let Some(tree) = self.tree.take() {
            // Only the directories that changed listed again, new ones walked. (A run whose
            // directory went is kept as read: a reload drops nothing.)
            let checked = tree
                .reload(self, threads)
                .map(|rl| (rl.tree, rl.found, rl.listed));
            if let Some((tree, found, listed)) = checked {
                self.tree = Some(tree);
                let checked = t0.elapsed();
                let work = self.plan_found(&found, Vec::new())?;
                let sizes = sizes_of(&work, &found);
                if std::env::var_os("TBSCOPE_TRACE").is_some() {
                    eprintln!(
                        "tbscope plan: check {checked:?} ({} runs moved, {listed} directories \
                         listed), plan {:?}",
                        found.len(),
                        t0.elapsed() - checked
                    );
                }
                return Ok((work, sizes, listed));
            }
        }
        self.plan_discovered(threads, true)
    }

    /// The plan of a discovery and one stat per file, with the planned files' sizes and how
    /// many directories it listed; with `keep_tree`, what it saw is kept for the next
    /// reload's check (`self.tree`).
    fn plan_discovered(
        &mut self,
        threads: usize,
        keep_tree: bool,
    ) -> Result<(Plan, Vec<u64>, usize)> {
        let t0 = std::time::Instant::now();
        let (root, runs) = (&self.root, self.opts.runs.as_ref());
        // Listing directories and stat'ing files on worker threads (a pool for this call
        // only, as a read makes its own; refused, the work runs on this thread): on a logdir
        // of many small runs, much of a load. Named apart from the read's workers: a dropped
        // pool's threads exit on their own time, and may still be there when the read's start.
        let pool = super::worker_pool(threads, "stat-").unwrap_or(None);
        let discover_stat = || -> Result<_> {
            if !keep_tree {
                let (found, errors) = discover(root, runs).map_err(|e| Error::io(e, root))?;
                return Ok((stat_found(found), errors, None, 0));
            }
            let mut walked = discover_listed(root, runs).map_err(|e| Error::io(e, root))?;
            let tree = Tree::of(&walked, &mut |run| walked.found.get(run).cloned());
            let found = stat_found(std::mem::take(&mut walked.found));
            Ok((found, walked.errors, tree, walked.listings.len()))
        };
        let (found, errors, tree, listed) = match &pool {
            Some(p) => p.install(discover_stat)?,
            None => discover_stat()?,
        };
        drop(pool);
        let stated = t0.elapsed();
        if keep_tree {
            self.tree = tree;
        }
        let work = self.plan_found(&found, errors)?;
        let sizes = sizes_of(&work, &found);
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope plan: discover and stat {stated:?}, plan {:?}",
                t0.elapsed() - stated
            );
        }
        Ok((work, sizes, listed))
    }

    /// [`Reader::plan`] cut into pieces of about `max_bytes` of event file bytes still to read
    /// (a piece holds at least one file), in plan order: [`Reader::read`] on each in turn
    /// streams a logdir in bounded memory.
    pub fn plan_pieces(&mut self, max_bytes: u64) -> Result<Vec<Vec<(String, PathBuf, Cursor)>>> {
        let work = self.plan()?;
        Ok(cut_pieces(work, max_bytes, |p| {
            std::fs::metadata(p).map_or(0, |m| m.len())
        }))
    }

    /// [`Reader::plan`] on runs already discovered and stat'ed (`found` possibly holding only
    /// those that may have changed).
    pub(crate) fn plan_found(
        &mut self,
        found: &Found,
        errors: Vec<(PathBuf, std::io::Error)>,
    ) -> Result<Vec<(String, PathBuf, Cursor)>> {
        for (path, e) in errors {
            let rel = self.rel(&path);
            let (run, file, severity, reason) = if path.is_dir() {
                (
                    rel,
                    String::new(),
                    Severity::Error,
                    format!("cannot list directory: {e}"),
                )
            } else {
                (String::new(), rel, Severity::Warning, e.to_string())
            };
            let entry = ReportEntry {
                run,
                file,
                severity,
                offset: 0,
                length: 0,
                reason,
            };
            // Reloads find the same problem again; report it once.
            if !self.report.contains(&entry) {
                self.report.push(entry);
            }
        }
        // (A logdir without runs is not a problem found in it: `report_entries` says so while
        // it lasts.)
        // Which files changed: new ones, ones whose size or mtime moved, and ones left with a
        // pending tail that are final now.
        let mut work: Vec<(String, PathBuf, Cursor)> = Vec::new();
        let mut root_is_file: Option<bool> = None;
        let now = std::time::SystemTime::now();
        for (run, files) in found {
            // This run's files to read, in order; `true`: only if no longer pending.
            let mut todo: Vec<(&PathBuf, Cursor, bool)> = Vec::new();
            if !self.runs.contains_key(run) {
                let id = self.run_names.len() as i32;
                self.run_names.push(run.clone());
                self.runs.insert(
                    run.clone(),
                    RunState {
                        id,
                        ..Default::default()
                    },
                );
            }
            for (path, meta) in files {
                use std::os::unix::fs::MetadataExt;
                let size = meta.as_ref().map_or(0, |m| m.len());
                let mtime = meta.as_ref().and_then(|m| m.modified().ok());
                let (dev, ino) = meta.as_ref().map_or((0, 0), |m| (m.dev(), m.ino()));
                let state = self.runs.get_mut(run).unwrap();
                match state.files.get(path) {
                    Some(f) if !f.failed && f.size == size && f.mtime == mtime => {
                        if f.pending {
                            todo.push((path, f.cursor, true));
                        }
                        continue;
                    }
                    Some(f) => todo.push((path, f.cursor, false)),
                    None => {
                        // Named only when new: a logdir of many runs re-planned through the
                        // cache would otherwise pay a stat (root.is_file) per known file.
                        let rel = rel_name(
                            &self.root,
                            *root_is_file.get_or_insert_with(|| self.root.is_file()),
                            path,
                        );
                        let id = self.file_names.len() as i32;
                        self.file_names.push(rel);
                        state.files.insert(FileState {
                            path: path.clone(),
                            id,
                            cursor: Cursor::default(),
                            size: 0,
                            mtime: None,
                            dev,
                            ino,
                            records: 0,
                            tail: 0,
                            pending: false,
                            file_version: None,
                            writer: None,
                            failed: false,
                        });
                        todo.push((path, Cursor::default(), false));
                    }
                }
                let f = state.files.get_mut(path).unwrap();
                f.mtime = mtime;
                f.dev = dev;
                f.ino = ino;
            }
            let live = if todo.iter().any(|t| t.2) {
                self.live_files(run, now)
            } else {
                Vec::new()
            };
            for (path, cursor, if_final) in todo {
                if !if_final || !live.iter().any(|(p, l)| *p == path && *l) {
                    work.push((run.clone(), path.clone(), cursor));
                }
            }
        }
        Ok(work)
    }

    /// Which of `run`'s files may still be written ([`may_grow`]), as of `now`.
    pub(super) fn live_files(
        &self,
        run: &str,
        now: std::time::SystemTime,
    ) -> Vec<(&PathBuf, bool)> {
        let Some(state) = self.runs.get(run) else {
            return Vec::new();
        };
        let files: Vec<(&Path, Option<std::time::SystemTime>)> = state
            .files
            .values()
            .map(|f| (f.path.as_path(), f.mtime))
            .collect();
        let live = may_grow(&files, now, self.opts.tail_timeout);
        state.files.keys().zip(live).collect()
    }
}

/// When an event file's writer created it: the seconds in its name
/// (`events.out.tfevents.<seconds>.<host>...`, what every writer names its files), if any.
fn started(path: &Path) -> Option<f64> {
    let name = path.file_name()?.to_str()?;
    let rest = &name[name.find("tfevents.")? + "tfevents.".len()..];
    let digits = rest.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse::<u64>().ok().map(|s| s as f64)
}

/// Which of a run's event files (path, mtime) may still be written, as of `now`.
///
/// Writers never append to an existing file after a restart (they start a new one), so a file
/// may still grow only while it is the newest of its run and it grew within `timeout`. "Newest"
/// is judged by when the others were started (the seconds in their names, rounded down): a file
/// is superseded once another file of its run was started after it last grew, so writers that
/// run side by side in one directory (several ranks) do not finalise each other's files. A
/// zero timeout makes every file final.
pub(crate) fn may_grow(
    files: &[(&Path, Option<std::time::SystemTime>)],
    now: std::time::SystemTime,
    timeout: std::time::Duration,
) -> Vec<bool> {
    if timeout.is_zero() {
        return vec![false; files.len()];
    }
    // The two latest starts, so each file compares with the latest of the others.
    let starts: Vec<Option<f64>> = files.iter().map(|(p, _)| started(p)).collect();
    let mut best: [(f64, usize); 2] = [(f64::NEG_INFINITY, usize::MAX); 2];
    for (i, s) in starts.iter().enumerate() {
        let Some(s) = *s else { continue };
        if s > best[0].0 {
            best = [(s, i), best[0]];
        } else if s > best[1].0 {
            best[1] = (s, i);
        }
    }
    files
        .iter()
        .enumerate()
        .map(|(i, (_, mtime))| {
            let Some(mtime) = mtime else {
                // Not stat'ed: nothing says it stopped.
                return true;
            };
            // A modification time ahead of the clock counts as just now.
            if now.duration_since(*mtime).is_ok_and(|age| age >= timeout) {
                return false;
            }
            let grew = crate::logdir::seconds(*mtime);
            let newest_other = if best[0].1 == i { best[1].0 } else { best[0].0 };
            newest_other <= grew
        })
        .collect()
}

/// Whether one event file may still be written ([`may_grow`] with the default timeout), its
/// directory's event files taken as its run.
pub fn file_may_grow(path: &Path) -> bool {
    let siblings: Vec<PathBuf> = path
        .parent()
        .and_then(|d| std::fs::read_dir(d).ok())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().contains("tfevents"))
                        && p.as_path() != path
                })
                .collect()
        })
        .unwrap_or_default();
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut files: Vec<(&Path, Option<std::time::SystemTime>)> = vec![(path, mtime(path))];
    files.extend(siblings.iter().map(|p| (p.as_path(), mtime(p))));
    may_grow(&files, std::time::SystemTime::now(), TAIL_TIMEOUT)[0]
}

#[cfg(test)]
mod tests {
    use super::stat_found;
    use std::path::PathBuf;

    /// Per run, its files with the size a stat found (None: no such file).
    type Sizes = Vec<(String, Vec<(PathBuf, Option<u64>)>)>;

    /// A plan may name a run twice (a `Vec`, not a map): both entries are stat'ed and kept, in
    /// order, on this thread and on a pool's.
    #[test]
    fn stat_found_keeps_every_entry_in_order() {
        let dir = std::env::temp_dir().join(format!("tbscope-stat-found-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, b"12").unwrap();
        let runs: Vec<(String, Vec<PathBuf>)> = (0..600)
            .map(|i| (format!("r{}", i / 2), vec![a.clone(), b.clone()]))
            .collect();
        let want: Sizes = runs
            .iter()
            .map(|(r, f)| {
                (
                    r.clone(),
                    vec![(f[0].clone(), Some(2)), (f[1].clone(), None)],
                )
            })
            .collect();
        let sizes = |found: crate::load::Found| -> Sizes {
            found
                .into_iter()
                .map(|(r, f)| {
                    (
                        r,
                        f.into_iter()
                            .map(|(p, m)| (p, m.map(|m| m.len())))
                            .collect(),
                    )
                })
                .collect()
        };
        assert_eq!(sizes(stat_found(runs.clone())), want);
        let pool = crate::pool::worker_pool(3, "test-").unwrap().unwrap();
        assert_eq!(sizes(pool.install(|| stat_found(runs))), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
