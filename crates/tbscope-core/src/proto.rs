//! A zero-copy protobuf decoder for the handful of messages an event file holds.
//!
//! Generated decoders allocate a `String`/`Vec` per field; at tens of millions of events that
//! allocation is most of the cost. Here every message is a view over the record's bytes: fields
//! are located once and sub-messages stay `&[u8]` until someone asks for them. Field numbers
//! follow TensorBoard's vendored protos (`tensorboard/compat/proto/*.proto`).

use std::fmt;

pub mod encode;

/// A record's bytes that are not valid protobuf, or not the message they should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

pub type Result<T> = std::result::Result<T, DecodeError>;

/// One field's payload, by wire type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl<'a> Wire<'a> {
    #[inline]
    fn bytes(self) -> Result<&'a [u8]> {
        match self {
            Wire::Bytes(b) => Ok(b),
            _ => Err(DecodeError("expected a length-delimited field")),
        }
    }
    #[inline]
    fn varint(self) -> Result<u64> {
        match self {
            Wire::Varint(v) => Ok(v),
            _ => Err(DecodeError("expected a varint field")),
        }
    }
    #[inline]
    fn f64(self) -> Result<f64> {
        match self {
            Wire::Fixed64(v) => Ok(f64::from_bits(v)),
            _ => Err(DecodeError("expected a double field")),
        }
    }
    #[inline]
    fn f32(self) -> Result<f32> {
        match self {
            Wire::Fixed32(v) => Ok(f32::from_bits(v)),
            _ => Err(DecodeError("expected a float field")),
        }
    }
}

#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    // Keys, steps below 128 and short lengths are one byte: keep that path tiny and inline.
    if let Some(&b) = buf.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Ok(u64::from(b));
        }
        // Two bytes (steps up to 16383, most lengths) stay on the fast path too.
        if let Some(&c) = buf.get(*pos + 1) {
            if c < 0x80 {
                *pos += 2;
                return Ok(u64::from(b & 0x7f) | (u64::from(c) << 7));
            }
        }
    }
    read_varint_slow(buf, pos)
}

#[inline(never)]
fn read_varint_slow(buf: &[u8], pos: &mut usize) -> Result<u64> {
    let mut out = 0u64;
    let mut shift = 0u32;
    loop {
        let Some(&b) = buf.get(*pos) else {
            return Err(DecodeError("varint runs past the end"));
        };
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err(DecodeError("varint is too long"));
        }
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
        shift += 7;
        if shift > 63 {
            return Err(DecodeError("varint is too long"));
        }
    }
}

/// Iterates the fields of one message.
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Fields { buf, pos: 0 }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Wire<'a>)>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        Some(self.field())
    }
}

impl<'a> Fields<'a> {
    #[inline(always)]
    fn field(&mut self) -> Result<(u32, Wire<'a>)> {
        let key = read_varint(self.buf, &mut self.pos)?;
        let number = (key >> 3) as u32;
        if number == 0 || key >> 3 > u64::from(u32::MAX >> 3) {
            self.pos = self.buf.len();
            return Err(DecodeError("invalid field number"));
        }
        let wire = match key & 7 {
            0 => Wire::Varint(read_varint(self.buf, &mut self.pos)?),
            1 => {
                let b = self.take(8)?;
                Wire::Fixed64(u64::from_le_bytes(b.try_into().unwrap()))
            }
            2 => {
                let n = read_varint(self.buf, &mut self.pos)?;
                let n = usize::try_from(n).map_err(|_| DecodeError("length overflows"))?;
                Wire::Bytes(self.take(n)?)
            }
            5 => {
                let b = self.take(4)?;
                Wire::Fixed32(u32::from_le_bytes(b.try_into().unwrap()))
            }
            _ => {
                self.pos = self.buf.len();
                return Err(DecodeError("unsupported wire type"));
            }
        };
        Ok((number, wire))
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => {
                self.pos = self.buf.len();
                Err(DecodeError("field runs past the end of its message"))
            }
        }
    }
}

