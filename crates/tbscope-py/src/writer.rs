//! `EventWriter`: the binding of `tbscope_core::writer`.
//!
//! Record calls keep the GIL: they only encode into a buffer (well under a microsecond), and
//! releasing and re-taking the GIL would cost more than the call itself. Calls that can block
//! (flush, close, back-pressure, binning a large histogram) release it.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use tbscope_core::histogram::{self, Edges, Histogram, Values};
use tbscope_core::writer::{self, Backlog, ScalarStyle, WriteError};

/// The one place where writer errors become Python exceptions.
fn to_py_err(e: WriteError) -> PyErr {
    match e {
        WriteError::Closed(m) | WriteError::InvalidArgument(m) => PyValueError::new_err(m),
        // OSError(errno, message) picks the errno's subclass (FileExistsError, ...).
        WriteError::Io {
            source, message, ..
        } => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, message)),
            None => PyOSError::new_err(message),
        },
        WriteError::Replaced { message, .. } => {
            PyFileNotFoundError::new_err((libc_enoent(), message))
        }
        WriteError::Other(m) => PyOSError::new_err(m),
    }
}

fn libc_enoent() -> i32 {
    std::io::Error::from(std::io::ErrorKind::NotFound)
        .raw_os_error()
        .unwrap_or(2)
}

/// Values read from a Python buffer: borrowed when its memory is usable as is, else copied.
enum Floats<'a> {
    F64(&'a [f64]),
    F32(&'a [f32]),
    Owned64(Vec<f64>),
    Owned32(Vec<f32>),
}

impl Floats<'_> {
    fn values(&self) -> Values<'_> {
        match self {
            Floats::F64(v) => Values::F64(v),
            Floats::F32(v) => Values::F32(v),
            Floats::Owned64(v) => Values::F64(v),
            Floats::Owned32(v) => Values::F32(v),
        }
    }
}

/// Native-order element type letter of a buffer format ("d", "<d", "=d", "@d" -> b'd').
fn format_char(buf: &PyUntypedBuffer) -> Option<u8> {
    let f = buf.format().to_bytes();
    let native_le = cfg!(target_endian = "little");
    match f {
        [c] | [b'@' | b'=', c] => Some(*c),
        [b'<', c] if native_le => Some(*c),
        [b'>' | b'!', c] if !native_le => Some(*c),
        _ => None,
    }
}

/// A C-contiguous buffer, or an error saying how to get one.
fn contiguous(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PyUntypedBuffer> {
    let buf = PyUntypedBuffer::get(obj).map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must support the buffer protocol (a numpy array, memoryview or bytes); got {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })?;
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{what} must be C-contiguous; pass np.ascontiguousarray(...) instead"
        )));
    }
    Ok(buf)
}

/// Reads a float64 or float32 buffer without copying when it is aligned.
fn floats<'a>(buf: &'a PyUntypedBuffer, what: &str, allow_f32: bool) -> PyResult<Floats<'a>> {
    let n = buf.item_count();
    let ptr = buf.buf_ptr();
    match (format_char(buf), buf.item_size()) {
        // An empty buffer's pointer may be null, which no slice may hold.
        (Some(b'd'), 8) if n == 0 => Ok(Floats::F64(&[])),
        (Some(b'f'), 4) if n == 0 && allow_f32 => Ok(Floats::F32(&[])),
        (Some(b'd'), 8) => {
            if ptr.align_offset(std::mem::align_of::<f64>()) == 0 {
                // SAFETY: the buffer is C-contiguous, holds `n` float64 values, is aligned,
                // and stays alive (and exported) as long as `buf`, which outlives the slice.
                Ok(Floats::F64(unsafe {
                    std::slice::from_raw_parts(ptr as *const f64, n)
                }))
            } else {
                // SAFETY: as above; reads are unaligned.
                let p = ptr as *const f64;
                Ok(Floats::Owned64(
                    (0..n)
                        .map(|i| unsafe { p.add(i).read_unaligned() })
                        .collect(),
                ))
            }
        }
        (Some(b'f'), 4) if allow_f32 => {
            if ptr.align_offset(std::mem::align_of::<f32>()) == 0 {
                // SAFETY: as for float64.
                Ok(Floats::F32(unsafe {
                    std::slice::from_raw_parts(ptr as *const f32, n)
                }))
            } else {
                let p = ptr as *const f32;
                // SAFETY: as for float64.
                Ok(Floats::Owned32(
                    (0..n)
                        .map(|i| unsafe { p.add(i).read_unaligned() })
                        .collect(),
                ))
            }
        }
        _ => Err(PyValueError::new_err(format!(
            "{what} must be {} in native byte order (buffer format {:?}); convert first, e.g. \
             np.asarray(x, dtype=np.float64)",
            if allow_f32 {
                "float64 or float32"
            } else {
                "float64"
            },
            buf.format().to_string_lossy()
        ))),
    }
}

