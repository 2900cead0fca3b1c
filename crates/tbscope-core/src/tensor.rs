//! `TensorProto`: dtype, shape, and element bytes from `tensor_content` or the typed fields.
//!
//! Elements come out as little-endian bytes in the dtype's natural width (what
//! `np.frombuffer(..., dtype)` expects), strings as a list of byte strings. The rules follow
//! TensorBoard's `tensor_util.make_ndarray`: `tensor_content` wins when non-empty; otherwise the
//! typed field, where exactly one element (one pair for complex) is repeated to fill the shape.

use crate::proto::{read_varint, DecodeError, Fields, Result, Wire};

/// `TensorProto` located within a record; elements are decoded on demand.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tensor<'a> {
    pub dtype: i32,
    pub shape: Vec<i64>,
    pub unknown_rank: bool,
    pub content: &'a [u8],
    pub raw: &'a [u8],
}

/// Decoded elements of a tensor.
#[derive(Debug, Clone, PartialEq)]
pub enum Elements<'a> {
    /// Little-endian element bytes, `element_size(dtype)` each.
    Numeric(Vec<u8>),
    Strings(Vec<&'a [u8]>),
}

// DataType values (types.proto).
pub const DT_FLOAT: i32 = 1;
pub const DT_DOUBLE: i32 = 2;
pub const DT_INT32: i32 = 3;
pub const DT_UINT8: i32 = 4;
pub const DT_INT16: i32 = 5;
pub const DT_INT8: i32 = 6;
pub const DT_STRING: i32 = 7;
pub const DT_COMPLEX64: i32 = 8;
pub const DT_INT64: i32 = 9;
pub const DT_BOOL: i32 = 10;
pub const DT_QINT8: i32 = 11;
pub const DT_QUINT8: i32 = 12;
pub const DT_QINT32: i32 = 13;
pub const DT_BFLOAT16: i32 = 14;
pub const DT_QINT16: i32 = 15;
pub const DT_QUINT16: i32 = 16;
pub const DT_UINT16: i32 = 17;
pub const DT_COMPLEX128: i32 = 18;
pub const DT_HALF: i32 = 19;
pub const DT_UINT32: i32 = 22;
pub const DT_UINT64: i32 = 23;

/// The largest DataType value with a name here (DT_FLOAT4_E2M1FN).
pub const MAX_DTYPE: i32 = 33;

/// The dtype with any `_REF` offset removed.
#[inline]
pub fn base_dtype(dtype: i32) -> i32 {
    if dtype > 100 {
        dtype - 100
    } else {
        dtype
    }
}

/// The dtype's name as numpy spells it where numpy has it.
pub fn dtype_name(dtype: i32) -> &'static str {
    match base_dtype(dtype) {
        DT_FLOAT => "float32",
        DT_DOUBLE => "float64",
        DT_INT32 => "int32",
        DT_UINT8 => "uint8",
        DT_INT16 => "int16",
        DT_INT8 => "int8",
        DT_STRING => "string",
        DT_COMPLEX64 => "complex64",
        DT_INT64 => "int64",
        DT_BOOL => "bool",
        DT_QINT8 => "qint8",
        DT_QUINT8 => "quint8",
        DT_QINT32 => "qint32",
        DT_BFLOAT16 => "bfloat16",
        DT_QINT16 => "qint16",
        DT_QUINT16 => "quint16",
        DT_UINT16 => "uint16",
        DT_COMPLEX128 => "complex128",
        DT_HALF => "float16",
        20 => "resource",
        21 => "variant",
        DT_UINT32 => "uint32",
        DT_UINT64 => "uint64",
        24 => "float8_e5m2",
        25 => "float8_e4m3fn",
        26 => "float8_e4m3fnuz",
        27 => "float8_e4m3b11fnuz",
        28 => "float8_e5m2fnuz",
        29 => "int4",
        30 => "uint4",
        31 => "int2",
        32 => "uint2",
        33 => "float4_e2m1fn",
        _ => "invalid",
    }
}

