//! One decoded value into its kind's table: the classic summary forms and the tensor forms.

use super::model::{lossy, SeriesMeta};
use crate::columns::Tables;
use crate::data_compat::Kind;
use crate::media::sniff_image;
use crate::proto::{Audio, HistogramProto, Image, Metadata, SummaryValue, ValueKind};
use crate::tensor::{base_dtype, element_f64, Elements, Tensor, DT_FLOAT, DT_STRING};

/// Absolute file offset of `part`, a sub-slice of `whole` (which starts at `whole_offset`).
#[inline]
pub(super) fn abs_offset(whole: &[u8], part: &[u8], whole_offset: u64) -> i64 {
    (whole_offset + (part.as_ptr() as usize - whole.as_ptr() as usize) as u64) as i64
}

/// Appends one value to its kind's table.
#[allow(
    clippy::too_many_arguments,
    reason = "the record loop's per-value state, passed as scalars in the hot path instead of a struct built per value"
)]
pub fn append(
    tables: &mut Tables,
    kind: Kind,
    tag: i32,
    step: i64,
    wall: f64,
    prov: Option<i64>,
    sv: &SummaryValue<'_>,
    data: &[u8],
    data_offset: u64,
    meta: Option<&SeriesMeta>,
) -> Result<(), &'static str> {
    match (kind, &sv.value) {
        (Kind::Scalars, ValueKind::Simple(x)) => {
            tables.scalars.c.push(tag, step, wall, prov);
            tables.scalars.value.push(f64::from(*x));
        }
        (Kind::Histograms, ValueKind::Histo(h)) => {
            let h = HistogramProto::decode(h).map_err(|e| e.0)?;
            if h.bucket.len() != h.bucket_limit.len() {
                return Err("histogram has different numbers of buckets and limits");
            }
            let k = h.bucket.len();
            let hs = &mut tables.histograms;
            hs.c.push(tag, step, wall, prov);
            // TensorBoard's edges: the first left edge is min, the last right edge is max.
            // Writers keep an empty bucket before the data (tensorboardX, so that its left
            // limit is on record) whose limit lies below min, and an empty last bucket may
            // start above max: there TensorBoard's edges would run backwards (its Python
            // reader drops such end buckets), so the outer edge is clamped to the inner one.
            // Every bucket is kept, and no bucket has left > right.
            let right = |i: usize| {
                if i + 1 < k {
                    h.bucket_limit[i]
                } else if k > 1 && h.max < h.bucket_limit[k - 2] {
                    h.bucket_limit[k - 2]
                } else {
                    h.max
                }
            };
            let left = |i: usize| {
                let edge = if i == 0 { h.min } else { h.bucket_limit[i - 1] };
                if i == 0 && edge > right(0) {
                    right(0)
                } else {
                    edge
                }
            };
            hs.buckets.push_with(|v| v.extend((0..k).map(left)));
            hs.right.extend((0..k).map(right));
            hs.count.extend_from_slice(&h.bucket);
            for (col, x) in hs
                .stats
                .iter_mut()
                .zip([h.min, h.max, h.num, h.sum, h.sum_squares])
            {
                col.push(x);
            }
            hs.legacy.push(true);
        }
        (Kind::Images, ValueKind::Image(b)) => {
            let im = Image::decode(b).map_err(|e| e.0)?;
            let t = &mut tables.images;
            t.b.c.push(tag, step, wall, prov);
            t.b.push_blob(
                0,
                abs_offset(data, im.encoded, data_offset),
                im.encoded.len(),
            );
            t.width.push(im.width);
            t.height.push(im.height);
            t.colorspace.push(im.colorspace);
            t.content_type.push(sniff_image(im.encoded));
        }
        (Kind::Audio, ValueKind::Audio(b)) => {
            let a = Audio::decode(b).map_err(|e| e.0)?;
            let t = &mut tables.audio;
            t.b.c.push(tag, step, wall, prov);
            t.b.push_blob(0, abs_offset(data, a.encoded, data_offset), a.encoded.len());
            t.sample_rate.push(f64::from(a.sample_rate));
            t.num_channels.push(a.num_channels);
            t.length_frames.push(a.length_frames);
            let ct = if a.content_type.is_empty() {
                b"audio/wav".as_slice()
            } else {
                a.content_type
            };
            t.content_type.push(lossy(ct).as_bytes());
            t.label.push(b"");
        }
        (Kind::Hparams, _) => {
            let content = sv
                .metadata
                .and_then(|m| Metadata::decode(m).ok())
                .map(|m| m.plugin_content)
                .unwrap_or_default();
            tables.hparams.c.push(tag, step, wall, prov);
            tables.hparams.content.push(content);
        }
        (_, ValueKind::Tensor(_)) | (Kind::Tensors, ValueKind::Nothing) => {
            let t = match sv.value {
                ValueKind::Tensor(tb) => Tensor::decode(tb).map_err(|e| e.0)?,
                // TensorBoard gives a value with no payload a null tensor: float32, shape [0].
                _ => Tensor {
                    dtype: DT_FLOAT,
                    shape: vec![0],
                    ..Default::default()
                },
            };
            append_tensor(
                tables,
                kind,
                tag,
                step,
                wall,
                prov,
                &t,
                data,
                data_offset,
                meta,
            )?;
        }
        (_, ValueKind::Nothing) => return Err("the value is empty"),
        _ => return Err("the value's type does not match the series' kind"),
    }
    Ok(())
}

