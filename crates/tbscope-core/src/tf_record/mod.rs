//! TFRecord framing: `u64 length | u32 masked_crc(length) | data | u32 masked_crc(data)`.
//!
//! All integers are little-endian; there is no file header, footer or index. [`parse_frame`]
//! classifies what starts at a position of a byte window; [`Walker`] walks a file's records
//! with the one set of rules every reader here uses: whole records, damage skipped up to the
//! next whole record (resynchronisation, at CRC cost linear in the bytes skipped), and what a
//! record running past the end of the bytes means ([`End`]: a pending tail, a torn record or
//! a stopped tail, damage before a segment cut). Which [`End`] applies to a file is the
//! loader's decision (`load`), not the walker's.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::masked_crc::{apply_shift, crc32c_append, mask, masked_crc32c, shift_operator};

/// Bytes before the payload: the length and its CRC.
pub const HEADER_LEN: usize = 12;
/// Bytes after the payload: the data CRC.
pub const FOOTER_LEN: usize = 4;
/// Framing overhead of one record.
pub const OVERHEAD: usize = HEADER_LEN + FOOTER_LEN;

/// Why the bytes at a position are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corruption {
    /// The 4 bytes after the length do not match its masked CRC.
    BadLengthCrc,
    /// The length CRC holds but the length is above the configured cap.
    TooLong(u64),
    /// The payload does not match its masked CRC.
    BadDataCrc,
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Corruption::BadLengthCrc => write!(f, "bad length crc"),
            Corruption::TooLong(n) => write!(f, "record length {n} is above the cap"),
            Corruption::BadDataCrc => write!(f, "bad data crc"),
        }
    }
}

/// What starts at the beginning of a byte window.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A whole record: its payload, and how many bytes it spans including framing.
    Record {
        data: &'a [u8],
        span: usize,
    },
    /// The window ends before the record does: `need` bytes from the start would decide it.
    /// At the end of a file this is a truncated tail (a writer still writing), not corruption.
    NeedMore {
        need: usize,
    },
    Corrupt(Corruption),
}

#[inline]
fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[inline]
fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Classifies the bytes at the start of `buf`.
///
/// The length CRC is always checked: without it a corrupt length could make the reader skip or
/// wait for gigabytes. The data CRC is checked only when `verify` is set (callers that skip it
/// re-check when a payload fails to decode).
#[inline(always)]
pub fn parse_frame(buf: &[u8], max_len: u64, verify: bool) -> Frame<'_> {
    if buf.len() < HEADER_LEN {
        return Frame::NeedMore { need: HEADER_LEN };
    }
    let len = le_u64(buf);
    if masked_crc32c(&buf[..8]) != le_u32(&buf[8..12]) {
        return Frame::Corrupt(Corruption::BadLengthCrc);
    }
    if len > max_len {
        return Frame::Corrupt(Corruption::TooLong(len));
    }
    // A cap near u64::MAX must not make the span overflow.
    let Some(span) = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(OVERHEAD))
    else {
        return Frame::Corrupt(Corruption::TooLong(len));
    };
    if buf.len() < span {
        return Frame::NeedMore { need: span };
    }
    let data = &buf[HEADER_LEN..HEADER_LEN + len as usize];
    if verify && masked_crc32c(data) != le_u32(&buf[HEADER_LEN + len as usize..span]) {
        return Frame::Corrupt(Corruption::BadDataCrc);
    }
    Frame::Record { data, span }
}

/// Checks the data CRC of a record that [`parse_frame`] returned unverified.
pub fn data_crc_ok(buf: &[u8], span: usize) -> bool {
    let data = &buf[HEADER_LEN..span - FOOTER_LEN];
    masked_crc32c(data) == le_u32(&buf[span - FOOTER_LEN..span])
}

/// Where a walk's bytes come from: a file, read with `pread` (never mapped: a file truncated
/// under a mapping kills the process with SIGBUS), or memory (tests, fuzzing).
pub trait Source {
    /// Reads bytes at `offset` into `buf`; fewer (or 0) at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl Source for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
}

impl Source for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let from = offset.min(self.len() as u64) as usize;
        let n = buf.len().min(self.len() - from);
        buf[..n].copy_from_slice(&self[from..from + n]);
        Ok(n)
    }
}

/// What the end of a walk's bytes means for a record that runs past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The end of a file that may still be written: a record running past it is a pending
    /// tail, left for a later walk, and nothing inside it is looked at.
    Live,
    /// The end of a file nothing more will be written to (writers start a new file after a
    /// restart): a record running past it is torn. With a whole record somewhere after its
    /// first byte, its bytes up to that record are damage; with none, it is a stopped tail.
    Final,
    /// A record boundary inside the file (a segment cut): a record or damage that does not
    /// end exactly there is damage up to it.
    Cut,
}

