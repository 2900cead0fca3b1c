//! `EventWriter`: the binding of `tbscope_core::writer`.
//!
//! Record calls keep the GIL: they only encode into a buffer (well under a microsecond), and
//! releasing and re-taking the GIL would cost more than the call itself. Calls that can block
//! (flush, close, back-pressure, binning a large histogram) release it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyString};
use tbscope_core::histogram::{self, Edges, Values};
use tbscope_core::proto::HistogramProto;
use tbscope_core::writer::{self, Backlog, ScalarStyle};

use crate::funnel::{guarded, invalid, Outcome};

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

/// What the last `scalars_dict` call logged: its key objects in order (strong references, so
/// an address names the same string for as long as it is kept), the `Summary` it encoded,
/// and where each value sits in it. A training loop logs the same keys every step, usually
/// from dicts built the same way, so the next call only has to see the same key objects
/// come by and rewrite four bytes per value.
#[derive(Default)]
struct Template {
    keys: Vec<Py<PyAny>>,
    body: Vec<u8>,
    value_at: Vec<usize>,
}

impl Template {
    /// Encodes the dict's items, reusing the template while its key objects come by in the
    /// template's order (a four-byte write per value) and encoding afresh from the first
    /// item that differs; the template is then what was encoded. One pass, each value
    /// converted once. On error the template is dropped (a half-written one must not match).
    fn fill(&mut self, py: Python<'_>, d: &Bound<'_, PyDict>) -> PyResult<()> {
        let mut i = 0;
        let mut matching = true;
        let r = each_item(py, d, |k, v| {
            // Only the address is compared: the template holds a reference to its key, so a
            // match is that very (immutable) string.
            if matching && i < self.keys.len() && k == self.keys[i].as_ptr() {
                let x = float_of(py, v)?;
                let at = self.value_at[i];
                self.body[at..at + 4].copy_from_slice(&(x as f32).to_le_bytes());
            } else {
                if matching {
                    matching = false;
                    self.truncate(i);
                }
                // SAFETY: `k` is a live object handed out by PyDict_Next; owning a reference
                // keeps it alive while a value's __float__ runs.
                let key = unsafe { Bound::from_borrowed_ptr(py, k) };
                let tag = key.cast::<PyString>()?.to_str()?;
                let x = float_of(py, v)?;
                tbscope_core::proto::encode::put_simple_value(&mut self.body, tag, x);
                self.value_at.push(self.body.len() - 4);
                self.keys.push(key.unbind());
            }
            i += 1;
            Ok(true)
        });
        match r {
            Ok(()) if matching => self.truncate(i),
            Ok(()) => {}
            Err(_) => self.truncate(0),
        }
        r
    }

    /// Keeps the first `n` items.
    fn truncate(&mut self, n: usize) {
        let end = if n == 0 { 0 } else { self.value_at[n - 1] + 4 };
        self.keys.truncate(n);
        self.value_at.truncate(n);
        self.body.truncate(end);
    }
}

/// Calls `f(key, value)` for each item of the dict, in its order, until `f` returns false or
/// fails. Borrowed pointers from PyDict_Next: no reference counting, no lists.
fn each_item(
    _gil: Python<'_>,
    d: &Bound<'_, PyDict>,
    mut f: impl FnMut(*mut ffi::PyObject, *mut ffi::PyObject) -> PyResult<bool>,
) -> PyResult<()> {
    let mut pos: ffi::Py_ssize_t = 0;
    let mut k: *mut ffi::PyObject = std::ptr::null_mut();
    let mut v: *mut ffi::PyObject = std::ptr::null_mut();
    // SAFETY: `d` is a dict and the GIL is held. PyDict_Next checks `pos` against the
    // dict's current size, so even a dict changed by a value's __float__ is only read
    // within bounds; the pointers it returns are used before any Python code runs, or
    // after taking a reference (`float_of`, `Template::fill`).
    while unsafe { ffi::PyDict_Next(d.as_ptr(), &mut pos, &mut k, &mut v) } != 0 {
        if !f(k, v)? {
            break;
        }
    }
    Ok(())
}