/// Appends a tensor-form value to its kind's table.
#[allow(
    clippy::too_many_arguments,
    reason = "as append(): the record loop's per-value state"
)]
pub fn append_tensor(
    tables: &mut Tables,
    kind: Kind,
    tag: i32,
    step: i64,
    wall: f64,
    prov: Option<i64>,
    t: &Tensor<'_>,
    data: &[u8],
    data_offset: u64,
    meta: Option<&SeriesMeta>,
) -> Result<(), &'static str> {
    let dtype = base_dtype(t.dtype);
    match kind {
        Kind::Scalars => {
            let x = t.scalar_f64().ok_or("not a rank-0 real-valued tensor")?;
            tables.scalars.c.push(tag, step, wall, prov);
            tables.scalars.value.push(x);
        }
        Kind::Histograms => {
            let rows = match t.shape.as_slice() {
                [k, 3] => *k as usize,
                [0] | [0, _] => 0,
                _ => return Err("histogram tensor is not of shape [k, 3]"),
            };
            let Elements::Numeric(b) = t.elements().map_err(|e| e.0)? else {
                return Err("histogram tensor holds strings");
            };
            let size = crate::tensor::element_size(dtype).ok_or("histogram dtype")?;
            let val = |i: usize| element_f64(dtype, &b[i * size..]).unwrap_or(f64::NAN);
            let hs = &mut tables.histograms;
            hs.c.push(tag, step, wall, prov);
            hs.buckets
                .push_with(|v| v.extend((0..rows).map(|r| val(r * 3))));
            hs.right.extend((0..rows).map(|r| val(r * 3 + 1)));
            hs.count.extend((0..rows).map(|r| val(r * 3 + 2)));
            for col in hs.stats.iter_mut() {
                col.push(f64::NAN);
            }
            hs.legacy.push(false);
        }
        Kind::Images => {
            let s = strings(t)?;
            if s.len() < 2 {
                return Err("image tensor has fewer than 2 elements");
            }
            let dim = |b: &[u8]| {
                std::str::from_utf8(b)
                    .ok()
                    .and_then(|x| x.trim().parse::<i32>().ok())
                    .unwrap_or(0)
            };
            let (w, h) = (dim(s[0]), dim(s[1]));
            let tb = &mut tables.images;
            for (i, img) in s[2..].iter().enumerate() {
                tb.b.c.push(tag, step, wall, prov);
                tb.b.push_blob(i as i32, abs_offset(data, img, data_offset), img.len());
                tb.width.push(w);
                tb.height.push(h);
                tb.colorspace.push(0);
                tb.content_type.push(sniff_image(img));
            }
        }
        Kind::Audio => {
            let s = strings(t)?;
            let stride = match t.shape.as_slice() {
                [_, 2] => 2,
                [_] => 1,
                _ => return Err("audio tensor is not of shape [k, 2] or [k]"),
            };
            let content_type = audio_content_type(meta);
            let ta = &mut tables.audio;
            for (i, row) in s.chunks(stride).enumerate() {
                let wav = row[0];
                let (rate, channels, frames) = wav_info(wav);
                ta.b.c.push(tag, step, wall, prov);
                ta.b.push_blob(i as i32, abs_offset(data, wav, data_offset), wav.len());
                ta.sample_rate.push(rate);
                ta.num_channels.push(channels);
                ta.length_frames.push(frames);
                ta.content_type.push(content_type);
                let label = row.get(1).copied().unwrap_or(b"");
                ta.label.push(String::from_utf8_lossy(label).as_bytes());
            }
        }
        Kind::Text => {
            let s = strings(t)?;
            let tx = &mut tables.text;
            for (i, el) in s.iter().enumerate() {
                tx.c.push(tag, step, wall, prov);
                tx.index.push(i as i32);
                tx.text.push(String::from_utf8_lossy(el).as_bytes());
                tx.shape.push(&t.shape);
            }
        }
        Kind::Blobs => {
            let s = strings(t)?;
            let b = &mut tables.blobs.b;
            for (i, el) in s.iter().enumerate() {
                b.c.push(tag, step, wall, prov);
                b.push_blob(i as i32, abs_offset(data, el, data_offset), el.len());
            }
        }
        Kind::Hparams => unreachable!("hparams values are filed from their metadata"),
        Kind::Tensors => {
            let els = t.elements().map_err(|e| e.0)?;
            let tt = &mut tables.tensors;
            tt.c.push(tag, step, wall, prov);
            tt.dtype.push(t.dtype);
            tt.shape.push(&t.shape);
            match els {
                Elements::Numeric(b) => {
                    tt.content.push(&b);
                    tt.content_valid.push(true);
                    tt.string_rows.push(tt.strings.len() as i64);
                    tt.strings_valid.push(false);
                }
                Elements::Strings(s) => {
                    tt.content.push(&[]);
                    tt.content_valid.push(false);
                    for el in s {
                        tt.strings.push(el);
                    }
                    tt.string_rows.push(tt.strings.len() as i64);
                    tt.strings_valid.push(true);
                }
            }
        }
    }
    Ok(())
}

