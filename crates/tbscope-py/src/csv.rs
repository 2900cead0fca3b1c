//! `to_csv`: an Arrow table as CSV in pandas' format (`tbscope_core::text`), written to a file
//! descriptor as it is formatted or returned as bytes.

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::RecordBatch;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::funnel::{guarded, Failure, Outcome};
use crate::{borrowed_file, STREAM};

/// An Arrow table (anything with `__arrow_c_stream__`) as CSV in pandas' format, UTF-8 (see
/// `tbscope_core::text`): written to the file descriptor `fd` as it is formatted (returns None),
/// or returned as bytes. ValueError for a column type it does not format; OSError (with its
/// errno: BrokenPipeError for a closed pipe) when writing fails.
#[pyfunction]
#[pyo3(signature = (table, *, header=true, chunk_rows=100_000, quote_chars=None, quote_empty=false, fd=None))]
#[allow(
    clippy::too_many_arguments,
    reason = "one parameter per Python keyword argument (pyo3 maps them)"
)]
pub(crate) fn to_csv<'py>(
    py: Python<'py>,
    table: &Bound<'py, PyAny>,
    header: bool,
    chunk_rows: usize,
    quote_chars: Option<String>,
    quote_empty: bool,
    fd: Option<i32>,
) -> Outcome<Option<Bound<'py, pyo3::types::PyBytes>>> {
    if let Some(fd) = fd.filter(|fd| *fd < 0) {
        return Err(Failure::Value(format!(
            "fd={fd} is not a file descriptor; pass an open file's fileno()"
        )));
    }
    // The body inside guarded(): a panic or Python error in it becomes the one Failure.
    guarded(|| {
        use arrow_array::ffi_stream::RecordBatchStreamReader;
        use arrow_array::RecordBatchReader as _;
        if !table.hasattr("__arrow_c_stream__")? {
            return Err(PyTypeError::new_err(format!(
                "table must be an Arrow table (anything with __arrow_c_stream__, such as a \
                 pyarrow.Table); got {}",
                table.get_type().name()?
            ))
            .into());
        }
        let capsule = table.call_method0("__arrow_c_stream__")?;
        let capsule = capsule.cast::<PyCapsule>().map_err(PyErr::from)?;
        let ptr = capsule.pointer_checked(Some(STREAM))?;
        // SAFETY: the capsule holds an FFI_ArrowArrayStream (checked by name); `from_raw` moves it
        // out and leaves a released stream behind, which the capsule's destructor then skips.
        let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr().cast()) };
        let reader = RecordBatchStreamReader::try_new(stream)
            .map_err(|e| Failure::Value(format!("not an Arrow stream: {e}")))?;
        let names: Vec<String> = reader
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let batches = reader
            .collect::<Result<Vec<RecordBatch>, _>>()
            .map_err(|e| Failure::Value(format!("reading the Arrow stream failed: {e}")))?;
        let opts = tbscope_core::text::CsvOptions {
            chunk_rows: chunk_rows.max(1),
            quote_chars: quote_chars.as_deref().unwrap_or(",\"\n").chars().collect(),
            quote_empty,
        };
        let threads = tbscope_core::load::thread_count(0);
        let csv = |sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>| {
            tbscope_core::text::write_csv(&names, &batches, header, &opts, threads, sink)
        };
        let Some(fd) = fd else {
            let mut parts: Vec<Vec<u8>> = Vec::new();
            py.detach(|| {
                csv(&mut |b| {
                    parts.push(b.to_vec());
                    Ok(())
                })
            })
            .map_err(Failure::Value)?;
            let len = parts.iter().map(Vec::len).sum();
            // Straight into the bytes object: the text of a large table is copied once.
            let bytes = pyo3::types::PyBytes::new_with(py, len, |buf| {
                let mut at = 0;
                for p in &parts {
                    buf[at..at + p.len()].copy_from_slice(p);
                    at += p.len();
                }
                Ok(())
            })?;
            return Ok(Some(bytes));
        };
        use std::io::Write as _;
        let mut file = borrowed_file(fd);
        let mut failed: Option<std::io::Error> = None;
        let out = py.detach(|| {
            csv(&mut |b| {
                file.write_all(b).inspect_err(|e| {
                    failed = Some(std::io::Error::from_raw_os_error(
                        e.raw_os_error().unwrap_or(0),
                    ));
                })
            })
        });
        match (out, failed) {
            (Ok(()), _) => Ok(None),
            (Err(_), Some(e)) => Err(Failure::Os(e)),
            (Err(msg), None) => Err(Failure::Value(msg)),
        }
    })
}