/// `float(v)` as numbers are taken everywhere else: an exact float read directly, anything
/// else (ints, numpy scalars, 0-d arrays) through `__float__`/`__index__`.
#[inline]
fn float_of(py: Python<'_>, v: *mut ffi::PyObject) -> PyResult<f64> {
    // SAFETY: `v` is a live object (see `each_item`); an exact float's value is read
    // without running Python code.
    unsafe {
        if ffi::PyFloat_CheckExact(v) != 0 {
            return Ok(ffi::PyFloat_AsDouble(v));
        }
        // A reference of our own: __float__ may drop the dict's.
        Bound::from_borrowed_ptr(py, v).extract()
    }
}

/// Writes TensorBoard event files: each call encodes one Event record; a background thread
/// writes them.
#[pyclass(module = "tbscope._core", frozen)]
pub struct EventWriter {
    inner: writer::EventWriter,
    /// The custom bucket edges of the last histogram, with their lookup tables: a run that
    /// logs with the same `bins` every step builds them once.
    last_edges: Mutex<Option<Arc<Edges>>>,
    /// See [`Template`]; dropped on close.
    template: Mutex<Template>,
}

impl EventWriter {
    /// `Edges` for these values: the last ones again if they are the same to the bit.
    fn edges(&self, ev: &[f64]) -> Outcome<Arc<Edges>> {
        let mut last = self.last_edges.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = last.as_ref() {
            let same = e.edges().len() == ev.len()
                && e.edges()
                    .iter()
                    .zip(ev)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
            if same {
                return Ok(e.clone());
            }
        }
        let e = Arc::new(invalid(Edges::new(ev))?);
        *last = Some(e.clone());
        Ok(e)
    }

