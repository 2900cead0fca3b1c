//! The cache's Arrow IPC files: written with a running checksum for the manifest
//! ([`write_ipc`]), and decoded from bytes already held and checked ([`decode`]) with every
//! block bounded by the file and every dictionary key checked to lie inside its dictionary,
//! in one pass rather than Arrow's key-by-key check (most of a warm open otherwise).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_schema::Schema;

use super::stamp::FileSum;

/// Counts and checksums what goes through it.
struct Summing<W> {
    inner: W,
    bytes: u64,
    crc: u32,
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `b` as a new IPC file (one record batch), fsynced; returns its rows, size and
/// checksum for the manifest.
pub(super) fn write_ipc(path: &Path, b: &RecordBatch) -> std::result::Result<FileSum, String> {
    let f = File::create_new(path).map_err(|e| e.to_string())?;
    let out = Summing {
        inner: BufWriter::with_capacity(1 << 20, f),
        bytes: 0,
        crc: 0,
    };
    let mut w =
        arrow_ipc::writer::FileWriter::try_new(out, &b.schema()).map_err(|e| e.to_string())?;
    w.write(b).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    let out = w.into_inner().map_err(|e| e.to_string())?;
    let (bytes, crc) = (out.bytes, out.crc);
    let f = out.inner.into_inner().map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    Ok(FileSum {
        rows: b.num_rows() as u64,
        bytes,
        crc,
    })
}

/// The one record batch of an IPC file whose bytes are `buf`, decoded with Arrow's full
/// validation (dictionary keys in one pass, [`dictionary_of`]) and held to `schema`, the
/// columns its consumers take for granted. Errors say what is wrong, not where.
pub(super) fn decode(buf: &Buffer, schema: &Schema) -> std::result::Result<RecordBatch, String> {
    let len = buf.len();
    if len < 16 {
        return Err("too short for an Arrow file".to_string());
    }
    let trailer: [u8; 10] = buf[len - 10..].try_into().expect("10 bytes");
    let footer_len = arrow_ipc::reader::read_footer_length(trailer).map_err(|e| e.to_string())?;
    if footer_len + 10 > len {
        return Err("footer runs past the start".to_string());
    }
    let footer = arrow_ipc::root_as_footer(&buf[len - 10 - footer_len..len - 10])
        .map_err(|e| e.to_string())?;
    let stored = footer
        .schema()
        .ok_or_else(|| "no schema".to_string())
        .and_then(|s| arrow_ipc::convert::try_fb_to_schema(s).map_err(|e| e.to_string()))?;
    if stored.fields() != schema.fields() {
        return Err(format!("columns {stored} where {schema} were expected"));
    }
    let version = footer.version();
    let block_data = |b: &arrow_ipc::Block| -> std::result::Result<(Buffer, usize), String> {
        let (Ok(start), Ok(meta), Ok(body)) = (
            usize::try_from(b.offset()),
            usize::try_from(b.metaDataLength()),
            usize::try_from(b.bodyLength()),
        ) else {
            return Err("a block of negative size".to_string());
        };
        let n = meta.checked_add(body);
        if meta < 8
            || n.and_then(|n| start.checked_add(n))
                .is_none_or(|end| end > len)
        {
            return Err("a block runs past the end".to_string());
        }
        Ok((buf.slice_with_length(start, meta + body), meta))
    };
    let dictionaries: Vec<_> = footer.dictionaries().iter().flatten().collect();
    let batches = footer
        .recordBatches()
        .ok_or_else(|| "no record batch".to_string())?;
    if batches.len() != 1 {
        return Err(format!("{} record batches, expected 1", batches.len()));
    }
    let block = batches.get(0);
    let b = if let Some(keys) = keys_schema(&stored) {
        // Arrow's own decode checks every dictionary key against its dictionary one at a
        // time (most of a warm open); the keys are decoded as the integers they are
        // and checked in one pass instead (`dictionary_of`).
        let stored = Arc::new(stored);
        let mut dicts = std::collections::HashMap::new();
        for block in dictionaries {
            let (data, meta) = block_data(block)?;
            let m = message(&data, meta, version)?;
            let d = m
                .header_as_dictionary_batch()
                .ok_or_else(|| "a dictionary block holds no dictionary".to_string())?;
            arrow_ipc::reader::read_dictionary(
                &data.slice(meta),
                d,
                &stored,
                &mut dicts,
                &m.version(),
            )
            .map_err(|e| e.to_string())?;
        }
        let (data, meta) = block_data(block)?;
        let m = message(&data, meta, version)?;
        let rb = m
            .header_as_record_batch()
            .ok_or_else(|| "empty record batch message".to_string())?;
        let raw = arrow_ipc::reader::read_record_batch(
            &data.slice(meta),
            rb,
            Arc::new(keys),
            &dicts,
            None,
            &m.version(),
        )
        .map_err(|e| e.to_string())?;
        let cols = stored
            .fields()
            .iter()
            .zip(raw.columns())
            .map(|(f, c)| dictionary_of(f, c, &dicts))
            .collect::<std::result::Result<Vec<_>, String>>()?;
        RecordBatch::try_new(stored, cols).map_err(|e| e.to_string())?
    } else {
        let mut decoder = arrow_ipc::reader::FileDecoder::new(Arc::new(stored), version);
        for block in dictionaries {
            let (data, _) = block_data(block)?;
            decoder
                .read_dictionary(block, &data)
                .map_err(|e| e.to_string())?;
        }
        let (data, _) = block_data(block)?;
        decoder
            .read_record_batch(block, &data)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "empty record batch message".to_string())?
    };
    Ok(b)
}

