//! The manifest's binary encoding: varints (zigzag for signed values), little-endian floats,
//! length-prefixed bytes, and the small codes built on them. Decoding checks every count
//! against the bytes left, so a damaged manifest is an error, never a large allocation.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cache::stamp::FileSum;
use crate::event_file::Severity;

#[derive(Default)]
pub(in crate::cache) struct Enc(pub(in crate::cache) Vec<u8>);

impl Enc {
    pub(in crate::cache) fn u(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    pub(in crate::cache) fn i(&mut self, v: i64) {
        self.u(((v << 1) ^ (v >> 63)) as u64);
    }
    pub(in crate::cache) fn f(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(in crate::cache) fn b(&mut self, v: &[u8]) {
        self.u(v.len() as u64);
        self.0.extend_from_slice(v);
    }
    pub(in crate::cache) fn s(&mut self, v: &str) {
        self.b(v.as_bytes());
    }
    pub(in crate::cache) fn flag(&mut self, v: bool) {
        self.u(v as u64);
    }
    pub(in crate::cache) fn opt_f(&mut self, v: Option<f64>) {
        self.flag(v.is_some());
        if let Some(v) = v {
            self.f(v);
        }
    }
    /// A file of a generation: 0 for none, else 1 + rows, size, checksum.
    pub(in crate::cache) fn file_sum(&mut self, f: Option<FileSum>) {
        match f {
            None => self.u(0),
            Some(f) => {
                self.u(f.rows + 1);
                self.u(f.bytes);
                self.u(u64::from(f.crc));
            }
        }
    }
    /// `v` after the bytes it shares with `prev` (sorted names share long prefixes).
    pub(in crate::cache) fn prefixed(&mut self, prev: &[u8], v: &[u8]) {
        let shared = prev.iter().zip(v).take_while(|(a, b)| a == b).count();
        self.u(shared as u64);
        self.b(&v[shared..]);
    }
}

pub(in crate::cache) struct Dec<'a> {
    pub(in crate::cache) buf: &'a [u8],
    pub(in crate::cache) pos: usize,
}

pub(in crate::cache) type DResult<T> = std::result::Result<T, String>;

impl<'a> Dec<'a> {
    #[inline]
    pub(in crate::cache) fn u(&mut self) -> DResult<u64> {
        // A manifest of many runs is millions of varints: with ten bytes left (a varint's
        // most), one bounds check for the whole of it.
        if let Some(w) = self.buf.get(self.pos..self.pos + 10) {
            let mut v = 0u64;
            for (i, &b) in w.iter().enumerate() {
                v |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    self.pos += i + 1;
                    return Ok(v);
                }
            }
            return Err("bad varint".into());
        }
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("ends early")?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("bad varint".into())
    }
    /// A count or length: never more than the bytes left, so a damaged one cannot make us
    /// allocate much.
    pub(in crate::cache) fn n(&mut self) -> DResult<usize> {
        let v = self.u()?;
        if v > (self.buf.len() - self.pos) as u64 {
            return Err("count past the end".into());
        }
        Ok(v as usize)
    }
    pub(in crate::cache) fn i(&mut self) -> DResult<i64> {
        let v = self.u()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }
    pub(in crate::cache) fn f(&mut self) -> DResult<f64> {
        let b = self.buf.get(self.pos..self.pos + 8).ok_or("ends early")?;
        self.pos += 8;
        Ok(f64::from_le_bytes(b.try_into().unwrap()))
    }
    pub(in crate::cache) fn b(&mut self) -> DResult<&'a [u8]> {
        let n = self.n()?;
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }
    /// Length-prefixed bytes as (start, length) in the buffer.
    pub(in crate::cache) fn range(&mut self) -> DResult<(u32, u32)> {
        let n = self.n()?;
        let at = self.pos;
        self.pos += n;
        Ok((at as u32, n as u32))
    }
    pub(in crate::cache) fn s(&mut self) -> DResult<String> {
        String::from_utf8(self.b()?.to_vec()).map_err(|_| "bad UTF-8".to_string())
    }
    pub(in crate::cache) fn flag(&mut self) -> DResult<bool> {
        Ok(self.u()? != 0)
    }
    pub(in crate::cache) fn opt_f(&mut self) -> DResult<Option<f64>> {
        Ok(if self.flag()? { Some(self.f()?) } else { None })
    }
    pub(in crate::cache) fn file_sum(&mut self) -> DResult<Option<FileSum>> {
        let rows = match self.u()? {
            0 => return Ok(None),
            n => n - 1,
        };
        let bytes = self.u()?;
        let crc = u32::try_from(self.u()?).map_err(|_| "bad checksum".to_string())?;
        Ok(Some(FileSum { rows, bytes, crc }))
    }
    /// Replaces `buf` (the previous value) by the next one, which shares a prefix with it.
    pub(in crate::cache) fn prefixed_into(&mut self, buf: &mut Vec<u8>) -> DResult<()> {
        let shared = self.u()? as usize;
        if shared > buf.len() {
            return Err("bad shared prefix".into());
        }
        buf.truncate(shared);
        buf.extend_from_slice(self.b()?);
        Ok(())
    }
    /// An index into a table of `len` entries.
    pub(in crate::cache) fn index(&mut self, len: usize) -> DResult<usize> {
        let i = self.u()? as usize;
        if i >= len {
            return Err("index out of range".into());
        }
        Ok(i)
    }
}

pub(in crate::cache) fn severity_code(s: Severity) -> u64 {
    match s {
        Severity::Corrupt => 0,
        Severity::Warning => 1,
        Severity::Truncated => 2,
        Severity::Error => 3,
        Severity::Info => 4,
    }
}

pub(in crate::cache) fn severity_of(c: u64) -> DResult<Severity> {
    Ok(match c {
        0 => Severity::Corrupt,
        1 => Severity::Warning,
        2 => Severity::Truncated,
        3 => Severity::Error,
        4 => Severity::Info,
        _ => return Err("bad severity".into()),
    })
}

pub(in crate::cache) fn time_of(secs: i64, nanos: u64) -> SystemTime {
    let base = if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    };
    base + Duration::from_nanos(nanos)
}
