//! Which runs a load through the cache looks at, and which cached runs it drops: after a
//! restore, those the check against the generation found moved (`check`, `relist`); on a
//! reload of a reader whose state is decoded, those the reader's own check against its last
//! discovery found moved (`load::changes::Tree`), the directories that changed listed again;
//! otherwise, those a discovery finds changed (`discover_with`). Either way the runs left are
//! a cold read's of the logdir as it is now.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;

use super::carry::Carried;
use super::check::{discover_with, same_listing, stale_among, stale_runs, stat_found_with};
use super::manifest::DirListing;
use super::relist::Relisted;
use super::Cache;
use crate::error::{Error, Result};
use crate::load::{stat_found, Found, Reader};

/// What a load looks at: the runs to plan with their files stat'ed, discovery's problems, the
/// runs whose cached rows go, and whether a directory's listing differs from the generation's
/// (the next generation should hold it even if no row changed).
pub(super) struct Looked {
    pub(super) found: Found,
    pub(super) errors: Vec<(PathBuf, std::io::Error)>,
    pub(super) stale: Vec<String>,
    pub(super) listings_differ: bool,
}

type Marks = Vec<(&'static str, Duration)>;

/// The runs numbered `runs` (in the restored generation's order, ascending) with the files
/// they had, each stat'ed (links followed, as reading does): what discovery would find for
/// them when no directory changed.
fn moved_found(r: &Reader, runs: &[u32]) -> Found {
    stat_found(runs.iter().filter_map(|&i| {
        let name = r.run_names.get(i as usize)?;
        let files = r.runs.get(name)?.files.keys().cloned().collect();
        Some((name.clone(), files))
    }))
}

impl Cache {
    /// What this load looks at (see the module docs): `moved`, the generation's runs the check
    /// after a restore found moved, with `relisted`, the directories it listed again; `stored`,
    /// that generation's stored facts and statistics.
    pub(super) fn look(
        &mut self,
        r: &mut Reader,
        threads: usize,
        moved: Option<Vec<u32>>,
        relisted: Option<Relisted>,
        stored: (Option<RecordBatch>, Option<RecordBatch>),
        (t0, marks): (Instant, &mut Marks),
    ) -> Result<Looked> {
        if let Some(runs) = moved {
            return Ok(self.look_restored(r, runs, relisted, stored, (t0, marks)));
        }
        if let Some(looked) = self.look_tree(r, threads, (t0, marks)) {
            return Ok(looked);
        }
        self.look_discovered(r, threads, (t0, marks))
    }

    /// After a restore: only the runs that moved, with the files they had, and those of the
    /// directories listed again with the files they have now. The other runs' encoded parts
    /// and stored tables are carried into the next generation.
    fn look_restored(
        &mut self,
        r: &mut Reader,
        runs: Vec<u32>,
        relisted: Option<Relisted>,
        (facts, stats): (Option<RecordBatch>, Option<RecordBatch>),
        (t0, marks): (Instant, &mut Marks),
    ) -> Looked {
        let dirs_same = relisted.is_none();
        let mut listings_differ = false;
        let (found, gone) = match relisted {
            None => (moved_found(r, &runs), Vec::new()),
            Some(rl) => {
                let mut found = moved_found(r, &rl.moved);
                found.extend(stat_found_with(rl.listed, None));
                found.sort_by(|a, b| a.0.cmp(&b.0));
                self.dirs = rl.listings;
                listings_differ = rl.differs;
                self.info.dirs_listed = rl.listed_dirs;
                (found, rl.gone)
            }
        };
        marks.push(("stat", t0.elapsed()));
        let mut stale = stale_among(r, &found);
        stale.extend(gone.iter().cloned());
        marks.push(("validate", t0.elapsed()));
        self.info.runs_rechecked = found.len();
        let again: HashSet<String> = found
            .iter()
            .map(|(run, _)| run.clone())
            .chain(gone)
            .collect();
        if let Some(k) = self.kept.as_mut() {
            k.again = again.clone();
            // (Every directory as listed, unless some were listed again.)
            k.dirs_same = dirs_same;
        }
        self.carried = Some(Carried {
            facts,
            stats,
            again,
        });
        Looked {
            found,
            errors: Vec::new(),
            stale,
            listings_differ,
        }
    }

    /// A reload of a decoded state, checked against the reader's last discovery (its own
    /// check, `load::changes`): only the runs whose files moved, and those of the directories
    /// that changed, listed again (new ones walked), as a reader's reload does; the listings
    /// kept for the generation follow. None when the check cannot tell, or the listings
    /// would not be a discovery's own: a discovery then decides.
    fn look_tree(
        &mut self,
        r: &mut Reader,
        threads: usize,
        (t0, marks): (Instant, &mut Marks),
    ) -> Option<Looked> {
        let tree = r.tree.take()?;
        let checked = tree.reload(r, threads);
        marks.push(("check", t0.elapsed()));
        let rl = checked?;
        // Every run is encoded anew (as after a discovery).
        self.kept = None;
        r.tree = Some(rl.tree);
        self.info.dirs_listed = rl.listed;
        let mut listings_differ = false;
        for rel in &rl.gone_dirs {
            listings_differ |= self.dirs.remove(rel).is_some();
        }
        for (rel, l) in rl.listings {
            let l = DirListing::of(l);
            listings_differ |= self.dirs.get(&rel).is_none_or(|o| !same_listing(o, &l));
            self.dirs.insert(rel, l);
        }
        self.info.runs_rechecked = rl.found.len();
        let mut stale = stale_among(r, &rl.found);
        // A run gone from the logdir goes from the cache too (a cold read has none of it).
        stale.extend(
            rl.gone_runs
                .into_iter()
                .filter(|run| r.runs.contains_key(run)),
        );
        marks.push(("validate", t0.elapsed()));
        Some(Looked {
            found: rl.found,
            errors: Vec::new(),
            stale,
            listings_differ,
        })
    }

    /// A discovery, reusing the listings of directories that did not change: every run is
    /// looked at (those untouched are not planned).
    fn look_discovered(
        &mut self,
        r: &mut Reader,
        threads: usize,
        (t0, marks): (Instant, &mut Marks),
    ) -> Result<Looked> {
        // Every run is encoded anew (a discovery may have changed any of them).
        self.kept = None;
        // Refused threads: the checks run on this thread.
        let pool = crate::pool::worker_pool(threads, "stat-").unwrap_or(None);
        let (found, errors, dirs, listed, tree) =
            discover_with(r, &self.dirs, pool.as_ref()).map_err(|e| Error::io(e, &r.root))?;
        r.tree = tree;
        self.info.dirs_listed = listed;
        marks.push(("discover", t0.elapsed()));
        let found = stat_found_with(found, pool.as_ref());
        drop(pool);
        marks.push(("stat", t0.elapsed()));
        let listings_differ = dirs.len() != self.dirs.len()
            || dirs
                .iter()
                .any(|(k, v)| self.dirs.get(k).is_none_or(|o| !same_listing(o, v)));
        self.dirs = dirs;
        self.info.runs_rechecked = found.len();
        let (stale, untouched) = stale_runs(r, &found);
        marks.push(("validate", t0.elapsed()));
        let found: Found = found
            .into_iter()
            .zip(untouched)
            .filter(|(_, same)| !same)
            .map(|(f, _)| f)
            .collect();
        Ok(Looked {
            found,
            errors,
            stale,
            listings_differ,
        })
    }
}
