//! A change to a few runs of a large cached logdir, carried over: the load decodes the state
//! of the runs whose files moved only, and the new generation takes everything of the others
//! from the one it continues (their encoded parts of the manifest, their rows of the stored
//! facts and statistics tables). Afterwards the reader stands as after a warm open of the new
//! generation (the state encoded, the stored tables answering), or, should it not be
//! published, as after decoding the whole of the old one.
//!
//! Until then the reader's `runs` holds placeholders for the runs not decoded (their name and
//! id, nothing else): only the load and the generation it writes see them, and both take
//! those runs' parts from the old generation (`Kept`, `Carried`).

use std::collections::HashSet;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};

use super::manifest::{decode_body, decode_header, Kept};
use super::pending::{decode_state_where, Pending};
use super::Cache;
use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::load::{kind_counts, Reader};

/// A load that decoded the state of some runs only: the generation it continues, still
/// encoded, and which of its runs were decoded.
pub(super) struct Partial {
    pending: Box<Pending>,
    /// Indices in the generation, ascending.
    decoded: Vec<u32>,
    /// The generation's runs, in order (the reader's `run_names` may gain entries meanwhile).
    names: Vec<String>,
}

/// What a generation written after a partial load holds, to continue from without reading it
/// back (`Cache::repend`).
pub(super) struct Written {
    pub(super) manifest: Vec<u8>,
    pub(super) facts: RecordBatch,
    pub(super) stats: RecordBatch,
}

/// The previous generation's stored tables and the runs a load read again (or dropped): the
/// next generation's tables are the stored rows of every other run and those runs' own.
pub(super) struct Carried {
    pub(super) facts: Option<RecordBatch>,
    pub(super) stats: Option<RecordBatch>,
    pub(super) again: HashSet<String>,
}

impl Cache {
    /// Decodes the pending generation's rows and pieces, and the state of the runs `runs`
    /// only (see the module docs). Ok(false), with nothing done, when the generation has no
    /// stored tables to carry over: the caller then decodes the whole state.
    pub(super) fn materialise_some(&mut self, r: &mut Reader, runs: &[u32]) -> Result<bool> {
        if self
            .pending
            .as_ref()
            .is_none_or(|p| p.facts.is_none() || p.stats.is_none())
        {
            return Ok(false);
        }
        for k in Kind::ALL {
            self.decode_kind(k, r)?;
            self.decode_pieces(r, k)?;
        }
        self.decode_names(r)?;
        let Some(p) = self.pending.take() else {
            return Ok(false);
        };
        let want = |i: usize| runs.binary_search(&(i as u32)).is_ok();
        match decode_state_where(&p, &r.run_names, &r.root, &want) {
            Ok((decoded, file_names, state_at)) => {
                r.runs = decoded;
                r.file_names = file_names;
                self.kept = Some(Kept {
                    manifest: p.manifest.clone(),
                    names: r.run_names.clone(),
                    index_at: p.index.at.clone(),
                    state_at,
                    strings: p.strings.clone(),
                    metas: p.metas.clone(),
                    again: Default::default(),
                    dirs_at: p.dirs_at,
                    dirs_same: false,
                });
                self.partial = Some(Partial {
                    pending: p,
                    decoded: runs.to_vec(),
                    names: r.run_names.clone(),
                });
                Ok(true)
            }
            Err(e) => {
                self.pending = Some(p);
                Err(Error::Other(format!(
                    "cache {}: the runs' state cannot be decoded: {e}",
                    self.dir.display()
                )))
            }
        }
    }

    /// Whether the generation about to be written can take the runs not decoded from the
    /// previous one: their parts, the listings and both stored tables.
    pub(super) fn partial_publishable(&self, r: &Reader) -> bool {
        let (Some(k), Some(c)) = (&self.kept, &self.carried) else {
            return false;
        };
        k.dirs_same
            && c.facts.is_some()
            && c.stats.is_some()
            && k.names.len() == r.runs.len()
            && k.names.iter().eq(r.runs.keys())
            && self.partial.as_ref().is_some_and(|p| {
                p.decoded
                    .iter()
                    .all(|&i| k.again.contains(&p.names[i as usize]))
            })
    }

