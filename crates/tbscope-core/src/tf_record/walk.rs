//! The [`Walker`]: a buffered walk over a byte range of a file, record by record, that skips
//! and reports damage (resynchronising with [`super::resync`]) and decides what the end of the
//! range means.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use super::frame::{le_u64, parse_frame, Corruption, Frame, HEADER_LEN, OVERHEAD};
use super::resync::{next_header, Prefix};
use super::source::Source;

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
                } else if self.prefix.candidate_ok(
                    &self.buf,
                    self.pos,
                    self.cur,
                    span,
                    &mut self.crc_bytes,
                ) {
                    return Sync::Found;
                }
            }
            self.cur += 1;
        }
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

#[cfg(test)]
pub(super) mod tests {
    use super::super::frame::tests::{real_first_record, rec, CAP};
    use super::*;

    /// Everything a walk of `bytes` returns, as (what, offset, length).
    pub(crate) fn walk(
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
}
