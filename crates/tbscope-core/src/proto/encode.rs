//! Protobuf encoding: the one place that writes the wire format. The writer encodes whole
//! Events straight into its pending buffer (no intermediate message objects); the rewrite
//! edits the values of an existing Event, copying every other field as raw bytes. The
//! decoding side is [`crate::proto`].

use crate::proto::HistogramProto;
use crate::proto::{raw_fields, DecodeError};

/// The `file_version` every event file starts with; readers use it to pick a restart policy.
pub const FILE_VERSION: &str = "brain.Event:2";

// ------------------------------------------------------------------------------------------
// Protobuf encoding.
//
// Only what events need: varints, fixed64/fixed32, and length-delimited fields whose length
// is known only after their body is written. Keys of fields 1-15 are one byte, so they are
// constants below.

const WIRE_VARINT: u8 = 0;
const WIRE_FIXED64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_FIXED32: u8 = 5;

/// The one-byte key of field `n` (`n <= 15`).
const fn key(n: u8, wire: u8) -> u8 {
    (n << 3) | wire
}

/// Bytes a varint of `v` takes.
#[inline(always)]
pub fn varint_len(v: u64) -> usize {
    // 1 + (index of the highest set bit) / 7; `| 1` makes 0 take one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends `v` as a varint.
#[inline(always)]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint of exactly `buf.len()` bytes (the caller sized it with
/// [`varint_len`]).
#[inline(always)]
fn varint_into(buf: &mut [u8], mut v: u64) {
    let last = buf.len() - 1;
    for b in &mut buf[..last] {
        *b = v as u8 | 0x80;
        v >>= 7;
    }
    buf[last] = v as u8;
}

#[inline(always)]
fn put_f64(out: &mut Vec<u8>, k: u8, v: f64) {
    out.push(k);
    out.extend_from_slice(&v.to_le_bytes());
}

#[inline(always)]
fn put_bytes(out: &mut Vec<u8>, k: u8, b: &[u8]) {
    out.push(k);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A length-delimited field whose body `f` writes in place.
///
/// The length goes before the body but is known only after it, so `hint` (the expected body
/// size) decides how many bytes to leave for it; when the guess is off the body is moved by a
/// byte or two. Callers that know the size exactly pass it and nothing moves; small messages
/// pass a small hint and nothing moves either.
#[inline(always)]
fn nested<R>(out: &mut Vec<u8>, k: u8, hint: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    out.push(k);
    let at = out.len();
    let reserved = varint_len(hint as u64);
    out.extend_from_slice(&[0u8; 10][..reserved]);
    let r = f(out);
    let body = at + reserved;
    let len = out.len() - body;
    let need = varint_len(len as u64);
    if need > reserved {
        out.extend_from_slice(&[0u8; 10][..need - reserved]);
        out.copy_within(body..body + len, at + need);
    } else if need < reserved {
        out.copy_within(body..body + len, at + need);
        out.truncate(at + need + len);
    }
    varint_into(&mut out[at..at + need], len as u64);
    r
}

// Field keys, named after the proto fields (see `proto.rs` for the reading side).
const EV_WALL_TIME: u8 = key(1, WIRE_FIXED64);
const EV_STEP: u8 = key(2, WIRE_VARINT);
const EV_FILE_VERSION: u8 = key(3, WIRE_LEN);
const EV_SUMMARY: u8 = key(5, WIRE_LEN);
const SUMMARY_VALUE: u8 = key(1, WIRE_LEN);
const VAL_TAG: u8 = key(1, WIRE_LEN);
const VAL_SIMPLE: u8 = key(2, WIRE_FIXED32);
const VAL_HISTO: u8 = key(5, WIRE_LEN);
const VAL_TENSOR: u8 = key(8, WIRE_LEN);
const VAL_METADATA: u8 = key(9, WIRE_LEN);
const META_PLUGIN_DATA: u8 = key(1, WIRE_LEN);
const PLUGIN_NAME: u8 = key(1, WIRE_LEN);
const TENSOR_DTYPE: u8 = key(1, WIRE_VARINT);
const TENSOR_SHAPE: u8 = key(2, WIRE_LEN);
const TENSOR_CONTENT: u8 = key(4, WIRE_LEN);
const TENSOR_FLOAT_VAL: u8 = key(5, WIRE_LEN);
const TENSOR_DOUBLE_VAL: u8 = key(6, WIRE_LEN);
const SHAPE_DIM: u8 = key(2, WIRE_LEN);
const DIM_SIZE: u8 = key(1, WIRE_VARINT);
const HISTO_MIN: u8 = key(1, WIRE_FIXED64);
const HISTO_MAX: u8 = key(2, WIRE_FIXED64);
const HISTO_NUM: u8 = key(3, WIRE_FIXED64);
const HISTO_SUM: u8 = key(4, WIRE_FIXED64);
const HISTO_SUM_SQUARES: u8 = key(5, WIRE_FIXED64);
const HISTO_BUCKET_LIMIT: u8 = key(6, WIRE_LEN);
const HISTO_BUCKET: u8 = key(7, WIRE_LEN);

const DT_FLOAT: u64 = 1;
const DT_DOUBLE: u64 = 2;
pub(crate) const DT_STRING: i32 = 7;

/// `wall_time` and, when given, `step`: the fields every event starts with.
#[inline(always)]
fn event_head(out: &mut Vec<u8>, wall: f64, step: Option<i64>) {
    put_f64(out, EV_WALL_TIME, wall);
    if let Some(s) = step {
        out.push(EV_STEP);
        // int64 on the wire: negative steps are their two's complement, ten bytes.
        put_varint(out, s as u64);
    }
}

/// How a scalar is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarStyle {
    /// `Summary.Value.simple_value` (float32): what TF1, tensorboardX and PyTorch write.
    Simple,
    /// A rank-0 DT_FLOAT tensor with `scalars` plugin metadata: TF2's form.
    Tensor32,
    /// A rank-0 DT_DOUBLE tensor: keeps all 53 bits (TensorBoard's Rust server ignores these;
    /// its Python server and tbscope read them).
    Tensor64,
}

/// Encodes the first event of every file.
pub fn encode_file_version(out: &mut Vec<u8>, wall: f64) {
    put_f64(out, EV_WALL_TIME, wall);
    put_bytes(out, EV_FILE_VERSION, FILE_VERSION.as_bytes());
}

fn encode_scalar_value(out: &mut Vec<u8>, tag: &str, value: f64, style: ScalarStyle) {
    nested(out, SUMMARY_VALUE, tag.len() + 40, |out| {
        put_bytes(out, VAL_TAG, tag.as_bytes());
        match style {
            ScalarStyle::Simple => {
                out.push(VAL_SIMPLE);
                out.extend_from_slice(&(value as f32).to_le_bytes());
            }
            ScalarStyle::Tensor32 | ScalarStyle::Tensor64 => {
                let double = style == ScalarStyle::Tensor64;
                nested(out, VAL_TENSOR, 16, |out| {
                    out.push(TENSOR_DTYPE);
                    put_varint(out, if double { DT_DOUBLE } else { DT_FLOAT });
                    // An empty shape: rank 0.
                    out.extend_from_slice(&[TENSOR_SHAPE, 0]);
                    if double {
                        out.extend_from_slice(&[TENSOR_DOUBLE_VAL, 8]);
                        out.extend_from_slice(&value.to_le_bytes());
                    } else {
                        out.extend_from_slice(&[TENSOR_FLOAT_VAL, 4]);
                        out.extend_from_slice(&(value as f32).to_le_bytes());
                    }
                });
                nested(out, VAL_METADATA, 11, |out| {
                    nested(out, META_PLUGIN_DATA, 9, |out| {
                        put_bytes(out, PLUGIN_NAME, b"scalars");
                    });
                });
            }
        }
    });
}

/// One scalar event.
pub fn encode_scalar(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    tag: &str,
    value: f64,
    style: ScalarStyle,
) {
    event_head(out, wall, step);
    nested(out, EV_SUMMARY, tag.len() + 44, |out| {
        encode_scalar_value(out, tag, value, style)
    });
}

/// Appends one `Summary.value` entry holding `tag` and a `simple_value` (float32): what
/// `encode_scalar_value` writes for [`ScalarStyle::Simple`], with every length known up
/// front, so nothing is moved. Batched logging builds whole `Summary` bodies from these.
#[inline]
pub fn put_simple_value(out: &mut Vec<u8>, tag: &str, value: f64) {
    let t = tag.len();
    let body = 1 + varint_len(t as u64) + t + 5;
    out.reserve(1 + varint_len(body as u64) + body);
    out.push(SUMMARY_VALUE);
    put_varint(out, body as u64);
    out.push(VAL_TAG);
    put_varint(out, t as u64);
    out.extend_from_slice(tag.as_bytes());
    out.push(VAL_SIMPLE);
    out.extend_from_slice(&(value as f32).to_le_bytes());
}

/// One event holding a `simple_value` per tag.
pub fn encode_scalars<'a>(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    items: impl Iterator<Item = (&'a str, f64)>,
    hint: usize,
) {
    event_head(out, wall, step);
    nested(out, EV_SUMMARY, hint, |out| {
        for (tag, value) in items {
            put_simple_value(out, tag, value);
        }
    });
}