/// The IPC message at the start of a block (`meta` bytes: its prefix and flatbuffer), in the
/// file's metadata version.
fn message(
    data: &[u8],
    meta: usize,
    version: arrow_ipc::MetadataVersion,
) -> std::result::Result<arrow_ipc::Message<'_>, String> {
    let head = &data[..meta];
    let at = if head[..4] == [0xff; 4] { 8 } else { 4 };
    let m = arrow_ipc::root_as_message(&head[at..]).map_err(|e| e.to_string())?;
    if version != arrow_ipc::MetadataVersion::V1 && m.version() != version {
        return Err("a message of another metadata version".into());
    }
    Ok(m)
}

/// `schema` with each dictionary column as its keys (`Int32`), for decoding the keys alone;
/// None when a dictionary has other keys or sits inside another type (Arrow decodes those).
fn keys_schema(schema: &Schema) -> Option<Schema> {
    use arrow_schema::{DataType, Field};
    fn has_dictionary(t: &DataType) -> bool {
        match t {
            DataType::Dictionary(..) => true,
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => has_dictionary(f.data_type()),
            DataType::Struct(fs) => fs.iter().any(|f| has_dictionary(f.data_type())),
            DataType::Union(fs, _) => fs.iter().any(|(_, f)| has_dictionary(f.data_type())),
            DataType::RunEndEncoded(a, b) => {
                has_dictionary(a.data_type()) || has_dictionary(b.data_type())
            }
            _ => false,
        }
    }
    let mut any = false;
    let mut fields = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        match f.data_type() {
            DataType::Dictionary(k, v) => {
                if **k != DataType::Int32 || has_dictionary(v) {
                    return None;
                }
                any = true;
                fields.push(Arc::new(Field::new(
                    f.name(),
                    DataType::Int32,
                    f.is_nullable(),
                )));
            }
            t if has_dictionary(t) => return None,
            _ => fields.push(f.clone()),
        }
    }
    any.then(|| Schema::new(fields))
}

/// Column `c` decoded under [`keys_schema`] as field `f` wants it: a dictionary column's keys
/// with the dictionary the file gives that field, every key checked to lie inside it.
fn dictionary_of(
    f: &arrow_schema::Field,
    c: &arrow_array::ArrayRef,
    dicts: &std::collections::HashMap<i64, arrow_array::ArrayRef>,
) -> std::result::Result<arrow_array::ArrayRef, String> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    use arrow_array::{Array, DictionaryArray};
    if !matches!(f.data_type(), arrow_schema::DataType::Dictionary(..)) {
        return Ok(c.clone());
    }
    #[allow(
        deprecated,
        reason = "the dictionary ids the IPC footer's schema carries: arrow 60 has no other way"
    )]
    let id = f
        .dict_id()
        .ok_or_else(|| format!("column {} has no dictionary id", f.name()))?;
    let values = dicts
        .get(&id)
        .ok_or_else(|| format!("column {}: no dictionary {id}", f.name()))?;
    let keys = c
        .as_primitive_opt::<Int32Type>()
        .ok_or_else(|| format!("column {}: keys not Int32", f.name()))?
        .clone();
    if keys.null_count() > 0 || !keys_within(keys.values(), values.len()) {
        // Arrow's own check, key by key (keys under nulls may hold anything): its error.
        return DictionaryArray::<Int32Type>::try_new(keys, values.clone())
            .map(|d| Arc::new(d) as arrow_array::ArrayRef)
            .map_err(|e| format!("column {}: {e}", f.name()));
    }
    // SAFETY: every key lies in 0..values.len() (keys_within), which is all new_unchecked
    // asks beyond what the types already hold.
    let d = unsafe { DictionaryArray::<Int32Type>::new_unchecked(keys, values.clone()) };
    Ok(Arc::new(d))
}

