//! `downsample` and `ema` over numpy columns (`tbscope_core::downsample`): many series at once,
//! each a range of rows, without the GIL.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tbscope_core::downsample::{ema as core_ema, m4_many};

use crate::funnel::{guarded, Outcome};

/// A C-contiguous, aligned buffer of `T` in native byte order (format letters `codes`).
fn slice<'a, T>(
    buf: &'a PyUntypedBuffer,
    codes: &[u8],
    what: &str,
    kind: &str,
) -> PyResult<&'a [T]> {
    let f = buf.format().to_bytes();
    let native_le = cfg!(target_endian = "little");
    let code = match f {
        [c] | [b'@' | b'=', c] => Some(*c),
        [b'<', c] if native_le => Some(*c),
        [b'>' | b'!', c] if !native_le => Some(*c),
        _ => None,
    };
    let ok =
        code.is_some_and(|c| codes.contains(&c)) && buf.item_size() == std::mem::size_of::<T>();
    if !ok || !buf.is_c_contiguous() || buf.dimensions() != 1 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a one-dimensional C-contiguous {kind} array in native byte order; \
             convert first, e.g. np.ascontiguousarray(a, dtype=np.{kind})"
        )));
    }
    let n = buf.item_count();
    if n == 0 {
        return Ok(&[]);
    }
    let ptr = buf.buf_ptr();
    if ptr.align_offset(std::mem::align_of::<T>()) != 0 {
        return Err(PyValueError::new_err(format!(
            "{what} is not aligned; pass a copy (a.copy())"
        )));
    }
    // SAFETY: C-contiguous, `n` items of T's size and alignment, alive while `buf` is.
    Ok(unsafe { std::slice::from_raw_parts(ptr as *const T, n) })
}

fn get(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PyUntypedBuffer> {
    PyUntypedBuffer::get(obj).map_err(|_| {
        PyValueError::new_err(format!("{what} must be a numpy array (or another buffer)"))
    })
}

/// The x column: int64 steps or float64 times.
enum Xs<'a> {
    I64(&'a [i64]),
    F64(&'a [f64]),
}

/// Series ranges: `starts[i]..ends[i]`, or the whole columns as one series.
fn ranges(
    starts: Option<&[i64]>,
    ends: Option<&[i64]>,
    len: usize,
) -> PyResult<Vec<(usize, usize)>> {
    match (starts, ends) {
        (None, None) => Ok(vec![(0, len)]),
        (Some(s), Some(e)) if s.len() == e.len() => s
            .iter()
            .zip(e)
            .map(|(&a, &b)| {
                if a < 0 || b < a || b as usize > len {
                    Err(PyValueError::new_err(format!(
                        "series range {a}..{b} is not inside the {len} rows"
                    )))
                } else {
                    Ok((a as usize, b as usize))
                }
            })
            .collect(),
        _ => Err(PyValueError::new_err(
            "starts and ends go together and have the same length",
        )),
    }
}

/// Downsamples each series (rows `starts[i]..ends[i]` of `x` and `y`) to at most `n` rows by
/// the M4 rule, optionally inside `[x_lo, x_hi]`. Returns (kept row numbers as int64 bytes,
/// rows kept per series as int64 bytes, smoothed values at the kept rows as float64 bytes or
/// None): with `smoothing`, each whole series is smoothed first (TensorBoard's EMA).
#[pyfunction]
#[pyo3(signature = (x, y, n, *, starts=None, ends=None, x_lo=None, x_hi=None, smoothing=None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn downsample<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    n: usize,
    starts: Option<&Bound<'py, PyAny>>,
    ends: Option<&Bound<'py, PyAny>>,
    x_lo: Option<f64>,
    x_hi: Option<f64>,
    smoothing: Option<f64>,
) -> Outcome<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
)> {
    guarded(|| Ok(m4(py, x, y, n, starts, ends, x_lo, x_hi, smoothing)?))
}

