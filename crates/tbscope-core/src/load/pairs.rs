//! Workers in pairs sharing their scalar columns: the first of a pair fills them downwards from
//! a boundary, the second upwards, so the pair's rows end up contiguous without an appending
//! copy and no row's memory is backed twice.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use crate::columns::{PlacedScalars, Scalars, Tables};
use crate::event_file::{read_file_into, FileChunk, Known, Options};
use crate::mem::populate;

use super::Segment;

/// Where a segment's scalar rows went in a pair's shared columns.
pub(super) enum Piece {
    /// Rows `lo..hi` of the shared allocation.
    At(usize, usize),
    /// Left in the segment's own tables: they did not fit (or the worker is unpaired).
    Kept(Scalars),
    /// The worker is not paired; rows are in its own tables as before.
    Own,
}

/// One worker's result: its non-scalar tables (rows in file order), each segment's chunk
/// and where its scalar rows are, and where its cursor in the shared columns stopped.
pub(super) struct Parsed {
    pub(super) tables: Tables,
    pub(super) chunks: Vec<(FileChunk, Piece)>,
    pub(super) cursor: usize,
}

/// The shared columns of a pair, as raw pointers: the two workers write disjoint rows.
pub(super) struct Dest {
    tag: *mut i32,
    step: *mut i64,
    wall: *mut f64,
    value: *mut f64,
    /// Null without provenance.
    offset: *mut i64,
    cap: usize,
    /// The boundary both workers start from.
    start: usize,
}

// SAFETY: the pointers are only written through by `place`, where the downward worker writes
// rows below `start` and the upward one rows at or above it; the allocation outlives both.
unsafe impl Send for Dest {}
unsafe impl Sync for Dest {}

impl Dest {
    pub(super) fn of(c: &mut PlacedScalars, start: usize) -> Dest {
        Dest {
            tag: c.tag.base(),
            step: c.step.base(),
            wall: c.wall.base(),
            value: c.value.base(),
            offset: if c.offset.capacity() > 0 {
                c.offset.base()
            } else {
                std::ptr::null_mut()
            },
            cap: c.tag.capacity(),
            start,
        }
    }

    /// Copies `s`'s rows to rows `at..at + s.len()`, backing that memory first.
    ///
    /// # Safety
    /// `at + s.len() <= cap`, and no other thread touches those rows.
    unsafe fn copy(&self, s: &Scalars, at: usize) {
        unsafe fn one<T: Copy>(src: &[T], dst: *mut T, at: usize) {
            let d = dst.add(at);
            populate(d as usize, std::mem::size_of_val(src));
            std::ptr::copy_nonoverlapping(src.as_ptr(), d, src.len());
        }
        one(&s.c.tag, self.tag, at);
        one(&s.c.step, self.step, at);
        one(&s.c.wall, self.wall, at);
        one(&s.value, self.value, at);
        if !self.offset.is_null() {
            one(&s.c.offset, self.offset, at);
        }
    }
}

/// Parses `work` as one worker of a pair: each segment into a reused scratch table, whose
/// scalar rows are then copied into the shared columns, below the boundary when `down` (the
/// segments taken last to first) and from it upwards otherwise. The scratch stays in cache and
/// its memory is backed once; the copy is what the appending of a second worker's rows used
/// to cost, without backing those rows twice.
pub(super) fn place(
    work: &[Segment],
    down: bool,
    dest: &Dest,
    opts: &Options,
    known: &RunKnown,
    cancel: &AtomicBool,
) -> Parsed {
    let mut scratch = Scalars::default();
    let mut cursor = dest.start;
    // Upwards, non-scalar rows go straight into the worker's tables in file order;
    // downwards, each segment gets tables of its own, put in order at the end.
    let mut tables = Tables::default();
    let mut segs: Vec<(Tables, FileChunk, Piece)> = Vec::with_capacity(work.len());
    let mut put = |t: &mut Tables, scratch: &mut Scalars, chunk: &mut FileChunk| -> Piece {
        std::mem::swap(&mut t.scalars, scratch);
        let n = scratch.c.len();
        let fits = if down {
            n <= cursor
        } else {
            n <= dest.cap - cursor
        };
        if !fits {
            // Rows too small for the estimate: keep them, and let the pair copy them in.
            return Piece::Kept(std::mem::take(scratch));
        }
        let at = if down { cursor - n } else { cursor };
        // SAFETY: at..at + n is within the capacity (checked above) and on this worker's
        // side of the boundary, which the cursor only moves away from.
        unsafe { dest.copy(scratch, at) };
        scratch.clear();
        cursor = if down { at } else { at + n };
        chunk.rows[0] = (at, at + n);
        Piece::At(at, at + n)
    };
    if down {
        for (run, path, cur, end) in work.iter().rev() {
            let mut t = Tables::default();
            std::mem::swap(&mut t.scalars, &mut scratch);
            let mut chunk = read_file_into(path, *cur, *end, opts, known.of(run), cancel, &mut t);
            super::progress::read_one();
            let piece = put(&mut t, &mut scratch, &mut chunk);
            segs.push((t, chunk, piece));
        }
        segs.reverse();
        let mut chunks = Vec::with_capacity(segs.len());
        for (t, mut chunk, piece) in segs {
            let rows = t.rows();
            if rows[1..].iter().any(|&r| r > 0) {
                let base = tables.rows();
                rebase(&mut chunk.rows, &base);
                if base.iter().all(|&r| r == 0) {
                    tables = t;
                } else {
                    tables.append(t);
                }
            } else {
                let base = tables.rows();
                for (r, &b) in chunk.rows.iter_mut().zip(&base).skip(1) {
                    *r = (b, b);
                }
            }
            chunks.push((chunk, piece));
        }
        Parsed {
            tables,
            chunks,
            cursor,
        }
    } else {
        let mut chunks = Vec::with_capacity(work.len());
        for (run, path, cur, end) in work {
            std::mem::swap(&mut tables.scalars, &mut scratch);
            let mut chunk =
                read_file_into(path, *cur, *end, opts, known.of(run), cancel, &mut tables);
            super::progress::read_one();
            let piece = put(&mut tables, &mut scratch, &mut chunk);
            chunks.push((chunk, piece));
        }
        Parsed {
            tables,
            chunks,
            cursor,
        }
    }
}

