//! Reading planned files: parsing them on worker threads (large files cut at record
//! boundaries), then merging what each file found into the reader's state in file order.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use arrow_array::RecordBatch;
use rayon::prelude::*;

use super::pairs::{join_pair, place, Dest, Parsed, Piece, RunKnown};
use super::{intern, thread_count, LoadStats, Reader, ReportEntry, Segment, TagState};
use crate::columns::{finish_placed, FileRows, PlacedScalars, Tables};
use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::event_file::{
    read_file_into, split_points_within, Cursor, FileChunk, Known, Severity, Until, STOPPED_TAIL,
};

impl Reader {
    /// Reads `work` (from [`Reader::plan`]) and returns its rows as batches per kind, without
    /// keeping them. File offsets and series state advance as in a load.
    pub fn read(
        &mut self,
        work: Vec<(String, PathBuf, Cursor)>,
        cancel: &AtomicBool,
    ) -> Result<(LoadStats, Vec<(Kind, RecordBatch)>)> {
        self.read_planned(work, cancel, None)
    }

    /// [`Reader::read`] of a piece of a plan whose files were stat'ed and counted already: with
    /// `sizes` (each file's size, in `work`'s order) the files are not stat'ed again, and the
    /// progress counts, given the whole plan beforehand, only get segments beyond one per
    /// file (large files cut for several threads).
    pub(crate) fn read_planned(
        &mut self,
        work: Vec<(String, PathBuf, Cursor)>,
        cancel: &AtomicBool,
        sizes: Option<Vec<u64>>,
    ) -> Result<(LoadStats, Vec<(Kind, RecordBatch)>)> {
        let counted = sizes.is_some();
        let files = work.len();
        // What each run already knows about its tags, so later files resolve at once. Only
        // runs that know some: a first read of many runs would otherwise clone every name.
        let mut known = RunKnown::default();
        for (run, _, _) in &work {
            if known.by_run.contains_key(run) {
                continue;
            }
            let k: HashMap<String, Known> = self.runs[run]
                .tags
                .iter()
                .filter_map(|(t, s)| s.kind.map(|kind| (t.to_string(), Known { kind })))
                .collect();
            if !k.is_empty() {
                known.by_run.insert(run.clone(), k);
            }
        }
        let t0 = std::time::Instant::now();
        let threads = thread_count(self.opts.threads);
        // A pool per load (one file needs none); one the system refuses fails the read.
        let pool = if work.len() <= 1 {
            None
        } else {
            crate::pool::worker_pool(threads, "")?
        };
        // Whether each file may still be written decides what a record running past its end is.
        let now = std::time::SystemTime::now();
        let mut live: HashMap<&str, Vec<(&PathBuf, bool)>> = HashMap::new();
        let untils: Vec<Until> = work
            .iter()
            .map(|(run, path, _)| {
                if let Some(&n) = self.fetching.get(path) {
                    return Until::Upto(n);
                }
                let files = live
                    .entry(run.as_str())
                    .or_insert_with(|| self.live_files(run, now));
                match files.iter().find(|(p, _)| *p == path) {
                    Some((_, false)) => Until::Final,
                    _ => Until::Live,
                }
            })
            .collect();
        drop(live);
        let work: Vec<(String, PathBuf, Cursor, Until)> = work
            .into_iter()
            .zip(untils)
            .map(|((r, p, c), u)| (r, p, c, u))
            .collect();
        // Large files are cut at record boundaries so several threads can share them. Each
        // file's size (stat'ed here unless the caller gives it) is what the split and the
        // balancing go by.
        let (work, bytes) = self.split_large(work, sizes, threads, pool.as_ref());
        super::progress::planned(if counted {
            work.len().saturating_sub(files)
        } else {
            work.len()
        });
        let mut groups = self.parse_groups(&work, &bytes, threads, pool.as_ref(), &known, cancel);
        // Two rare cases need a second pass over the work, with what the first one learnt:
        // values of undecided kind (tensors before any metadata) are filed once every file of
        // their run has had its say, a tag no file decides being a tensor; and a file whose
        // split was not clean (damage near a cut) is read in one piece.
        let chunks = || groups.iter().flat_map(|(_, cs)| cs.iter());
        let deferred = chunks().any(|c| c.deferred > 0);
        let dirty: std::collections::HashSet<PathBuf> = work
            .iter()
            .zip(chunks())
            .filter(|((_, _, _, end), c)| matches!(end, Until::Cut(_)) && !c.clean_end)
            .map(|(seg, _)| seg.1.clone())
            .collect();
        let work = if deferred || !dirty.is_empty() {
            let mut known2 = known.clone();
            for ((run, _, _, _), c) in work.iter().zip(chunks()) {
                let k = known2.by_run.entry(run.clone()).or_default();
                for t in &c.tags {
                    if let Some(kind) = t.kind {
                        k.entry(t.name.clone()).or_insert(Known { kind });
                    }
                }
            }
            for ((run, _, _, _), c) in work.iter().zip(chunks()) {
                let k = known2.by_run.entry(run.clone()).or_default();
                for t in &c.tags {
                    k.entry(t.name.clone()).or_insert(Known {
                        kind: Kind::Tensors,
                    });
                }
            }
            let mut redo: Vec<Segment> = Vec::new();
            for seg in work {
                if !dirty.contains(&seg.1) {
                    redo.push(seg);
                } else if let Some(first) = redo.iter_mut().rev().find(|s| s.1 == seg.1) {
                    // One piece: from where the first segment starts to where the file's read
                    // ends (the last segment's end is the file's).
                    if !matches!(seg.3, Until::Cut(_)) {
                        first.3 = seg.3;
                    }
                } else {
                    redo.push(seg);
                }
            }
            let bytes = segment_bytes(&redo);
            super::progress::planned(redo.len());
            groups = self.parse_groups(&redo, &bytes, threads, pool.as_ref(), &known2, cancel);
            redo
        } else {
            work
        };
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        let parsed = t0.elapsed();
        let (stats, mut groups) = self.merge(work, groups);
        let merged = t0.elapsed();
        // One batch per kind: pandas would otherwise concatenate (and unify dictionaries) again.
        // On the pool, so that finishing rows, copying and Arrow conversion use every worker.
        let provenance = self.opts.file.provenance;
        let appended;
        let batches = {
            let finish = || {
                // Each worker's rows get their logdir-wide tag ids and run/file columns, the
                // workers' tables side by side.
                let fix = |(t, jobs): &mut (Tables, Vec<Finish>)| {
                    for j in jobs.iter() {
                        t.finish_rows(&j.rows, &j.tag_map, j.run, j.file, provenance);
                    }
                    // A pair's shared scalar columns: every file at once, side by side.
                    if let Some(p) = t.scalars.placed.as_mut() {
                        let js: Vec<FileRows> = jobs
                            .iter()
                            .map(|j| FileRows {
                                rows: j.rows[0],
                                tag_map: &j.tag_map,
                                run: j.run,
                                file: j.file,
                            })
                            .collect();
                        finish_placed(p, &js, provenance);
                    }
                };
                if rayon::current_thread_index().is_some() {
                    groups.par_iter_mut().for_each(fix);
                } else {
                    groups.iter_mut().for_each(fix);
                }
                let mut tables = groups.into_iter().map(|(t, _)| t);
                let mut all = tables.next().unwrap_or_default();
                for t in tables {
                    all.append(t);
                }
                let appended = t0.elapsed();
                (appended, self.take_batches(all))
            };
            let (a, b) = match &pool {
                Some(p) => p.install(finish),
                None => finish(),
            };
            appended = a;
            b
        };
        if std::env::var_os("TBSCOPE_TRACE").is_some() {
            eprintln!(
                "tbscope: parse {parsed:?}, merge {:?}, append {:?}, arrow {:?}, crc {} bytes",
                merged - parsed,
                appended - merged,
                t0.elapsed() - appended,
                stats.crc_bytes
            );
        }
        Ok((stats, batches))
    }