/// Bytes per element in the decoded form, or `None` for dtypes without a fixed-width form.
pub fn element_size(dtype: i32) -> Option<usize> {
    Some(match base_dtype(dtype) {
        DT_UINT8 | DT_INT8 | DT_BOOL | DT_QINT8 | DT_QUINT8 | 24..=28 => 1,
        DT_INT16 | DT_UINT16 | DT_QINT16 | DT_QUINT16 | DT_BFLOAT16 | DT_HALF => 2,
        DT_FLOAT | DT_INT32 | DT_QINT32 | DT_UINT32 => 4,
        DT_DOUBLE | DT_INT64 | DT_UINT64 | DT_COMPLEX64 => 8,
        DT_COMPLEX128 => 16,
        _ => return None,
    })
}

impl<'a> Tensor<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut t = Tensor {
            raw: buf,
            ..Default::default()
        };
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match (n, w) {
                (1, Wire::Varint(v)) => t.dtype = v as i32,
                (2, Wire::Bytes(b)) => decode_shape(b, &mut t)?,
                (4, Wire::Bytes(b)) => t.content = b,
                (1 | 2 | 4, _) => {
                    return Err(DecodeError("TensorProto field has the wrong wire type"))
                }
                _ => {}
            }
        }
        Ok(t)
    }

    /// Number of elements the shape calls for (unknown dims count as 0).
    pub fn num_elements(&self) -> usize {
        self.shape
            .iter()
            .map(|&d| d.max(0) as usize)
            .fold(1usize, |a, d| a.saturating_mul(d))
    }

    /// Fast path for a rank-0 numeric tensor: its value as f64, if it has exactly one.
    pub fn scalar_f64(&self) -> Option<f64> {
        if !self.shape.is_empty() || self.unknown_rank {
            return None;
        }
        let dtype = base_dtype(self.dtype);
        // The commonest case (TF2 float scalars) without going through `elements`.
        if dtype == DT_FLOAT && self.content.len() == 4 {
            return Some(f32::from_le_bytes(self.content.try_into().unwrap()) as f64);
        }
        match self.elements().ok()? {
            Elements::Numeric(b) => element_f64(dtype, &b),
            Elements::Strings(_) => None,
        }
    }

    /// All elements, with the fill rule applied. Errors when counts disagree with the shape.
    pub fn elements(&self) -> Result<Elements<'a>> {
        let dtype = base_dtype(self.dtype);
        let n = self.num_elements();
        if dtype == DT_STRING {
            let mut out = Vec::new();
            for f in Fields::new(self.raw) {
                if let (8, w) = f? {
                    match w {
                        Wire::Bytes(b) => out.push(b),
                        _ => return Err(DecodeError("string_val has the wrong wire type")),
                    }
                }
            }
            if out.len() == 1 && n > 1 {
                out = vec![out[0]; n];
            }
            if out.len() != n {
                return Err(DecodeError(
                    "string tensor element count does not match its shape",
                ));
            }
            return Ok(Elements::Strings(out));
        }
        let Some(size) = element_size(dtype) else {
            return Err(DecodeError("tensor dtype has no fixed-width element form"));
        };
        if !self.content.is_empty() {
            if self.content.len() != n * size {
                return Err(DecodeError(
                    "tensor_content size does not match dtype and shape",
                ));
            }
            return Ok(Elements::Numeric(self.content.to_vec()));
        }
        let mut out = Vec::new();
        let field = typed_field(dtype);
        for f in Fields::new(self.raw) {
            let (num, w) = f?;
            // torch's add_tensor puts uint8 elements in uint32_val (16), not int_val.
            if num == field || (dtype == DT_UINT8 && num == 16) {
                append_typed(dtype, w, &mut out)?;
            }
        }
        // A complex element is two values on the wire; the fill rule repeats one element.
        let have = out.len() / size;
        if have == 1 && n > 1 {
            let one = out.clone();
            out.reserve(size * (n - 1));
            for _ in 1..n {
                out.extend_from_slice(&one);
            }
        } else if have != n {
            return Err(DecodeError("tensor element count does not match its shape"));
        }
        Ok(Elements::Numeric(out))
    }
}