/// Why a byte range was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// Bytes where no record starts (see [`Corruption`]), up to the next whole record.
    Bad(Corruption),
    /// A record cut short, with whole records after it. `claimed` is the payload length its
    /// header claims (None when the file ends inside the header itself).
    Torn { claimed: Option<u64> },
    /// A record that runs past a segment cut.
    PastCut,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Bad(c) => write!(f, "{c}"),
            Damage::Torn { claimed: Some(n) } => write!(
                f,
                "torn record: its header claims {n} bytes of payload, the file ends before them and whole records follow"
            ),
            Damage::Torn { claimed: None } => write!(
                f,
                "torn record: a header cut short, and whole records follow"
            ),
            Damage::PastCut => write!(f, "record runs past a segment cut"),
        }
    }
}

/// One step of a [`Walker`].
#[derive(Debug)]
pub enum Step<'a> {
    /// A whole record: `framed` is its bytes with framing (payload: [`payload`]). Both CRCs
    /// hold, or only the length's with `verify` off.
    Record { offset: u64, framed: &'a [u8] },
    /// Bytes skipped: no whole record starts before `offset + length`.
    Damage {
        offset: u64,
        length: u64,
        why: Damage,
    },
    /// The walk's bytes end inside a record: a pending tail (`stopped` false: the file may
    /// still be written, a later walk resumes here) or a stopped tail (the file will not grow:
    /// the record is lost). The walk is over.
    Tail {
        offset: u64,
        length: u64,
        stopped: bool,
    },
    /// Reading failed at `offset`; the walk is over and [`Walker::cursor`] is where to retry.
    ReadError { offset: u64, error: io::Error },
    /// Nothing more.
    End,
}

/// The first position from `from` where a header's length CRC holds and its length is at most
/// `max_len`, while 12 bytes remain. Resynchronisation spends most of its time here.
#[inline]
fn next_header(buf: &[u8], from: usize, max_len: u64) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE 4.2, checked just above.
            return unsafe { next_header_sse42(buf, from, max_len) };
        }
    }
    next_header_with(buf, from, max_len, |v| masked_crc32c(&v.to_le_bytes()))
}

/// [`next_header`] compiled for SSE 4.2, so the length CRC is one inlined instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn next_header_sse42(buf: &[u8], from: usize, max_len: u64) -> Option<usize> {
    // SAFETY (of the closure's call): this function only runs on CPUs with SSE 4.2.
    next_header_with(buf, from, max_len, |v| unsafe {
        crate::masked_crc::masked_crc_u64_sse42(v)
    })
}

#[inline(always)]
fn next_header_with(
    buf: &[u8],
    from: usize,
    max_len: u64,
    crc: impl Fn(u64) -> u32,
) -> Option<usize> {
    let mut p = from;
    while p + HEADER_LEN <= buf.len() {
        let len = le_u64(&buf[p..]);
        // The cheap test first: lengths of random bytes are mostly far above any cap.
        if len <= max_len && crc(len) == le_u32(&buf[p + 8..]) {
            return Some(p);
        }
        p += 1;
    }
    None
}

/// The payload of a framed record from [`Step::Record`].
#[inline]
pub fn payload(framed: &[u8]) -> &[u8] {
    &framed[HEADER_LEN..framed.len() - FOOTER_LEN]
}

/// How a [`Walker`] reads.
#[derive(Debug, Clone, Copy)]
pub struct WalkOptions {
    /// Records longer than this are corruption (a lying length must not make a reader wait for
    /// or allocate gigabytes).
    pub max_len: u64,
    /// Check data CRCs of records (resynchronisation always checks them).
    pub verify: bool,
    /// The smallest read.
    pub min_read: usize,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            max_len: 256 << 20,
            verify: true,
            min_read: 256 << 10,
        }
    }
}

/// Bytes kept in front of the current position when the buffer is refilled, so running CRCs
/// taken a little before it stay usable (see [`Prefix`]).
const KEEP: usize = 16;
/// Spacing of the running CRCs kept while resynchronising.
const STEP: u64 = 16;
/// Candidate payloads up to this long are checked directly (no more than the two lookups of
/// running CRCs would cost).
const DIRECT: usize = 16;

/// Running CRC-32Cs from one anchor, every [`STEP`] bytes: the data CRC of a candidate record
/// found while resynchronising is then two lookups and a shift ([`crate::masked_crc::crc32c_shift`])
/// instead of a pass over its payload. Each byte enters the running CRC once per anchor, and
/// the anchor only moves when the buffer has moved past it, so checking candidates costs CRC
/// work linear in the bytes skipped, however many candidates claim long payloads.
#[derive(Debug, Default)]
struct Prefix {
    anchor: u64,
    ck: Vec<u32>,
    shift: Shift,
}

/// The shift for the last length asked for: crafted headers tend to repeat one length, and a
/// length used often gets byte tables (four lookups instead of a 32-step multiplication).
#[derive(Debug, Default)]
struct Shift {
    len: u64,
    op: u32,
    uses: u32,
    tables: Option<Box<[[u32; 256]; 4]>>,
}