/// Bytes of a packed repeated double field's body.
fn packed_f64(out: &mut Vec<u8>, k: u8, v: &[f64]) {
    out.push(k);
    put_varint(out, (v.len() * 8) as u64);
    #[cfg(target_endian = "little")]
    {
        // The wire format is the in-memory one: one copy instead of a push per value.
        // SAFETY: any f64 is 8 initialised bytes; the slice covers exactly `v`.
        out.extend_from_slice(unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        });
    }
    #[cfg(not(target_endian = "little"))]
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// One histogram event: a legacy `HistogramProto` in `Summary.Value.histo`.
pub fn encode_histogram(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    tag: &str,
    h: &HistogramProto,
) {
    // Exact sizes, so a histogram of thousands of buckets is never moved.
    let histo = 5 * 9 + field_len(h.bucket_limit.len() * 8) + field_len(h.bucket.len() * 8);
    value_event(out, wall, step, tag, field_len(histo), |out| {
        nested(out, VAL_HISTO, histo, |out| {
            put_f64(out, HISTO_MIN, h.min);
            put_f64(out, HISTO_MAX, h.max);
            put_f64(out, HISTO_NUM, h.num);
            put_f64(out, HISTO_SUM, h.sum);
            put_f64(out, HISTO_SUM_SQUARES, h.sum_squares);
            packed_f64(out, HISTO_BUCKET_LIMIT, &h.bucket_limit);
            packed_f64(out, HISTO_BUCKET, &h.bucket);
        });
    });
}