fn decode_shape<'a>(buf: &'a [u8], t: &mut Tensor<'a>) -> Result<()> {
    for f in Fields::new(buf) {
        match f? {
            (2, Wire::Bytes(dim)) => {
                let mut size = 0i64;
                for g in Fields::new(dim) {
                    if let (1, Wire::Varint(v)) = g? {
                        size = v as i64;
                    }
                }
                t.shape.push(size);
            }
            (3, Wire::Varint(v)) => t.unknown_rank = v != 0,
            _ => {}
        }
    }
    Ok(())
}

/// Which `TensorProto` field carries elements of `dtype`.
fn typed_field(dtype: i32) -> u32 {
    match dtype {
        DT_FLOAT => 5,
        DT_DOUBLE => 6,
        DT_INT32 | DT_UINT8 | DT_INT16 | DT_INT8 | DT_QINT8 | DT_QUINT8 | DT_QINT16
        | DT_QUINT16 | DT_QINT32 | DT_UINT16 => 7,
        DT_COMPLEX64 => 9,
        DT_INT64 => 10,
        DT_BOOL => 11,
        DT_COMPLEX128 => 12,
        DT_HALF | DT_BFLOAT16 => 13,
        DT_UINT32 => 16,
        DT_UINT64 => 17,
        24..=28 => 18,
        _ => 0,
    }
}

/// Calls `push` with each value of a varint field occurrence, packed (`Bytes`) or not; any other
/// wire type is the error `wrong`.
fn each_varint(w: Wire<'_>, wrong: &'static str, mut push: impl FnMut(u64)) -> Result<()> {
    match w {
        Wire::Varint(v) => push(v),
        Wire::Bytes(b) => {
            let mut pos = 0;
            while pos < b.len() {
                push(read_varint(b, &mut pos)?);
            }
        }
        _ => return Err(DecodeError(wrong)),
    }
    Ok(())
}

/// Appends one occurrence of a typed field (packed or not) in the dtype's element width.
fn append_typed(dtype: i32, w: Wire<'_>, out: &mut Vec<u8>) -> Result<()> {
    let fixed = |width: usize, out: &mut Vec<u8>| -> Result<()> {
        match w {
            Wire::Fixed32(v) if width == 4 => out.extend_from_slice(&v.to_le_bytes()),
            Wire::Fixed64(v) if width == 8 => out.extend_from_slice(&v.to_le_bytes()),
            Wire::Bytes(b) if b.len() % width == 0 => out.extend_from_slice(b),
            _ => return Err(DecodeError("typed tensor field has the wrong wire type")),
        }
        Ok(())
    };
    match dtype {
        DT_FLOAT | DT_COMPLEX64 => fixed(4, out),
        DT_DOUBLE | DT_COMPLEX128 => fixed(8, out),
        24..=28 => match w {
            Wire::Bytes(b) => {
                out.extend_from_slice(b);
                Ok(())
            }
            _ => Err(DecodeError("float8_val has the wrong wire type")),
        },
        DT_HALF | DT_BFLOAT16 => each_varint(w, "half_val has the wrong wire type", |v| {
            out.extend_from_slice(&half_val_bits(dtype, v).to_le_bytes())
        }),
        _ => {
            let width = element_size(dtype).unwrap_or(8);
            each_varint(w, "typed tensor field has the wrong wire type", |v| {
                out.extend_from_slice(&v.to_le_bytes()[..width])
            })
        }
    }
}

/// The 16-bit pattern of one `half_val` entry. The format puts it in the low 16 bits; torch's
/// `add_tensor` writes the element's float32 bit pattern instead, as an int32. The two cannot be
/// confused: every float32 pattern of a nonzero half or bfloat16 value is above 0xFFFF (or
/// negative, which arrives sign-extended), and zero is zero either way. Such an entry is narrowed
/// back, exactly for the values torch widened.
fn half_val_bits(dtype: i32, v: u64) -> u16 {
    if v <= 0xffff {
        return v as u16;
    }
    let x = f32::from_bits(v as u32);
    if dtype == DT_BFLOAT16 {
        bf16_bits(x)
    } else {
        f16_bits(x)
    }
}