    /// Parses segments on `threads` workers, each taking a contiguous run of them (balanced by
    /// bytes), so rows come out in file order. Workers in pairs share their scalar columns
    /// (see [`place`]); one pair's result per group, an unpaired worker's tables of its own.
    fn parse_groups(
        &self,
        work: &[Segment],
        bytes: &[u64],
        threads: usize,
        pool: Option<&rayon::ThreadPool>,
        known: &RunKnown,
        cancel: &AtomicBool,
    ) -> Vec<(Tables, Vec<FileChunk>)> {
        let opts = &self.opts.file;
        let total: u64 = bytes.iter().sum();
        let n = threads.clamp(1, work.len().max(1));
        let mut ranges = Vec::with_capacity(n);
        let (mut start, mut acc) = (0usize, 0u64);
        for (i, b) in bytes.iter().enumerate() {
            acc += b;
            if ranges.len() + 1 < n && acc * n as u64 >= total * (ranges.len() as u64 + 1) {
                ranges.push((start, i + 1, acc));
                start = i + 1;
                acc = 0;
            }
        }
        ranges.push((start, work.len(), acc));
        // One segment may hold several shares of the bytes: fewer groups than threads then.
        let n = ranges.len();
        let one = |&(a, b, group_bytes): &(usize, usize, u64)| {
            let mut tables = Tables::default();
            if opts.kinds.contains(Kind::Scalars) {
                // Room for the smallest possible scalar records: the columns never reallocate,
                // and capacity never touched costs address space, not memory. The first group
                // gets room for all, since the others are appended to it.
                let rows = ((if a == 0 { total } else { group_bytes }) / 40) as usize;
                tables.scalars.c.reserve_chunk(rows, opts.provenance);
                crate::mem::reserve(&mut tables.scalars.value, rows);
            }
            let chunks: Vec<FileChunk> = work[a..b]
                .iter()
                .map(|(run, path, cursor, end)| {
                    let chunk = read_file_into(
                        path,
                        *cursor,
                        *end,
                        opts,
                        known.of(run),
                        cancel,
                        &mut tables,
                    );
                    super::progress::read_one();
                    chunk
                })
                .collect();
            (tables, chunks)
        };
        // Workers in pairs share their scalar columns: the first of a pair fills them
        // downwards from a boundary (its segments last to first), the second upwards, so the
        // pair's rows end up contiguous without an appending copy, and no row's memory is
        // backed twice. Only where there is a pool (and a second worker).
        let pairs = if pool.is_some() && n >= 2 && opts.kinds.contains(Kind::Scalars) {
            (0..n / 2)
                .map(|p| {
                    // Rows are rarely under 40 bytes; a pair whose rows are smaller than that
                    // still reads right, through a copy (see `place`).
                    let below = (ranges[2 * p].2 / 40) as usize;
                    let above = (ranges[2 * p + 1].2 / 40) as usize;
                    PlacedScalars::with_capacity(below + above, opts.provenance)
                        .map(|cols| (cols, below))
                })
                .collect::<Option<Vec<_>>>()
        } else {
            None
        };
        let Some(mut pairs) = pairs else {
            return match pool {
                Some(p) => p.install(|| ranges.par_iter().map(one).collect()),
                None => ranges.iter().map(one).collect(),
            };
        };
        let dests: Vec<Dest> = pairs.iter_mut().map(|(c, s)| Dest::of(c, *s)).collect();
        let parse = |g: usize| -> Parsed {
            let (a, b, _) = ranges[g];
            match dests.get(g / 2) {
                Some(dest) => place(&work[a..b], g.is_multiple_of(2), dest, opts, known, cancel),
                None => {
                    let (t, cs) = one(&ranges[g]);
                    Parsed {
                        tables: t,
                        chunks: cs.into_iter().map(|c| (c, Piece::Own)).collect(),
                        cursor: 0,
                    }
                }
            }
        };
        let mut parsed: Vec<Parsed> = match pool {
            Some(p) => p.install(|| (0..n).into_par_iter().map(parse).collect()),
            None => (0..n).map(parse).collect(),
        };
        let mut out = Vec::with_capacity(n.div_ceil(2));
        let mut pairs = pairs.into_iter();
        let mut parsed_iter = parsed.drain(..);
        while let Some(first) = parsed_iter.next() {
            match pairs.next() {
                Some((cols, _)) => {
                    let second = parsed_iter.next().expect("workers come in pairs");
                    out.push(join_pair(first, second, cols, opts.provenance));
                }
                // The unpaired last worker of an odd count.
                None => out.push((
                    first.tables,
                    first.chunks.into_iter().map(|(c, _)| c).collect(),
                )),
            }
        }
        out
    }

