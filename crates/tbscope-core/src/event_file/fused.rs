//! What the fused record loop (`parser.rs`) is built from: masked CRCs in two flavours (the
//! portable dispatch, or SSE 4.2 instructions inlined into a loop compiled for them) and byte
//! equality for short strings.

/// How the fused record loop computes masked CRCs: the portable dispatch, or SSE 4.2
/// instructions inlined into a loop compiled for them.
pub(super) trait RecordCrc {
    fn length(len: u64) -> u32;
    fn data(data: &[u8]) -> u32;
}

pub(super) struct PortableCrc;

impl RecordCrc for PortableCrc {
    #[inline(always)]
    fn length(len: u64) -> u32 {
        crate::masked_crc::masked_crc32c(&len.to_le_bytes())
    }
    #[inline(always)]
    fn data(data: &[u8]) -> u32 {
        crate::masked_crc::masked_crc32c(data)
    }
}

/// Only used inside functions compiled for SSE 4.2 (see `Parser::fast_records`).
#[cfg(target_arch = "x86_64")]
pub(super) struct Sse42Crc;

#[cfg(target_arch = "x86_64")]
impl RecordCrc for Sse42Crc {
    #[inline(always)]
    fn length(len: u64) -> u32 {
        // SAFETY: only instantiated in `fast_records_sse42`, reached after the CPU check.
        unsafe { crate::masked_crc::masked_crc_u64_sse42(len) }
    }
    #[inline(always)]
    fn data(data: &[u8]) -> u32 {
        // SAFETY: as above.
        unsafe { crate::masked_crc::mask(crate::masked_crc::crc32c_short_sse42(data)) }
    }
}

/// Byte equality for short strings (tags) without a libc call: eight bytes at a time, the last
/// word overlapping. Tag lookups run once per record, and a `memcmp` call was a tenth of a read.
#[inline(always)]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().unwrap());
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused loop's two CRC flavours must agree byte for byte (only one runs on a given
    /// machine, so the portable one is otherwise untested on x86).
    #[test]
    fn record_crc_flavours_agree() {
        let data: Vec<u8> = (0..600u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for n in 0..data.len() {
            let want = crate::masked_crc::masked_crc32c(&data[..n]);
            assert_eq!(PortableCrc::data(&data[..n]), want, "length {n}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("sse4.2") {
                assert_eq!(Sse42Crc::data(&data[..n]), want, "length {n}");
            }
        }
        for len in [0u64, 1, 57, 255, 1 << 20, u64::MAX] {
            let want = crate::masked_crc::masked_crc32c(&len.to_le_bytes());
            assert_eq!(PortableCrc::length(len), want);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("sse4.2") {
                assert_eq!(Sse42Crc::length(len), want);
            }
        }
    }

    #[test]
    fn same_bytes_is_equality() {
        let a: Vec<u8> = (0..40u8).collect();
        for n in 0..a.len() {
            for m in 0..a.len() {
                assert_eq!(same_bytes(&a[..n], &a[..m]), n == m);
            }
            for flip in 0..n {
                let mut b = a[..n].to_vec();
                b[flip] ^= 0x80;
                assert!(!same_bytes(&a[..n], &b), "{n} {flip}");
            }
        }
    }
}
