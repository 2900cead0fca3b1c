//! Conversion of the merged column tables into Arrow record batches. Vectors and placed
//! rows become Arrow buffers without copying; dictionary columns keep only the values their
//! rows use.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BinaryArray, DictionaryArray, Float64Array, Int32Array, Int64Array, LargeBinaryArray,
    LargeListArray, LargeStringArray, RecordBatch, StringArray, TimestampNanosecondArray,
};
use arrow_buffer::{BooleanBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::{Blobs, Common, Placed, Tables, Tensors, VarList};
use crate::data_compat::Kind;
use crate::media::IMAGE_TYPES;
use crate::mem::{join, populate};

/// Dictionaries the merged tables refer to.
pub struct Dicts<'a> {
    pub runs: &'a [String],
    pub tags: &'a [String],
    pub files: &'a [String],
    /// Plugin name per (run, tag) row of a table, resolved by the caller.
    pub plugin_of: &'a dyn Fn(i32, i32) -> i32,
    pub plugins: &'a [String],
}

fn dict_field(name: &str) -> Field {
    Field::new(
        name,
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        false,
    )
}

/// A column the Arrow conversion can rewrite in place and then take over without copying.
pub trait Col<T: arrow_buffer::ArrowNativeType>: Send + Sync {
    fn rows(&self) -> &[T];
    fn rows_mut(&mut self) -> &mut [T];
    fn into_buffer(self) -> ScalarBuffer<T>;
}

impl<T: arrow_buffer::ArrowNativeType> Col<T> for Vec<T> {
    fn rows(&self) -> &[T] {
        self
    }
    fn rows_mut(&mut self) -> &mut [T] {
        self
    }
    fn into_buffer(self) -> ScalarBuffer<T> {
        ScalarBuffer::from(self)
    }
}

impl<T: arrow_buffer::ArrowNativeType + std::panic::RefUnwindSafe> Col<T> for Placed<T> {
    fn rows(&self) -> &[T] {
        self.as_slice()
    }
    fn rows_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
    fn into_buffer(self) -> ScalarBuffer<T> {
        Placed::into_buffer(self)
    }
}

/// A dictionary column holding only the values its rows use, so a scalars table's `tag`
/// categories are its own tags, not every tag of the logdir.
fn dict_array(keys: impl Col<i32>, values: &[String]) -> ArrayRef {
    let (keys, values) = dict_parts(keys, values);
    dict_from(keys, values)
}

/// The work of [`dict_array`] that passes over the rows: keys renumbered in place into the
/// used values.
fn dict_parts<K: Col<i32>>(mut keys: K, values: &[String]) -> (K, ArrayRef) {
    let mut remap = vec![-1i32; values.len()];
    for &k in keys.rows() {
        remap[k as usize] = 0;
    }
    let mut used = Vec::new();
    for (i, r) in remap.iter_mut().enumerate() {
        if *r == 0 {
            *r = used.len() as i32;
            used.push(values[i].as_str());
        }
    }
    if used.len() != values.len() {
        for k in keys.rows_mut() {
            *k = remap[*k as usize];
        }
    }
    (keys, Arc::new(StringArray::from_iter_values(used)))
}

fn dict_from(keys: impl Col<i32>, values: ArrayRef) -> ArrayRef {
    let keys = Int32Array::new(keys.into_buffer(), None);
    // SAFETY: every key was remapped into `0..used.len()` by dict_parts (or all values are
    // used and keys index `values` by construction); checking again would be another pass.
    debug_assert!(keys
        .values()
        .iter()
        .all(|&k| (k as usize) < arrow_array::Array::len(values.as_ref())));
    Arc::new(unsafe { DictionaryArray::<Int32Type>::new_unchecked(keys, values) })
}

fn validity(bits: &[bool]) -> Option<NullBuffer> {
    if bits.iter().all(|&b| b) {
        None
    } else {
        Some(NullBuffer::new(BooleanBuffer::from(bits)))
    }
}

fn large_binary(v: VarList<u8>, valid: Option<NullBuffer>) -> LargeBinaryArray {
    LargeBinaryArray::new(
        OffsetBuffer::new(ScalarBuffer::from(v.offsets)),
        v.values.into(),
        valid,
    )
}

fn large_utf8(v: VarList<u8>) -> LargeStringArray {
    // Invalid UTF-8 was replaced before it got here.
    LargeStringArray::new(
        OffsetBuffer::new(ScalarBuffer::from(v.offsets)),
        v.values.into(),
        None,
    )
}

