//! `downsample` and `ema` over numpy columns (`tbscope_core::downsample`): many series at once,
//! each a range of rows, without the GIL; and `group_rows` (`tbscope_core::group`), which lays
//! one tag's rows of a table out as such series.

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use tbscope_core::downsample::{ema as core_ema, m4_many};
use tbscope_core::group::{count as group_count, fill as group_fill, Chunk};

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

/// Series ranges: `starts[i]..ends[i]` (int64 arrays), or the whole columns as one series.
fn ranges(
    starts: Option<&Bound<'_, PyAny>>,
    ends: Option<&Bound<'_, PyAny>>,
    len: usize,
) -> PyResult<Vec<(usize, usize)>> {
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
    match (ss, es) {
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
/// None, points inside the window per series as int64 bytes): with `smoothing`, each whole
/// series is smoothed first (TensorBoard's EMA).
#[pyfunction]
#[pyo3(signature = (x, y, n, *, starts=None, ends=None, x_lo=None, x_hi=None, smoothing=None))]
#[allow(
    clippy::too_many_arguments,
    clippy::type_complexity,
    reason = "one parameter per Python keyword argument (pyo3 maps them); the result is the Python tuple it returns"
)]
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
    Bound<'py, PyBytes>,
)> {
    guarded(|| {
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
            return Err(
                PyValueError::new_err(format!("x has {len} rows and y {}", ys.len())).into(),
            );
        }
        let series = ranges(starts, ends, len)?;
        let (rows, counts, smoothed, totals) = py.detach(|| {
            let threads = tbscope_core::load::thread_count(0);
            let kept = match xs {
                Xs::I64(v) => m4_many(v, ys, &series, n, x_lo, x_hi, threads),
                Xs::F64(v) => m4_many(v, ys, &series, n, x_lo, x_hi, threads),
            };
            let mut rows: Vec<i64> = Vec::with_capacity(kept.iter().map(|(k, _)| k.len()).sum());
            let mut counts: Vec<i64> = Vec::with_capacity(series.len());
            let mut totals: Vec<i64> = Vec::with_capacity(series.len());
            let mut smoothed: Vec<f64> = Vec::new();
            let mut scratch: Vec<f64> = Vec::new();
            for (&(a, b), (part, candidates)) in series.iter().zip(kept) {
                counts.push(part.len() as i64);
                totals.push(candidates as i64);
                if let Some(w) = smoothing {
                    scratch.resize(b - a, 0.0);
                    core_ema(&ys[a..b], w, &mut scratch);
                    smoothed.extend(part.iter().map(|&r| scratch[r - a]));
                }
                rows.extend(part.iter().map(|&r| r as i64));
            }
            (rows, counts, smoothing.map(|_| smoothed), totals)
        });
        Ok((
            bytes_of(py, &rows),
            bytes_of(py, &counts),
            smoothed.map(|s| bytes_of(py, &s)),
            bytes_of(py, &totals),
        ))
    })
}

