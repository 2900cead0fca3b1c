//! Python bindings for tbscope-core: a `Reader` and Arrow tables, and the event writer
//! (`writer.rs`).
//!
//! Every long call releases the GIL and stays interruptible (Ctrl-C cancels the read); every
//! core error becomes a Python exception in [`to_py_err`] and nowhere else.

use std::collections::VecDeque;
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::SchemaRef;
use pyo3::create_exception;
use pyo3::exceptions::{
    PyException, PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyPermissionError,
    PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tbscope_core::event_file::Options;
use tbscope_core::{CachedReader, Error, Kind, Reader, ReaderOptions, Restarts, Scan};

mod series;
mod writer;

create_exception!(
    _core,
    CorruptRecordError,
    PyException,
    "A record could not be read and strict reading was asked for."
);

const STREAM: &CStr = c"arrow_array_stream";
const SCHEMA: &CStr = c"arrow_schema";

/// The one place where core errors become Python exceptions.
fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::Io { source, path } => {
            let msg = format!("{path}: {source}");
            match source.kind() {
                std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
                _ => PyOSError::new_err(msg),
            }
        }
        Error::Corrupt { .. } => CorruptRecordError::new_err(e.to_string()),
        Error::InvalidArgument(m) => PyValueError::new_err(m),
        Error::Interrupted => PyKeyboardInterrupt::new_err("read interrupted"),
        Error::Other(m) => PyOSError::new_err(m),
    }
}

fn regex(pattern: Option<String>, what: &str) -> PyResult<Option<regex::Regex>> {
    pattern
        .map(|p| {
            regex::Regex::new(&p).map_err(|e| {
                // The regex crate's message spans lines with a caret diagram; one line is enough.
                let why = e
                    .to_string()
                    .lines()
                    .filter(|l| l.trim_start().starts_with("error:"))
                    .collect::<Vec<_>>()
                    .join(" ");
                let why = if why.is_empty() {
                    "invalid pattern".to_string()
                } else {
                    why.trim().to_string()
                };
                PyValueError::new_err(format!(
                    "{what}= pattern {p:?} is not supported by the native matcher ({why}); \
                     use a glob or a regex without look-around or backreferences"
                ))
            })
        })
        .transpose()
}

fn kind(name: &str) -> PyResult<Kind> {
    Kind::from_name(name).ok_or_else(|| {
        let all: Vec<_> = Kind::ALL.iter().map(|k| k.name()).collect();
        PyValueError::new_err(format!(
            "unknown kind {name:?}; choose from {}",
            all.join(", ")
        ))
    })
}

/// A logdir being read (directly or through a cache directory).
type Inner = Box<dyn Scan>;

/// A logdir being read; keeps per-file offsets so `load()` again reads only new bytes.
#[pyclass(module = "tbscope._core", frozen)]
struct NativeReader {
    inner: Arc<Mutex<Inner>>,
}

