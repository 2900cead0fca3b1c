//! Column builders for each kind: the tables the parser fills.
//!
//! A file is parsed into its own [`Tables`] (tags numbered per file, run and file implicit);
//! merging renumbers tags into the logdir's dictionary and fills in run and file ids. Their
//! conversion to Arrow record batches ([`to_batch`]) lives in the `arrow` submodule.

mod arrow;

use std::sync::Arc;

use arrow_buffer::ScalarBuffer;

use crate::mem::{both, populate, prefault, reserve};

pub use self::arrow::{binary_array, string_array, to_batch, Col, Dicts};

/// A growable list of variable-length values: `offsets[i]..offsets[i+1]` is row i.
#[derive(Debug, Clone)]
pub struct VarList<T> {
    pub offsets: Vec<i64>,
    pub values: Vec<T>,
}

impl<T> Default for VarList<T> {
    fn default() -> Self {
        VarList {
            offsets: vec![0],
            values: Vec::new(),
        }
    }
}

impl<T: Copy> VarList<T> {
    #[inline]
    pub fn push(&mut self, v: &[T]) {
        self.values.extend_from_slice(v);
        self.offsets.push(self.values.len() as i64);
    }
    #[inline]
    pub fn push_with(&mut self, f: impl FnOnce(&mut Vec<T>)) {
        f(&mut self.values);
        self.offsets.push(self.values.len() as i64);
    }
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn get(&self, i: usize) -> &[T] {
        &self.values[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
    pub fn extend(&mut self, other: &VarList<T>) {
        let base = self.values.len() as i64;
        self.values.extend_from_slice(&other.values);
        self.offsets
            .extend(other.offsets[1..].iter().map(|o| o + base));
    }
    pub fn reserve(&mut self, rows: usize, values: usize) {
        self.offsets.reserve(rows);
        self.values.reserve(values);
    }
}

/// Columns every table has. In a per-file chunk `run` and `file` are empty (implicit).
#[derive(Debug, Default, Clone)]
pub struct Common {
    pub run: Vec<i32>,
    pub tag: Vec<i32>,
    pub step: Vec<i64>,
    /// Seconds; NaN where the file held a non-finite wall time (null in Arrow).
    pub wall: Vec<f64>,
    pub file: Vec<i32>,
    /// Record offsets, kept only when provenance is asked for.
    pub offset: Vec<i64>,
}

impl Common {
    #[inline(always)]
    pub fn push(&mut self, tag: i32, step: i64, wall: f64, offset: Option<i64>) {
        self.tag.push(tag);
        self.step.push(step);
        self.wall.push(wall);
        if let Some(o) = offset {
            self.offset.push(o);
        }
    }
    pub fn len(&self) -> usize {
        self.tag.len()
    }
    pub fn is_empty(&self) -> bool {
        self.tag.is_empty()
    }
    /// Reserves a per-file chunk's columns (no run or file columns there).
    pub fn reserve_chunk(&mut self, n: usize, provenance: bool) {
        reserve(&mut self.tag, n);
        reserve(&mut self.step, n);
        reserve(&mut self.wall, n);
        if provenance {
            reserve(&mut self.offset, n);
        }
    }
}

#[derive(Debug, Default)]
pub struct Scalars {
    pub c: Common,
    pub value: Vec<f64>,
    /// Rows whose memory is already backed (see [`Scalars::prefault_rows`]), and the
    /// allocation that holds for (a reallocated column starts over).
    pub populated: usize,
    pub populated_base: usize,
    /// When set, every row lives here instead (the columns above are empty).
    pub placed: Option<Box<PlacedScalars>>,
}

impl Scalars {
    /// Backs rows up to `upto` (within the reserved capacity) with memory, from where the
    /// last call stopped.
    pub fn prefault_rows(&mut self, upto: usize) {
        let base = self.c.tag.as_ptr() as usize;
        if base != self.populated_base {
            (self.populated, self.populated_base) = (0, base);
        }
        let from = self.populated.max(self.c.len());
        if upto > from {
            fn range<T>(v: &Vec<T>, from: usize, upto: usize) {
                let size = std::mem::size_of::<T>();
                let upto = upto.min(v.capacity());
                if upto > from {
                    populate(v.as_ptr() as usize + from * size, (upto - from) * size);
                }
            }
            range(&self.c.tag, from, upto);
            range(&self.c.step, from, upto);
            range(&self.c.wall, from, upto);
            range(&self.value, from, upto);
            if self.c.offset.capacity() > 0 {
                range(&self.c.offset, from, upto);
            }
        }
        self.populated = self.populated.max(upto);
    }

    /// Empties the columns but keeps their (backed) memory, for the next segment.
    pub fn clear(&mut self) {
        self.c.tag.clear();
        self.c.step.clear();
        self.c.wall.clear();
        self.c.offset.clear();
        self.value.clear();
    }

    /// Rows, wherever they live.
    pub fn len(&self) -> usize {
        match &self.placed {
            Some(p) => p.len(),
            None => self.c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves placed rows into ordinary columns (a copy), so they can be appended to.
    fn materialize(&mut self) {
        if let Some(p) = self.placed.take() {
            let p = *p;
            self.c.tag = p.tag.as_slice().to_vec();
            self.c.step = p.step.as_slice().to_vec();
            self.c.wall = p.wall.as_slice().to_vec();
            self.value = p.value.as_slice().to_vec();
            self.c.offset = p.offset.as_slice().to_vec();
            self.c.run = p.run;
            self.c.file = p.file;
        }
    }
}

/// Rows `lo..hi` of a column allocation that two workers filled from a shared boundary
/// outwards, one downwards and one upwards (see `load::parse_groups`). The rows cannot start
/// at the allocation's start, so they become Arrow buffers that keep the allocation alive,
/// not vectors.
#[derive(Debug, Default)]
pub struct Placed<T> {
    /// Owns the memory; its length stays 0, rows are written through raw pointers.
    alloc: Vec<T>,
    lo: usize,
    hi: usize,
}

impl<T: arrow_buffer::ArrowNativeType + std::panic::RefUnwindSafe> Placed<T> {
    /// Address space for `cap` rows; `None` when the system will not give that much.
    pub fn with_capacity(cap: usize) -> Option<Self> {
        let mut alloc = Vec::new();
        alloc.try_reserve_exact(cap).ok()?;
        Some(Placed {
            alloc,
            lo: 0,
            hi: 0,
        })
    }

    pub fn capacity(&self) -> usize {
        self.alloc.capacity()
    }

    /// A raw pointer writers share; each writes only the rows it owns.
    pub fn base(&mut self) -> *mut T {
        self.alloc.as_mut_ptr()
    }

    /// Declares rows `lo..hi` written.
    ///
    /// # Safety
    /// Every row in `lo..hi` was written, and `hi` is within the capacity.
    pub unsafe fn set_rows(&mut self, lo: usize, hi: usize) {
        debug_assert!(lo <= hi && hi <= self.alloc.capacity());
        (self.lo, self.hi) = (lo, hi);
    }

    pub fn len(&self) -> usize {
        self.hi - self.lo
    }

    /// Rows `a..b`, whatever rows are declared.
    ///
    /// # Safety
    /// Every row in `a..b` was written, and `b` is within the capacity.
    pub unsafe fn written(&self, a: usize, b: usize) -> &[T] {
        std::slice::from_raw_parts(self.alloc.as_ptr().add(a), b - a)
    }

    pub fn is_empty(&self) -> bool {
        self.hi == self.lo
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: rows lo..hi were written (set_rows' contract) and lie in the allocation.
        unsafe { std::slice::from_raw_parts(self.alloc.as_ptr().add(self.lo), self.len()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in as_slice; &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.alloc.as_mut_ptr().add(self.lo), self.len()) }
    }

    /// The rows as an Arrow buffer, without copying; the buffer owns the allocation.
    pub fn into_buffer(self) -> ScalarBuffer<T> {
        let len = self.len();
        let bytes = len * std::mem::size_of::<T>();
        if len == 0 {
            return ScalarBuffer::from(Vec::new());
        }
        let ptr = self.alloc.as_ptr();
        // SAFETY: ptr.add(lo) is non-null and aligned for T (inside a Vec<T> allocation);
        // `bytes` bytes from it were written (set_rows); the allocation lives as long as the
        // buffer, which owns the vector (length 0, so dropping it drops no elements).
        let buf = unsafe {
            arrow_buffer::Buffer::from_custom_allocation(
                std::ptr::NonNull::new_unchecked(ptr.add(self.lo) as *mut u8),
                bytes,
                Arc::new(self.alloc),
            )
        };
        ScalarBuffer::new(buf, 0, len)
    }
}

/// Scalar columns filled in place by a pair of workers; run and file are filled at finish.
#[derive(Debug, Default)]
pub struct PlacedScalars {
    pub tag: Placed<i32>,
    pub step: Placed<i64>,
    pub wall: Placed<f64>,
    pub value: Placed<f64>,
    /// Record offsets; capacity 0 without provenance.
    pub offset: Placed<i64>,
    pub run: Vec<i32>,
    pub file: Vec<i32>,
}

impl PlacedScalars {
    /// Address space for `cap` rows in each column; `None` when the system refuses.
    pub fn with_capacity(cap: usize, provenance: bool) -> Option<Self> {
        Some(PlacedScalars {
            tag: Placed::with_capacity(cap)?,
            step: Placed::with_capacity(cap)?,
            wall: Placed::with_capacity(cap)?,
            value: Placed::with_capacity(cap)?,
            offset: Placed::with_capacity(if provenance { cap } else { 0 })?,
            run: Vec::new(),
            file: Vec::new(),
        })
    }

    pub fn len(&self) -> usize {
        self.tag.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tag.is_empty()
    }

    /// Declares rows `lo..hi` of every column written.
    ///
    /// # Safety
    /// As [`Placed::set_rows`], for every column (the offset column only with provenance).
    pub unsafe fn set_rows(&mut self, lo: usize, hi: usize, provenance: bool) {
        self.tag.set_rows(lo, hi);
        self.step.set_rows(lo, hi);
        self.wall.set_rows(lo, hi);
        self.value.set_rows(lo, hi);
        if provenance {
            self.offset.set_rows(lo, hi);
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Tensors {
    pub c: Common,
    pub dtype: Vec<i32>,
    pub shape: VarList<i64>,
    /// Element bytes; `content_valid[i]` is false for string tensors.
    pub content: VarList<u8>,
    pub content_valid: Vec<bool>,
    /// Per row, a range of `string_items`; empty range and invalid for numeric tensors.
    pub strings: VarList<u8>,
    pub string_rows: Vec<i64>,
    pub strings_valid: Vec<bool>,
}

impl Tensors {
    pub fn new() -> Self {
        Tensors {
            string_rows: vec![0],
            ..Default::default()
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Histograms {
    pub c: Common,
    pub buckets: VarList<f64>,
    pub right: Vec<f64>,
    pub count: Vec<f64>,
    /// min, max, num, sum, sum_squares of legacy histograms; NaN and invalid for tensor form.
    pub stats: [Vec<f64>; 5],
    pub legacy: Vec<bool>,
}

#[derive(Debug, Default, Clone)]
pub struct Blobs {
    pub c: Common,
    pub index: Vec<i32>,
    /// File id of the blob; empty in a per-file chunk.
    pub blob_file: Vec<i32>,
    pub blob_offset: Vec<i64>,
    pub blob_length: Vec<i64>,
}

impl Blobs {
    #[inline]
    pub fn push_blob(&mut self, index: i32, offset: i64, len: usize) {
        self.index.push(index);
        self.blob_offset.push(offset);
        self.blob_length.push(len as i64);
    }
}

#[derive(Debug, Default, Clone)]
pub struct Images {
    pub b: Blobs,
    pub width: Vec<i32>,
    pub height: Vec<i32>,
    /// 0 where unknown (tensor-form images carry no colorspace).
    pub colorspace: Vec<i32>,
    pub content_type: Vec<u8>,
}

#[derive(Debug, Default, Clone)]
pub struct Audio {
    pub b: Blobs,
    pub sample_rate: Vec<f64>,
    pub num_channels: Vec<i64>,
    pub length_frames: Vec<i64>,
    pub content_type: VarList<u8>,
    pub label: VarList<u8>,
}

#[derive(Debug, Default, Clone)]
pub struct Text {
    pub c: Common,
    pub index: Vec<i32>,
    pub text: VarList<u8>,
    /// The shape of the tensor each element came from (`[]` for a rank-0 text), so a 2×2
    /// table and four lines of one text are told apart.
    pub shape: VarList<i64>,
}

/// Hparams records keep their plugin content (the data lives in metadata, not in the tensor).
#[derive(Debug, Default, Clone)]
pub struct Hparams {
    pub c: Common,
    pub content: VarList<u8>,
}

/// Graph blobs and other blob sequences.
#[derive(Debug, Default, Clone)]
pub struct BlobSeq {
    pub b: Blobs,
}

/// One table per kind.
#[derive(Debug)]
pub struct Tables {
    pub scalars: Scalars,
    pub tensors: Tensors,
    pub histograms: Histograms,
    pub images: Images,
    pub audio: Audio,
    pub text: Text,
    pub hparams: Hparams,
    pub blobs: BlobSeq,
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            scalars: Scalars::default(),
            tensors: Tensors::new(),
            histograms: Histograms::default(),
            images: Images::default(),
            audio: Audio::default(),
            text: Text::default(),
            hparams: Hparams::default(),
            blobs: BlobSeq::default(),
        }
    }
}

impl Tables {
    pub fn rows(&self) -> [usize; 8] {
        [
            self.scalars.len(),
            self.histograms.c.len(),
            self.images.b.c.len(),
            self.audio.b.c.len(),
            self.text.c.len(),
            self.hparams.c.len(),
            self.blobs.b.c.len(),
            self.tensors.c.len(),
        ]
    }

    /// Appends another worker's finished rows, consuming them column by column so that at
    /// most one column exists twice at any moment.
    pub fn append(&mut self, mut o: Tables) {
        fn cat<T: Copy>(a: &mut Vec<T>, b: &mut Vec<T>) {
            // The destination's capacity was reserved but never touched: map it in bulk
            // rather than a page fault per 4 KiB in the copy.
            prefault(a, b.len());
            a.extend_from_slice(b);
            *b = Vec::new();
        }
        fn common(a: &mut Common, b: &mut Common) {
            cat(&mut a.run, &mut b.run);
            cat(&mut a.tag, &mut b.tag);
            cat(&mut a.step, &mut b.step);
            cat(&mut a.wall, &mut b.wall);
            cat(&mut a.file, &mut b.file);
            cat(&mut a.offset, &mut b.offset);
        }
        // Scalars are most of the bytes: two halves of their columns copy side by side.
        if !o.scalars.is_empty() {
            // Placed rows cannot grow: both sides become ordinary columns (a copy, rarely:
            // a load places each pair of workers' rows, and pairs are appended only on
            // machines with more than two threads).
            self.scalars.materialize();
            o.scalars.materialize();
            let (a, b) = (&mut self.scalars, &mut o.scalars);
            let (ac, bc) = (&mut a.c, &mut b.c);
            both(
                || {
                    cat(&mut ac.run, &mut bc.run);
                    cat(&mut ac.tag, &mut bc.tag);
                    cat(&mut ac.step, &mut bc.step);
                },
                || {
                    cat(&mut ac.wall, &mut bc.wall);
                    cat(&mut a.value, &mut b.value);
                    cat(&mut ac.file, &mut bc.file);
                    cat(&mut ac.offset, &mut bc.offset);
                },
            );
        }
        fn blobs(a: &mut Blobs, b: &mut Blobs) {
            common(&mut a.c, &mut b.c);
            cat(&mut a.index, &mut b.index);
            cat(&mut a.blob_file, &mut b.blob_file);
            cat(&mut a.blob_offset, &mut b.blob_offset);
            cat(&mut a.blob_length, &mut b.blob_length);
        }

        let (t, ot) = (&mut self.tensors, &mut o.tensors);
        common(&mut t.c, &mut ot.c);
        cat(&mut t.dtype, &mut ot.dtype);
        t.shape.extend(&ot.shape);
        t.content.extend(&ot.content);
        cat(&mut t.content_valid, &mut ot.content_valid);
        let base = t.strings.len() as i64;
        t.strings.extend(&ot.strings);
        t.string_rows
            .extend(ot.string_rows[1..].iter().map(|r| r + base));
        cat(&mut t.strings_valid, &mut ot.strings_valid);

        let (h, oh) = (&mut self.histograms, &mut o.histograms);
        common(&mut h.c, &mut oh.c);
        h.buckets.extend(&oh.buckets);
        cat(&mut h.right, &mut oh.right);
        cat(&mut h.count, &mut oh.count);
        for (a, b) in h.stats.iter_mut().zip(oh.stats.iter_mut()) {
            cat(a, b);
        }
        cat(&mut h.legacy, &mut oh.legacy);

        let (im, oi) = (&mut self.images, &mut o.images);
        blobs(&mut im.b, &mut oi.b);
        cat(&mut im.width, &mut oi.width);
        cat(&mut im.height, &mut oi.height);
        cat(&mut im.colorspace, &mut oi.colorspace);
        cat(&mut im.content_type, &mut oi.content_type);

        let (a, oa) = (&mut self.audio, &mut o.audio);
        blobs(&mut a.b, &mut oa.b);
        cat(&mut a.sample_rate, &mut oa.sample_rate);
        cat(&mut a.num_channels, &mut oa.num_channels);
        cat(&mut a.length_frames, &mut oa.length_frames);
        a.content_type.extend(&oa.content_type);
        a.label.extend(&oa.label);

        common(&mut self.text.c, &mut o.text.c);
        cat(&mut self.text.index, &mut o.text.index);
        self.text.text.extend(&o.text.text);
        self.text.shape.extend(&o.text.shape);

        common(&mut self.hparams.c, &mut o.hparams.c);
        self.hparams.content.extend(&o.hparams.content);

        blobs(&mut self.blobs.b, &mut o.blobs.b);
    }

    /// Turns one file's rows (per kind, the range it added), read with file-local tag ids,
    /// into logdir rows: tags renumbered in place, run and file columns filled in. Files must
    /// be finished in the order they were read, so these columns line up with the rows.
    pub fn finish_rows(
        &mut self,
        rows: &[(usize, usize); 8],
        tag_map: &[i32],
        run: i32,
        file: i32,
        provenance: bool,
    ) {
        fn fix(
            c: &mut Common,
            (a, b): (usize, usize),
            tag_map: &[i32],
            run: i32,
            file: i32,
            provenance: bool,
        ) {
            renumber(&mut c.tag[a..b], tag_map);
            if c.run.capacity() - c.run.len() < b - a {
                c.run
                    .reserve(c.tag.capacity().max(c.run.len() + b - a) - c.run.len());
            }
            prefault(&c.run, b - a);
            debug_assert_eq!(c.run.len(), a, "files finished out of order");
            c.run.extend(std::iter::repeat_n(run, b - a));
            if provenance {
                c.file.extend(std::iter::repeat_n(file, b - a));
            }
        }
        let blob_files = |b: &mut Blobs, (a, e): (usize, usize)| {
            b.blob_file.extend(std::iter::repeat_n(file, e - a))
        };
        if self.scalars.placed.is_none() {
            fix(&mut self.scalars.c, rows[0], tag_map, run, file, provenance);
        }
        fix(
            &mut self.histograms.c,
            rows[1],
            tag_map,
            run,
            file,
            provenance,
        );
        fix(
            &mut self.images.b.c,
            rows[2],
            tag_map,
            run,
            file,
            provenance,
        );
        blob_files(&mut self.images.b, rows[2]);
        fix(&mut self.audio.b.c, rows[3], tag_map, run, file, provenance);
        blob_files(&mut self.audio.b, rows[3]);
        fix(&mut self.text.c, rows[4], tag_map, run, file, provenance);
        fix(&mut self.hparams.c, rows[5], tag_map, run, file, provenance);
        fix(&mut self.blobs.b.c, rows[6], tag_map, run, file, provenance);
        blob_files(&mut self.blobs.b, rows[6]);
        fix(&mut self.tensors.c, rows[7], tag_map, run, file, provenance);
    }
}

/// Renumbers one file's tag ids (file-local) into the logdir's, in place.
fn renumber(tags: &mut [i32], tag_map: &[i32]) {
    // A file whose tags were first seen in this order (every file but the first of a sweep of
    // identical runs) maps them to themselves: no pass over its rows needed.
    if tag_map.iter().enumerate().all(|(i, &t)| t == i as i32) {
        return;
    }
    for t in tags {
        *t = tag_map[*t as usize];
    }
}

/// One file's placed scalar rows and what finishing them needs.
pub struct FileRows<'a> {
    pub rows: (usize, usize),
    pub tag_map: &'a [i32],
    pub run: i32,
    pub file: i32,
}

/// [`Tables::finish_rows`] for placed scalars, every file at once: `jobs` are each file's
/// row range (in order, covering all rows), tag map, run and file id. Files are finished side
/// by side when called on a worker pool.
pub fn finish_placed(p: &mut PlacedScalars, jobs: &[FileRows<'_>], provenance: bool) {
    /// A file's slices of the tag, run and file columns, with its job.
    struct Piece<'c, 'j> {
        tag: &'c mut [i32],
        run: &'c mut [i32],
        file: &'c mut [i32],
        job: &'j FileRows<'j>,
    }
    let n = p.len();
    // Zeroed allocations come straight from the kernel, untouched: each piece below backs
    // its own pages.
    p.run = vec![0; n];
    p.file = if provenance { vec![0; n] } else { Vec::new() };
    let mut tag = p.tag.as_mut_slice();
    let mut run = p.run.as_mut_slice();
    let mut file = p.file.as_mut_slice();
    let mut pieces = Vec::with_capacity(jobs.len());
    let mut at = 0;
    for job in jobs {
        let (a, b) = job.rows;
        debug_assert_eq!(a, at, "placed files finished out of order");
        let len = b - a;
        let (t, tr) = std::mem::take(&mut tag).split_at_mut(len);
        let (u, ur) = std::mem::take(&mut run).split_at_mut(len);
        let (v, vr) = if provenance {
            std::mem::take(&mut file).split_at_mut(len)
        } else {
            (&mut [][..], &mut [][..])
        };
        (tag, run, file) = (tr, ur, vr);
        pieces.push(Piece {
            tag: t,
            run: u,
            file: v,
            job,
        });
        at = b;
    }
    debug_assert_eq!(at, n, "placed rows not all finished");
    let fill = |p: Piece<'_, '_>| {
        renumber(p.tag, p.job.tag_map);
        populate(p.run.as_ptr() as usize, std::mem::size_of_val(p.run));
        p.run.fill(p.job.run);
        if provenance {
            populate(p.file.as_ptr() as usize, std::mem::size_of_val(p.file));
            p.file.fill(p.job.file);
        }
    };
    if rayon::current_thread_index().is_some() {
        use rayon::prelude::*;
        pieces.into_par_iter().for_each(fill);
    } else {
        pieces.into_iter().for_each(fill);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reservation the system cannot give (here: more than the address space) is skipped,
    /// not a panic or an abort; the columns still take rows.
    #[test]
    fn impossible_reservations_are_skipped() {
        let mut s = Scalars::default();
        s.c.reserve_chunk(usize::MAX / 4, true);
        reserve(&mut s.value, usize::MAX / 4);
        s.c.push(0, 1, 2.0, Some(3));
        s.value.push(4.0);
        assert_eq!((s.c.len(), s.value.len()), (1, 1));
    }
}
