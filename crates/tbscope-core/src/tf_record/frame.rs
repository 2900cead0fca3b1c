//! One record's bytes: the header (length and its masked CRC), the payload, the footer (the
//! payload's masked CRC); parsing them ([`parse_frame`]) and writing them ([`write_record`],
//! [`framed`]).

use crate::masked_crc::masked_crc32c;

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
pub(super) fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[inline]
pub(super) fn le_u64(b: &[u8]) -> u64 {
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

/// The payload of a framed record from [`Step::Record`](super::Step::Record).
#[inline]
pub fn payload(framed: &[u8]) -> &[u8] {
    &framed[HEADER_LEN..framed.len() - FOOTER_LEN]
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
pub(super) mod tests {
    use super::*;

    pub(crate) const CAP: u64 = 256 << 20;

    /// The first record of a real TensorFlow event file, as quoted by TensorBoard's own tests.
    pub(crate) fn real_first_record() -> Vec<u8> {
        let mut payload = vec![0x09];
        payload.extend_from_slice(&1_582_000_000.5f64.to_le_bytes());
        payload.extend_from_slice(&[0x1a, 0x0d]);
        payload.extend_from_slice(b"brain.Event:2");
        let mut rec = Vec::new();
        write_record(&mut rec, &payload);
        rec
    }

    pub(crate) fn rec(payload: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        write_record(&mut r, payload);
        r
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
}
