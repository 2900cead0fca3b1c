//! CRC-32C with the LevelDB/TFRecord mask.
//!
//! TFRecord stores `mask(crc32c(bytes))` rather than the plain checksum, because a CRC computed
//! over data that itself embeds CRCs is weak; the rotate-and-add breaks that correlation. The
//! `crc32c` crate picks SSE4.2/ARMv8 instructions at run time, so wheels stay portable.

/// The constant TensorFlow adds after rotating (`kMaskDelta` in TensorFlow's `crc32c.h`).
const MASK_DELTA: u32 = 0xa282_ead8;

/// Plain CRC-32C (Castagnoli) of `data`.
///
/// Event records are mostly tens of bytes. The `crc32c` crate aligns its input byte by byte
/// before its 3-way parallel loop, which dominates at that size, so short inputs take a straight
/// unaligned 8-bytes-at-a-time loop instead; long ones go to the crate. Both use the SSE 4.2
/// instruction when the CPU has it (detected at run time, so wheels stay portable).
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if data.len() < 512 && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE 4.2, checked just above.
            return unsafe { crc32c_short_sse42(data) };
        }
    }
    crc32c::crc32c(data)
}

/// CRC-32C of a short input with the SSE 4.2 instruction; inlined into callers compiled for
/// SSE 4.2 (the record loop), so a record costs no call and no feature check.
///
/// # Safety
/// The CPU must support SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
pub unsafe fn crc32c_short_sse42(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut crc = u64::from(u32::MAX);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(w.try_into().unwrap()));
    }
    // The tail in at most three steps (4, 2, 1 bytes): each step waits for the previous one,
    // so fewer steps is shorter latency.
    let mut crc = crc as u32;
    let mut rest = words.remainder();
    if rest.len() >= 4 {
        crc = _mm_crc32_u32(crc, u32::from_le_bytes(rest[..4].try_into().unwrap()));
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        crc = _mm_crc32_u16(crc, u16::from_le_bytes(rest[..2].try_into().unwrap()));
        rest = &rest[2..];
    }
    if let Some(&b) = rest.first() {
        crc = _mm_crc32_u8(crc, b);
    }
    !crc
}

/// The masked CRC-32C of a record's 8-byte length field, in one instruction.
///
/// # Safety
/// The CPU must support SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
pub unsafe fn masked_crc_u64_sse42(v: u64) -> u32 {
    mask(!(std::arch::x86_64::_mm_crc32_u64(u64::from(u32::MAX), v) as u32))
}

/// Applies the TFRecord mask to a raw CRC-32C.
#[inline]
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The masked CRC-32C of `data`, as stored after a record's length and after its payload.
#[inline]
pub fn masked_crc32c(data: &[u8]) -> u32 {
    mask(crc32c(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3720_zero_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        // ... and 32 bytes of 0xff, ascending and descending.
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let asc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&asc), 0x46dd_794e);
        let desc: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&desc), 0x113f_db5c);
    }

    #[test]
    fn short_path_matches_crate_at_every_length() {
        let data: Vec<u8> = (0..1500u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for n in 0..data.len() {
            for start in 0..3 {
                if start <= n {
                    assert_eq!(
                        crc32c(&data[start..n]),
                        crc32c::crc32c(&data[start..n]),
                        "len {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn masked_vector_from_tensorboard() {
        assert_eq!(masked_crc32c(b"\x1a\x11CRC test, one two"), 0x5794_d08a);
    }

    #[test]
    fn mask_is_not_identity_and_is_invertible() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX] {
            let m = mask(crc);
            let unmasked = m.wrapping_sub(MASK_DELTA).rotate_left(15);
            assert_eq!(unmasked, crc);
        }
        assert_ne!(mask(0), 0);
    }
}