/// Bytes of a length-delimited field with a one-byte key and a body of `body` bytes.
#[inline(always)]
fn field_len(body: usize) -> usize {
    1 + varint_len(body as u64) + body
}

/// An event holding one `Summary.Value`: its `tag`, then what `rest` writes (exactly `rest_len`
/// bytes, so no length has to be moved).
#[inline(always)]
fn value_event(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    tag: &str,
    rest_len: usize,
    rest: impl FnOnce(&mut Vec<u8>),
) {
    let value = field_len(tag.len()) + rest_len;
    event_head(out, wall, step);
    nested(out, EV_SUMMARY, field_len(value), |out| {
        nested(out, SUMMARY_VALUE, value, |out| {
            put_bytes(out, VAL_TAG, tag.as_bytes());
            rest(out);
        });
    });
}

/// One tensor event: `TensorProto{dtype, tensor_shape, tensor_content}` plus optional
/// already-encoded `SummaryMetadata`.
#[allow(
    clippy::too_many_arguments,
    reason = "one event's fields, encoded in place without an intermediate message"
)]
pub fn encode_tensor(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    tag: &str,
    data: &[u8],
    dtype: i32,
    shape: &[i64],
    metadata: Option<&[u8]>,
) {
    let dims: usize = shape
        .iter()
        .map(|&d| field_len(1 + varint_len(d as u64)))
        .sum();
    let content = if data.is_empty() {
        0
    } else {
        field_len(data.len())
    };
    let tensor = 1 + varint_len(dtype as u64) + field_len(dims) + content;
    let meta = metadata.map_or(0, |m| field_len(m.len()));
    value_event(out, wall, step, tag, field_len(tensor) + meta, |out| {
        nested(out, VAL_TENSOR, tensor, |out| {
            out.push(TENSOR_DTYPE);
            put_varint(out, dtype as u64);
            nested(out, TENSOR_SHAPE, dims, |out| {
                for &d in shape {
                    nested(out, SHAPE_DIM, 1 + varint_len(d as u64), |out| {
                        out.push(DIM_SIZE);
                        put_varint(out, d as u64);
                    });
                }
            });
            // proto3 leaves empty bytes out; readers see the same either way.
            if !data.is_empty() {
                put_bytes(out, TENSOR_CONTENT, data);
            }
        });
        if let Some(m) = metadata {
            put_bytes(out, VAL_METADATA, m);
        }
    });
}