/// Moves a chunk's row ranges of every kind but scalars (whose rows are placed) up by `base`,
/// the rows of those kinds before its tables.
fn rebase(rows: &mut [(usize, usize); 8], base: &[usize; 8]) {
    for (r, &b) in rows.iter_mut().zip(base).skip(1) {
        *r = (r.0 + b, r.1 + b);
    }
}

/// A pair's results as one group: the shared scalar columns (or, when some rows did not fit,
/// ordinary columns holding every row in order), the non-scalar tables of both, and the
/// chunks with row ranges into them.
pub(super) fn join_pair(
    first: Parsed,
    second: Parsed,
    mut cols: PlacedScalars,
    provenance: bool,
) -> (Tables, Vec<FileChunk>) {
    let (lo, hi) = (first.cursor, second.cursor);
    let mut tables = first.tables;
    let mut chunks: Vec<FileChunk> = Vec::with_capacity(first.chunks.len() + second.chunks.len());
    let base = tables.rows();
    let pieces: Vec<(FileChunk, Piece)> = first
        .chunks
        .into_iter()
        .chain(second.chunks.into_iter().map(|(mut c, p)| {
            rebase(&mut c.rows, &base);
            (c, p)
        }))
        .collect();
    tables.append(second.tables);
    if pieces.iter().all(|(_, p)| matches!(p, Piece::At(..))) {
        // SAFETY: the downward worker wrote every row from its final cursor up to the
        // boundary, and the upward one every row from the boundary to its cursor.
        unsafe { cols.set_rows(lo, hi, provenance) };
        for (mut c, p) in pieces {
            if let Piece::At(a, b) = p {
                c.rows[0] = (a - lo, b - lo);
            }
            chunks.push(c);
        }
        tables.scalars = Scalars {
            placed: Some(Box::new(cols)),
            ..Default::default()
        };
    } else {
        // Some rows did not fit: gather all of them, in order, into ordinary columns.
        let mut s = Scalars::default();
        for (mut c, p) in pieces {
            let start = s.c.len();
            match p {
                // SAFETY: a placed piece's rows were all written (`place`).
                Piece::At(a, b) => unsafe {
                    s.c.tag.extend_from_slice(cols.tag.written(a, b));
                    s.c.step.extend_from_slice(cols.step.written(a, b));
                    s.c.wall.extend_from_slice(cols.wall.written(a, b));
                    s.value.extend_from_slice(cols.value.written(a, b));
                    if provenance {
                        s.c.offset.extend_from_slice(cols.offset.written(a, b));
                    }
                },
                Piece::Kept(k) => {
                    s.c.tag.extend_from_slice(&k.c.tag);
                    s.c.step.extend_from_slice(&k.c.step);
                    s.c.wall.extend_from_slice(&k.c.wall);
                    s.value.extend_from_slice(&k.value);
                    s.c.offset.extend_from_slice(&k.c.offset);
                }
                Piece::Own => unreachable!("paired workers place every piece"),
            }
            c.rows[0] = (start, s.c.len());
            chunks.push(c);
        }
        tables.scalars = s;
    }
    (tables, chunks)
}

/// What each run of a read already knows about its tags (see `read_file_into`); runs that
/// know nothing, all of them on a first read, share one empty map.
#[derive(Default, Clone)]
pub(super) struct RunKnown {
    pub(super) by_run: HashMap<String, HashMap<String, Known>>,
    empty: HashMap<String, Known>,
}

impl RunKnown {
    pub(super) fn of(&self, run: &str) -> &HashMap<String, Known> {
        self.by_run.get(run).unwrap_or(&self.empty)
    }
}