/// Common columns: run, tag, step, wall_time, timestamp, and optionally file/offset.
fn common_columns(c: Common, d: &Dicts<'_>, provenance: bool) -> (Vec<Field>, Vec<ArrayRef>) {
    let Common {
        run,
        tag,
        step,
        wall,
        file,
        offset,
    } = c;
    common_columns_of(run, tag, step, wall, file, offset, d, provenance)
}

/// [`common_columns`] for columns held in any [`Col`].
#[allow(clippy::too_many_arguments)]
fn common_columns_of<I: Col<i32>, L: Col<i64>, F: Col<f64>>(
    run: Vec<i32>,
    tag: I,
    step: L,
    wall: F,
    file: Vec<i32>,
    offset: L,
    d: &Dicts<'_>,
    provenance: bool,
) -> (Vec<Field>, Vec<ArrayRef>) {
    let (runs, tags) = (d.runs, d.tags);
    // The derived timestamp column and the two dictionary columns are independent passes over
    // ten million rows each: side by side on the pool's workers.
    let ((ts, nulls), ((run_keys, run_vals), (tag_keys, tag_vals))) = join(
        || timestamps(wall.rows()),
        || join(|| dict_parts(run, runs), || dict_parts(tag, tags)),
    );
    let mut fields = vec![
        dict_field("run"),
        dict_field("tag"),
        Field::new("step", DataType::Int64, false),
        Field::new("wall_time", DataType::Float64, true),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            true,
        ),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        dict_from(run_keys, run_vals),
        dict_from(tag_keys, tag_vals),
        Arc::new(Int64Array::new(step.into_buffer(), None)),
        Arc::new(Float64Array::new(wall.into_buffer(), nulls.clone())),
        Arc::new(TimestampNanosecondArray::new(ScalarBuffer::from(ts), nulls).with_timezone("UTC")),
    ];
    if provenance {
        fields.push(dict_field("file"));
        fields.push(Field::new("offset", DataType::Int64, false));
        cols.push(dict_array(file, d.files));
        cols.push(Arc::new(Int64Array::new(offset.into_buffer(), None)));
    }
    (fields, cols)
}

/// Wall times as UTC nanoseconds, and the validity of both (null where the file held a
/// non-finite wall time). One pass: the finiteness check rides along with the conversion.
fn timestamps(wall: &[f64]) -> (Vec<i64>, Option<NullBuffer>) {
    // Rounded half away from zero without a libm call per row; 0 (and null) where not finite.
    let to_ns = |w: f64| {
        let ns = w * 1e9;
        (ns + 0.5f64.copysign(ns)) as i64
    };
    let fill = |out: &mut [i64], wall: &[f64]| -> bool {
        // Map this piece's fresh pages in bulk; on the pool, each worker its own piece.
        populate(out.as_ptr() as usize, std::mem::size_of_val(out));
        let mut finite = true;
        for (o, &w) in out.iter_mut().zip(wall) {
            let ok = w.is_finite();
            finite &= ok;
            *o = if ok { to_ns(w) } else { 0 };
        }
        finite
    };
    // Zeroed memory comes fresh from the kernel: no write pass before the fill.
    let mut ts: Vec<i64> = vec![0; wall.len()];
    let all_finite = if rayon::current_thread_index().is_some() {
        use rayon::prelude::*;
        ts.par_chunks_mut(1 << 16)
            .zip(wall.par_chunks(1 << 16))
            .map(|(o, w)| fill(o, w))
            .reduce(|| true, |a, b| a && b)
    } else {
        fill(&mut ts, wall)
    };
    let nulls = if all_finite {
        None
    } else {
        validity(&wall.iter().map(|w| w.is_finite()).collect::<Vec<_>>())
    };
    (ts, nulls)
}

fn f64_col(v: Vec<f64>, nulls: Option<NullBuffer>) -> ArrayRef {
    Arc::new(Float64Array::new(ScalarBuffer::from(v), nulls))
}

fn i32_col(v: Vec<i32>) -> ArrayRef {
    Arc::new(Int32Array::new(ScalarBuffer::from(v), None))
}

fn i64_col(v: Vec<i64>) -> ArrayRef {
    Arc::new(Int64Array::new(ScalarBuffer::from(v), None))
}