impl Shift {
    fn apply(&mut self, crc: u32, n: u64) -> u32 {
        if self.op == 0 || self.len != n {
            self.len = n;
            self.op = shift_operator(n);
            self.uses = 0;
            self.tables = None;
        }
        if let Some(t) = &self.tables {
            let b = crc.to_le_bytes();
            return t[0][b[0] as usize]
                ^ t[1][b[1] as usize]
                ^ t[2][b[2] as usize]
                ^ t[3][b[3] as usize];
        }
        self.uses += 1;
        if self.uses >= 64 {
            // The shift is linear in `crc`: a table per byte, each entry the XOR of the
            // entries for its bits.
            let mut t = Box::new([[0u32; 256]; 4]);
            for (k, row) in t.iter_mut().enumerate() {
                for bit in 0..8 {
                    row[1 << bit] = apply_shift(self.op, 1 << (8 * k + bit));
                }
                for v in 1..256usize {
                    let low = v & v.wrapping_neg();
                    row[v] = row[v & (v - 1)] ^ row[low];
                }
            }
            self.tables = Some(t);
        }
        apply_shift(self.op, crc)
    }
}

impl Prefix {
    /// The CRC-32C of the bytes from the anchor to file offset `i`, with `buf` holding the file
    /// from `pos` on (and `i` inside it). Re-anchors at `i` (value 0) when the anchor's bytes
    /// are no longer in `buf`.
    fn at(&mut self, buf: &[u8], pos: u64, i: u64, counter: &mut u64) -> u32 {
        let last = self
            .ck
            .len()
            .checked_sub(1)
            .map(|n| self.anchor + STEP * n as u64);
        let j = match last {
            Some(l) if i >= self.anchor && l >= pos => ((i - self.anchor) / STEP) as usize,
            _ => return self.restart(i),
        };
        let q = self.anchor + STEP * j as u64;
        if q < pos {
            return self.restart(i);
        }
        while self.ck.len() <= j {
            let at = self.anchor + STEP * (self.ck.len() as u64 - 1);
            let from = (at - pos) as usize;
            let next = crc32c_append(self.ck[self.ck.len() - 1], &buf[from..from + STEP as usize]);
            self.ck.push(next);
            *counter += STEP;
        }
        *counter += i - q;
        crc32c_append(self.ck[j], &buf[(q - pos) as usize..(i - pos) as usize])
    }

    /// A new anchor at `i`: the CRC of nothing.
    fn restart(&mut self, i: u64) -> u32 {
        self.anchor = i;
        self.ck.clear();
        self.ck.push(0);
        0
    }

    fn shift(&mut self, crc: u32, n: u64) -> u32 {
        self.shift.apply(crc, n)
    }
}

/// A step without borrows (see [`Walker::next`]).
enum Out {
    Record {
        at: usize,
        span: usize,
    },
    Damage {
        offset: u64,
        length: u64,
        why: Damage,
    },
    Tail {
        offset: u64,
        length: u64,
        stopped: bool,
    },
    ReadError {
        offset: u64,
        error: io::Error,
    },
    End,
}

enum Sync {
    /// A whole record starts at the current position.
    Found,
    /// No whole record starts before this offset, and none can from there on: a candidate
    /// header running past the end (unless the end is final), or fewer than 12 bytes left.
    End(u64),
    Failed(u64, io::Error),
    Cancelled,
}

/// The one framing state machine: walks the records of a byte range of a file, skipping and
/// reporting damage (resynchronising at the next position where a whole record starts, both
/// CRCs checked) and deciding what the end of the range means ([`End`]). `event_file`,
/// `rewrite` and the Python compat layer's raw records all read through it, so they agree on
/// every damaged file.
///
/// Bytes past `size` (the size seen when the walk started, or a segment cut) are never read: a
/// file that keeps growing cannot keep a walk going. Resynchronisation costs CRC work linear
/// in the bytes it skips ([`Prefix`]); [`Walker::crc_bytes`] counts it.
pub struct Walker<'s, S: Source + ?Sized> {
    src: &'s S,
    buf: Vec<u8>,
    /// File offset of `buf[0]`, valid bytes in `buf`, next byte to look at.
    pos: u64,
    len: usize,
    cur: usize,
    size: u64,
    from: u64,
    end: End,
    opts: WalkOptions,
    /// Inside damage: where it started and why.
    damage: Option<(u64, Damage)>,
    queued: Option<Out>,
    /// Where the last record returned starts in `buf` (for [`Walker::reject`]).
    last: usize,
    /// Set when the walk is over: where a later walk of the file resumes.
    resume: Option<u64>,
    clean_end: bool,
    refills: u64,
    crc_bytes: u64,
    prefix: Prefix,
    cancel: Option<&'s AtomicBool>,
}

