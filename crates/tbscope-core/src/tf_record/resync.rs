//! Finding the next record boundary in damaged bytes: the scan for a header whose length CRC
//! holds ([`next_header`]), and the data CRC check of a candidate record at CRC cost linear in
//! the bytes skipped ([`Prefix`]). The [`Walker`](super::Walker) drives both.

use super::frame::{le_u32, le_u64, FOOTER_LEN, HEADER_LEN, OVERHEAD};
use crate::masked_crc::{apply_shift, crc32c_append, mask, masked_crc32c, shift_operator};

/// The first position from `from` where a header's length CRC holds and its length is at most
/// `max_len`, while 12 bytes remain. Resynchronisation spends most of its time here.
#[inline]
pub(super) fn next_header(buf: &[u8], from: usize, max_len: u64) -> Option<usize> {
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
pub(super) struct Prefix {
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
    /// Whether the data CRC of the candidate record at `at` in `buf` (whole there; `buf` holds
    /// the file from `pos` on) holds, counting the bytes fed to CRC-32C in `counter`.
    #[inline]
    pub(super) fn candidate_ok(
        &mut self,
        buf: &[u8],
        pos: u64,
        at: usize,
        span: usize,
        counter: &mut u64,
    ) -> bool {
        let n = span - OVERHEAD;
        let stored = le_u32(&buf[at + span - FOOTER_LEN..]);
        if n <= DIRECT {
            *counter += n as u64;
            return masked_crc32c(&buf[at + HEADER_LEN..at + HEADER_LEN + n]) == stored;
        }
        let s = pos + (at + HEADER_LEN) as u64;
        let e = s + n as u64;
        let head = self.at(buf, pos, s, counter);
        let end = self.at(buf, pos, e, counter);
        mask(end ^ self.shift(head, n as u64)) == stored
    }

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

#[cfg(test)]
mod tests {
    use super::super::frame::tests::{real_first_record, rec, CAP};
    use super::super::walk::tests::walk;
    use super::super::End;
    use super::*;

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