/// `Event.what`: at most one is set (the last one on the wire wins, as in protobuf).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum What<'a> {
    #[default]
    Nothing,
    FileVersion(&'a [u8]),
    GraphDef(&'a [u8]),
    Summary(&'a [u8]),
    LogMessage(&'a [u8]),
    SessionLog(&'a [u8]),
    TaggedRunMetadata(&'a [u8]),
    MetaGraphDef(&'a [u8]),
}

/// `tensorboard.Event`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Event<'a> {
    pub wall_time: f64,
    pub step: i64,
    pub what: What<'a>,
    /// `source_metadata.writer`, only on a file's first event.
    pub source_metadata: Option<&'a [u8]>,
}

impl<'a> Event<'a> {
    /// Decodes wall time, step and the location of the payload; nothing below that.
    #[inline]
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut ev = Event::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => ev.wall_time = w.f64()?,
                2 => ev.step = w.varint()? as i64,
                3 => ev.what = What::FileVersion(w.bytes()?),
                4 => ev.what = What::GraphDef(w.bytes()?),
                5 => ev.what = What::Summary(w.bytes()?),
                6 => ev.what = What::LogMessage(w.bytes()?),
                7 => ev.what = What::SessionLog(w.bytes()?),
                8 => ev.what = What::TaggedRunMetadata(w.bytes()?),
                9 => ev.what = What::MetaGraphDef(w.bytes()?),
                10 => ev.source_metadata = Some(w.bytes()?),
                _ => {}
            }
        }
        Ok(ev)
    }
}

/// The commonest event of all: wall time, step and one `simple_value`, nothing else.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimpleScalar<'a> {
    pub wall_time: f64,
    pub step: i64,
    pub tag: &'a [u8],
    pub value: f32,
}

/// Recognises an event laid out exactly as `wall_time, step, summary{value{tag, simple_value}}`
/// (what tensorboardX, PyTorch and TF1 write for a scalar) with straight-line code: the generic
/// decoder's per-field dispatch costs more than the rest of reading such a record. Anything
/// else, including extra fields or another order, returns None for the general path.
#[inline(always)]
pub fn simple_scalar(b: &[u8]) -> Option<SimpleScalar<'_>> {
    if b.len() < 9 || b[0] != 0x09 {
        return None;
    }
    let wall_time = f64::from_le_bytes(b[1..9].try_into().ok()?);
    let mut pos = 9;
    let mut step = 0i64;
    if b.get(pos) == Some(&0x10) {
        pos += 1;
        step = read_varint(b, &mut pos).ok()? as i64;
    }
    if b.get(pos) != Some(&0x2a) {
        return None;
    }
    pos += 1;
    let summary_len = read_varint(b, &mut pos).ok()? as usize;
    // Checked: a damaged length near 2^64 must not overflow (this runs before the data CRC).
    if pos.checked_add(summary_len) != Some(b.len()) || b.get(pos) != Some(&0x0a) {
        return None;
    }
    pos += 1;
    let value_len = read_varint(b, &mut pos).ok()? as usize;
    if pos.checked_add(value_len) != Some(b.len()) || b.get(pos) != Some(&0x0a) {
        return None;
    }
    pos += 1;
    let tag_len = read_varint(b, &mut pos).ok()? as usize;
    let tag = b.get(pos..pos.checked_add(tag_len)?)?;
    pos += tag_len;
    // Exactly the float field must remain.
    if b.len() != pos + 5 || b[pos] != 0x15 {
        return None;
    }
    let value = f32::from_le_bytes(b[pos + 1..pos + 5].try_into().ok()?);
    Some(SimpleScalar {
        wall_time,
        step,
        tag,
        value,
    })
}

/// Iterates `Summary.value` entries without decoding them.
pub fn summary_values(summary: &[u8]) -> impl Iterator<Item = Result<&[u8]>> {
    Fields::new(summary).filter_map(|f| match f {
        Ok((1, w)) => Some(w.bytes()),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    })
}