/// float32 to bfloat16, rounding to nearest even (NaN stays NaN).
fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) as u16) | 0x40;
    }
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// float32 to IEEE half precision, rounding to nearest even (overflow to infinity, NaN kept).
fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    // Keep `shift` low bits of the 24-bit significand off, rounding half to even.
    let (sig, shift, base) = if e <= 0 {
        if e < -10 {
            return sign;
        }
        (man | 0x80_0000, (14 - e) as u32, 0u32)
    } else {
        (man, 13, (e as u32) << 10)
    };
    let kept = sig >> shift;
    let rest = sig & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let up = u32::from(rest > half || (rest == half && kept & 1 == 1));
    // A carry out of the significand moves into the exponent, which is the right result.
    sign | (base + kept + up) as u16
}

/// Converts one element's bytes to f64 (None for dtypes that are not real numbers).
pub fn element_f64(dtype: i32, b: &[u8]) -> Option<f64> {
    macro_rules! le {
        ($t:ty) => {
            <$t>::from_le_bytes(b.get(..std::mem::size_of::<$t>())?.try_into().ok()?) as f64
        };
    }
    Some(match base_dtype(dtype) {
        DT_FLOAT => le!(f32),
        DT_DOUBLE => le!(f64),
        DT_INT32 | DT_QINT32 => le!(i32),
        DT_UINT8 | DT_QUINT8 => le!(u8),
        DT_INT16 | DT_QINT16 => le!(i16),
        DT_INT8 | DT_QINT8 => le!(i8),
        DT_INT64 => le!(i64),
        DT_BOOL => (*b.first()? != 0) as u8 as f64,
        DT_UINT16 | DT_QUINT16 => le!(u16),
        DT_UINT32 => le!(u32),
        DT_UINT64 => le!(u64),
        DT_HALF => f16_to_f64(u16::from_le_bytes(b.get(..2)?.try_into().ok()?)),
        DT_BFLOAT16 => {
            f32::from_bits(u32::from(u16::from_le_bytes(b.get(..2)?.try_into().ok()?)) << 16) as f64
        }
        _ => return None,
    })
}

