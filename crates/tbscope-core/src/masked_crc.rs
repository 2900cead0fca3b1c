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
    append_short_sse42(0, data)
}

/// [`crc32c_append`] for short inputs with the SSE 4.2 instruction.
///
/// # Safety
/// The CPU must support SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[inline]
unsafe fn append_short_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u16, _mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut crc = u64::from(!crc);
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

/// The CRC-32C of `crc`'s input followed by `data`, from `crc` (a finished CRC-32C).
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if data.len() < 512 && std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE 4.2, checked just above.
            return unsafe { append_short_sse42(crc, data) };
        }
    }
    crc32c::crc32c_append(crc, data)
}

/// CRC-32C's polynomial with its bits reversed (bit 31 stands for x^0, bit 0 for x^31), the
/// form the register takes.
const POLY: u32 = 0x82f6_3b78;

/// The product of two polynomials modulo CRC-32C's, both in the register's bit order.
const fn gf_mul(mut a: u32, mut b: u32) -> u32 {
    let mut p = 0;
    // Bit 31 of `a` is x^0; each step moves `b` one power of x up.
    while a != 0 {
        if a & 0x8000_0000 != 0 {
            p ^= b;
        }
        a <<= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// `ZEROS[k]` is x^(8 * 2^k) modulo the polynomial: what appending 2^k zero bytes does to a
/// register.
const ZEROS: [u32; 64] = {
    let mut t = [0u32; 64];
    t[0] = 1 << (31 - 8); // x^8
    let mut k = 1;
    while k < 64 {
        t[k] = gf_mul(t[k - 1], t[k - 1]);
        k += 1;
    }
    t
};

/// The operator that [`crc32c_shift`] applies for `n` bytes; worth keeping when many slices
/// have the same length.
pub fn shift_operator(n: u64) -> u32 {
    let mut op = 1 << 31; // x^0
    let mut k = 0;
    let mut n = n;
    while n != 0 {
        if n & 1 != 0 {
            op = gf_mul(ZEROS[k], op);
        }
        n >>= 1;
        k += 1;
    }
    op
}

/// Applies an operator from [`shift_operator`].
#[inline]
pub fn apply_shift(op: u32, crc: u32) -> u32 {
    gf_mul(op, crc)
}

/// For any byte strings `a` and `b`: `crc32c(a ++ b) == crc32c_shift(crc32c(a), b.len()) ^
/// crc32c(b)` (the initial and final inversions cancel out). So with running CRCs taken from
/// one point of a buffer, the CRC of any slice after that point costs two lookups and a shift
/// instead of a pass over the slice: that is what keeps resynchronisation linear.
pub fn crc32c_shift(crc: u32, n: u64) -> u32 {
    apply_shift(shift_operator(n), crc)
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
    fn append_and_shift_split_any_input() {
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for (a, b) in [
            (0, 0),
            (0, 1),
            (1, 0),
            (5, 7),
            (100, 2000),
            (513, 17),
            (8, 2900),
        ] {
            let (x, y) = (&data[..a], &data[a..a + b]);
            let whole = crc32c(&data[..a + b]);
            assert_eq!(crc32c_append(crc32c(x), y), whole, "append {a}+{b}");
            assert_eq!(
                crc32c_shift(crc32c(x), b as u64) ^ crc32c(y),
                whole,
                "shift {a}+{b}"
            );
        }
        // A running CRC from any anchor gives any later slice's CRC.
        let run = |i: usize| crc32c(&data[7..i]);
        for (s, e) in [(7, 7), (10, 900), (64, 65), (1000, 2999)] {
            assert_eq!(
                run(e) ^ crc32c_shift(run(s), (e - s) as u64),
                crc32c(&data[s..e])
            );
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
