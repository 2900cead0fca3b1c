//! A change to a few runs of a large cached logdir, carried over: the load decodes the state
//! of the runs whose files moved only, and the new generation takes everything of the others
//! from the one it continues (their encoded parts of the manifest, their rows of the stored
//! facts and statistics tables). Afterwards the reader stands as after a warm open of the new
//! generation (the state encoded, the stored tables answering), or, should it not be
//! published, as after decoding the whole of the old one.
//!
//! Until then the reader's `runs` holds the decoded runs only (its `run_names` all of them):
//! only the load and the generation it writes see that, and both take the other runs' parts
//! from the old generation (`Kept`, `Carried`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, DictionaryArray, Int32Array, RecordBatch};

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
    /// Indices in the generation, ascending (its runs, in order, are `Kept::names`: the
    /// reader's `run_names` may gain entries meanwhile).
    decoded: Vec<u32>,
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
        let t0 = std::time::Instant::now();
        let mut marks: Vec<(&str, std::time::Duration)> = Vec::new();
        for k in Kind::ALL {
            self.decode_kind(k, r)?;
        }
        marks.push(("rows", t0.elapsed()));
        self.decode_names(r)?;
        marks.push(("names", t0.elapsed()));
        for k in Kind::ALL {
            self.decode_pieces(r, k)?;
        }
        marks.push(("pieces", t0.elapsed()));
        let Some(p) = self.pending.take() else {
            return Ok(false);
        };
        let want = |i: usize| runs.binary_search(&(i as u32)).is_ok();
        let decoded = decode_state_where(&p, &r.run_names, &r.root, &want);
        marks.push(("runs", t0.elapsed()));
        super::trace_marks("partial state", &marks);
        match decoded {
            Ok((decoded, file_names, state_at)) => {
                r.runs = decoded;
                r.file_names = file_names;
                self.kept = Some(Kept {
                    manifest: p.manifest.clone(),
                    partial: true,
                    nruns: r.run_names.len(),
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
    /// previous one: their parts, the listings (the previous ones, or all of them listed
    /// again: `relist.rs`) and both stored tables. A run it does not have is one read again.
    pub(super) fn partial_publishable(&self, r: &Reader) -> bool {
        let (Some(k), Some(c)) = (&self.kept, &self.carried) else {
            return false;
        };
        (k.dirs_same || !self.dirs.is_empty())
            && c.facts.is_some()
            && c.stats.is_some()
            && r.runs
                .keys()
                .all(|n| k.again.contains(n) || k.names(r).binary_search(n).is_ok())
            && self.partial.as_ref().is_some_and(|p| {
                p.decoded
                    .iter()
                    .all(|&i| k.again.contains(&k.names(r)[i as usize]))
            })
    }

    /// Decodes the state of the runs a partial load left encoded (the generation
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
        let Some(kept) = &self.kept else {
            return Err(bad("the generation's runs are gone".into()));
        };
        let (rest, names, _) =
            decode_state_where(p, kept.names(r), &r.root, &|i| !done(i)).map_err(bad)?;
        let mut names = names;
        for (name, state) in rest {
            let i = state.id as usize;
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
        // (Directories listed again left the listings in place already.)
        if self.dirs.is_empty() {
            self.dirs = p.listings().map_err(bad)?;
        }
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
        // With every directory as listed, the generation's runs are the previous one's, in
        // order: the first of the reader's names (a run read again from its start was numbered
        // anew). Directories listed again may have added or removed runs: the names are the
        // new manifest's then.
        let k = self
            .kept
            .as_ref()
            .ok_or_else(|| bad("no generation kept".into()))?;
        let (n, same) = (k.nruns, k.dirs_same);
        if (same && (m.nruns != n || r.run_names.len() < n)) || w.facts.num_rows() != m.nruns {
            return Err(bad("runs out of step".into()));
        }
        let names = m.names;
        let pending = Pending::of(manifest, m, false, Some(w.facts), Some(w.stats));
        if same {
            r.run_names.truncate(n);
        } else {
            r.run_names = pending
                .decode_names(names)
                .map_err(|e| bad(format!("run names: {e}")))?;
        }
        r.runs.clear();
        self.pending = Some(Box::new(pending));
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
    let order = crate::runstats::merge_order(
        pn.len(),
        fr.len(),
        |i| pn.value(i),
        |j| fr.value(j),
        |i| replaced(pn.value(i)),
    );
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

/// [`crate::runstats::merge_stats`] when the result keeps `prev`'s tag dictionary: every run
/// of `fresh` replaces its own rows of `prev` (where they were) or is a run `prev` does not
/// have (its rows go where its name sorts), and logs only tags `prev` knows, so that the tags
/// still first appear in the order they are numbered (the runs are numbered anew, in that
/// order). Copies contiguous row ranges instead of looking every row's names up. None when
/// that does not hold (a new tag, or one only a run read again had): the caller merges row by
/// row.
pub(super) fn splice_stats(
    prev: &RecordBatch,
    fresh: &RecordBatch,
    replaced: &dyn Fn(&str) -> bool,
) -> Option<RecordBatch> {
    let dict = |b: &RecordBatch, c: usize| b.column(c).as_dictionary::<Int32Type>().clone();
    let (prun, ptag, frun, ftag) = (dict(prev, 0), dict(prev, 1), dict(fresh, 0), dict(fresh, 1));
    let (pnames, fnames) = (
        prun.values().as_string::<i32>(),
        frun.values().as_string::<i32>(),
    );
    // Row ranges of one run each, in order.
    let groups = |keys: &[i32]| {
        let mut out: Vec<(i32, usize, usize)> = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            match out.last_mut() {
                Some((last, _, len)) if *last == k => *len += 1,
                _ => out.push((k, i, 1)),
            }
        }
        out
    };
    let (pk, fk) = (prun.keys().values(), frun.keys().values());
    let (pg, fg) = (groups(pk), groups(fk));
    // Fresh tags as prev's keys.
    let ptags = ptag.values().as_string::<i32>();
    let index: HashMap<&str, i32> = (0..ptags.len())
        .map(|i| (ptags.value(i), i as i32))
        .collect();
    let ftags = ftag.values().as_string::<i32>();
    let tag_of: Vec<i32> = (0..ftags.len())
        .map(|i| index.get(ftags.value(i)).copied())
        .collect::<Option<_>>()?;
    // (source, start, len) in output order.
    let mut parts: Vec<(usize, usize, usize)> = Vec::with_capacity(pg.len() + 2 * fg.len());
    let mut fi = fg.iter().peekable();
    // Fresh runs go before the first run of prev whose name sorts after theirs (a fresh run
    // must take the place of its own rows, if prev has any).
    let mut fresh_before = |name: Option<&str>, parts: &mut Vec<(usize, usize, usize)>| {
        while let Some(&&(fkey, fstart, flen)) = fi.peek() {
            let fname = fnames.value(fkey as usize);
            if name.is_some_and(|n| fname > n) {
                break;
            }
            if !replaced(fname) {
                return false;
            }
            parts.push((1, fstart, flen));
            fi.next();
        }
        true
    };
    for &(k, start, len) in &pg {
        let name = pnames.value(k as usize);
        if !fresh_before(Some(name), &mut parts) {
            return None;
        }
        if !replaced(name) {
            // Consecutive kept rows of prev make one part.
            match parts.last_mut() {
                Some((0, s, l)) if *s + *l == start => *l += len,
                _ => parts.push((0, start, len)),
            }
        }
    }
    if !fresh_before(None, &mut parts) {
        return None;
    }
    let rows: usize = parts.iter().map(|p| p.2).sum();
    let mut run_keys: Vec<i32> = Vec::with_capacity(rows);
    let mut tag_keys: Vec<i32> = Vec::with_capacity(rows);
    let (ptk, ftk) = (ptag.keys().values(), ftag.keys().values());
    // Runs numbered by first appearance (each run's rows come from one side only).
    let mut run_names: Vec<&str> = Vec::with_capacity(pnames.len() + fnames.len());
    let mut numbered = [vec![-1i32; pnames.len()], vec![-1i32; fnames.len()]];
    for &(src, start, len) in &parts {
        let (keys, names) = if src == 0 { (pk, pnames) } else { (fk, fnames) };
        let number = &mut numbered[src];
        for &k in &keys[start..start + len] {
            let slot = number.get_mut(k as usize)?;
            if *slot < 0 {
                *slot = run_names.len() as i32;
                run_names.push(names.value(k as usize));
            }
            run_keys.push(*slot);
        }
        if src == 0 {
            tag_keys.extend_from_slice(&ptk[start..start + len]);
        } else {
            tag_keys.extend(ftk[start..start + len].iter().map(|&t| tag_of[t as usize]));
        }
    }
    // Numbered by first appearance, every value used: what a row-by-row merge would number.
    let in_order = |keys: &[i32], values: usize| {
        let mut next = 0i32;
        for &k in keys {
            if k == next {
                next += 1;
            } else if k > next {
                return false;
            }
        }
        next as usize == values
    };
    if !in_order(&tag_keys, ptags.len()) {
        return None;
    }
    let runs: ArrayRef = Arc::new(arrow_array::StringArray::from(run_names));
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(prev.num_columns());
    for (keys, values) in [(run_keys, runs), (tag_keys, ptag.values().clone())] {
        let a = DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), values);
        cols.push(Arc::new(a.ok()?));
    }
    for c in 2..prev.num_columns() {
        let src = [prev.column(c), fresh.column(c)];
        let pieces: Vec<ArrayRef> = parts
            .iter()
            .map(|&(t, start, len)| src[t].slice(start, len))
            .collect();
        let refs: Vec<&dyn Array> = pieces.iter().map(|a| a.as_ref()).collect();
        cols.push(arrow_select::concat::concat(&refs).ok()?);
    }
    RecordBatch::try_new(prev.schema(), cols).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runstats::{merge_stats, scalar_stats_of};
    use arrow_array::{Float64Array, Int64Array};
    use arrow_schema::{DataType, Field, Schema};

    type Row<'a> = (&'a str, &'a str, i64, f64);

    /// Scalar rows (run, tag, step, value) as the columns `scalar_stats_of` reads.
    fn rows(rows: &[Row<'_>]) -> RecordBatch {
        let dict = |col: &dyn Fn(&Row<'_>) -> String| {
            let mut names: Vec<String> = Vec::new();
            let keys: Vec<i32> = rows
                .iter()
                .map(|r| {
                    let n = col(r);
                    match names.iter().position(|x| *x == n) {
                        Some(i) => i as i32,
                        None => {
                            names.push(n);
                            names.len() as i32 - 1
                        }
                    }
                })
                .collect();
            let values = Arc::new(arrow_array::StringArray::from(names));
            Arc::new(DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), values).unwrap())
                as ArrayRef
        };
        let d = || DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let schema = Schema::new(vec![
            Field::new("run", d(), false),
            Field::new("tag", d(), false),
            Field::new("step", DataType::Int64, false),
            Field::new("value", DataType::Float64, false),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                dict(&|r| r.0.to_string()),
                dict(&|r| r.1.to_string()),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.3))),
            ],
        )
        .unwrap()
    }

    /// Splices where it can, and then gives exactly what the row-by-row merge gives.
    fn check(prev: &[(&str, &str, i64, f64)], fresh: &[(&str, &str, i64, f64)], spliced: bool) {
        let (prev, fresh) = (
            scalar_stats_of(&[rows(prev)]).unwrap(),
            scalar_stats_of(&[rows(fresh)]).unwrap(),
        );
        let names: Vec<String> = {
            let d = fresh.column(0).as_dictionary::<Int32Type>();
            let v = d.values().as_string::<i32>();
            (0..v.len()).map(|i| v.value(i).to_string()).collect()
        };
        let again = |run: &str| names.iter().any(|n| n == run);
        let merged = merge_stats(&prev, &fresh, &again).unwrap();
        let got = splice_stats(&prev, &fresh, &again);
        assert_eq!(got.is_some(), spliced, "{fresh:?}");
        if let Some(got) = got {
            assert_eq!(format!("{got:?}"), format!("{merged:?}"));
        }
    }

    #[test]
    fn splice_equals_the_row_by_row_merge() {
        let prev = [
            ("a", "x", 0, 1.0),
            ("a", "y", 0, 2.0),
            ("b", "x", 0, 3.0),
            ("b", "q", 0, 4.0),
            ("b", "y", 1, 5.0),
            ("c", "x", 0, 6.0),
            ("c", "q", 0, 7.0),
        ];
        // The middle run appended to, and the first and last.
        let b = [
            ("b", "x", 0, 3.0),
            ("b", "q", 0, 4.0),
            ("b", "y", 1, 5.0),
            ("b", "x", 2, -1.0),
        ];
        check(&prev, &b, true);
        check(
            &prev,
            &[
                ("a", "x", 0, 1.0),
                ("a", "y", 0, 9.0),
                ("c", "x", 0, 6.0),
                ("c", "q", 0, 7.0),
                ("c", "x", 5, 0.5),
            ],
            true,
        );
        // Runs prev does not have (first, between, last; the last two with a run read again
        // between them): spliced where their names sort, the runs numbered anew.
        check(&prev, &[("0", "x", 0, 1.0)], true);
        check(&prev, &[("bb", "x", 0, 1.0)], true);
        check(
            &prev,
            &[("bb", "y", 0, 1.0), ("c", "q", 3, 1.0), ("d", "x", 0, 2.0)],
            true,
        );
        // A tag prev does not know, a tag only a run that lost it had, a run's tags in another
        // order: merged row by row. (A tag the run lost that a later run still has keeps its
        // number: spliced.)
        check(&prev, &[("b", "z", 0, 1.0)], false);
        check(&prev, &[("b", "x", 0, 1.0), ("b", "y", 0, 1.0)], true);
        check(&prev[..5], &[("b", "x", 0, 1.0), ("b", "y", 0, 1.0)], false);
        check(&prev, &[("a", "y", 0, 1.0), ("a", "x", 0, 1.0)], false);
    }
}