fn blob_columns(b: Blobs, d: &Dicts<'_>, f: &mut Vec<Field>, c: &mut Vec<ArrayRef>) {
    f.push(dict_field("blob_file"));
    c.push(dict_array(b.blob_file, d.files));
    f.push(Field::new("blob_offset", DataType::Int64, false));
    c.push(i64_col(b.blob_offset));
    f.push(Field::new("blob_length", DataType::Int64, false));
    c.push(i64_col(b.blob_length));
}

fn plugin_column(c: &Common, d: &Dicts<'_>) -> ArrayRef {
    let keys: Vec<i32> = c
        .run
        .iter()
        .zip(&c.tag)
        .map(|(&r, &t)| (d.plugin_of)(r, t))
        .collect();
    dict_array(keys, d.plugins)
}

fn list_f64(offsets: &[i64], values: Vec<f64>) -> ArrayRef {
    let field = Arc::new(Field::new("item", DataType::Float64, false));
    Arc::new(LargeListArray::new(
        field,
        OffsetBuffer::new(ScalarBuffer::from(offsets.to_vec())),
        f64_col(values, None),
        None,
    ))
}

/// Converts one kind's merged columns into a record batch.
pub fn to_batch(tables: &mut Tables, kind: Kind, d: &Dicts<'_>, provenance: bool) -> RecordBatch {
    let (mut f, mut c);
    match kind {
        Kind::Scalars => {
            let mut s = std::mem::take(&mut tables.scalars);
            let value = match s.placed.take() {
                Some(p) => {
                    let p = *p;
                    (f, c) = common_columns_of(
                        p.run, p.tag, p.step, p.wall, p.file, p.offset, d, provenance,
                    );
                    Float64Array::new(p.value.into_buffer(), None)
                }
                None => {
                    (f, c) = common_columns(s.c, d, provenance);
                    Float64Array::new(ScalarBuffer::from(s.value), None)
                }
            };
            f.push(Field::new("value", DataType::Float64, false));
            c.push(Arc::new(value));
        }
        Kind::Tensors => {
            let t = std::mem::replace(&mut tables.tensors, Tensors::new());
            let plugin = plugin_column(&t.c, d);
            (f, c) = common_columns(t.c, d, provenance);
            f.push(dict_field("plugin"));
            c.push(plugin);
            // Dictionary values must be unique: codes 0..=33 have distinct names, others are 0.
            let names: Vec<String> = (0..=crate::tensor::MAX_DTYPE)
                .map(|i| crate::tensor::dtype_name(i).to_string())
                .collect();
            let codes = t.dtype.iter().map(|&d| {
                let b = crate::tensor::base_dtype(d);
                if (0..=crate::tensor::MAX_DTYPE).contains(&b) {
                    b
                } else {
                    0
                }
            });
            f.push(dict_field("dtype"));
            c.push(dict_array(codes.collect::<Vec<_>>(), &names));
            let dim = Arc::new(Field::new("item", DataType::Int64, false));
            f.push(Field::new("shape", DataType::LargeList(dim.clone()), false));
            c.push(Arc::new(LargeListArray::new(
                dim,
                OffsetBuffer::new(ScalarBuffer::from(t.shape.offsets)),
                i64_col(t.shape.values),
                None,
            )));
            f.push(Field::new("content", DataType::LargeBinary, true));
            let cv = validity(&t.content_valid);
            c.push(Arc::new(large_binary(t.content, cv)));
            let item = Arc::new(Field::new("item", DataType::LargeBinary, false));
            f.push(Field::new(
                "strings",
                DataType::LargeList(item.clone()),
                true,
            ));
            let sv = validity(&t.strings_valid);
            c.push(Arc::new(LargeListArray::new(
                item,
                OffsetBuffer::new(ScalarBuffer::from(t.string_rows)),
                Arc::new(large_binary(t.strings, None)),
                sv,
            )));
        }
        Kind::Histograms => {
            let h = std::mem::take(&mut tables.histograms);
            (f, c) = common_columns(h.c, d, provenance);
            let offsets = h.buckets.offsets;
            for (name, vals) in [
                ("left", h.buckets.values),
                ("right", h.right),
                ("count", h.count),
            ] {
                let item = Field::new("item", DataType::Float64, false);
                f.push(Field::new(name, DataType::LargeList(Arc::new(item)), false));
                c.push(list_f64(&offsets, vals));
            }
            let nulls = validity(&h.legacy);
            for (name, vals) in ["min", "max", "num", "sum", "sum_squares"]
                .into_iter()
                .zip(h.stats)
            {
                f.push(Field::new(name, DataType::Float64, true));
                c.push(f64_col(vals, nulls.clone()));
            }
        }
        Kind::Images => {
            let mut im = std::mem::take(&mut tables.images);
            (f, c) = common_columns(std::mem::take(&mut im.b.c), d, provenance);
            f.push(Field::new("index", DataType::Int32, false));
            c.push(i32_col(std::mem::take(&mut im.b.index)));
            f.push(Field::new("width", DataType::Int32, false));
            c.push(i32_col(im.width));
            f.push(Field::new("height", DataType::Int32, false));
            c.push(i32_col(im.height));
            let cs_valid: Vec<bool> = im.colorspace.iter().map(|&x| x != 0).collect();
            f.push(Field::new("colorspace", DataType::Int32, true));
            c.push(Arc::new(Int32Array::new(
                ScalarBuffer::from(im.colorspace),
                validity(&cs_valid),
            )));
            let names: Vec<String> = IMAGE_TYPES.iter().map(|s| s.to_string()).collect();
            f.push(dict_field("content_type"));
            c.push(dict_array(
                im.content_type
                    .iter()
                    .map(|&x| x as i32)
                    .collect::<Vec<_>>(),
                &names,
            ));
            blob_columns(im.b, d, &mut f, &mut c);
        }
        Kind::Audio => {
            let mut a = std::mem::take(&mut tables.audio);
            (f, c) = common_columns(std::mem::take(&mut a.b.c), d, provenance);
            f.push(Field::new("index", DataType::Int32, false));
            c.push(i32_col(std::mem::take(&mut a.b.index)));
            f.push(Field::new("sample_rate", DataType::Float64, false));
            c.push(f64_col(a.sample_rate, None));
            f.push(Field::new("num_channels", DataType::Int64, false));
            c.push(i64_col(a.num_channels));
            f.push(Field::new("length_frames", DataType::Int64, false));
            c.push(i64_col(a.length_frames));
            f.push(Field::new("content_type", DataType::LargeUtf8, false));
            c.push(Arc::new(large_utf8(a.content_type)));
            f.push(Field::new("label", DataType::LargeUtf8, false));
            c.push(Arc::new(large_utf8(a.label)));
            blob_columns(a.b, d, &mut f, &mut c);
        }
        Kind::Text => {
            let t = std::mem::take(&mut tables.text);
            (f, c) = common_columns(t.c, d, provenance);
            f.push(Field::new("index", DataType::Int32, false));
            c.push(i32_col(t.index));
            f.push(Field::new("text", DataType::LargeUtf8, false));
            c.push(Arc::new(large_utf8(t.text)));
            let dim = Arc::new(Field::new("item", DataType::Int64, false));
            f.push(Field::new("shape", DataType::LargeList(dim.clone()), false));
            c.push(Arc::new(LargeListArray::new(
                dim,
                OffsetBuffer::new(ScalarBuffer::from(t.shape.offsets)),
                i64_col(t.shape.values),
                None,
            )));
        }
        Kind::Hparams => {
            let h = std::mem::take(&mut tables.hparams);
            (f, c) = common_columns(h.c, d, provenance);
            f.push(Field::new("plugin_content", DataType::LargeBinary, false));
            c.push(Arc::new(large_binary(h.content, None)));
        }
        Kind::Blobs => {
            let mut b = std::mem::take(&mut tables.blobs);
            let plugin = plugin_column(&b.b.c, d);
            (f, c) = common_columns(std::mem::take(&mut b.b.c), d, provenance);
            f.push(dict_field("plugin"));
            c.push(plugin);
            f.push(Field::new("index", DataType::Int32, false));
            c.push(i32_col(std::mem::take(&mut b.b.index)));
            blob_columns(b.b, d, &mut f, &mut c);
        }
    }
    let schema: SchemaRef = Arc::new(Schema::new(f));
    RecordBatch::try_new(schema, c).expect("columns match their schema")
}

/// A small string table: builds `series` and similar tables from owned rows.
pub fn string_array(v: impl IntoIterator<Item = String>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

pub fn binary_array<'a>(v: impl IntoIterator<Item = &'a [u8]>) -> ArrayRef {
    Arc::new(BinaryArray::from_iter_values(v))
}