/// The MIME type TensorBoard serves tensor-form audio as: from `AudioPluginData.encoding`.
fn audio_content_type(meta: Option<&SeriesMeta>) -> &'static [u8] {
    const WAV: u64 = 11;
    let encoding = meta.and_then(|m| {
        crate::proto::Fields::new(&m.plugin_content).find_map(|f| match f {
            Ok((2, crate::proto::Wire::Varint(v))) => Some(v),
            _ => None,
        })
    });
    if encoding == Some(WAV) {
        b"audio/wav"
    } else {
        b"application/octet-stream"
    }
}

fn strings<'a>(t: &Tensor<'a>) -> Result<Vec<&'a [u8]>, &'static str> {
    if base_dtype(t.dtype) != DT_STRING {
        return Err("expected a string tensor");
    }
    match t.elements().map_err(|e| e.0)? {
        Elements::Strings(s) => Ok(s),
        Elements::Numeric(_) => Err("expected a string tensor"),
    }
}

/// Sample rate, channels and frame count from a WAV header; zeros when it is not one.
fn wav_info(b: &[u8]) -> (f64, i64, i64) {
    if b.len() < 12 || &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return (0.0, 0, 0);
    }
    let (mut rate, mut channels, mut block, mut frames) = (0u32, 0u16, 0u16, 0i64);
    let mut pos = 12;
    while pos + 8 <= b.len() {
        let id = &b[pos..pos + 4];
        let size = u32::from_le_bytes(b[pos + 4..pos + 8].try_into().unwrap()) as usize;
        let body = &b[pos + 8..(pos + 8).saturating_add(size).min(b.len())];
        if id == b"fmt " && body.len() >= 14 {
            channels = u16::from_le_bytes([body[2], body[3]]);
            rate = u32::from_le_bytes(body[4..8].try_into().unwrap());
            block = u16::from_le_bytes([body[12], body[13]]);
        } else if id == b"data" && block > 0 {
            frames = (size / block as usize) as i64;
        }
        pos = pos.saturating_add(8 + size + (size & 1));
    }
    (f64::from(rate), i64::from(channels), frames)
}