#[pymethods]
impl NativeReader {
    #[new]
    #[pyo3(signature = (path, *, runs=None, tags=None, kinds=None, step_lo=None, step_hi=None,
                        restarts="all", verify=true, max_record_bytes=256 << 20, provenance=false, threads=0,
                        cache_dir=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: PathBuf,
        runs: Option<String>,
        tags: Option<String>,
        kinds: Option<Vec<String>>,
        step_lo: Option<i64>,
        step_hi: Option<i64>,
        restarts: &str,
        verify: bool,
        max_record_bytes: u64,
        provenance: bool,
        threads: usize,
        cache_dir: Option<PathBuf>,
    ) -> PyResult<Self> {
        let restarts = match restarts {
            "all" => Restarts::All,
            "preempt" => Restarts::Preempt,
            other => {
                return Err(PyValueError::new_err(format!(
                    "restarts={other:?} is not a choice; use \"all\" (keep every record) or \"preempt\" (TensorBoard's rule)"
                )))
            }
        };
        let kinds = match kinds {
            None => tbscope_core::data_compat::KindSet::ALL,
            Some(v) => tbscope_core::data_compat::KindSet::of(
                &v.iter().map(|k| kind(k)).collect::<PyResult<Vec<_>>>()?,
            ),
        };
        let preempt = restarts == Restarts::Preempt;
        let file = Options {
            verify,
            max_len: max_record_bytes,
            provenance,
            kinds,
            tags: regex(tags, "tags")?,
            // Preemption must see the steps below the bound, so that bound is applied later.
            step_lo: if preempt { None } else { step_lo },
            step_hi,
        };
        let opts = ReaderOptions {
            file,
            runs: regex(runs, "runs")?,
            restarts,
            threads,
            step_lo: if preempt { step_lo } else { None },
        };
        let reader: Inner = match cache_dir {
            Some(dir) => Box::new(CachedReader::new(&path, opts, &dir).map_err(to_py_err)?),
            None => Box::new(Reader::new(&path, opts).map_err(to_py_err)?),
        };
        Ok(NativeReader {
            inner: Arc::new(Mutex::new(reader)),
        })
    }

    /// Reads what is new; returns (files read, bytes read, records, rows).
    fn load(&self, py: Python<'_>) -> PyResult<(usize, u64, u64, usize)> {
        let s = interruptible(py, &self.inner, |r, cancel| r.load(cancel))?;
        Ok((s.files_read, s.bytes_read, s.records, s.rows))
    }

    /// Streams one kind in pieces of about `max_bytes` of event files, keeping nothing.
    fn stream(&self, kind_name: &str, max_bytes: u64) -> PyResult<Stream> {
        let k = kind(kind_name)?;
        let plan = {
            let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            r.plan().map_err(to_py_err)?
        };
        let mut groups = VecDeque::new();
        let mut group = Vec::new();
        let mut bytes = 0u64;
        for item in plan {
            let left = std::fs::metadata(&item.1)
                .map_or(0, |m| m.len())
                .saturating_sub(item.2.offset);
            if !group.is_empty() && bytes + left > max_bytes {
                groups.push_back(std::mem::take(&mut group));
                bytes = 0;
            }
            bytes += left;
            group.push(item);
        }
        if !group.is_empty() {
            groups.push_back(group);
        }
        Ok(Stream {
            reader: self.inner.clone(),
            groups: Mutex::new(groups),
            kind: k,
        })
    }

    /// All rows read so far of one kind.
    fn table(&self, py: Python<'_>, kind_name: &str) -> PyResult<Table> {
        let k = kind(kind_name)?;
        let reader = self.inner.clone();
        py.detach(move || {
            let mut r = reader.lock().unwrap_or_else(|p| p.into_inner());
            let batches = r.table(k)?;
            Ok(Table {
                schema: r.schema(k)?,
                batches,
            })
        })
        .map_err(to_py_err)
    }

    fn series(&self) -> PyResult<Table> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Table::one(r.series().map_err(to_py_err)?))
    }

    /// One row per run with hparams records.
    fn hparams(&self) -> PyResult<Table> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Table::one(r.hparams().map_err(to_py_err)?))
    }

    fn runs_table(&self) -> PyResult<Table> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Table::one(r.runs_table().map_err(to_py_err)?))
    }

    /// Per run, the newest mtime of its event files (seconds) as of the last load.
    fn run_mtimes(&self) -> PyResult<Table> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Table::one(r.run_mtimes().map_err(to_py_err)?))
    }

    /// Per run: the runs table's columns, last_modified, series, first_step, last_step.
    fn run_facts(&self) -> PyResult<Table> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Table::one(r.run_facts().map_err(to_py_err)?))
    }

    /// One row per run of `runs_table()`; per tag with scalars (sorted) and per (statistic,
    /// suffix) of `stats`, a column `<tag>:<suffix>`.
    fn summary_table(&self, py: Python<'_>, stats: Vec<(String, String)>) -> PyResult<Table> {
        let reader = self.inner.clone();
        py.detach(move || {
            let mut r = reader.lock().unwrap_or_else(|p| p.into_inner());
            r.summary_table(&stats).map(Table::one)
        })
        .map_err(to_py_err)
    }

    /// Per scalar series: points, first, last, min, max, mean, count, argmin, argmax.
    fn scalar_stats(&self, py: Python<'_>) -> PyResult<Table> {
        let reader = self.inner.clone();
        py.detach(move || {
            let mut r = reader.lock().unwrap_or_else(|p| p.into_inner());
            r.scalar_stats().map(Table::one)
        })
        .map_err(to_py_err)
    }

    fn run_names(&self) -> PyResult<Vec<String>> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        r.run_names().map_err(to_py_err)
    }

    /// The health report: (run, file, severity, offset, length, reason) tuples.
    fn report(&self) -> PyResult<Vec<ReportTuple>> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(r.report()
            .map_err(to_py_err)?
            .iter()
            .map(|e| {
                (
                    e.run.clone(),
                    e.file.clone(),
                    e.severity.name(),
                    e.offset,
                    e.length,
                    e.reason.clone(),
                )
            })
            .collect())
    }

    /// What the cache did on the last load: (dir, status, generation, written, runs dropped,
    /// warnings), or None without a cache.
    fn cache_info(&self) -> Option<CacheInfoTuple> {
        let r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        r.cache_info().map(|c| {
            (
                c.dir.to_string_lossy().into_owned(),
                c.status,
                c.generation,
                c.written,
                c.runs_dropped,
                c.warnings,
            )
        })
    }

    /// The absolute path of a file named in `blob_file`/`file` columns.
    fn file_path(&self, rel: &str) -> PyResult<Option<PathBuf>> {
        let mut r = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        r.file_path(rel).map_err(to_py_err)
    }
}