/// IEEE 754 half precision to f64, exactly.
pub fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor_bytes(dtype: i32, dims: &[i64], tail: &[u8]) -> Vec<u8> {
        let mut shape = Vec::new();
        for &d in dims {
            shape.extend_from_slice(&[0x12, 0x02, 0x08, d as u8]);
        }
        let mut b = vec![0x08, dtype as u8, 0x12, shape.len() as u8];
        b.extend(shape);
        b.extend_from_slice(tail);
        b
    }

    #[test]
    fn fill_rule_repeats_single_value() {
        // float_val packed with one element, shape [2, 3].
        let mut tail = vec![0x2a, 0x04];
        tail.extend_from_slice(&1.5f32.to_le_bytes());
        let buf = tensor_bytes(DT_FLOAT, &[2, 3], &tail);
        let t = Tensor::decode(&buf).unwrap();
        assert_eq!(t.shape, vec![2, 3]);
        let Elements::Numeric(b) = t.elements().unwrap() else {
            panic!()
        };
        let vals: Vec<f32> = b
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(vals, vec![1.5; 6]);
    }

    #[test]
    fn count_mismatch_is_an_error() {
        let mut tail = vec![0x2a, 0x08];
        tail.extend_from_slice(&1.5f32.to_le_bytes());
        tail.extend_from_slice(&2.5f32.to_le_bytes());
        let buf = tensor_bytes(DT_FLOAT, &[3], &tail);
        assert!(Tensor::decode(&buf).unwrap().elements().is_err());
    }

    #[test]
    fn negative_int32_and_half() {
        // int_val = -2 as a 10-byte varint (protobuf sign-extends int32).
        let tail = [
            0x38, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let t_bytes = tensor_bytes(DT_INT32, &[], &tail);
        let t = Tensor::decode(&t_bytes).unwrap();
        assert_eq!(t.scalar_f64(), Some(-2.0));
        // half_val 0x3c00 == 1.0; bfloat16 0x3fc0 == 1.5
        let t_bytes = tensor_bytes(DT_HALF, &[], &[0x68, 0x80, 0x78]);
        assert_eq!(Tensor::decode(&t_bytes).unwrap().scalar_f64(), Some(1.0));
        let t_bytes = tensor_bytes(DT_BFLOAT16, &[], &[0x68, 0xc0, 0x7f]);
        assert_eq!(Tensor::decode(&t_bytes).unwrap().scalar_f64(), Some(1.5));
    }

    fn varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    fn elements_f64(buf: &[u8]) -> Vec<f64> {
        let t = Tensor::decode(buf).unwrap();
        let Elements::Numeric(b) = t.elements().unwrap() else {
            panic!()
        };
        let size = element_size(base_dtype(t.dtype)).unwrap();
        b.chunks(size)
            .map(|c| element_f64(t.dtype, c).unwrap())
            .collect()
    }

    /// half_val as torch's add_tensor writes it: each element's float32 bits as an int32
    /// (negative ones sign-extended to ten bytes), packed.
    fn torch_half_val(dtype: i32, values: &[f32]) -> Vec<u8> {
        let mut packed = Vec::new();
        for v in values {
            packed.extend(varint(v.to_bits() as i32 as i64 as u64));
        }
        let mut tail = vec![0x6a];
        tail.extend(varint(packed.len() as u64));
        tail.extend(packed);
        tensor_bytes(dtype, &[values.len() as i64], &tail)
    }

    #[test]
    fn torchs_float32_patterns_in_half_val() {
        // Values a float16 holds exactly, as torch widened them: subnormal, max, -0, inf.
        let halves = [
            413.0f32 / 1024.0,
            -1473.0 / 2048.0,
            0.0,
            -0.0,
            2f32.powi(-24),
            65504.0,
            f32::INFINITY,
        ];
        let got = elements_f64(&torch_half_val(DT_HALF, &halves));
        assert_eq!(
            got,
            halves.iter().map(|&v| f64::from(v)).collect::<Vec<_>>()
        );
        assert!(got[3].is_sign_negative());
        // bfloat16 values: float32 patterns whose low 16 bits are zero.
        let bf = [
            -207.0f32 / 512.0,
            f32::from_bits(0x7149_0000),
            f32::from_bits(0x80a0_0000),
            0.0,
        ];
        assert_eq!(
            elements_f64(&torch_half_val(DT_BFLOAT16, &bf)),
            bf.iter().map(|&v| f64::from(v)).collect::<Vec<_>>()
        );
        // NaN stays NaN.
        assert!(elements_f64(&torch_half_val(DT_HALF, &[f32::NAN]))[0].is_nan());
        // The format's own 16-bit patterns next to them still mean what they say.
        let t_bytes = tensor_bytes(DT_HALF, &[2], &[0x6a, 0x03, 0x80, 0x78, 0x00]);
        assert_eq!(elements_f64(&t_bytes), vec![1.0, 0.0]);
    }

    #[test]
    fn f16_rounding_is_to_nearest_even() {
        assert_eq!(f16_bits(1.0 + 2f32.powi(-11)), 0x3c00); // halfway, even stays
        assert_eq!(f16_bits(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02); // halfway, odd rounds up
        assert_eq!(f16_bits(65520.0), 0x7c00); // rounds past the largest half
        assert_eq!(f16_bits(2f32.powi(-25)), 0x0000); // halfway to the smallest subnormal
        assert_eq!(f16_bits(1.5 * 2f32.powi(-24)), 0x0002);
        assert_eq!(f16_bits(2f32.powi(-14) * (1.0 - 2f32.powi(-12))), 0x0400); // carries to a normal
        assert_eq!(bf16_bits(1.0 + 2f32.powi(-8)), 0x3f80);
        assert_eq!(bf16_bits(1.0 + 3.0 * 2f32.powi(-8)), 0x3f82);
    }

    #[test]
    fn torchs_uint8_in_uint32_val() {
        // torch: DT_UINT8 with uint32_val (field 16), packed [250, 3].
        let t_bytes = tensor_bytes(DT_UINT8, &[2], &[0x82, 0x01, 0x03, 0xfa, 0x01, 0x03]);
        assert_eq!(elements_f64(&t_bytes), vec![250.0, 3.0]);
    }

    #[test]
    fn half_conversion_edges() {
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(f16_to_f64(0x7bff), 65504.0);
        assert_eq!(f16_to_f64(0xfc00), f64::NEG_INFINITY);
        assert!(f16_to_f64(0x7e00).is_nan());
    }
}