    /// Decodes the state of the runs a partial load left as placeholders (the generation
    /// was not published): the reader then holds every run, as a whole decode gives it.
    pub(super) fn complete_partial(&mut self, r: &mut Reader) -> Result<()> {
        let Some(part) = self.partial.take() else {
            return Ok(());
        };
        let p = &part.pending;
        let done = |i: usize| part.decoded.binary_search(&(i as u32)).is_ok();
        let bad = |e: String| {
            Error::Other(format!(
                "cache {}: the runs' state cannot be decoded: {e}",
                self.dir.display()
            ))
        };
        let (rest, names, _) =
            decode_state_where(p, &part.names, &r.root, &|i| !done(i)).map_err(bad)?;
        let mut names = names;
        for (i, (name, state)) in rest.into_iter().enumerate() {
            if done(i) {
                continue;
            }
            let (a, b) = (p.index.start[i] as usize, p.index.start[i + 1] as usize);
            for (slot, n) in r
                .file_names
                .iter_mut()
                .zip(names.iter_mut())
                .take(b)
                .skip(a)
            {
                *slot = std::mem::take(n);
            }
            r.runs.insert(name, state);
        }
        self.dirs = p.listings().map_err(bad)?;
        Ok(())
    }

    /// After a partial load published `w`: the reader forgets the runs' state and the cache
    /// holds the new generation as a warm open would (state encoded, stored tables answering).
    pub(super) fn repend(&mut self, r: &mut Reader, w: Written) -> Result<()> {
        let bad = |e: String| Error::Other(format!("the generation just written: {e}"));
        let manifest = arrow_buffer::Buffer::from_vec(w.manifest);
        let m = {
            let (_, body) = decode_header(&manifest).map_err(bad)?;
            decode_body(body).map_err(bad)?
        };
        if m.nruns != r.runs.len() || w.facts.num_rows() != m.nruns {
            return Err(bad("runs out of step".into()));
        }
        // The names in the generation's order (the reader's may hold a run twice: one read
        // again from its start is numbered anew).
        let names: Vec<String> = std::mem::take(&mut r.runs).into_keys().collect();
        self.pending = Some(Box::new(Pending {
            manifest,
            nruns: m.nruns,
            names: None,
            pieces: [None; 8],
            run_arcs: None,
            state: m.state,
            strings: m.strings,
            metas: m.metas,
            index: m.index,
            dirs: m.dirs,
            dirs_at: m.dirs_at,
            facts: Some(w.facts),
            stats: Some(w.stats),
        }));
        r.run_names = names;
        r.file_names.clear();
        self.partial = None;
        self.kept = None;
        self.carried = None;
        self.dirs.clear();
        Ok(())
    }

    /// The runs' facts of the unfiltered load, for the generation's stored table: the carried
    /// rows of every run the load did not read again and those runs' own, or every run's.
    pub(super) fn facts_to_store(&self, r: &Reader) -> Result<RecordBatch> {
        let Some((stored, again)) = self
            .carried
            .as_ref()
            .and_then(|c| Some((c.facts.as_ref()?, &c.again)))
        else {
            if self.partial.is_some() {
                return Err(Error::Other("the runs' facts are not all decoded".into()));
            }
            return r.run_facts();
        };
        let table =
            r.runs_table_with(&|run, s| again.contains(run).then(|| (s.max_step, kind_counts(s))));
        let fresh = r.facts_from(table, &r.series_pick());
        merge_rows(stored, &fresh, &|run| again.contains(run))
    }
}

/// The rows of `prev` whose run `replaced` says no to and every row of `fresh`, in run-name
/// order (both tables one row per run, sorted by run; same schema).
pub(super) fn merge_rows(
    prev: &RecordBatch,
    fresh: &RecordBatch,
    replaced: &dyn Fn(&str) -> bool,
) -> Result<RecordBatch> {
    let (pn, fr) = (
        prev.column(0).as_string::<i32>(),
        fresh.column(0).as_string::<i32>(),
    );
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(prev.num_rows() + fresh.num_rows());
    let (mut i, mut j) = (0usize, 0usize);
    while i < pn.len() || j < fr.len() {
        if i < pn.len() && replaced(pn.value(i)) {
            i += 1;
            continue;
        }
        if j == fr.len() || (i < pn.len() && pn.value(i) < fr.value(j)) {
            order.push((0, i));
            i += 1;
        } else {
            order.push((1, j));
            j += 1;
        }
    }
    let err = |e: arrow_schema::ArrowError| Error::Other(format!("merging facts: {e}"));
    let cols = (0..prev.num_columns())
        .map(|c| {
            arrow_select::interleave::interleave(
                &[prev.column(c).as_ref(), fresh.column(c).as_ref()],
                &order,
            )
            .map_err(err)
        })
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(prev.schema(), cols).map_err(err)
}