type Work = Vec<(String, PathBuf, tbscope_core::event_file::Cursor)>;

/// `NativeReader.report()`: (run, file, severity, offset, length, reason).
type ReportTuple = (String, String, &'static str, u64, u64, String);

/// `NativeReader.cache_info()`: (dir, status, generation, written, runs dropped, warnings).
type CacheInfoTuple = (
    String,
    &'static str,
    Option<String>,
    bool,
    usize,
    Vec<String>,
);

/// Runs `f` on the reader in a helper thread while this thread waits without the GIL, checking
/// for signals every 50 ms: Ctrl-C sets the cancel flag and raises KeyboardInterrupt.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    reader: &Arc<Mutex<Inner>>,
    f: impl FnOnce(&mut Inner, &AtomicBool) -> tbscope_core::Result<T> + Send + 'static,
) -> PyResult<T> {
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let reader = reader.clone();
    let flag = cancel.clone();
    std::thread::Builder::new()
        .name("tbscope-load".into())
        .spawn(move || {
            let mut r = reader.lock().unwrap_or_else(|p| p.into_inner());
            let _ = tx.send(f(&mut r, &flag));
        })
        .map_err(|e| PyOSError::new_err(format!("cannot start a reader thread: {e}")))?;
    // Receivers are not Sync; the lock only lets the wait run without the GIL.
    let rx = Mutex::new(rx);
    loop {
        match py.detach(|| rx.lock().unwrap().recv_timeout(Duration::from_millis(50))) {
            Ok(res) => return res.map_err(to_py_err),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    // Workers notice the flag within a few thousand records; don't wait
                    // forever on one stuck in a system call.
                    let _ = py.detach(|| rx.lock().unwrap().recv_timeout(Duration::from_secs(5)));
                    return Err(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PyOSError::new_err("the reader thread stopped unexpectedly"))
            }
        }
    }
}

/// Pieces of a logdir read one at a time: each `next()` reads a group of files.
#[pyclass(module = "tbscope._core", frozen)]
struct Stream {
    reader: Arc<Mutex<Inner>>,
    groups: Mutex<VecDeque<Work>>,
    kind: Kind,
}

#[pymethods]
impl Stream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Table>> {
        loop {
            let Some(group) = self
                .groups
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
            else {
                return Ok(None);
            };
            let kind = self.kind;
            let batches: Vec<RecordBatch> =
                interruptible(py, &self.reader, move |r, cancel| r.read(group, cancel))?
                    .1
                    .into_iter()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, b)| b)
                    .collect();
            if let Some(first) = batches.first() {
                return Ok(Some(Table {
                    schema: first.schema(),
                    batches,
                }));
            }
        }
    }
}