impl<'s, S: Source + ?Sized> Walker<'s, S> {
    /// Walks `src` from `from` to `size` (the size seen when the walk starts, or a segment cut;
    /// see [`End`]), reading into `buf` (reused; taken back with [`Walker::into_buf`]).
    pub fn new(
        src: &'s S,
        from: u64,
        size: u64,
        end: End,
        opts: WalkOptions,
        buf: Vec<u8>,
    ) -> Self {
        let from = from.min(size);
        Walker {
            src,
            buf,
            pos: from,
            len: 0,
            cur: 0,
            size,
            from,
            end,
            opts,
            damage: None,
            queued: None,
            last: 0,
            resume: None,
            clean_end: false,
            refills: 0,
            crc_bytes: 0,
            prefix: Prefix::default(),
            cancel: None,
        }
    }

    /// Checks `cancel` now and then during long resynchronisations; set, the walk ends.
    pub fn with_cancel(mut self, cancel: &'s AtomicBool) -> Self {
        self.cancel = Some(cancel);
        self
    }

    #[inline]
    fn abs(&self, i: usize) -> u64 {
        self.pos + i as u64
    }

    /// The next record, damage, tail or the end.
    #[allow(clippy::should_implement_trait)] // a lending iterator: a step borrows the buffer
    pub fn next(&mut self) -> Step<'_> {
        match self.step() {
            Out::Record { at, span } => Step::Record {
                offset: self.abs(at),
                framed: &self.buf[at..at + span],
            },
            Out::Damage {
                offset,
                length,
                why,
            } => Step::Damage {
                offset,
                length,
                why,
            },
            Out::Tail {
                offset,
                length,
                stopped,
            } => Step::Tail {
                offset,
                length,
                stopped,
            },
            Out::ReadError { offset, error } => Step::ReadError { offset, error },
            Out::End => Step::End,
        }
    }

    fn step(&mut self) -> Out {
        if let Some(q) = self.queued.take() {
            return q;
        }
        loop {
            if self.resume.is_some() {
                return Out::End;
            }
            if let Some((start, why)) = self.damage {
                // A live walk stops where a record may still be being written; a final one
                // stops there too (a torn record of its own, below) unless it is already
                // looking past a torn record, whose payload may hold anything.
                let stop = match self.end {
                    End::Live => true,
                    End::Final => !matches!(why, Damage::Torn { .. }),
                    End::Cut => false,
                };
                match self.resync(stop) {
                    Sync::Found => {
                        self.damage = None;
                        return Out::Damage {
                            offset: start,
                            length: self.abs(self.cur) - start,
                            why,
                        };
                    }
                    Sync::End(p) => {
                        self.damage = None;
                        let size = self.size;
                        return match (self.end, why) {
                            // Nothing whole after a torn record: the writer stopped inside it.
                            (End::Final, Damage::Torn { .. }) => {
                                self.resume = Some(start);
                                Out::Tail {
                                    offset: start,
                                    length: size - start,
                                    stopped: true,
                                }
                            }
                            // What follows the damage may be a record still being written.
                            (End::Live, _) => {
                                self.resume = Some(p);
                                if p < size {
                                    self.queued = Some(Out::Tail {
                                        offset: p,
                                        length: size - p,
                                        stopped: false,
                                    });
                                }
                                Out::Damage {
                                    offset: start,
                                    length: p - start,
                                    why,
                                }
                            }
                            // Where a live walk would leave a pending tail: the same torn
                            // record as when a later walk starts there.
                            (End::Final, _) if p < size => {
                                let claimed = (self.len - self.cur >= HEADER_LEN)
                                    .then(|| le_u64(&self.buf[self.cur..]));
                                self.damage = Some((p, Damage::Torn { claimed }));
                                self.cur += 1;
                                Out::Damage {
                                    offset: start,
                                    length: p - start,
                                    why,
                                }
                            }
                            _ => {
                                self.resume = Some(size);
                                Out::Damage {
                                    offset: start,
                                    length: size - start,
                                    why,
                                }
                            }
                        };
                    }
                    Sync::Failed(offset, error) => return self.failed(offset, error),
                    Sync::Cancelled => {
                        self.resume = Some(self.abs(self.cur));
                        return Out::End;
                    }
                }
            }
            let at = self.abs(self.cur);
            let w = &self.buf[self.cur..self.len];
            match parse_frame(w, self.opts.max_len, self.opts.verify) {
                Frame::Record { data, span } => {
                    self.crc_bytes += 8 + if self.opts.verify {
                        data.len() as u64
                    } else {
                        0
                    };
                    self.last = self.cur;
                    self.cur += span;
                    return Out::Record {
                        at: self.last,
                        span,
                    };
                }
                Frame::NeedMore { need } => {
                    if at.saturating_add(need as u64) <= self.size {
                        if let Err((offset, error)) = self.fill(need, need) {
                            return self.failed(offset, error);
                        }
                        continue;
                    }
                    if at == self.size {
                        self.clean_end = true;
                        self.resume = Some(at);
                        return Out::End;
                    }
                    let length = self.size - at;
                    match self.end {
                        End::Live => {
                            self.resume = Some(at);
                            return Out::Tail {
                                offset: at,
                                length,
                                stopped: false,
                            };
                        }
                        End::Cut => {
                            self.resume = Some(self.size);
                            return Out::Damage {
                                offset: at,
                                length,
                                why: Damage::PastCut,
                            };
                        }
                        End::Final => {
                            if self.cur == self.len {
                                // Its bytes are still on disk: the search starts inside them.
                                if let Err((offset, error)) = self.fill(1, 0) {
                                    return self.failed(offset, error);
                                }
                            }
                            let claimed = (need > HEADER_LEN).then(|| (need - OVERHEAD) as u64);
                            self.damage = Some((self.abs(self.cur), Damage::Torn { claimed }));
                            self.cur += 1;
                        }
                    }
                }
                Frame::Corrupt(why) => {
                    self.crc_bytes += 8;
                    if why == Corruption::BadDataCrc {
                        self.crc_bytes += le_u64(w);
                    }
                    self.damage = Some((at, Damage::Bad(why)));
                    self.cur += 1;
                }
            }
        }
    }

    /// Ends the walk on a read error, reporting damage found so far first.
    fn failed(&mut self, offset: u64, error: io::Error) -> Out {
        let here = self.abs(self.cur);
        self.resume = Some(here);
        match self.damage.take() {
            Some((start, why)) if here > start => {
                self.queued = Some(Out::ReadError { offset, error });
                Out::Damage {
                    offset: start,
                    length: here - start,
                    why,
                }
            }
            _ => Out::ReadError { offset, error },
        }
    }

    /// Finds the next position, from the current one, where a whole record starts; with
    /// `stop`, ends at a header that runs past the end (a record that may be unfinished).
    fn resync(&mut self, stop: bool) -> Sync {
        let mut tried = 0u32;
        loop {
            if self.len - self.cur < HEADER_LEN {
                if self.abs(self.len) >= self.size {
                    return Sync::End(self.abs(self.cur));
                }
                if let Err((at, e)) = self.fill(HEADER_LEN, 0) {
                    return Sync::Failed(at, e);
                }
                continue;
            }
            tried = tried.wrapping_add(1);
            if tried.is_multiple_of(1 << 16)
                && self.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Sync::Cancelled;
            }
            let Some(p) = next_header(&self.buf[..self.len], self.cur, self.opts.max_len) else {
                // No header in what is buffered: on from the first position too short for one.
                let last = self.len + 1 - HEADER_LEN;
                self.crc_bytes += 8 * (last - self.cur) as u64;
                self.cur = last;
                continue;
            };
            self.crc_bytes += 8 * (p + 1 - self.cur) as u64;
            self.cur = p;
            let len = le_u64(&self.buf[p..]);
            if let Some(span) = usize::try_from(len)
                .ok()
                .and_then(|l| l.checked_add(OVERHEAD))
            {
                let at = self.abs(self.cur);
                if at.saturating_add(span as u64) > self.size {
                    if stop {
                        return Sync::End(at);
                    }
                } else if self.len - self.cur < span {
                    // Room for the next candidates too, so crafted headers claiming long
                    // payloads do not cost a refill (and a copy) each.
                    if let Err((at, e)) = self.fill(span, span + span / 2) {
                        return Sync::Failed(at, e);
                    }
                    continue;
                } else if self.candidate_ok(span) {
                    return Sync::Found;
                }
            }
            self.cur += 1;
        }
    }

    /// Whether the data CRC of the candidate record at the current position (whole in the
    /// buffer) holds.
    fn candidate_ok(&mut self, span: usize) -> bool {
        let c = self.cur;
        let n = span - OVERHEAD;
        let stored = le_u32(&self.buf[c + span - FOOTER_LEN..]);
        if n <= DIRECT {
            self.crc_bytes += n as u64;
            return masked_crc32c(&self.buf[c + HEADER_LEN..c + HEADER_LEN + n]) == stored;
        }
        let s = self.abs(c + HEADER_LEN);
        let e = s + n as u64;
        let head = self.prefix.at(&self.buf, self.pos, s, &mut self.crc_bytes);
        let end = self.prefix.at(&self.buf, self.pos, e, &mut self.crc_bytes);
        mask(end ^ self.prefix.shift(head, n as u64)) == stored
    }

    /// Moves the unread bytes (and up to [`KEEP`] before them) to the front and reads until
    /// `need` bytes from the current position are there or the walk's bytes end; the buffer
    /// grows to hold at least `want` (and the minimum read) from there.
    fn fill(&mut self, need: usize, want: usize) -> Result<(), (u64, io::Error)> {
        let keep = self.cur.min(KEEP);
        let from = self.cur - keep;
        self.buf.copy_within(from..self.len, 0);
        self.pos += from as u64;
        self.len -= from;
        self.cur = keep;
        let left = usize::try_from(self.size - self.pos).unwrap_or(usize::MAX);
        let target = keep
            .saturating_add(need.max(want).max(self.opts.min_read))
            .min(left.max(keep + need));
        if self.buf.len() < target {
            self.buf.resize(target, 0);
        }
        self.refills += 1;
        while self.len < self.buf.len() {
            let left = self.size - self.abs(self.len);
            if left == 0 {
                break;
            }
            let upto = (self.len as u64 + left).min(self.buf.len() as u64) as usize;
            let at = self.abs(self.len);
            match self.src.read_at(&mut self.buf[self.len..upto], at) {
                Ok(0) => {
                    // The file shrank under us: what we have is its end.
                    self.size = at;
                    break;
                }
                Ok(n) => self.len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.size = at;
                    return Err((at, e));
                }
            }
            if self.len - self.cur >= need {
                break;
            }
        }
        Ok(())
    }

    /// The bytes from the current position to the end of what is in memory, and the file
    /// offset of the first, when the walk is between records (not inside damage, not over):
    /// for a caller's own loop over whole records (`event_file`'s fused scalar loop). It must
    /// hand back with [`Walker::advance`] only whole records whose CRCs it checked; anything
    /// else is left to [`Walker::next`], which decides about damage.
    #[inline]
    pub fn window(&self) -> Option<(&[u8], u64)> {
        if self.damage.is_some() || self.queued.is_some() || self.resume.is_some() {
            return None;
        }
        Some((&self.buf[self.cur..self.len], self.abs(self.cur)))
    }

    /// Moves past `n` bytes of whole, checked records taken from [`Walker::window`].
    #[inline]
    pub fn advance(&mut self, n: usize) {
        self.cur += n;
        self.crc_bytes += n as u64;
    }

    /// Takes back the record [`Walker::next`] returned last: its data CRC, not checked with
    /// `verify` off, turned out bad. It becomes damage, resynchronised from its second byte.
    pub fn reject(&mut self) {
        self.damage = Some((self.abs(self.last), Damage::Bad(Corruption::BadDataCrc)));
        self.cur = self.last + 1;
    }

    /// Where a later walk of the file resumes: the end of the last whole record, or the start
    /// of a tail.
    pub fn cursor(&self) -> u64 {
        self.resume.unwrap_or(self.abs(self.cur))
    }

    /// The walk ended exactly at the end of its bytes, on a record boundary.
    pub fn clean_end(&self) -> bool {
        self.clean_end
    }

    /// Where the walk's bytes end (less than asked when the file shrank during the walk).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes read from the source so far.
    pub fn bytes_read(&self) -> u64 {
        self.abs(self.len) - self.from
    }

    /// How many times the buffer was refilled (a caller may prepare memory for what came in).
    pub fn refills(&self) -> u64 {
        self.refills
    }

    /// Bytes fed to CRC-32C so far (both CRCs of records, resynchronisation's work): stays
    /// within a small multiple of the bytes walked, whatever the input.
    pub fn crc_bytes(&self) -> u64 {
        self.crc_bytes
    }

    /// The buffer, for the next walk.
    pub fn into_buf(self) -> Vec<u8> {
        self.buf
    }
}

