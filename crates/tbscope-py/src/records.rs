//! One event file's records as the reader frames them: payloads, record heads, the record
//! boundaries `tbscope.dask` cuts large files at, and Chrome trace files (profiles).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::funnel::{guarded, Failure, Outcome};
use crate::Table;

/// Payloads of whole records of one event file, with their offsets, read with the reader's
/// framing (both CRCs checked): the records starting at `offsets`, else every record, or those
/// whose payload contains `containing`.
#[pyfunction]
#[pyo3(signature = (path, offsets=None, *, containing=None, max_record_bytes=256 << 20))]
pub(crate) fn read_records<'py>(
    py: Python<'py>,
    path: PathBuf,
    offsets: Option<Vec<u64>>,
    containing: Option<Vec<u8>>,
    max_record_bytes: u64,
) -> Outcome<Vec<(u64, Bound<'py, PyBytes>)>> {
    let found = py.detach(|| {
        guarded(|| {
            tbscope_core::event_file::records::raw_records(
                &path,
                offsets.as_deref(),
                containing.as_deref(),
                max_record_bytes,
            )
            .map_err(|e| tbscope_core::Error::io(e, &path).into())
        })
    })?;
    Ok(found
        .into_iter()
        .map(|(o, d)| (o, PyBytes::new(py, &d)))
        .collect())
}

/// The head of every whole record of one event file, in file order: (offset, step, wall_time,
/// what, status, file_version, writer) columns as little-endian u64/i64/f64/u8/i32 buffers
/// plus (offset, string) lists for the file versions and source writers. See
/// `event_file::records::record_heads`.
#[pyfunction]
#[pyo3(signature = (path, *, max_record_bytes=256 << 20))]
#[allow(clippy::type_complexity)] // one plain tuple of columns, unpacked by its one caller
pub(crate) fn record_heads<'py>(
    py: Python<'py>,
    path: PathBuf,
    max_record_bytes: u64,
) -> Outcome<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Vec<(u64, String)>,
    Vec<(u64, String)>,
)> {
    let heads = py.detach(|| {
        guarded(|| {
            tbscope_core::event_file::records::record_heads(&path, max_record_bytes)
                .map_err(|e| tbscope_core::Error::io(e, &path).into())
        })
    })?;
    fn column<'py, T: Copy, const N: usize>(
        py: Python<'py>,
        heads: &[tbscope_core::event_file::records::RecordHead],
        f: impl Fn(&tbscope_core::event_file::records::RecordHead) -> T,
        le: impl Fn(T) -> [u8; N],
    ) -> Bound<'py, PyBytes> {
        let mut out = Vec::with_capacity(heads.len() * N);
        for h in heads {
            out.extend_from_slice(&le(f(h)));
        }
        PyBytes::new(py, &out)
    }
    let versions = heads
        .iter()
        .filter_map(|h| h.file_version.clone().map(|v| (h.offset, v)))
        .collect();
    let writers = heads
        .iter()
        .filter_map(|h| h.writer.clone().map(|w| (h.offset, w)))
        .collect();
    Ok((
        column(py, &heads, |h| h.offset, u64::to_le_bytes),
        column(py, &heads, |h| h.step, i64::to_le_bytes),
        column(py, &heads, |h| h.wall_time, f64::to_le_bytes),
        column(py, &heads, |h| h.what, u8::to_le_bytes),
        column(py, &heads, |h| h.status, i32::to_le_bytes),
        versions,
        writers,
    ))
}

/// Record boundaries of one event file after `start`, about `piece` bytes apart, found by
/// hopping from record header to record header (`event_file::split_points`): where
/// `tbscope.dask` cuts a large file into partitions.
#[pyfunction]
#[pyo3(signature = (path, start, piece, *, max_record_bytes=256 << 20))]
pub(crate) fn split_points(
    py: Python<'_>,
    path: PathBuf,
    start: u64,
    piece: u64,
    max_record_bytes: u64,
) -> Outcome<Vec<u64>> {
    if piece == 0 {
        return Err(Failure::Value("piece must be at least 1 byte".into()));
    }
    py.detach(|| {
        guarded(|| {
            Ok(tbscope_core::event_file::split_points(
                &path,
                start,
                piece,
                max_record_bytes,
            ))
        })
    })
}

/// A Chrome trace file (gzip or not) as a table of events (`tbscope_core::profile`).
#[pyfunction]
pub(crate) fn read_trace(py: Python<'_>, path: PathBuf) -> Outcome<Table> {
    py.detach(|| {
        guarded(|| {
            let b = tbscope_core::profile::read_trace(&path)?;
            Ok(Table::one(b))
        })
    })
}