/// One tag's rows of a table's chunks, grouped: chunk `i` has run codes `runs[i]` and tag
/// codes `tags[i]` (int32), keeps the rows whose tag code is `tag[i]` (-1: none), and puts
/// them in group `groups[i][run code]` (int64; -1 leaves the run out) of `n_groups`.
/// `columns[c][i]` is column `c` of chunk `i` (8-byte numbers). Returns (rows per group as
/// int64 bytes, one bytearray per column with the kept rows group after group, each group in
/// chunk and row order).
#[pyfunction]
#[pyo3(signature = (runs, tags, tag, groups, n_groups, columns))]
#[allow(
    clippy::type_complexity,
    reason = "the Python tuple it returns, written out"
)]
pub fn group_rows<'py>(
    py: Python<'py>,
    runs: Vec<Bound<'py, PyAny>>,
    tags: Vec<Bound<'py, PyAny>>,
    tag: Vec<i64>,
    groups: Vec<Bound<'py, PyAny>>,
    n_groups: usize,
    columns: Vec<Vec<Bound<'py, PyAny>>>,
) -> Outcome<(Bound<'py, PyBytes>, Vec<Bound<'py, PyByteArray>>)> {
    guarded(|| {
        let n = runs.len();
        if tags.len() != n
            || tag.len() != n
            || groups.len() != n
            || columns.iter().any(|c| c.len() != n)
        {
            return Err(PyValueError::new_err(
                "runs, tags, tag, groups and every column need one entry per chunk",
            )
            .into());
        }
        let bufs = |objs: &[Bound<'py, PyAny>], what: &str| -> PyResult<Vec<PyUntypedBuffer>> {
            objs.iter().map(|o| get(o, what)).collect()
        };
        let (rb, tb, gb) = (
            bufs(&runs, "runs")?,
            bufs(&tags, "tags")?,
            bufs(&groups, "groups")?,
        );
        let cb: Vec<Vec<PyUntypedBuffer>> = columns
            .iter()
            .map(|c| bufs(c, "columns"))
            .collect::<PyResult<_>>()?;
        let mut chunks = Vec::with_capacity(n);
        for i in 0..n {
            let code = match tag[i] {
                -1 => None,
                t => Some(
                    i32::try_from(t).map_err(|_| PyValueError::new_err("tag codes are int32"))?,
                ),
            };
            chunks.push(Chunk {
                runs: slice::<i32>(&rb[i], b"il", "runs", "int32")?,
                tags: slice::<i32>(&tb[i], b"il", "tags", "int32")?,
                tag: code,
                group: slice::<i64>(&gb[i], b"qli", "groups", "int64")?,
                columns: cb
                    .iter()
                    .map(|c| slice::<u64>(&c[i], b"qlidQLI", "columns", "int64"))
                    .collect::<PyResult<_>>()?,
            });
        }
        let counts = py
            .detach(|| group_count(&chunks, n_groups))
            .map_err(PyValueError::new_err)?;
        let total: usize = counts.iter().sum();
        let outs: Vec<Bound<'py, PyByteArray>> = (0..columns.len())
            .map(|_| PyByteArray::new_with(py, total * 8, |_| Ok(())))
            .collect::<PyResult<_>>()?;
        // The bytearrays are new and only referenced here: nothing can resize them while the
        // GIL is released.
        let ptrs: Vec<usize> = outs.iter().map(|o| o.data() as usize).collect();
        if ptrs
            .iter()
            .any(|&p| total > 0 && p % std::mem::align_of::<u64>() != 0)
        {
            return Err(PyValueError::new_err("bytearray storage is not 8-byte aligned").into());
        }
        py.detach(|| {
            let mut views: Vec<&mut [u64]> = ptrs
                .iter()
                .map(|&p| {
                    if total == 0 {
                        return &mut [][..];
                    }
                    // SAFETY: a fresh bytearray of `total * 8` bytes, 8-byte aligned (checked),
                    // alive and unshared for this call.
                    unsafe { std::slice::from_raw_parts_mut(p as *mut u64, total) }
                })
                .collect();
            group_fill(&chunks, &counts, &mut views)
        })
        .map_err(PyValueError::new_err)?;
        let counts: Vec<i64> = counts.into_iter().map(|c| c as i64).collect();
        Ok((bytes_of(py, &counts), outs))
    })
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
    guarded(|| {
        let yb = get(y, "y")?;
        let ys = slice::<f64>(&yb, b"d", "y", "float64")?;
        let ob = get(out, "out")?;
        if ob.readonly() {
            return Err(PyValueError::new_err("out must be writable").into());
        }
        let os = slice::<f64>(&ob, b"d", "out", "float64")?;
        if os.len() != ys.len() {
            return Err(PyValueError::new_err("out must have the length of y").into());
        }
        let series = ranges(starts, ends, ys.len())?;
        let out_ptr = os.as_ptr() as usize;
        // In place (`out` is `y`, or overlaps it): read from a copy, since a slice may not be
        // borrowed and written at once.
        let (y_lo, o_lo) = (ys.as_ptr() as usize, out_ptr);
        let bytes = std::mem::size_of_val(ys);
        let copy: Option<Vec<f64>> =
            (y_lo < o_lo + bytes && o_lo < y_lo + bytes).then(|| ys.to_vec());
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
    })
}

fn bytes_of<'py, T: Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: plain numbers (i64, f64) viewed as their bytes.
    let b =
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, b)
}