/// Whether every key lies in `0..len`, in one pass the compiler vectorises: a key `k` lies
/// in `0..=last` exactly when neither `k` nor `last - k` is negative, so the sign bit of the
/// OR of them all says whether any does not (sixteen accumulators: no dependency chain).
fn keys_within(keys: &[i32], len: usize) -> bool {
    if keys.is_empty() {
        return true;
    }
    let Some(last) = len.checked_sub(1) else {
        return false;
    };
    let last = i32::try_from(last).unwrap_or(i32::MAX);
    let mut acc = [0i32; 16];
    let chunks = keys.chunks_exact(acc.len());
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &k) in acc.iter_mut().zip(c) {
            *a |= k | last.wrapping_sub(k);
        }
    }
    let all = rest
        .iter()
        .map(|&k| k | last.wrapping_sub(k))
        .chain(acc)
        .fold(0, |a, b| a | b);
    all >= 0
}

#[cfg(test)]
#[allow(dead_code)] // the tests' shared generator: these tests use part of it
#[path = "../../tests/common/rng.rs"]
mod rng;

#[cfg(test)]
mod tests {
    use super::super::files::{read_ipc_file, RestoreError};
    use super::*;
    use std::fs;

    /// The one-pass key check against the plain definition, at the edges of `i32` and of
    /// the dictionary, and on seeded random keys.
    #[test]
    fn keys_within_is_every_key_in_range() {
        let plain = |keys: &[i32], len: usize| keys.iter().all(|&k| k >= 0 && (k as usize) < len);
        let edges = [
            i32::MIN,
            i32::MIN + 1,
            -2,
            -1,
            0,
            1,
            2,
            35,
            36,
            37,
            38,
            i32::MAX - 1,
            i32::MAX,
        ];
        let lens = [
            0,
            1,
            2,
            37,
            38,
            i32::MAX as usize,
            i32::MAX as usize + 1,
            usize::MAX,
        ];
        let mut rng = rng::Rng::new(0x6b77);
        for len in lens {
            assert!(keys_within(&[], len));
            for &e in &edges {
                for n in [1, 15, 16, 17, 40] {
                    for at in [0, n - 1, n / 2] {
                        let mut keys = vec![0i32; n];
                        if len > 1 {
                            for k in &mut keys {
                                *k = rng.below(len.min(1 << 31) as u64) as i32;
                            }
                        }
                        keys[at] = e;
                        assert_eq!(
                            keys_within(&keys, len),
                            plain(&keys, len),
                            "{len} {e} {n} {at}"
                        );
                    }
                }
            }
        }
    }

    /// Rows as the cache stores them: run and tag as dictionaries, step, value.
    fn dictionary_rows(rows: usize, runs: usize, tags: usize) -> RecordBatch {
        use arrow_array::types::Int32Type;
        use arrow_array::{DictionaryArray, Float64Array, Int32Array, Int64Array, StringArray};
        let dict = |n: usize, f: &dyn Fn(usize) -> i32, name: &str| {
            let values: Vec<String> = (0..n).map(|i| format!("{name}-{i}")).collect();
            let keys = Int32Array::from((0..rows).map(f).collect::<Vec<_>>());
            Arc::new(
                DictionaryArray::<Int32Type>::try_new(keys, Arc::new(StringArray::from(values)))
                    .unwrap(),
            ) as arrow_array::ArrayRef
        };
        let run = dict(runs, &|i| (i * runs / rows) as i32, "run");
        let tag = dict(tags, &|i| (i % tags) as i32, "tag");
        let step = Arc::new(Int64Array::from_iter_values(
            (0..rows as i64).map(|i| i * 3),
        ));
        let value = Arc::new(Float64Array::from_iter_values(
            (0..rows).map(|i| i as f64 / 7.0),
        ));
        RecordBatch::try_from_iter([
            ("run", run),
            ("tag", tag),
            ("step", step as arrow_array::ArrayRef),
            ("value", value as arrow_array::ArrayRef),
        ])
        .unwrap()
    }