/// Frames `data` as one TFRecord, appending to `out`.
pub fn write_record(out: &mut Vec<u8>, data: &[u8]) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
}

/// Frames the record that `f` encodes as one TFRecord, in place at the end of `out`: the
/// same bytes as [`write_record`], without encoding into a separate buffer first (the
/// writer's hot path).
#[inline(always)]
pub fn framed(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    f(out);
    let len = ((out.len() - start - HEADER_LEN) as u64).to_le_bytes();
    out[start..start + 8].copy_from_slice(&len);
    out[start + 8..start + HEADER_LEN].copy_from_slice(&masked_crc32c(&len).to_le_bytes());
    let crc = masked_crc32c(&out[start + HEADER_LEN..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 256 << 20;

    /// The first record of a real TensorFlow event file, as quoted by TensorBoard's own tests.
    fn real_first_record() -> Vec<u8> {
        let mut payload = vec![0x09];
        payload.extend_from_slice(&1_582_000_000.5f64.to_le_bytes());
        payload.extend_from_slice(&[0x1a, 0x0d]);
        payload.extend_from_slice(b"brain.Event:2");
        let mut rec = Vec::new();
        write_record(&mut rec, &payload);
        rec
    }

    #[test]
    fn header_bytes_match_tensorflow() {
        let rec = real_first_record();
        assert_eq!(&rec[..8], &[0x18, 0, 0, 0, 0, 0, 0, 0]);
        // Length CRC of a 24-byte payload is independent of the payload.
        assert_eq!(&rec[8..12], &[0xa3, 0x7f, 0x4b, 0x22]);
    }

    #[test]
    fn parses_whole_record() {
        let rec = real_first_record();
        match parse_frame(&rec, CAP, true) {
            Frame::Record { data, span } => {
                assert_eq!(span, rec.len());
                assert_eq!(data.len(), 24);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_prefix_is_need_more() {
        let rec = real_first_record();
        for cut in 0..rec.len() {
            assert!(
                matches!(parse_frame(&rec[..cut], CAP, true), Frame::NeedMore { .. }),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn detects_each_corruption() {
        let rec = real_first_record();
        let mut bad_len = rec.clone();
        bad_len[0] ^= 1;
        assert_eq!(
            parse_frame(&bad_len, CAP, true),
            Frame::Corrupt(Corruption::BadLengthCrc)
        );
        let mut bad_data = rec.clone();
        bad_data[HEADER_LEN + 3] ^= 0x40;
        assert_eq!(
            parse_frame(&bad_data, CAP, true),
            Frame::Corrupt(Corruption::BadDataCrc)
        );
        // Unverified parsing accepts it; the explicit check still catches it.
        match parse_frame(&bad_data, CAP, false) {
            Frame::Record { span, .. } => assert!(!data_crc_ok(&bad_data, span)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_frame(&rec, 10, true),
            Frame::Corrupt(Corruption::TooLong(24))
        );
    }

    /// Everything a walk of `bytes` returns, as (what, offset, length).
    fn walk(
        bytes: &[u8],
        end: End,
        max_len: u64,
        verify: bool,
    ) -> (Vec<(char, u64, u64)>, u64, u64) {
        let opts = WalkOptions {
            max_len,
            verify,
            min_read: 64,
        };
        let mut w = Walker::new(bytes, 0, bytes.len() as u64, end, opts, Vec::new());
        let mut out = Vec::new();
        loop {
            match w.next() {
                Step::Record { offset, framed } => out.push(('r', offset, framed.len() as u64)),
                Step::Damage { offset, length, .. } => out.push(('d', offset, length)),
                Step::Tail {
                    offset,
                    length,
                    stopped,
                } => out.push((if stopped { 's' } else { 't' }, offset, length)),
                Step::ReadError { .. } => panic!("memory does not fail"),
                Step::End => break,
            }
        }
        (out, w.cursor(), w.crc_bytes())
    }

    fn rec(payload: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        write_record(&mut r, payload);
        r
    }

    #[test]
    fn walker_skips_garbage_to_the_next_record() {
        let mut b = b"garbage that is long enough to hold a header".to_vec();
        let at = b.len() as u64;
        b.extend(real_first_record());
        for end in [End::Live, End::Final, End::Cut] {
            let (steps, cursor, _) = walk(&b, end, CAP, true);
            assert_eq!(steps, vec![('d', 0, at), ('r', at, 40)], "{end:?}");
            assert_eq!(cursor, b.len() as u64);
        }
        // Garbage to the end: a few bytes too short for a header are left as a pending tail
        // while the file may grow; otherwise everything is damage.
        let g = &b[..at as usize];
        let (steps, cursor, _) = walk(g, End::Live, CAP, true);
        assert_eq!(steps, vec![('d', 0, at - 11), ('t', at - 11, 11)]);
        assert_eq!(cursor, at - 11);
        // Final: the same place ends the damage, and the bytes from there are a stopped tail
        // (as when a later walk starts there).
        let (steps, _, _) = walk(g, End::Final, CAP, true);
        assert_eq!(steps, vec![('d', 0, at - 11), ('s', at - 11, 11)]);
        let (steps, _, _) = walk(g, End::Cut, CAP, true);
        assert_eq!(steps, vec![('d', 0, at)]);
    }

    /// A record cut short at the end of the bytes, by what the end means.
    #[test]
    fn walker_ends_inside_a_record() {
        let first = real_first_record();
        let big = rec(&[7u8; 500]);
        let mut b = first.clone();
        b.extend_from_slice(&big[..100]);
        let n = first.len() as u64;
        let (steps, cursor, _) = walk(&b, End::Live, CAP, true);
        assert_eq!(steps, vec![('r', 0, n), ('t', n, 100)]);
        assert_eq!(cursor, n);
        let (steps, cursor, _) = walk(&b, End::Final, CAP, true);
        assert_eq!(steps, vec![('r', 0, n), ('s', n, 100)]);
        assert_eq!(cursor, n, "a later walk looks at a stopped tail again");
        let (steps, cursor, _) = walk(&b, End::Cut, CAP, true);
        assert_eq!(steps, vec![('r', 0, n), ('d', n, 100)]);
        assert_eq!(cursor, b.len() as u64);
        // Inside a header too.
        let (steps, _, _) = walk(&b[..first.len() + 5], End::Final, CAP, true);
        assert_eq!(steps, vec![('r', 0, n), ('s', n, 5)]);
    }

    /// A torn record with whole records after it: damage once the file is final (every
    /// record after it read), a pending tail while it may still be written (nothing inside
    /// it read: it may be a record whose payload embeds records).
    #[test]
    fn walker_torn_record_by_end() {
        let first = real_first_record();
        let big = rec(&[7u8; 5000]);
        let mut b = first.clone();
        b.extend_from_slice(&big[..300]);
        let after = b.len() as u64;
        let r2 = rec(b"after the tear");
        b.extend(&r2);
        b.extend(&r2);
        let n = first.len() as u64;
        let (steps, _, _) = walk(&b, End::Final, CAP, true);
        let m = r2.len() as u64;
        assert_eq!(
            steps,
            vec![
                ('r', 0, n),
                ('d', n, after - n),
                ('r', after, m),
                ('r', after + m, m)
            ]
        );
        let (steps, cursor, _) = walk(&b, End::Live, CAP, true);
        assert_eq!(steps, vec![('r', 0, n), ('t', n, b.len() as u64 - n)]);
        assert_eq!(cursor, n);
    }

    /// The byte-at-a-time contract: records where both CRCs hold, taken greedily; with a live
    /// end the walk stops at the first position (reached between records or while skipping)
    /// where a header with a valid length CRC runs past the end or fewer than 12 bytes remain.
    fn reference(b: &[u8], max_len: u64, end: End) -> Vec<u64> {
        let mut out = Vec::new();
        let mut p = 0usize;
        while p < b.len() {
            if b.len() - p < HEADER_LEN {
                break;
            }
            let len = le_u64(&b[p..]);
            if len <= max_len && masked_crc32c(&b[p..p + 8]) == le_u32(&b[p + 8..]) {
                let span = len as usize + OVERHEAD;
                if b.len() - p < span {
                    if end == End::Live {
                        break;
                    }
                } else if masked_crc32c(&b[p + 12..p + span - 4]) == le_u32(&b[p + span - 4..]) {
                    out.push(p as u64);
                    p += span;
                    continue;
                }
            }
            p += 1;
        }
        out
    }

    #[test]
    fn walker_matches_the_reference_on_damaged_bytes() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for case in 0..3000 {
            let mut b = Vec::new();
            for _ in 0..next() % 8 {
                // Payloads long enough to take the running-CRC path now and then.
                let n = (next() % if case % 3 == 0 { 300 } else { 40 }) as usize;
                let p: Vec<u8> = (0..n).map(|_| next() as u8).collect();
                // A record inside a record's payload, now and then.
                if next() % 5 == 0 {
                    let inner = rec(&p);
                    b.extend(rec(&inner));
                } else {
                    b.extend(rec(&p));
                }
            }
            for _ in 0..next() % 4 {
                if b.len() < 2 {
                    break;
                }
                let at = (next() as usize) % b.len();
                match next() % 3 {
                    0 => b[at] ^= 1 << (next() % 8),
                    1 => b.truncate(at),
                    _ => {
                        let to = at + (next() as usize) % (b.len() - at);
                        b.drain(at..to);
                    }
                }
            }
            let cap = [24, 4096, CAP][case % 3];
            for end in [End::Live, End::Final, End::Cut] {
                let (steps, cursor, crc) = walk(&b, end, cap, true);
                let got: Vec<u64> = steps.iter().filter(|s| s.0 == 'r').map(|s| s.1).collect();
                let want = reference(
                    &b,
                    cap,
                    if end == End::Live {
                        End::Live
                    } else {
                        End::Final
                    },
                );
                if end != End::Cut {
                    assert_eq!(got, want, "case {case} {end:?}: {b:?}");
                }
                // Steps tile the bytes walked, in order.
                let mut at = 0;
                for s in &steps {
                    assert_eq!(s.1, at, "case {case} {end:?}: {steps:?}");
                    at += s.2;
                }
                assert!(
                    at == b.len() as u64 || end == End::Live,
                    "case {case}: {steps:?}"
                );
                assert!(cursor <= b.len() as u64);
                assert!(
                    crc <= 32 * b.len() as u64 + 64,
                    "case {case}: {crc} CRC bytes"
                );
            }
        }
    }

    /// Headers with valid length CRCs every 12 bytes, each claiming a long payload that is not
    /// there (bad data), spaced so that each claimed end lands on another such header: the
    /// CRC work stays linear, and the real record at the end is found.
    #[test]
    fn crafted_headers_cost_linear_crc_work() {
        for claimed in [1u64 << 20, (1 << 20) + 4, 5000] {
            let mut h = Vec::new();
            h.extend_from_slice(&claimed.to_le_bytes());
            h.extend_from_slice(&masked_crc32c(&claimed.to_le_bytes()).to_le_bytes());
            let mut b = Vec::new();
            while b.len() < 3 << 20 {
                b.extend_from_slice(&h);
            }
            let at = b.len() as u64;
            b.extend(real_first_record());
            for end in [End::Live, End::Final, End::Cut] {
                let (steps, _, crc) = walk(&b, end, CAP, true);
                let size = b.len() as u64;
                assert!(
                    crc <= 16 * size,
                    "{claimed} {end:?}: {crc} CRC bytes for {size}"
                );
                if end != End::Live {
                    assert_eq!(steps.last(), Some(&('r', at, 40)), "{claimed} {end:?}");
                }
            }
        }
    }
}