/// `Summary.Value.value`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ValueKind<'a> {
    #[default]
    Nothing,
    Simple(f32),
    ObsoleteHisto,
    Image(&'a [u8]),
    Histo(&'a [u8]),
    Audio(&'a [u8]),
    Tensor(&'a [u8]),
}

/// `Summary.Value`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SummaryValue<'a> {
    pub tag: &'a [u8],
    pub node_name: &'a [u8],
    pub metadata: Option<&'a [u8]>,
    pub value: ValueKind<'a>,
}

impl<'a> SummaryValue<'a> {
    #[inline]
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut v = SummaryValue::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => v.tag = w.bytes()?,
                2 => v.value = ValueKind::Simple(w.f32()?),
                3 => v.value = ValueKind::ObsoleteHisto,
                4 => v.value = ValueKind::Image(w.bytes()?),
                5 => v.value = ValueKind::Histo(w.bytes()?),
                6 => v.value = ValueKind::Audio(w.bytes()?),
                7 => v.node_name = w.bytes()?,
                8 => v.value = ValueKind::Tensor(w.bytes()?),
                9 => v.metadata = Some(w.bytes()?),
                _ => {}
            }
        }
        Ok(v)
    }

    /// The tag, falling back to the legacy `node_name` as TensorBoard's Python loader does.
    #[inline]
    pub fn effective_tag(&self) -> &'a [u8] {
        if self.tag.is_empty() {
            self.node_name
        } else {
            self.tag
        }
    }
}

/// `SummaryMetadata`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metadata<'a> {
    pub plugin_name: &'a [u8],
    pub plugin_content: &'a [u8],
    pub display_name: &'a [u8],
    pub description: &'a [u8],
    pub data_class: i32,
}

impl<'a> Metadata<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut m = Metadata::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => {
                    for g in Fields::new(w.bytes()?) {
                        let (n, w) = g?;
                        match n {
                            1 => m.plugin_name = w.bytes()?,
                            2 => m.plugin_content = w.bytes()?,
                            _ => {}
                        }
                    }
                }
                2 => m.display_name = w.bytes()?,
                3 => m.description = w.bytes()?,
                4 => m.data_class = w.varint()? as i32,
                _ => {}
            }
        }
        Ok(m)
    }
}

/// `HistogramProto`, the legacy histogram: what the reader decodes and the writer encodes.
/// `bucket[i]` counts values up to `bucket_limit[i]` (its right edge).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistogramProto {
    pub min: f64,
    pub max: f64,
    pub num: f64,
    pub sum: f64,
    pub sum_squares: f64,
    pub bucket_limit: Vec<f64>,
    pub bucket: Vec<f64>,
}

impl HistogramProto {
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut h = HistogramProto::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => h.min = w.f64()?,
                2 => h.max = w.f64()?,
                3 => h.num = w.f64()?,
                4 => h.sum = w.f64()?,
                5 => h.sum_squares = w.f64()?,
                6 => push_f64s(&mut h.bucket_limit, w)?,
                7 => push_f64s(&mut h.bucket, w)?,
                _ => {}
            }
        }
        Ok(h)
    }
}

/// Appends a repeated double, packed or not.
fn push_f64s(out: &mut Vec<f64>, w: Wire<'_>) -> Result<()> {
    match w {
        Wire::Fixed64(v) => out.push(f64::from_bits(v)),
        Wire::Bytes(b) => {
            if b.len() % 8 != 0 {
                return Err(DecodeError("packed doubles are not a multiple of 8 bytes"));
            }
            out.extend(
                b.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap())),
            );
        }
        _ => return Err(DecodeError("expected doubles")),
    }
    Ok(())
}

/// `Summary.Image`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Image<'a> {
    pub height: i32,
    pub width: i32,
    pub colorspace: i32,
    pub encoded: &'a [u8],
}