/// An already-encoded `Summary` wrapped in an event.
pub fn encode_summary(out: &mut Vec<u8>, wall: f64, step: Option<i64>, summary: &[u8]) {
    event_head(out, wall, step);
    put_bytes(out, EV_SUMMARY, summary);
}

// ------------------------------------------------------------------------------------------
// Editing the values of an encoded Event.

/// The field number of a one-byte key.
const fn number(k: u8) -> u32 {
    (k >> 3) as u32
}

/// How a kept value goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueEdit {
    Keep,
    Drop,
    /// Carry this SummaryMetadata instead of its own.
    SetMeta(Vec<u8>),
    /// Carry no metadata (its series was decided by a legacy value without any).
    StripMeta,
}

/// A Summary.Value with its metadata replaced (or removed); every other field as it was.
fn edit_value(value: &[u8], meta: Option<&[u8]>) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(value.len() + meta.map_or(0, |m| m.len() + 6));
    for f in raw_fields(value) {
        let f = f?;
        if f.number != number(VAL_METADATA) {
            out.extend_from_slice(f.whole);
        }
    }
    if let Some(m) = meta {
        put_bytes(&mut out, VAL_METADATA, m);
    }
    Ok(out)
}

/// The Event `data` with the values of its Summary edited as `edits` says (one per value, in
/// order). The Summary that decoders use is the last one on the wire; any other field of the
/// Event, that Summary's non-value fields included, is copied as it was.
pub fn edit_event(data: &[u8], edits: &[ValueEdit]) -> Result<Vec<u8>, DecodeError> {
    let last_summary = raw_fields(data)
        .enumerate()
        .filter(|(_, f)| f.as_ref().is_ok_and(|f| f.number == number(EV_SUMMARY)))
        .map(|(i, _)| i)
        .last();
    let mut out = Vec::with_capacity(data.len());
    for (i, f) in raw_fields(data).enumerate() {
        let f = f?;
        if Some(i) != last_summary {
            out.extend_from_slice(f.whole);
            continue;
        }
        let summary = f
            .bytes
            .ok_or(DecodeError("expected a length-delimited field"))?;
        let mut body = Vec::with_capacity(summary.len());
        let mut edit = edits.iter();
        for g in raw_fields(summary) {
            let g = g?;
            if g.number != number(SUMMARY_VALUE) {
                body.extend_from_slice(g.whole);
                continue;
            }
            let value = g
                .bytes
                .ok_or(DecodeError("expected a length-delimited field"))?;
            match edit.next().unwrap_or(&ValueEdit::Keep) {
                ValueEdit::Keep => body.extend_from_slice(g.whole),
                ValueEdit::Drop => {}
                ValueEdit::SetMeta(m) => {
                    put_bytes(&mut body, SUMMARY_VALUE, &edit_value(value, Some(m))?)
                }
                ValueEdit::StripMeta => {
                    put_bytes(&mut body, SUMMARY_VALUE, &edit_value(value, None)?)
                }
            }
        }
        put_bytes(&mut out, EV_SUMMARY, &body);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tf_record::{framed, write_record};

    #[test]
    fn varint_lengths() {
        for (v, n) in [
            (0u64, 1),
            (127, 1),
            (128, 2),
            (16383, 2),
            (16384, 3),
            (u64::MAX, 10),
        ] {
            assert_eq!(varint_len(v), n, "{v}");
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), n);
            let mut pos = 0;
            assert_eq!(crate::proto::read_varint(&out, &mut pos).unwrap(), v);
        }
    }

    #[test]
    fn nested_moves_body_when_hint_is_off() {
        for (hint, body) in [(0usize, 300usize), (5000, 3), (200, 200), (1, 20000)] {
            let mut out = vec![0xee];
            nested(&mut out, 0x0a, hint, |o| {
                o.extend_from_slice(&vec![7u8; body])
            });
            let mut pos = 2;
            assert_eq!(out[1], 0x0a);
            let len = crate::proto::read_varint(&out, &mut pos).unwrap() as usize;
            assert_eq!(len, body, "hint {hint}");
            assert_eq!(out.len(), pos + body);
            assert!(out[pos..].iter().all(|&b| b == 7));
        }
    }

    #[test]
    fn framing_matches_write_record() {
        let mut payload = Vec::new();
        encode_scalar(
            &mut payload,
            1.5e9,
            Some(3),
            "loss",
            0.25,
            ScalarStyle::Simple,
        );
        let mut a = Vec::new();
        write_record(&mut a, &payload);
        let mut b = vec![1, 2, 3];
        framed(&mut b, |o| {
            encode_scalar(o, 1.5e9, Some(3), "loss", 0.25, ScalarStyle::Simple)
        });
        assert_eq!(&b[3..], &a[..]);
    }

    #[test]
    fn simple_values_match_the_general_encoder() {
        // Short tags and ones whose lengths need two-byte varints.
        for n in [0usize, 1, 20, 119, 120, 121, 122, 127, 128, 300] {
            let tag = "t".repeat(n);
            for v in [0.0, -1.5, f64::NAN, 1e300] {
                let mut a = Vec::new();
                encode_scalar_value(&mut a, &tag, v, ScalarStyle::Simple);
                let mut b = vec![9u8];
                put_simple_value(&mut b, &tag, v);
                assert_eq!(&b[1..], &a[..], "tag of {n} bytes");
            }
        }
    }

    #[test]
    fn scalar_bytes_match_tensorflow_layout() {
        // The TF2 record quoted in the format reference (section 1.3), modulo wall time.
        let mut out = Vec::new();
        encode_scalar(
            &mut out,
            0.0,
            Some(77),
            "accuracy",
            0.99,
            ScalarStyle::Tensor32,
        );
        let tail = &out[9..];
        assert_eq!(&tail[..2], &[0x10, 0x4d]);
        let mut expect = vec![0x2a, 0x25, 0x0a, 0x23, 0x0a, 0x08];
        expect.extend_from_slice(b"accuracy");
        // Ours uses float_val (field 5) where TF uses tensor_content; same length.
        expect.extend_from_slice(&[0x42, 0x0a, 0x08, 0x01, 0x12, 0x00, 0x2a, 0x04]);
        expect.extend_from_slice(&0.99f32.to_le_bytes());
        expect.extend_from_slice(&[0x4a, 0x0b, 0x0a, 0x09, 0x0a, 0x07]);
        expect.extend_from_slice(b"scalars");
        assert_eq!(&tail[2..], &expect[..]);
    }
}
