//! The rows of a cache: segments (one Arrow IPC file per kind per load that added rows) and the
//! pieces that say which rows of which segment belong to which run, in output order; the
//! compaction that keeps their number bounded.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};

use super::stamp::FileSum;
use super::unique_name;
use super::view::{compact_dicts, is_string_dict};
use super::Cache;
use crate::data_compat::Kind;
use crate::error::{Error, Result};

/// Past this many segments the small ones are merged (see `compact_if_needed`).
const MAX_SEGMENTS: usize = 8;
/// A table in more slices than this is compacted whole: every consumer that wants one array
/// (pandas) concatenates slices, and a slice per run of a large logdir would cost more than the
/// rewrite. Runs that grow add a slice each (their new rows sit in a newer segment).
const MAX_SLICES: usize = 4096;

/// Rows added by one load, one batch per kind.
pub(super) struct Segment {
    pub(super) name: String,
    pub(super) batches: [Option<RecordBatch>; 8],
    /// Files of a restored generation opened but not read yet: `batches[k]` is filled from
    /// `unread[k]` (read, checked against `files[k]`, decoded) when a table of that kind is
    /// first needed (`Cache::decode_kind`). A warm `ls` or `summary` never reads the rows.
    pub(super) unread: [Option<File>; 8],
    /// What the manifest says about this segment's file of each kind in `home`.
    pub(super) files: [Option<FileSum>; 8],
    /// A published generation holding this segment's files, to hard-link them from.
    pub(super) home: Option<PathBuf>,
}

impl Segment {
    pub(super) fn new(name: String, home: Option<PathBuf>) -> Segment {
        Segment {
            name,
            batches: Default::default(),
            unread: Default::default(),
            files: Default::default(),
            home,
        }
    }

    /// Rows of `kind`, decoded or not.
    pub(super) fn rows(&self, kind: Kind) -> usize {
        let k = kind as usize;
        match (&self.batches[k], &self.unread[k], &self.files[k]) {
            (Some(b), _, _) => b.num_rows(),
            (None, Some(_), Some(f)) => f.rows as usize,
            _ => 0,
        }
    }

    pub(super) fn has(&self, kind: Kind) -> bool {
        self.batches[kind as usize].is_some() || self.unread[kind as usize].is_some()
    }
}

/// Rows `start..start + len` of a segment's table, all of one run.
#[derive(Debug, Clone)]
pub(super) struct Piece {
    pub(super) seg: usize,
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) run: Arc<str>,
}

impl Cache {
    /// Whether the rows of `kind` are decoded: every segment's file of that kind read and the
    /// pieces of that kind decoded.
    pub(super) fn decoded(&self, kind: Kind) -> bool {
        self.segments
            .iter()
            .all(|s| s.unread[kind as usize].is_none())
            && self
                .pending
                .as_ref()
                .is_none_or(|p| p.pieces[kind as usize].is_none())
    }

    /// The rows of `kind` in output order, as slices of the segments (no copies).
    pub(super) fn served(&self, kind: Kind) -> Result<Vec<RecordBatch>> {
        self.served_of(kind, &|_| true)
    }