    /// Splits files with much left to read into segments for parallel parsing; with each
    /// segment, the bytes it spans (files are stat'ed once, here, unless `sizes` gives each
    /// one's size, in order).
    fn split_large(
        &self,
        work: Vec<Segment>,
        sizes: Option<Vec<u64>>,
        threads: usize,
        pool: Option<&rayon::ThreadPool>,
    ) -> (Vec<Segment>, Vec<u64>) {
        // Files smaller than this are not worth a header scan; TBSCOPE_SPLIT_BYTES overrides it
        // (tests use it to split small files).
        let split_above: u64 = std::env::var("TBSCOPE_SPLIT_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64 << 20);
        let work: Vec<(Segment, Option<u64>)> = match sizes {
            Some(s) if s.len() == work.len() => {
                work.into_iter().zip(s.into_iter().map(Some)).collect()
            }
            _ => work.into_iter().map(|w| (w, None)).collect(),
        };
        let plan =
            |((run, path, cursor, until), size): (Segment, Option<u64>)| -> Vec<(Segment, u64)> {
                let size = size.unwrap_or_else(|| std::fs::metadata(&path).map_or(0, |m| m.len()));
                let end = match until {
                    Until::Upto(n) => n,
                    _ => u64::MAX,
                };
                let size = size.min(end);
                let left = size.saturating_sub(cursor.offset);
                if threads <= 1 || left <= split_above {
                    return vec![((run, path, cursor, until), left)];
                }
                let piece = (left / (threads as u64 * 4)).max(split_above / 4).max(1);
                let cuts =
                    split_points_within(&path, cursor.offset, piece, self.opts.file.max_len, end);
                let mut out = Vec::with_capacity(cuts.len() + 1);
                let mut start = cursor.offset;
                for c in cuts {
                    out.push((
                        (
                            run.clone(),
                            path.clone(),
                            Cursor { offset: start },
                            Until::Cut(c),
                        ),
                        c.saturating_sub(start),
                    ));
                    start = c;
                }
                out.push((
                    (run, path, Cursor { offset: start }, until),
                    size.saturating_sub(start),
                ));
                out
            };
        match pool {
            Some(p) => p.install(|| work.into_par_iter().flat_map_iter(plan).unzip()),
            None => work.into_iter().flat_map(plan).unzip(),
        }
    }

    /// Bookkeeping for what was read, in file order: offsets, report, kinds decided, tags
    /// renumbered. Returns each worker's tables, ready for Arrow.
    fn merge(
        &mut self,
        work: Vec<Segment>,
        groups: Vec<(Tables, Vec<FileChunk>)>,
    ) -> (LoadStats, Vec<(Tables, Vec<Finish>)>) {
        let mut stats = LoadStats {
            files_read: work.len(),
            ..Default::default()
        };
        let mut work = work.into_iter();
        let mut out = Vec::with_capacity(groups.len());
        // Tag names, file versions and writers repeat in every run: one copy each.
        let mut shared: std::collections::HashSet<Arc<str>> = std::collections::HashSet::new();
        let mut share = |s: &str| -> Arc<str> {
            if let Some(a) = shared.get(s) {
                return a.clone();
            }
            let a: Arc<str> = Arc::from(s);
            shared.insert(a.clone());
            a
        };
        for (tables, chunks) in groups {
            let mut jobs = Vec::with_capacity(chunks.len());
            for chunk in chunks {
                let (run, path, _, _) = work.next().expect("a segment per chunk");
                stats.bytes_read += chunk.bytes_read;
                stats.records += chunk.records;
                stats.crc_bytes += chunk.crc_bytes;
                // The run's state, looked up once per file (a logdir of many small runs has
                // as many files as runs); the fields below are borrowed beside it.
                let state = self.runs.get_mut(&run).unwrap();
                let f = state.files.get_mut(&path).unwrap();
                f.cursor = chunk.end;
                f.size = chunk.size;
                f.records += chunk.records;
                f.tail = chunk.tail;
                f.pending = chunk.tail_pending;
                f.failed = chunk.problems.iter().any(|p| p.severity == Severity::Error);
                if let Some(v) = &chunk.file_version {
                    f.file_version = Some(share(v));
                }
                if let Some(v) = &chunk.writer {
                    f.writer = Some(share(v));
                }
                let file_id = f.id;
                let rel = &self.file_names[f.id as usize];
                if let Some(w) = chunk.first_wall {
                    state.first_wall = Some(state.first_wall.map_or(w, |x| x.min(w)));
                }
                if let Some(w) = chunk.last_wall {
                    state.last_wall = Some(state.last_wall.map_or(w, |x| x.max(w)));
                }
                if let Some(s) = chunk.max_step {
                    state.max_step = Some(state.max_step.map_or(s, |x| x.max(s)));
                }
                state.sessions.extend(chunk.sessions.iter().cloned());
                state.corrupt += chunk
                    .problems
                    .iter()
                    .filter(|p| p.severity == Severity::Corrupt)
                    .count() as u64;
                // Stale notes about this file's end (a pending or stopped tail, an empty file)
                // are replaced by what this read found.
                self.report.retain(|e| {
                    !(e.file == *rel
                        && (matches!(e.severity, Severity::Truncated | Severity::Info)
                            || (e.severity == Severity::Warning
                                && e.reason.starts_with(STOPPED_TAIL))))
                });
                for p in &chunk.problems {
                    self.report.push(ReportEntry {
                        run: run.clone(),
                        file: rel.clone(),
                        severity: p.severity,
                        offset: p.offset,
                        length: p.length,
                        reason: p.reason.clone(),
                    });
                }
                // File-local tags to logdir-wide ids, deciding kinds in file order.
                let run_id = state.id;
                let mut tag_map = Vec::with_capacity(chunk.tags.len());
                for lt in &chunk.tags {
                    let gid = intern(&mut self.tag_names, &mut self.tag_index, &lt.name);
                    tag_map.push(gid);
                    if !lt.wanted {
                        continue;
                    }
                    if !state.tags.contains_key(lt.name.as_str()) {
                        state.tags.insert(
                            share(&lt.name),
                            TagState {
                                kind: None,
                                meta: None,
                                points: 0,
                                first_step: i64::MAX,
                                last_step: i64::MIN,
                            },
                        );
                    }
                    let ts = state.tags.get_mut(lt.name.as_str()).unwrap();
                    if ts.points == 0
                        && ts.kind.is_none()
                        && !state.tag_order.iter().any(|t| **t == *lt.name)
                    {
                        state.tag_order.push(share(&lt.name));
                    }
                    if ts.meta.is_none() {
                        ts.meta = lt.meta.clone().map(Arc::new);
                    }
                    match (ts.kind, lt.kind) {
                    (None, k) => ts.kind = k,
                    (Some(a), Some(b)) if a != b => self.report.push(ReportEntry {
                        run: run.clone(),
                        file: rel.clone(),
                        severity: Severity::Warning,
                        offset: 0,
                        length: 0,
                        reason: format!(
                            "tag {:?} is {} in this file but {} before it; its points here are in the {} table",
                            lt.name, b.name(), a.name(), b.name()
                        ),
                    }),
                    _ => {}
                }
                    ts.points += lt.points;
                    if lt.points > 0 {
                        ts.first_step = ts.first_step.min(lt.first_step);
                        ts.last_step = ts.last_step.max(lt.last_step);
                    }
                }
                jobs.push(Finish {
                    rows: chunk.rows,
                    tag_map,
                    run: run_id,
                    file: file_id,
                });
            }
            stats.rows += tables.rows().iter().sum::<usize>();
            out.push((tables, jobs));
        }
        (stats, out)
    }
}

/// What turns one file's rows into logdir rows once the merge has numbered its tags (see
/// [`Tables::finish_rows`]).
pub(crate) struct Finish {
    rows: [(usize, usize); 8],
    tag_map: Vec<i32>,
    run: i32,
    file: i32,
}

/// The bytes each segment spans, up to its cut or its file's end (stat'ed here).
fn segment_bytes(work: &[Segment]) -> Vec<u64> {
    work.iter()
        .map(|(_, path, cursor, end)| {
            match end {
                Until::Cut(c) => *c,
                Until::Upto(n) => std::fs::metadata(path).map_or(0, |m| m.len().min(*n)),
                Until::Live | Until::Final => std::fs::metadata(path).map_or(0, |m| m.len()),
            }
            .saturating_sub(cursor.offset)
        })
        .collect()
}