/// Above this many values a histogram is binned without the GIL (and on several cores).
const HISTOGRAM_DETACH: usize = 1 << 16;

/// Writes TensorBoard event files: each call encodes one Event record; a background thread
/// writes them.
#[pyclass(module = "tbscope._core", frozen)]
pub struct EventWriter {
    inner: writer::EventWriter,
}

impl EventWriter {
    /// Applies back-pressure after an append: waits, without the GIL, for the thread.
    #[inline]
    fn queued(&self, py: Python<'_>, r: writer::Result<Backlog>) -> PyResult<()> {
        match r.map_err(to_py_err)? {
            Backlog::Fine => Ok(()),
            Backlog::Full => py.detach(|| self.inner.relieve()).map_err(to_py_err),
        }
    }
}

#[pymethods]
impl EventWriter {
    #[new]
    #[pyo3(signature = (path, *, flush_secs=120.0, max_queue=10, max_pending_bytes=256 << 20))]
    fn new(
        path: Option<PathBuf>,
        flush_secs: f64,
        max_queue: usize,
        max_pending_bytes: usize,
    ) -> PyResult<Self> {
        let flush_every = Duration::try_from_secs_f64(flush_secs)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "flush_secs must be a positive number of seconds, got {flush_secs}"
                ))
            })?;
        let opts = writer::Options {
            flush_every,
            max_queue,
            max_pending_bytes,
        };
        let inner = match path {
            Some(p) => writer::EventWriter::create(&p, opts),
            None => writer::EventWriter::memory(opts),
        }
        .map_err(to_py_err)?;
        Ok(EventWriter { inner })
    }

    #[getter]
    fn path(&self) -> Option<String> {
        self.inner.path().map(|p| p.to_string_lossy().into_owned())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    #[getter]
    fn pending_bytes(&self) -> u64 {
        self.inner.pending_bytes()
    }

    #[getter]
    fn bytes_written(&self) -> u64 {
        self.inner.bytes_written()
    }

    #[getter]
    fn records_written(&self) -> u64 {
        self.inner.records_written()
    }

    #[pyo3(signature = (tag, value, step=None, wall_time=None, new_style=false, double_precision=false))]
    #[allow(clippy::too_many_arguments)]
    fn scalar(
        &self,
        py: Python<'_>,
        tag: &str,
        value: f64,
        step: Option<i64>,
        wall_time: Option<f64>,
        new_style: bool,
        double_precision: bool,
    ) -> PyResult<()> {
        let style = match (new_style, double_precision) {
            (false, _) => ScalarStyle::Simple,
            (true, false) => ScalarStyle::Tensor32,
            (true, true) => ScalarStyle::Tensor64,
        };
        let r = self.inner.scalar(tag, value, step, wall_time, style);
        self.queued(py, r)
    }

    #[pyo3(signature = (tags, values, step=None, wall_time=None))]
    fn scalars(
        &self,
        py: Python<'_>,
        tags: Vec<PyBackedStr>,
        values: Vec<f64>,
        step: Option<i64>,
        wall_time: Option<f64>,
    ) -> PyResult<()> {
        let tags: Vec<&str> = tags.iter().map(|t| &**t).collect();
        let r = self.inner.scalars(&tags, &values, step, wall_time);
        self.queued(py, r)
    }

    #[pyo3(signature = (tag, values, step=None, wall_time=None, edges=None, max_bins=None))]
    #[allow(clippy::too_many_arguments)]
    fn histogram(
        &self,
        py: Python<'_>,
        tag: &str,
        values: &Bound<'_, PyAny>,
        step: Option<i64>,
        wall_time: Option<f64>,
        edges: Option<&Bound<'_, PyAny>>,
        max_bins: Option<usize>,
    ) -> PyResult<()> {
        let vbuf = contiguous(values, "values")?;
        let vals = floats(&vbuf, "values", true)?;
        let edges = match edges {
            Some(e) => {
                let ebuf = contiguous(e, "edges")?;
                let ev = floats(&ebuf, "edges", false)?;
                let Values::F64(ev) = ev.values() else {
                    unreachable!("edges are float64 only")
                };
                Some(Edges::new(ev).map_err(PyValueError::new_err)?)
            }
            None => None,
        };
        let v = vals.values();
        let compute = || histogram::histogram(v, edges.as_ref(), max_bins);
        let h: Histogram = if v.len() >= HISTOGRAM_DETACH {
            py.detach(compute)
        } else {
            compute()
        }
        .map_err(PyValueError::new_err)?;
        let r = self.inner.histogram(tag, &h, step, wall_time);
        self.queued(py, r)
    }

    #[pyo3(signature = (tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts, step=None, wall_time=None))]
    #[allow(clippy::too_many_arguments)]
    fn histogram_raw(
        &self,
        py: Python<'_>,
        tag: &str,
        min: f64,
        max: f64,
        num: f64,
        sum: f64,
        sum_squares: f64,
        bucket_limits: Vec<f64>,
        bucket_counts: Vec<f64>,
        step: Option<i64>,
        wall_time: Option<f64>,
    ) -> PyResult<()> {
        let h = Histogram {
            min,
            max,
            num,
            sum,
            sum_squares,
            limits: bucket_limits,
            counts: bucket_counts,
        };
        let r = self.inner.histogram(tag, &h, step, wall_time);
        self.queued(py, r)
    }

    #[pyo3(signature = (tag, data, dtype, shape, step=None, wall_time=None, metadata=None))]
    #[allow(clippy::too_many_arguments)]
    fn tensor(
        &self,
        py: Python<'_>,
        tag: &str,
        data: &Bound<'_, PyAny>,
        dtype: i32,
        shape: Vec<i64>,
        step: Option<i64>,
        wall_time: Option<f64>,
        metadata: Option<&[u8]>,
    ) -> PyResult<()> {
        let buf = contiguous(data, "data")?;
        let bytes: &[u8] = if buf.len_bytes() == 0 {
            // An empty buffer's pointer may be null, which no slice may hold.
            &[]
        } else {
            // SAFETY: a C-contiguous buffer is `len_bytes` bytes at `buf_ptr`, alive while
            // `buf` is; any alignment is fine for bytes.
            unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) }
        };
        let r = self
            .inner
            .tensor(tag, bytes, dtype, &shape, metadata, step, wall_time);
        self.queued(py, r)
    }

    #[pyo3(signature = (summary, step=None, wall_time=None))]
    fn summary(
        &self,
        py: Python<'_>,
        summary: &[u8],
        step: Option<i64>,
        wall_time: Option<f64>,
    ) -> PyResult<()> {
        let r = self.inner.summary(summary, step, wall_time);
        self.queued(py, r)
    }

    fn event(&self, py: Python<'_>, event: &[u8]) -> PyResult<()> {
        let r = self.inner.event(event);
        self.queued(py, r)
    }

    #[pyo3(signature = (fsync=false))]
    fn flush(&self, py: Python<'_>, fsync: bool) -> PyResult<()> {
        py.detach(|| self.inner.flush(fsync)).map_err(to_py_err)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.close()).map_err(to_py_err)
    }

    fn take<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let b = self.inner.take().map_err(to_py_err)?;
        Ok(pyo3::types::PyBytes::new(py, &b))
    }
}