/// Record batches that leave through the Arrow PyCapsule interface.
#[pyclass(module = "tbscope._core", frozen)]
struct Table {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl Table {
    fn one(b: RecordBatch) -> Table {
        Table {
            schema: b.schema(),
            batches: vec![b],
        }
    }
}

#[pymethods]
impl Table {
    /// A fresh stream on every call; batches are shared, not copied.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema; // The protocol lets a producer keep its own schema.
        let it = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(it));
        PyCapsule::new_with_value(py, stream, STREAM)
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let s = FFI_ArrowSchema::try_from(self.schema.as_ref())
            .map_err(|e| PyValueError::new_err(format!("cannot export schema: {e}")))?;
        PyCapsule::new_with_value(py, s, SCHEMA)
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    #[getter]
    fn num_batches(&self) -> usize {
        self.batches.len()
    }
}

// ------------------------------------------------------------------------------------------
// Log surgery (`tbscope_core::rewrite`): written into a staging directory, published by
// `commit_rewrite` once the Python side has verified it (or at once with `commit=True`).

/// `rewrite`'s errors: an occupied output is FileExistsError, everything else as usual.
fn rewrite_err(e: Error) -> PyErr {
    match e {
        Error::Io { source, path } if source.kind() == std::io::ErrorKind::AlreadyExists => {
            pyo3::exceptions::PyFileExistsError::new_err(format!("{path}: {source}"))
        }
        e => to_py_err(e),
    }
}

/// Runs `f` on a helper thread while this one waits without the GIL; Ctrl-C sets the cancel
/// flag (the rewrite stops within a few thousand records) and raises KeyboardInterrupt.
fn detached<T: Send + 'static>(
    py: Python<'_>,
    f: impl FnOnce(&AtomicBool) -> tbscope_core::Result<T> + Send + 'static,
) -> PyResult<T> {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("tbscope-rewrite".into())
        .spawn(move || {
            let _ = tx.send(f(&flag));
        })
        .map_err(|e| PyOSError::new_err(format!("cannot start a worker thread: {e}")))?;
    let rx = Mutex::new(rx);
    loop {
        match py.detach(|| rx.lock().unwrap().recv_timeout(Duration::from_millis(50))) {
            Ok(res) => return res.map_err(rewrite_err),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    // Wait for the worker to remove its staging directory.
                    let _ = py.detach(|| rx.lock().unwrap().recv_timeout(Duration::from_secs(30)));
                    return Err(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PyOSError::new_err(
                    "the rewrite thread stopped unexpectedly",
                ))
            }
        }
    }
}

/// Rewrites `src` into a staging directory next to `dst` and returns what it did as a dict
/// (`staging`: where the output is, or None once committed; counts; `files_out`; `problems`
/// as report tuples). With `commit`, publishes it as `dst` at once.
#[pyfunction]
#[pyo3(signature = (src, dst, *, runs=None, tags=None, drop_tags=None, drop_steps=None,
                    preempt=false, merge=true, force=false, commit=false, threads=0))]
#[allow(clippy::too_many_arguments)]
fn rewrite<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: PathBuf,
    runs: Option<String>,
    tags: Option<String>,
    drop_tags: Option<String>,
    drop_steps: Option<(Option<i64>, Option<i64>)>,
    preempt: bool,
    merge: bool,
    force: bool,
    commit: bool,
    threads: usize,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use tbscope_core::rewrite as rw;
    let opts = rw::RewriteOptions {
        runs: regex(runs, "runs")?,
        tags: regex(tags, "tags")?,
        drop_tags: regex(drop_tags, "drop_tags")?,
        drop_steps,
        preempt,
        merge,
        threads,
        ..Default::default()
    };
    let (stats, staging) = detached(py, move |cancel| {
        let staging = rw::stage(&src, &dst, force)?;
        let stats = match rw::write(&src, &staging, &opts, cancel) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(e);
            }
        };
        if commit {
            rw::commit(&src, &staging, &dst, force)?;
            return Ok((stats, None));
        }
        Ok((stats, Some(staging)))
    })?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("staging", staging)?;
    d.set_item("runs", stats.runs)?;
    d.set_item("files_in", stats.files_in)?;
    d.set_item("files_out", stats.files_out)?;
    d.set_item("records_in", stats.records_in)?;
    d.set_item("records_out", stats.records_out)?;
    d.set_item("records_dropped", stats.records_dropped)?;
    d.set_item("records_rewritten", stats.records_rewritten)?;
    d.set_item("values_dropped", stats.values_dropped)?;
    d.set_item("metadata_moved", stats.metadata_moved)?;
    d.set_item("bytes_in", stats.bytes_in)?;
    d.set_item("bytes_out", stats.bytes_out)?;
    d.set_item("bytes_skipped", stats.bytes_skipped)?;
    let problems: Vec<_> = stats
        .problems
        .into_iter()
        .map(|e| {
            (
                e.run,
                e.file,
                e.severity.name(),
                e.offset,
                e.length,
                e.reason,
            )
        })
        .collect();
    d.set_item("problems", problems)?;
    Ok(d)
}