    /// `bytes` written over `path` with the size and checksum the manifest would then give it
    /// (as a file the stamps trust would look after a change the filesystem did not see), and
    /// decoded; a panic is returned as Err too, so that a case can say which it was.
    fn decode_as_if_checked(
        path: &Path,
        bytes: &[u8],
        rows: u64,
        schema: &Schema,
    ) -> std::thread::Result<std::result::Result<RecordBatch, String>> {
        fs::write(path, bytes).unwrap();
        let sum = FileSum {
            rows,
            bytes: bytes.len() as u64,
            crc: crc32c::crc32c(bytes),
        };
        std::panic::catch_unwind(|| {
            match read_ipc_file(File::open(path).unwrap(), path, sum, schema, 1, None) {
                Ok(b) => Ok(b),
                Err(RestoreError::Bad(why)) => Err(why),
                Err(RestoreError::Gone) => Err("gone".into()),
            }
        })
    }

    /// The dictionary keys of a cached file are checked in one pass, not by Arrow key by key:
    /// that check must stay complete. Seeded mutations of a file whose checksum is made to
    /// agree: every key set outside its dictionary (negative, the dictionary's length, past
    /// it) is an error naming the column, never a batch; bits flipped anywhere in the record
    /// batch's keys and values give an error or a batch that passes Arrow's full validation;
    /// nothing panics.
    #[test]
    fn mutated_dictionary_keys_are_errors_never_batches() {
        use arrow_array::Array;
        let (rows, runs, tags) = (4096, 37, 5);
        let b = dictionary_rows(rows, runs, tags);
        let path = std::env::temp_dir().join(format!("tbscope-keys-{}.arrow", std::process::id()));
        let _ = fs::remove_file(&path);
        write_ipc(&path, &b).unwrap();
        let good = fs::read(&path).unwrap();
        let schema = b.schema();
        let got = decode_as_if_checked(&path, &good, rows as u64, &schema)
            .expect("no panic")
            .expect("the file as written decodes");
        assert_eq!(got, b);
        // Where each dictionary column's keys lie in the file: their bytes, found by content.
        let keys_at = |c: usize| {
            let d = b.column(c).to_data();
            let k: Vec<u8> = d.buffers()[0].as_slice()[..rows * 4].to_vec();
            let at: Vec<usize> = good
                .windows(k.len())
                .enumerate()
                .filter(|(_, w)| *w == k.as_slice())
                .map(|(i, _)| i)
                .collect();
            assert_eq!(at.len(), 1, "column {c}'s keys found once");
            at[0]
        };
        let (run_at, tag_at) = (keys_at(0), keys_at(1));
        let mut rng = rng::Rng::new(0x6b65_7973);
        for case in 0..400 {
            let (at, n, name) = if case % 2 == 0 {
                (run_at, runs, "run")
            } else {
                (tag_at, tags, "tag")
            };
            let row = match case % 5 {
                0 => 0,
                1 => rows - 1,
                _ => rng.below(rows as u64) as usize,
            };
            let key: i32 = match (case / 2) % 6 {
                0 => -1,
                1 => i32::MIN,
                2 => n as i32,
                3 => i32::MAX,
                4 => n as i32 + rng.below(1 << 20) as i32,
                _ => -(rng.below(1 << 30) as i32) - 1,
            };
            let mut bytes = good.clone();
            bytes[at + 4 * row..at + 4 * row + 4].copy_from_slice(&key.to_le_bytes());
            let where_ = format!("case {case}: {name} key {key} at row {row}");
            match decode_as_if_checked(&path, &bytes, rows as u64, &schema) {
                Err(_) => panic!("{where_}: panicked"),
                Ok(Ok(_)) => panic!("{where_}: a batch with a key outside its dictionary"),
                Ok(Err(why)) => assert!(
                    why.contains(&format!("column {name}")) && why.contains(&key.to_string()),
                    "{where_}: {why}"
                ),
            }
        }
        // Bits flipped in the record batch's body: the keys, the steps and values after them.
        let body = run_at.min(tag_at);
        for case in 0..400 {
            let mut bytes = good.clone();
            for _ in 0..1 + rng.below(3) {
                let pos = body + rng.below((good.len() - body) as u64) as usize;
                bytes[pos] ^= 1 << rng.below(8);
            }
            match decode_as_if_checked(&path, &bytes, rows as u64, &schema) {
                Err(_) => panic!("flip case {case}: panicked"),
                Ok(Err(_)) => {}
                Ok(Ok(got)) => {
                    for c in got.columns() {
                        c.to_data()
                            .validate_full()
                            .unwrap_or_else(|e| panic!("flip case {case}: invalid batch: {e}"));
                    }
                    assert_eq!(got.num_rows(), rows);
                }
            }
        }
        fs::remove_file(&path).unwrap();
    }
}