    /// Applies back-pressure after an append: waits, without the GIL, for the thread.
    #[inline]
    fn queued(&self, py: Python<'_>, r: writer::Result<Backlog>) -> Outcome<()> {
        match r? {
            Backlog::Fine => Ok(()),
            Backlog::Full => Ok(py.detach(|| self.inner.relieve())?),
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
    ) -> Outcome<Self> {
        guarded(|| {
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
            }?;
            Ok(EventWriter {
                inner,
                last_edges: Mutex::new(None),
                template: Mutex::new(Template::default()),
            })
        })
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
    #[allow(
        clippy::too_many_arguments,
        reason = "the Python method's parameters, one for one"
    )]
    fn scalar(
        &self,
        py: Python<'_>,
        tag: &str,
        value: f64,
        step: Option<i64>,
        wall_time: Option<f64>,
        new_style: bool,
        double_precision: bool,
    ) -> Outcome<()> {
        guarded(|| {
            let style = match (new_style, double_precision) {
                (false, _) => ScalarStyle::Simple,
                (true, false) => ScalarStyle::Tensor32,
                (true, true) => ScalarStyle::Tensor64,
            };
            let r = self.inner.scalar(tag, value, step, wall_time, style);
            self.queued(py, r)
        })
    }

    #[pyo3(signature = (tags, values, step=None, wall_time=None))]
    fn scalars(
        &self,
        py: Python<'_>,
        tags: Vec<PyBackedStr>,
        values: Vec<f64>,
        step: Option<i64>,
        wall_time: Option<f64>,
    ) -> Outcome<()> {
        guarded(|| {
            let tags: Vec<&str> = tags.iter().map(|t| &**t).collect();
            let r = self.inner.scalars(&tags, &values, step, wall_time);
            self.queued(py, r)
        })
    }

    /// `scalars` from a dict, read with the dict's own iteration (no lists built). The
    /// encoded `Summary` is kept (see [`Template`]): a dict with the same key objects as the
    /// last one costs a float read and a four-byte write per value.
    #[pyo3(signature = (metrics, step=None, wall_time=None))]
    fn scalars_dict(
        &self,
        py: Python<'_>,
        metrics: &Bound<'_, PyDict>,
        step: Option<i64>,
        wall_time: Option<f64>,
    ) -> Outcome<()> {
        guarded(|| {
            let r = match self.template.try_lock() {
                Ok(mut t) => {
                    t.fill(py, metrics)?;
                    self.inner.summary(&t.body, step, wall_time)
                }
                // Busy: a value's __float__ logs through this writer (or another thread is in
                // the middle of a call). Encode on the side.
                Err(_) => {
                    let mut t = Template::default();
                    t.fill(py, metrics)?;
                    self.inner.summary(&t.body, step, wall_time)
                }
            };
            self.queued(py, r)
        })
    }

    #[pyo3(signature = (tag, values, step=None, wall_time=None, edges=None, max_bins=None))]
    #[allow(
        clippy::too_many_arguments,
        reason = "the Python method's parameters, one for one"
    )]
    fn histogram(
        &self,
        py: Python<'_>,
        tag: &str,
        values: &Bound<'_, PyAny>,
        step: Option<i64>,
        wall_time: Option<f64>,
        edges: Option<&Bound<'_, PyAny>>,
        max_bins: Option<usize>,
    ) -> Outcome<()> {
        guarded(|| {
            let vbuf = contiguous(values, "values")?;
            let vals = floats(&vbuf, "values", true)?;
            let edges = match edges {
                Some(e) => {
                    let ebuf = contiguous(e, "edges")?;
                    let ev = floats(&ebuf, "edges", false)?;
                    let Values::F64(ev) = ev.values() else {
                        unreachable!("edges are float64 only")
                    };
                    Some(self.edges(ev)?)
                }
                None => None,
            };
            let v = vals.values();
            let compute = || histogram::histogram(v, edges.as_deref(), max_bins);
            let h: HistogramProto = invalid(if v.len() >= HISTOGRAM_DETACH {
                py.detach(compute)
            } else {
                compute()
            })?;
            let r = self.inner.histogram(tag, &h, step, wall_time);
            self.queued(py, r)
        })
    }

    #[pyo3(signature = (tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts, step=None, wall_time=None))]
    #[allow(
        clippy::too_many_arguments,
        reason = "the Python method's parameters, one for one"
    )]
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
    ) -> Outcome<()> {
        guarded(|| {
            let h = HistogramProto {
                min,
                max,
                num,
                sum,
                sum_squares,
                bucket_limit: bucket_limits,
                bucket: bucket_counts,
            };
            let r = self.inner.histogram(tag, &h, step, wall_time);
            self.queued(py, r)
        })
    }

    #[pyo3(signature = (tag, data, dtype, shape, step=None, wall_time=None, metadata=None))]
    #[allow(
        clippy::too_many_arguments,
        reason = "the Python method's parameters, one for one"
    )]
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
    ) -> Outcome<()> {
        guarded(|| {
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
        })
    }

    #[pyo3(signature = (summary, step=None, wall_time=None))]
    fn summary(
        &self,
        py: Python<'_>,
        summary: &[u8],
        step: Option<i64>,
        wall_time: Option<f64>,
    ) -> Outcome<()> {
        guarded(|| {
            let r = self.inner.summary(summary, step, wall_time);
            self.queued(py, r)
        })
    }

    fn event(&self, py: Python<'_>, event: &[u8]) -> Outcome<()> {
        guarded(|| {
            let r = self.inner.event(event);
            self.queued(py, r)
        })
    }

    #[pyo3(signature = (fsync=false))]
    fn flush(&self, py: Python<'_>, fsync: bool) -> Outcome<()> {
        guarded(|| Ok(py.detach(|| self.inner.flush(fsync))?))
    }

    fn close(&self, py: Python<'_>) -> Outcome<()> {
        guarded(|| {
            // Nothing more will be logged: let go of the template's keys.
            if let Ok(mut t) = self.template.try_lock() {
                *t = Template::default();
            }
            Ok(py.detach(|| self.inner.close())?)
        })
    }

    fn take<'py>(&self, py: Python<'py>) -> Outcome<Bound<'py, pyo3::types::PyBytes>> {
        guarded(|| {
            let b = self.inner.take()?;
            Ok(pyo3::types::PyBytes::new(py, &b))
        })
    }
}