/// Publishes a staging directory from `rewrite(commit=False)` as `dst` (checks run again).
#[pyfunction]
#[pyo3(signature = (src, staging, dst, *, force=false))]
fn commit_rewrite(src: PathBuf, staging: PathBuf, dst: PathBuf, force: bool) -> PyResult<()> {
    tbscope_core::rewrite::commit(&src, &staging, &dst, force).map_err(rewrite_err)
}

/// An Arrow table (anything with `__arrow_c_stream__`) as CSV in pandas' format, UTF-8 (see
/// `tbscope_core::text`): written to the file descriptor `fd` as it is formatted (returns None),
/// or returned as bytes. ValueError for a column type it does not format; OSError (with its
/// errno: BrokenPipeError for a closed pipe) when writing fails.
#[pyfunction]
#[pyo3(signature = (table, *, header=true, chunk_rows=100_000, quote_chars=None, quote_empty=false, fd=None))]
#[allow(clippy::too_many_arguments)]
fn to_csv<'py>(
    py: Python<'py>,
    table: &Bound<'py, PyAny>,
    header: bool,
    chunk_rows: usize,
    quote_chars: Option<String>,
    quote_empty: bool,
    fd: Option<i32>,
) -> PyResult<Option<Bound<'py, pyo3::types::PyBytes>>> {
    use arrow_array::ffi_stream::RecordBatchStreamReader;
    use arrow_array::RecordBatchReader as _;
    let capsule = table.call_method0("__arrow_c_stream__")?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let ptr = capsule.pointer_checked(Some(STREAM))?;
    // SAFETY: the capsule holds an FFI_ArrowArrayStream (checked by name); `from_raw` moves it
    // out and leaves a released stream behind, which the capsule's destructor then skips.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr().cast()) };
    let reader = RecordBatchStreamReader::try_new(stream)
        .map_err(|e| PyValueError::new_err(format!("not an Arrow stream: {e}")))?;
    let names: Vec<String> = reader
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let batches = reader
        .collect::<Result<Vec<RecordBatch>, _>>()
        .map_err(|e| PyValueError::new_err(format!("reading the Arrow stream failed: {e}")))?;
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
        .map_err(PyValueError::new_err)?;
        let len = parts.iter().map(Vec::len).sum();
        // Straight into the bytes object: the text of a large table is copied once.
        return pyo3::types::PyBytes::new_with(py, len, |buf| {
            let mut at = 0;
            for p in &parts {
                buf[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            Ok(())
        })
        .map(Some);
    };
    use std::io::Write as _;
    use std::os::fd::FromRawFd as _;
    // SAFETY: the caller's open descriptor, borrowed for the call: ManuallyDrop never closes it.
    let mut file = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
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
        (Err(_), Some(e)) => Err(PyOSError::new_err((
            e.raw_os_error().unwrap_or(0),
            e.to_string(),
        ))),
        (Err(msg), None) => Err(PyValueError::new_err(msg)),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<NativeReader>()?;
    m.add_class::<Table>()?;
    m.add_class::<Stream>()?;
    m.add_class::<writer::EventWriter>()?;
    m.add_function(wrap_pyfunction!(rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(commit_rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(to_csv, m)?)?;
    m.add_function(wrap_pyfunction!(series::downsample, m)?)?;
    m.add_function(wrap_pyfunction!(series::ema, m)?)?;
    m.add(
        "CorruptRecordError",
        m.py().get_type::<CorruptRecordError>(),
    )?;
    Ok(())
}