    /// [`Cache::served`], the rows of the runs `keep` says yes to only.
    pub(super) fn served_of(
        &self,
        kind: Kind,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<RecordBatch>> {
        if !self.decoded(kind) {
            return Err(Error::Other(format!(
                "cache: the {} rows used before being decoded",
                kind.name()
            )));
        }
        let mut out = Vec::new();
        let mut cur: Option<(usize, usize, usize)> = None;
        let flush = |c: Option<(usize, usize, usize)>, out: &mut Vec<RecordBatch>| {
            if let Some((seg, start, len)) = c {
                let Some(b) = self.segments[seg].batches[kind as usize].as_ref() else {
                    return Err(Error::Other("cache: a piece without its rows".into()));
                };
                out.push(if start == 0 && len == b.num_rows() {
                    b.clone()
                } else {
                    b.slice(start, len)
                });
            }
            Ok(())
        };
        for p in self.pieces[kind as usize].iter().filter(|p| keep(&p.run)) {
            match cur {
                Some((s, st, l)) if s == p.seg && st + l == p.start => {
                    cur = Some((s, st, l + p.len));
                }
                _ => {
                    flush(cur, &mut out)?;
                    cur = Some((p.seg, p.start, p.len));
                }
            }
        }
        flush(cur, &mut out)?;
        Ok(out)
    }

    /// Keeps the segment count bounded without rewriting the bulk of the cache on every open
    /// of a growing logdir: past MAX_SEGMENTS, the small segments (all but the largest) are
    /// merged into one; everything is merged into one when they have grown to half the largest,
    /// when a quarter of the rows belong to dropped runs, or when a table has become more than
    /// MAX_SLICES slices.
    pub(super) fn compact_if_needed(&mut self) -> Result<()> {
        let mut live = 0usize;
        let mut slices = 0usize;
        for k in Kind::ALL {
            live += self.pieces[k as usize].iter().map(|p| p.len).sum::<usize>();
            slices = slices.max(self.served(k)?.len());
        }
        let rows: Vec<usize> = self
            .segments
            .iter()
            .map(|s| Kind::ALL.iter().map(|&k| s.rows(k)).sum())
            .collect();
        let total: usize = rows.iter().sum();
        let used: HashSet<usize> = self.pieces.iter().flatten().map(|p| p.seg).collect();
        if used.len() < self.segments.len() {
            // Forget segments no piece points at.
            self.keep_segments(&used);
            return self.compact_if_needed();
        }
        let full = slices > MAX_SLICES || (total - live) * 4 > live.max(1);
        if !full && self.segments.len() <= MAX_SEGMENTS {
            return Ok(());
        }
        let largest = (0..rows.len()).max_by_key(|&i| rows[i]).unwrap_or(0);
        let big = rows.get(largest).copied().unwrap_or(0);
        let merge: HashSet<usize> = if full || (total - big) * 2 > big {
            (0..self.segments.len()).collect()
        } else {
            (0..self.segments.len()).filter(|&i| i != largest).collect()
        };
        self.merge_segments(&merge)
    }

    /// Replaces the segments in `merge` by one holding their live rows, in output order.
    fn merge_segments(&mut self, merge: &HashSet<usize>) -> Result<()> {
        let new_seg = self.segments.len();
        let mut merged = Segment::new(unique_name("s"), None);
        for k in Kind::ALL {
            let mut parts = Vec::new();
            let mut at = 0;
            for p in self.pieces[k as usize].iter_mut() {
                if !merge.contains(&p.seg) {
                    continue;
                }
                let Some(b) = self.segments[p.seg].batches[k as usize].as_ref() else {
                    return Err(Error::Other("cache: a piece without its rows".into()));
                };
                parts.push(b.slice(p.start, p.len));
                *p = Piece {
                    seg: new_seg,
                    start: at,
                    len: p.len,
                    run: p.run.clone(),
                };
                at += p.len;
            }
            if !parts.is_empty() {
                merged.batches[k as usize] = Some(concat_compact(&parts)?);
            }
        }
        self.segments.push(merged);
        let used: HashSet<usize> = self.pieces.iter().flatten().map(|p| p.seg).collect();
        self.keep_segments(&used);
        Ok(())
    }

    fn keep_segments(&mut self, used: &HashSet<usize>) {
        let mut new_index = vec![usize::MAX; self.segments.len()];
        let mut kept = Vec::new();
        for (i, s) in std::mem::take(&mut self.segments).into_iter().enumerate() {
            if used.contains(&i) {
                new_index[i] = kept.len();
                kept.push(s);
            }
        }
        self.segments = kept;
        for p in self.pieces.iter_mut().flatten() {
            p.seg = new_index[p.seg];
        }
    }
}

/// Maximal row ranges of one run in a batch (its run column is a dictionary).
pub(super) fn run_pieces(seg: usize, b: &RecordBatch) -> Vec<Piece> {
    let runs = b.column(0).as_dictionary::<Int32Type>();
    let names = runs.values().as_string::<i32>();
    let names: Vec<Arc<str>> = (0..names.len())
        .map(|i| Arc::from(names.value(i)))
        .collect();
    let keys = runs.keys().values();
    let mut out: Vec<Piece> = Vec::new();
    let mut start = 0;
    for i in 1..=keys.len() {
        if i == keys.len() || keys[i] != keys[start] {
            out.push(Piece {
                seg,
                start,
                len: i - start,
                run: names[keys[start] as usize].clone(),
            });
            start = i;
        }
    }
    out
}

/// Merges two run-ordered piece lists; for one run, `old` comes first.
pub(super) fn merge_pieces(old: Vec<Piece>, fresh: Vec<Piece>) -> Vec<Piece> {
    let mut out = Vec::with_capacity(old.len() + fresh.len());
    let mut a = old.into_iter().peekable();
    let mut b = fresh.into_iter().peekable();
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => {
                if x.run <= y.run {
                    out.push(a.next().unwrap());
                } else {
                    out.push(b.next().unwrap());
                }
            }
            (Some(_), None) => out.push(a.next().unwrap()),
            (None, Some(_)) => out.push(b.next().unwrap()),
            (None, None) => break,
        }
    }
    out
}

/// One batch from several of the same schema; string dictionaries are merged (values in order
/// of first use), other columns concatenated.
fn concat_compact(parts: &[RecordBatch]) -> Result<RecordBatch> {
    if parts.len() == 1 {
        return compact_dicts(&parts[0]);
    }
    let schema = parts[0].schema();
    let err =
        |e: arrow_schema::ArrowError| Error::Other(format!("compacting the cache failed: {e}"));
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (i, f) in schema.fields().iter().enumerate() {
        let arrays: Vec<&dyn Array> = parts.iter().map(|b| b.column(i).as_ref()).collect();
        if !is_string_dict(f.data_type()) || arrays.iter().any(|a| a.null_count() > 0) {
            cols.push(arrow_select::concat::concat(&arrays).map_err(err)?);
            continue;
        }
        let mut index: HashMap<&str, i32> = HashMap::new();
        let mut values: Vec<&str> = Vec::new();
        let mut keys: Vec<i32> = Vec::with_capacity(arrays.iter().map(|a| a.len()).sum());
        for a in &arrays {
            let d = a.as_dictionary::<Int32Type>();
            let v = d.values().as_string::<i32>();
            let mut map = vec![-1i32; v.len()];
            for &k in d.keys().values().iter() {
                let m = &mut map[k as usize];
                if *m < 0 {
                    let s = v.value(k as usize);
                    *m = *index.entry(s).or_insert_with(|| {
                        values.push(s);
                        values.len() as i32 - 1
                    });
                }
                keys.push(*m);
            }
        }
        let values = Arc::new(StringArray::from_iter_values(values));
        cols.push(Arc::new(
            DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), values).map_err(err)?,
        ));
    }
    RecordBatch::try_new(schema, cols).map_err(err)
}