impl<'a> Image<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut im = Image::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => im.height = w.varint()? as i32,
                2 => im.width = w.varint()? as i32,
                3 => im.colorspace = w.varint()? as i32,
                4 => im.encoded = w.bytes()?,
                _ => {}
            }
        }
        Ok(im)
    }
}

/// `Summary.Audio`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Audio<'a> {
    pub sample_rate: f32,
    pub num_channels: i64,
    pub length_frames: i64,
    pub encoded: &'a [u8],
    pub content_type: &'a [u8],
}

impl<'a> Audio<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut a = Audio::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => a.sample_rate = w.f32()?,
                2 => a.num_channels = w.varint()? as i64,
                3 => a.length_frames = w.varint()? as i64,
                4 => a.encoded = w.bytes()?,
                5 => a.content_type = w.bytes()?,
                _ => {}
            }
        }
        Ok(a)
    }
}

/// `SessionLog`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SessionLog<'a> {
    pub status: i32,
    pub checkpoint_path: &'a [u8],
    pub msg: &'a [u8],
}

impl<'a> SessionLog<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut s = SessionLog::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => s.status = w.varint()? as i32,
                2 => s.checkpoint_path = w.bytes()?,
                3 => s.msg = w.bytes()?,
                _ => {}
            }
        }
        Ok(s)
    }
}

/// `LogMessage` (deprecated in TensorFlow, still in TF1 logs).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LogMessage<'a> {
    pub level: i32,
    pub message: &'a [u8],
}

impl<'a> LogMessage<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut m = LogMessage::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => m.level = w.varint()? as i32,
                2 => m.message = w.bytes()?,
                _ => {}
            }
        }
        Ok(m)
    }
}

/// `TaggedRunMetadata`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TaggedRunMetadata<'a> {
    pub tag: &'a [u8],
    pub run_metadata: &'a [u8],
}

impl<'a> TaggedRunMetadata<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<Self> {
        let mut t = TaggedRunMetadata::default();
        for f in Fields::new(buf) {
            let (n, w) = f?;
            match n {
                1 => t.tag = w.bytes()?,
                2 => t.run_metadata = w.bytes()?,
                _ => {}
            }
        }
        Ok(t)
    }
}

/// One field of a message as it sits on the wire.
pub(crate) struct RawField<'a> {
    pub(crate) number: u32,
    /// The whole field, key included: what is copied when the field is kept.
    pub(crate) whole: &'a [u8],
    /// The payload of a length-delimited field.
    pub(crate) bytes: Option<&'a [u8]>,
}