/// `downsample`'s body.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn m4<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    n: usize,
    starts: Option<&Bound<'py, PyAny>>,
    ends: Option<&Bound<'py, PyAny>>,
    x_lo: Option<f64>,
    x_hi: Option<f64>,
    smoothing: Option<f64>,
) -> PyResult<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
)> {
    let xb = get(x, "x")?;
    let yb = get(y, "y")?;
    let xs = match slice::<i64>(&xb, b"qli", "x", "int64") {
        Ok(v) if xb.item_size() == 8 => Xs::I64(v),
        _ => Xs::F64(slice::<f64>(&xb, b"d", "x", "float64 or int64")?),
    };
    let ys = slice::<f64>(&yb, b"d", "y", "float64")?;
    let len = match xs {
        Xs::I64(v) => v.len(),
        Xs::F64(v) => v.len(),
    };
    if len != ys.len() {
        return Err(PyValueError::new_err(format!(
            "x has {len} rows and y {}",
            ys.len()
        )));
    }
    let sb = starts.map(|s| get(s, "starts")).transpose()?;
    let eb = ends.map(|e| get(e, "ends")).transpose()?;
    let ss = sb
        .as_ref()
        .map(|b| slice::<i64>(b, b"qli", "starts", "int64"))
        .transpose()?;
    let es = eb
        .as_ref()
        .map(|b| slice::<i64>(b, b"qli", "ends", "int64"))
        .transpose()?;
    let series = ranges(ss, es, len)?;
    let (rows, counts, smoothed) = py.detach(|| {
        let mut rows: Vec<usize> = Vec::new();
        let mut counts: Vec<i64> = Vec::with_capacity(series.len());
        let mut smoothed: Vec<f64> = Vec::new();
        let mut scratch: Vec<f64> = Vec::new();
        let threads = tbscope_core::load::thread_count(0);
        let kept = match xs {
            Xs::I64(v) => m4_many(v, ys, &series, n, x_lo, x_hi, threads),
            Xs::F64(v) => m4_many(v, ys, &series, n, x_lo, x_hi, threads),
        };
        for (&(a, b), part) in series.iter().zip(kept) {
            let before = rows.len();
            rows.extend(part);
            counts.push((rows.len() - before) as i64);
            if let Some(w) = smoothing {
                scratch.resize(b - a, 0.0);
                core_ema(&ys[a..b], w, &mut scratch);
                smoothed.extend(rows[before..].iter().map(|&r| scratch[r - a]));
            }
        }
        (rows, counts, smoothing.map(|_| smoothed))
    });
    let rows: Vec<i64> = rows.into_iter().map(|r| r as i64).collect();
    Ok((
        bytes_of(py, &rows),
        bytes_of(py, &counts),
        smoothed.map(|s| bytes_of(py, &s)),
    ))
}

/// TensorBoard's smoothing of each series of `y` (rows `starts[i]..ends[i]`, or all of `y`)
/// into `out`, a writable float64 array of the same length (rows outside every series are
/// left as they are).
#[pyfunction]
#[pyo3(signature = (y, weight, out, *, starts=None, ends=None))]
pub fn ema<'py>(
    py: Python<'py>,
    y: &Bound<'py, PyAny>,
    weight: f64,
    out: &Bound<'py, PyAny>,
    starts: Option<&Bound<'py, PyAny>>,
    ends: Option<&Bound<'py, PyAny>>,
) -> Outcome<()> {
    guarded(|| Ok(smooth(py, y, weight, out, starts, ends)?))
}

/// `ema`'s body.
fn smooth<'py>(
    py: Python<'py>,
    y: &Bound<'py, PyAny>,
    weight: f64,
    out: &Bound<'py, PyAny>,
    starts: Option<&Bound<'py, PyAny>>,
    ends: Option<&Bound<'py, PyAny>>,
) -> PyResult<()> {
    let yb = get(y, "y")?;
    let ys = slice::<f64>(&yb, b"d", "y", "float64")?;
    let ob = get(out, "out")?;
    if ob.readonly() {
        return Err(PyValueError::new_err("out must be writable"));
    }
    let os = slice::<f64>(&ob, b"d", "out", "float64")?;
    if os.len() != ys.len() {
        return Err(PyValueError::new_err("out must have the length of y"));
    }
    let sb = starts.map(|s| get(s, "starts")).transpose()?;
    let eb = ends.map(|e| get(e, "ends")).transpose()?;
    let ss = sb
        .as_ref()
        .map(|b| slice::<i64>(b, b"qli", "starts", "int64"))
        .transpose()?;
    let es = eb
        .as_ref()
        .map(|b| slice::<i64>(b, b"qli", "ends", "int64"))
        .transpose()?;
    let series = ranges(ss, es, ys.len())?;
    let out_ptr = os.as_ptr() as usize;
    // In place (`out` is `y`, or overlaps it): read from a copy, since a slice may not be
    // borrowed and written at once.
    let (y_lo, o_lo) = (ys.as_ptr() as usize, out_ptr);
    let bytes = std::mem::size_of_val(ys);
    let copy: Option<Vec<f64>> = (y_lo < o_lo + bytes && o_lo < y_lo + bytes).then(|| ys.to_vec());
    let ys: &[f64] = copy.as_deref().unwrap_or(ys);
    py.detach(|| {
        for (a, b) in series {
            // SAFETY: `out` is a writable buffer of ys.len() float64s (checked above), alive for
            // the call, not overlapping what is read; ranges lie inside it (a later range
            // overwrites what an overlapping earlier one wrote).
            let dst =
                unsafe { std::slice::from_raw_parts_mut((out_ptr as *mut f64).add(a), b - a) };
            core_ema(&ys[a..b], weight, dst);
        }
    });
    Ok(())
}

fn bytes_of<'py, T: Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: plain numbers (i64, f64) viewed as their bytes.
    let b =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, b)
}
