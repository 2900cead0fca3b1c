//! The one way out of the binding: every failure of a native call, whatever its source (the
//! reader, the rewrite, the writer, a Python exception met on the way, a panic), becomes a
//! [`Failure`], and `From<Failure> for PyErr` is the one place where failures become Python
//! exceptions. Long calls run through [`detached`], the one interruptible runner.
//!
//! (A `From<tbscope_core::Error> for PyErr` cannot be written here: both types are foreign to
//! this crate. `Failure` is the binding's own type standing between them.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyPermissionError,
    PyValueError,
};
use pyo3::prelude::*;
use tbscope_core::writer::WriteError;
use tbscope_core::Error;
use tbscope_remote::FetchError;

// Python-defined (tbscope/errors.py), so they pickle like any Python exception.
pyo3::import_exception!(tbscope.errors, CorruptRecordError);
pyo3::import_exception!(tbscope.errors, TbscopeError);

/// Why a native call failed.
pub(crate) enum Failure {
    /// The reader, the cache or the rewrite.
    Core(Error),
    /// The event writer.
    Write(WriteError),
    /// A ranged GET of the native object-store transport.
    Fetch(FetchError),
    /// A bad argument found by core code that says why in words (histogram edges, bins).
    Value(String),
    /// A system call's failure, without a path to name (OSError with its errno).
    Os(std::io::Error),
    /// A Python exception already made (argument conversion, a value's `__float__`, ...).
    Py(PyErr),
    /// A panic: a bug in tbscope, never a `pyo3_runtime.PanicException` (a BaseException
    /// that `except Exception` would miss).
    Panic(String),
}

/// What the `#[pymethods]` return.
pub(crate) type Outcome<T> = Result<T, Failure>;

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

impl From<WriteError> for Failure {
    fn from(e: WriteError) -> Self {
        Failure::Write(e)
    }
}

impl From<FetchError> for Failure {
    fn from(e: FetchError) -> Self {
        Failure::Fetch(e)
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Py(e)
    }
}

/// The OSError subclass Python itself would raise for this kind of I/O error.
fn os_error(kind: std::io::ErrorKind, msg: String) -> PyErr {
    match kind {
        std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
        std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
        std::io::ErrorKind::AlreadyExists => PyFileExistsError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

/// The one place where failures become Python exceptions.
impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Core(e) => match e {
                Error::Io { source, path } => os_error(source.kind(), format!("{path}: {source}")),
                Error::Corrupt { .. } => CorruptRecordError::new_err(e.to_string()),
                Error::InvalidArgument(m) => PyValueError::new_err(m),
                Error::Interrupted => PyKeyboardInterrupt::new_err("read interrupted"),
                Error::Other(m) => PyOSError::new_err(m),
            },
            Failure::Write(e) => match e {
                WriteError::Closed(m) | WriteError::InvalidArgument(m) => PyValueError::new_err(m),
                // OSError(errno, message) picks the errno's subclass (FileExistsError, ...).
                WriteError::Io {
                    source, message, ..
                } => match source.raw_os_error() {
                    Some(errno) => PyOSError::new_err((errno, message)),
                    None => os_error(source.kind(), message),
                },
                WriteError::Replaced { message, .. } => {
                    PyFileNotFoundError::new_err((enoent(), message))
                }
                WriteError::Other(m) => PyOSError::new_err(m),
            },
            // The mirror tells these apart: a removed object, a key only fsspec can name
            // (ValueError), anything else (retried, then reported).
            Failure::Fetch(e) => match e {
                FetchError::NotFound(m) => PyFileNotFoundError::new_err((enoent(), m)),
                FetchError::BadKey(m) => PyValueError::new_err(m),
                FetchError::Other(m) => PyOSError::new_err(m),
            },
            Failure::Value(m) => PyValueError::new_err(m),
            Failure::Os(e) => match e.raw_os_error() {
                Some(errno) => PyOSError::new_err((errno, e.to_string())),
                None => os_error(e.kind(), e.to_string()),
            },
            Failure::Py(e) => e,
            Failure::Panic(what) => TbscopeError::new_err(format!(
                "internal error in tbscope's native code: {what} (a bug: please report it)"
            )),
        }
    }
}

fn enoent() -> i32 {
    std::io::Error::from(std::io::ErrorKind::NotFound)
        .raw_os_error()
        .unwrap_or(2)
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs `f`, a panic included among its failures.
pub(crate) fn guarded<T>(f: impl FnOnce() -> Outcome<T>) -> Outcome<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(Failure::Panic(panic_message(p))))
}

/// The one interruptible runner: runs `f` on a helper thread named `name` while this thread
/// waits without the GIL, checking for signals every 50 ms. Ctrl-C (or any exception a signal
/// handler raises) sets the cancel flag `f` gets, waits up to `grace` for `f` to stop (workers
/// notice the flag within a few thousand records; a rewrite then removes its staging
/// directory), and raises that exception.
pub(crate) fn detached<T: Send + 'static>(
    py: Python<'_>,
    name: &str,
    grace: Duration,
    f: impl FnOnce(&AtomicBool) -> Outcome<T> + Send + 'static,
) -> Outcome<T> {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _ = tx.send(guarded(|| f(&flag)));
        })
        .map_err(|e| PyOSError::new_err(format!("cannot start a {name} thread: {e}")))?;
    // Receivers are not Sync; the lock only lets the wait run without the GIL.
    let rx = Mutex::new(rx);
    let wait = |d| py.detach(|| rx.lock().unwrap_or_else(|p| p.into_inner()).recv_timeout(d));
    loop {
        match wait(Duration::from_millis(50)) {
            Ok(out) => return out,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    let _ = wait(grace);
                    return Err(e.into());
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Failure::Panic(format!(
                    "the {name} thread stopped unexpectedly"
                )))
            }
        }
    }
}

/// A bad argument that core code explains in words (a `String` error) as a ValueError.
pub(crate) fn invalid<T>(r: Result<T, String>) -> Outcome<T> {
    r.map_err(Failure::Value)
}