/// The fields of `buf` with their exact byte spans (`proto::Fields` gives payloads only).
pub(crate) fn raw_fields(buf: &[u8]) -> impl Iterator<Item = Result<RawField<'_>>> {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if pos >= buf.len() {
            return None;
        }
        let start = pos;
        let field = (|| {
            let key = read_varint(buf, &mut pos)?;
            let number =
                u32::try_from(key >> 3).map_err(|_| DecodeError("invalid field number"))?;
            if number == 0 {
                return Err(DecodeError("invalid field number"));
            }
            let mut bytes = None;
            let skip = match key & 7 {
                0 => {
                    read_varint(buf, &mut pos)?;
                    0
                }
                1 => 8,
                2 => {
                    let n = read_varint(buf, &mut pos)?;
                    let n = usize::try_from(n).map_err(|_| DecodeError("length overflows"))?;
                    let end = pos
                        .checked_add(n)
                        .filter(|&e| e <= buf.len())
                        .ok_or(DecodeError("field runs past the end of its message"))?;
                    bytes = Some(&buf[pos..end]);
                    n
                }
                5 => 4,
                _ => return Err(DecodeError("unsupported wire type")),
            };
            pos = pos
                .checked_add(skip)
                .filter(|&e| e <= buf.len())
                .ok_or(DecodeError("field runs past the end of its message"))?;
            Ok(RawField {
                number,
                whole: &buf[start..pos],
                bytes,
            })
        })();
        if field.is_err() {
            pos = buf.len();
        }
        Some(field)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tf.summary.scalar("accuracy", 0.99, step=77)` as TensorFlow 2 writes it.
    fn tf2_scalar_event() -> Vec<u8> {
        let mut ev = vec![0x09];
        ev.extend_from_slice(&1234.5f64.to_le_bytes());
        ev.extend_from_slice(&[0x10, 0x4d, 0x2a, 0x25, 0x0a, 0x23, 0x0a, 0x08]);
        ev.extend_from_slice(b"accuracy");
        ev.extend_from_slice(&[
            0x42, 0x0a, 0x08, 0x01, 0x12, 0x00, 0x22, 0x04, 0xa4, 0x70, 0x7d, 0x3f,
        ]);
        ev.extend_from_slice(&[0x4a, 0x0b, 0x0a, 0x09, 0x0a, 0x07]);
        ev.extend_from_slice(b"scalars");
        ev
    }

    #[test]
    fn decodes_tf2_scalar() {
        let buf = tf2_scalar_event();
        let ev = Event::decode(&buf).unwrap();
        assert_eq!(ev.wall_time, 1234.5);
        assert_eq!(ev.step, 77);
        let What::Summary(s) = ev.what else { panic!() };
        let vals: Vec<_> = summary_values(s).collect::<Result<_>>().unwrap();
        assert_eq!(vals.len(), 1);
        let v = SummaryValue::decode(vals[0]).unwrap();
        assert_eq!(v.tag, b"accuracy");
        let md = Metadata::decode(v.metadata.unwrap()).unwrap();
        assert_eq!(md.plugin_name, b"scalars");
        let ValueKind::Tensor(t) = v.value else {
            panic!()
        };
        assert_eq!(&t[t.len() - 4..], &0.99f32.to_le_bytes());
    }

    #[test]
    fn every_truncation_errors_or_decodes_prefix_cleanly() {
        let buf = tf2_scalar_event();
        for cut in 0..buf.len() {
            // Must never panic; may succeed when the cut lands on a field boundary.
            let _ = Event::decode(&buf[..cut]).map(|e| match e.what {
                What::Summary(s) => summary_values(s).count(),
                _ => 0,
            });
        }
    }

    #[test]
    fn simple_scalar_agrees_with_the_general_decoder() {
        let mut ev = vec![0x09];
        ev.extend_from_slice(&7.25f64.to_le_bytes());
        ev.extend_from_slice(&[
            0x10, 0x96, 0x01, 0x2a, 0x0b, 0x0a, 0x09, 0x0a, 0x02, b'l', b'r', 0x15,
        ]);
        ev.extend_from_slice(&0.5f32.to_le_bytes());
        let s = simple_scalar(&ev).unwrap();
        assert_eq!(
            (s.wall_time, s.step, s.tag, s.value),
            (7.25, 150, &b"lr"[..], 0.5)
        );
        let general = Event::decode(&ev).unwrap();
        assert_eq!((general.wall_time, general.step), (7.25, 150));
        // Any extra byte, a second value, or a truncation falls back to the general path.
        let mut longer = ev.clone();
        longer.push(0);
        assert!(simple_scalar(&longer).is_none());
        for cut in 0..ev.len() {
            assert!(simple_scalar(&ev[..cut]).is_none());
        }
        assert!(simple_scalar(&tf2_scalar_event()).is_none());
    }

    #[test]
    fn rejects_groups_and_overlong_varints() {
        assert!(Event::decode(&[0x0b]).is_err()); // start-group wire type
        let mut pos = 0;
        assert!(read_varint(&[0xff; 11], &mut pos).is_err());
        let mut pos = 0;
        assert_eq!(
            read_varint(
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                &mut pos
            )
            .unwrap(),
            u64::MAX
        );
    }
}
