//! Writing event files: Events are encoded and framed on the caller's thread, straight into a
//! pending buffer, and one background thread per writer hands that buffer to the OS.
//!
//! Why this shape: a training loop logs from its hot path, so a call must cost about what a
//! `Vec` append costs. Encoding is a few dozen bytes written in place (no intermediate message
//! objects, no allocation once the buffer has grown), framing is two hardware CRCs, and the
//! mutex is held only for that. System calls, which take microseconds and can block for much
//! longer on a slow disk, happen on the writer's own thread. The two swap buffers (double
//! buffering), so the caller never waits for a write in progress, and memory use stays flat.
//!
//! Failure model: a write that fails (disk full, I/O error) leaves the file ending on a whole
//! record (it is truncated back) and leaves the unwritten batch queued; the error is reported by
//! the next call and the batch is written again on the next flush or close. A file that is
//! removed or replaced under the writer is re-created, so a `rm -rf logdir` during training
//! costs only what was written before it.

mod queue;
mod sink;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How [`EventWriter::scalar`] stores a value.
pub use crate::proto::encode::ScalarStyle;
use crate::proto::encode::{
    encode_file_version, encode_histogram, encode_scalar, encode_scalars, encode_summary,
    encode_tensor, DT_STRING,
};
use crate::proto::HistogramProto;
use crate::tf_record::framed;
use queue::{background, Shared, State};
use sink::Sink;

// ------------------------------------------------------------------------------------------
// Errors.

/// Why a writer call failed. The bindings turn each variant into one Python exception.
#[derive(Debug)]
pub enum WriteError {
    /// The writer was closed; nothing more can be written through it.
    Closed(String),
    /// The arguments cannot work; the message says what to do instead.
    InvalidArgument(String),
    /// Creating, writing or syncing the file failed. `message` has the path, the reason, how
    /// much is still queued and what happens to it.
    Io {
        source: io::Error,
        path: String,
        message: String,
    },
    /// The file was removed or replaced under the writer, which re-created it; nothing queued
    /// was lost, but what had been written before is gone from this path.
    Replaced { path: String, message: String },
    /// The background thread is gone (it cannot fail, so this is a bug).
    Other(String),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Closed(m) | WriteError::InvalidArgument(m) | WriteError::Other(m) => {
                f.write_str(m)
            }
            WriteError::Io { message, .. } | WriteError::Replaced { message, .. } => {
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for WriteError {}

pub type Result<T> = std::result::Result<T, WriteError>;

/// What went wrong in the background, kept until a call can report it.
#[derive(Debug)]
enum Failure {
    Io {
        source: io::Error,
        path: PathBuf,
        what: &'static str,
    },
    Replaced {
        old: PathBuf,
        new: PathBuf,
        removed: bool,
    },
}

// ------------------------------------------------------------------------------------------
// The writer.

/// Tuning knobs, with TensorBoard's writer defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// The thread writes whatever is queued at least this often.
    pub flush_every: Duration,
    /// The thread is woken once this many records are queued.
    pub max_queue: usize,
    /// Callers block once more than this many bytes wait (back-pressure, not unbounded RAM).
    pub max_pending_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            flush_every: Duration::from_secs(120),
            max_queue: 10,
            max_pending_bytes: 256 << 20,
        }
    }
}

/// After an append: whether the caller should wait for the thread before going on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backlog {
    Fine,
    /// More than `max_pending_bytes` wait: call [`EventWriter::relieve`] (without holding
    /// locks another thread may need, e.g. Python's GIL).
    Full,
}

/// Writes events to one file (or to memory); see the module docs.
pub struct EventWriter {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    memory: bool,
}

impl EventWriter {
    /// Creates `path` (never overwriting: an existing file is an error) and writes its
    /// `file_version` record before returning, so the file is valid from the start.
    pub fn create(path: &Path, opts: Options) -> Result<EventWriter> {
        let opts = checked(opts)?;
        let mut first = Vec::new();
        framed(&mut first, |out| encode_file_version(out, now()));
        let sink = Sink::create(path, &first).map_err(|source| {
            let p = path.display();
            let message = match source.kind() {
                io::ErrorKind::AlreadyExists => format!(
                    "{p} already exists; event writers never overwrite a file: pick a new name"
                ),
                io::ErrorKind::NotFound => format!(
                    "cannot create {p}: its directory does not exist; create it first \
                     (os.makedirs)"
                ),
                _ => format!("cannot create the event file {p}: {source}"),
            };
            WriteError::Io {
                message,
                path: p.to_string(),
                source,
            }
        })?;
        EventWriter::spawn(sink, first.len() as u64, 1, opts)
    }

    /// Starts the thread for an open file that already holds `bytes` bytes in `records`
    /// records.
    fn spawn(sink: Sink, bytes: u64, records: u64, opts: Options) -> Result<EventWriter> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                bytes_written: bytes,
                records_written: records,
                path: Some(sink.path.clone()),
                ..State::default()
            }),
            wake: Condvar::new(),
            done: Condvar::new(),
            opts,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("tbscope-writer".into())
            .spawn(move || background(&s, sink))
            .map_err(|e| WriteError::Other(format!("cannot start the writer thread: {e}")))?;
        Ok(EventWriter {
            shared,
            thread: Mutex::new(Some(thread)),
            memory: false,
        })
    }

    /// A writer without a file or thread: records pile up until [`take`](Self::take). The
    /// first record is the `file_version` one, so everything taken, concatenated, is a valid
    /// event file.
    pub fn memory(opts: Options) -> Result<EventWriter> {
        let opts = checked(opts)?;
        let mut buf = Vec::new();
        framed(&mut buf, |out| encode_file_version(out, now()));
        Ok(EventWriter {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    buf,
                    records: 1,
                    ..State::default()
                }),
                wake: Condvar::new(),
                done: Condvar::new(),
                opts,
            }),
            thread: Mutex::new(None),
            memory: true,
        })
    }

    pub fn path(&self) -> Option<PathBuf> {
        self.shared.lock().path.clone()
    }
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }
    /// Bytes queued and not yet handed to the OS.
    pub fn pending_bytes(&self) -> u64 {
        let st = self.shared.lock();
        st.buf.len() as u64 + st.in_flight_bytes
    }
    /// Bytes handed to the OS so far (all files, file_version records included). In memory
    /// mode: bytes returned by `take`.
    pub fn bytes_written(&self) -> u64 {
        self.shared.lock().bytes_written
    }
    pub fn records_written(&self) -> u64 {
        self.shared.lock().records_written
    }

    /// Encodes one record with `f` into the queue. The hot path: one lock, no allocation
    /// once the buffer has grown, no system call unless the thread must be woken.
    #[inline]
    pub fn append(&self, f: impl FnOnce(&mut Vec<u8>)) -> Result<Backlog> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        if st.closed || st.failure.is_some() || st.gone {
            return Err(self.refusal(&mut st));
        }
        framed(&mut st.buf, f);
        st.records += 1;
        if self.memory {
            return Ok(Backlog::Fine);
        }
        if st.idle && !st.failed && st.records >= sh.opts.max_queue as u64 {
            // Notifying costs a system call: only when the thread sleeps, and only once.
            st.idle = false;
            sh.wake.notify_one();
        }
        if st.buf.len() as u64 + st.in_flight_bytes > sh.opts.max_pending_bytes as u64 {
            return Ok(Backlog::Full);
        }
        Ok(Backlog::Fine)
    }

    /// The error a call must raise instead of queueing: a background failure (reported
    /// once), a closed writer, or a dead thread.
    #[cold]
    fn refusal(&self, st: &mut State) -> WriteError {
        if let Some(f) = st.failure.take() {
            return report(f, st);
        }
        if st.closed {
            return WriteError::Closed(
                "this event writer is closed; open a new writer to log more".into(),
            );
        }
        WriteError::Other("the event writer's thread has stopped; open a new writer".into())
    }

    pub fn scalar(
        &self,
        tag: &str,
        value: f64,
        step: Option<i64>,
        wall: Option<f64>,
        style: ScalarStyle,
    ) -> Result<Backlog> {
        let wall = wall.unwrap_or_else(now);
        self.append(|out| encode_scalar(out, wall, step, tag, value, style))
    }

    pub fn scalars(
        &self,
        tags: &[&str],
        values: &[f64],
        step: Option<i64>,
        wall: Option<f64>,
    ) -> Result<Backlog> {
        if tags.len() != values.len() {
            return Err(WriteError::InvalidArgument(format!(
                "scalars() got {} tags but {} values; pass one value per tag",
                tags.len(),
                values.len()
            )));
        }
        let wall = wall.unwrap_or_else(now);
        let hint = tags.iter().map(|t| t.len() + 9).sum();
        self.append(|out| {
            encode_scalars(
                out,
                wall,
                step,
                tags.iter().copied().zip(values.iter().copied()),
                hint,
            )
        })
    }

    pub fn histogram(
        &self,
        tag: &str,
        h: &HistogramProto,
        step: Option<i64>,
        wall: Option<f64>,
    ) -> Result<Backlog> {
        if h.bucket_limit.len() != h.bucket.len() {
            return Err(WriteError::InvalidArgument(format!(
                "a histogram needs one bucket limit per bucket count; got {} limits and {} counts",
                h.bucket_limit.len(),
                h.bucket.len()
            )));
        }
        let wall = wall.unwrap_or_else(now);
        self.append(|out| encode_histogram(out, wall, step, tag, h))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "a tensor value and its event, passed through to the encoder as they are"
    )]
    pub fn tensor(
        &self,
        tag: &str,
        data: &[u8],
        dtype: i32,
        shape: &[i64],
        metadata: Option<&[u8]>,
        step: Option<i64>,
        wall: Option<f64>,
    ) -> Result<Backlog> {
        check_tensor(data.len(), dtype, shape)?;
        let wall = wall.unwrap_or_else(now);
        self.append(|out| encode_tensor(out, wall, step, tag, data, dtype, shape, metadata))
    }

    pub fn summary(&self, summary: &[u8], step: Option<i64>, wall: Option<f64>) -> Result<Backlog> {
        let wall = wall.unwrap_or_else(now);
        self.append(|out| encode_summary(out, wall, step, summary))
    }

    pub fn event(&self, event: &[u8]) -> Result<Backlog> {
        self.append(|out| out.extend_from_slice(event))
    }

    /// Waits until everything queued is written (back-pressure after [`Backlog::Full`]).
    pub fn relieve(&self) -> Result<()> {
        self.flush(false)
    }

    /// Blocks until everything queued so far is handed to the OS (and synced to disk when
    /// `fsync`). Retries a batch an earlier write failed on. No-op in memory mode or once
    /// closed.
    pub fn flush(&self, fsync: bool) -> Result<()> {
        if self.memory {
            return Ok(());
        }
        let sh = &*self.shared;
        let mut st = sh.lock();
        if st.closed {
            return Ok(());
        }
        let notice = earlier_notice(&mut st);
        st = self.request(st, fsync);
        let failure = st.failure.take().or(notice);
        if st.failed {
            return Err(still_failed(failure, &st));
        }
        match failure {
            Some(f) => Err(report(f, &st)),
            None if st.gone => Err(WriteError::Other(
                "the event writer's thread has stopped; open a new writer".into(),
            )),
            None => Ok(()),
        }
    }

    /// Asks the thread to write everything queued and waits until it has.
    fn request<'a>(&'a self, mut st: MutexGuard<'a, State>, fsync: bool) -> MutexGuard<'a, State> {
        let sh = &*self.shared;
        st.flush_req += 1;
        st.fsync_req |= fsync;
        let mine = st.flush_req;
        st.idle = false;
        sh.wake.notify_one();
        while st.flush_done < mine && !st.gone {
            st = sh.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st
    }

    /// Writes everything, stops the thread and closes the file. Idempotent. If the final
    /// write fails the writer stays open (data still queued) so close can be retried.
    pub fn close(&self) -> Result<()> {
        let sh = &*self.shared;
        let mut st = sh.lock();
        if st.closed {
            return Ok(());
        }
        st.closed = true;
        if self.memory {
            return Ok(());
        }
        let notice = earlier_notice(&mut st);
        st.stop = true;
        st = self.request(st, false);
        let failure = st.failure.take().or(notice);
        if st.failed {
            // Nothing was lost yet: stay open so the caller can free space and retry.
            st.closed = false;
            st.stop = false;
            return Err(still_failed(failure, &st));
        }
        let notice = failure.map(|f| report(f, &st));
        drop(st);
        self.join();
        notice.map_or(Ok(()), Err)
    }

    fn join(&self) {
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Memory mode: the framed records queued so far, which are then forgotten.
    pub fn take(&self) -> Result<Vec<u8>> {
        if !self.memory {
            return Err(WriteError::InvalidArgument(
                "take() is only for writers created without a path (memory mode); this one \
                 writes to a file: read the file instead"
                    .into(),
            ));
        }
        let mut st = self.shared.lock();
        let out = std::mem::take(&mut st.buf);
        st.bytes_written += out.len() as u64;
        st.records_written += std::mem::take(&mut st.records);
        Ok(out)
    }
}

impl Drop for EventWriter {
    /// Flushes and joins: what was logged is on disk once the writer is gone.
    fn drop(&mut self) {
        if self.memory {
            return;
        }
        if self.close().is_err() {
            // The data cannot be written; don't leave the thread waiting for a retry.
            let mut st = self.shared.lock();
            st.abandon = true;
            st.stop = true;
            self.shared.wake.notify_one();
            drop(st);
            self.join();
        }
    }
}

/// Seconds since the Unix epoch, as event files store them.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The longest `flush_every` used: a deadline past it could overflow the clock (`Instant +
/// Duration` panics there, which killed the writer thread), and a century is "never" anyway.
const MAX_FLUSH_EVERY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

fn checked(mut opts: Options) -> Result<Options> {
    opts.flush_every = opts.flush_every.min(MAX_FLUSH_EVERY);
    if opts.max_queue == 0 {
        return Err(WriteError::InvalidArgument(
            "max_queue must be at least 1 (1 = wake the writer thread on every record)".into(),
        ));
    }
    if opts.max_pending_bytes == 0 {
        return Err(WriteError::InvalidArgument(
            "max_pending_bytes must be positive".into(),
        ));
    }
    if opts.flush_every.is_zero() {
        return Err(WriteError::InvalidArgument(
            "flush_secs must be positive".into(),
        ));
    }
    Ok(opts)
}

/// Data length must match dtype and shape, as every reader checks.
fn check_tensor(len: usize, dtype: i32, shape: &[i64]) -> Result<()> {
    if dtype == DT_STRING {
        return Err(WriteError::InvalidArgument(
            "DT_STRING tensors cannot be given as raw bytes (strings go in string_val); \
             encode the TensorProto yourself and pass a Summary to summary()"
                .into(),
        ));
    }
    if let Some(&d) = shape.iter().find(|&&d| d < 0) {
        return Err(WriteError::InvalidArgument(format!(
            "tensor shape {shape:?} has a negative dimension {d}; every dimension must be >= 0"
        )));
    }
    let Some(size) = crate::tensor::element_size(dtype) else {
        return Err(WriteError::InvalidArgument(format!(
            "dtype {dtype} ({}) has no fixed element size; pass a numeric TensorFlow DataType",
            crate::tensor::dtype_name(dtype)
        )));
    };
    let n = shape.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
    if n.saturating_mul(size as u64) != len as u64 {
        return Err(WriteError::InvalidArgument(format!(
            "tensor data has {len} bytes but shape {shape:?} of {} ({size} bytes each) needs {}",
            crate::tensor::dtype_name(dtype),
            n.saturating_mul(size as u64)
        )));
    }
    Ok(())
}

/// Before a retry: an earlier write error is superseded by the retry's outcome, but news of a
/// re-created file must still reach the caller.
fn earlier_notice(st: &mut State) -> Option<Failure> {
    st.failure
        .take()
        .filter(|f| matches!(f, Failure::Replaced { .. }))
}

/// The error for a retry that failed. Its failure may already have been reported to a
/// concurrent call, but the caller waiting for the retry must hear about it too.
fn still_failed(f: Option<Failure>, st: &State) -> WriteError {
    match f {
        Some(f) => report(f, st),
        None => WriteError::Other(format!(
            "writing the event file failed (reported to another call); {} bytes ({} records) \
             are still queued and will be retried on the next flush() or close()",
            st.buf.len() as u64 + st.in_flight_bytes,
            st.records + st.in_flight_records
        )),
    }
}

/// The message for a background failure, with what is still queued.
fn report(f: Failure, st: &State) -> WriteError {
    let queued = st.buf.len() as u64 + st.in_flight_bytes;
    let records = st.records + st.in_flight_records;
    match f {
        Failure::Io { source, path, what } => WriteError::Io {
            message: format!(
                "{}: {what} failed: {source}; {queued} bytes ({records} records) are still \
                 queued and will be retried on the next flush() or close() (free space or fix \
                 the cause first)",
                path.display()
            ),
            path: path.display().to_string(),
            source,
        },
        Failure::Replaced { old, new, removed } => {
            let how = if removed {
                "was removed (or its directory was)"
            } else {
                "was replaced by another file"
            };
            let now = if new == old {
                "re-created it with its queued records; what was written before is gone".to_string()
            } else {
                format!(
                    "did not overwrite the new file and writes to {} from now on",
                    new.display()
                )
            };
            WriteError::Replaced {
                path: old.display().to_string(),
                message: format!(
                    "event file {} {how} while the writer was open; the writer {now}",
                    old.display()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;
    use std::time::Instant;

    use sink::Ident;

    /// A writer whose descriptor is `/dev/full` (every write fails with ENOSPC) while its path
    /// is a regular file: the thread sees "its" file in place and a disk that is full. The
    /// test can later point the descriptor at the regular file (dup2), which is "freeing
    /// space" as far as the writer can tell. Returns the writer, the path and the descriptor.
    #[cfg(target_os = "linux")]
    fn on_full_disk(dir: &Path, opts: Options) -> (EventWriter, PathBuf, i32) {
        use std::os::fd::AsRawFd;
        let path = dir.join("events.out.tfevents.full");
        std::fs::write(&path, b"").unwrap();
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let fd = full.as_raw_fd();
        let sink = Sink {
            file: full,
            path: path.clone(),
            len: 0,
            ident: Ident::of(&std::fs::metadata(&path).unwrap()),
        };
        (EventWriter::spawn(sink, 0, 0, opts).unwrap(), path, fd)
    }

    #[cfg(target_os = "linux")]
    fn temp_dir(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tbscope-writer-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A flush interval past the clock's range (flush_secs=2**63 from Python) once killed
    /// the writer thread with an `Instant + Duration` overflow: the data never reached disk.
    #[test]
    fn an_endless_flush_interval_is_never() {
        let dir = temp_dir("endless");
        let path = dir.join("events.out.tfevents.1.endless");
        let opts = Options {
            flush_every: Duration::MAX,
            ..Options::default()
        };
        let w = EventWriter::create(&path, opts).unwrap();
        w.scalar("x", 1.0, Some(1), Some(1.0), ScalarStyle::Simple)
            .unwrap();
        w.flush(false).unwrap();
        w.close().unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn failed_writes_keep_records_queued_until_a_retry_works() {
        let dir = temp_dir("enospc");
        let lazy = Options {
            flush_every: Duration::from_secs(3600),
            max_queue: usize::MAX,
            max_pending_bytes: 1 << 30,
        };
        let (w, path, fd) = on_full_disk(&dir, lazy);
        for i in 0..5 {
            w.scalar("x", i as f64, Some(i), Some(1.0), ScalarStyle::Simple)
                .unwrap();
        }
        let queued = w.pending_bytes();
        assert!(queued > 0);
        match w.flush(false) {
            Err(WriteError::Io {
                source, message, ..
            }) => {
                assert_eq!(source.raw_os_error(), Some(libc::ENOSPC));
                assert!(message.contains(&path.display().to_string()), "{message}");
                assert!(
                    message.contains(&format!("{queued} bytes (5 records) are still queued")),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Nothing was dropped, nothing counted as written.
        assert_eq!(w.pending_bytes(), queued);
        assert_eq!((w.bytes_written(), w.records_written()), (0, 0));
        // The failure was reported; logging goes on and queues behind the failed batch.
        w.scalar("x", 5.0, Some(5), Some(1.0), ScalarStyle::Simple)
            .unwrap();
        assert!(w.flush(false).is_err(), "still full");
        // "Free space": the descriptor now refers to the regular file at the path.
        let good = OpenOptions::new().write(true).open(&path).unwrap();
        // SAFETY: both descriptors are open; dup2 atomically makes `fd` another handle on
        // `good`'s open file, and the writer's File keeps owning `fd`.
        assert_eq!(
            unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&good), fd) },
            fd
        );
        w.flush(false).unwrap();
        assert_eq!(w.pending_bytes(), 0);
        assert_eq!(w.records_written(), 6);
        w.close().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, w.bytes_written());
        // Six whole records, in order.
        let mut pos = 0;
        let mut steps = Vec::new();
        while pos < bytes.len() {
            match crate::tf_record::parse_frame(&bytes[pos..], 1 << 20, true) {
                crate::tf_record::Frame::Record { data, span } => {
                    let ev = crate::proto::Event::decode(data).unwrap();
                    steps.push(ev.step);
                    pos += span;
                }
                other => panic!("{other:?} at {pos}"),
            }
        }
        assert_eq!(steps, vec![0, 1, 2, 3, 4, 5]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_background_failure_is_raised_by_the_next_call() {
        let dir = temp_dir("next-call");
        let opts = Options {
            flush_every: Duration::from_secs(3600),
            max_queue: 1,
            max_pending_bytes: 1 << 30,
        };
        let (w, _path, _fd) = on_full_disk(&dir, opts);
        // max_queue = 1: the thread tries (and fails) on its own.
        w.scalar("x", 0.0, Some(0), None, ScalarStyle::Simple)
            .unwrap();
        let t = Instant::now();
        let err = loop {
            match w.scalar("x", 1.0, Some(1), None, ScalarStyle::Simple) {
                Err(e) => break e,
                Ok(_) => {
                    assert!(t.elapsed() < Duration::from_secs(5), "no error surfaced");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        };
        assert!(
            matches!(err, WriteError::Io { ref source, .. } if source.raw_os_error() == Some(libc::ENOSPC))
        );
        // The thread does not retry on its own (no hammering a full disk): the queue holds.
        let pending = w.pending_bytes();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(w.pending_bytes(), pending);
        assert!(pending > 0);
        // Close cannot write either: it says so and stays open, so it can be retried.
        assert!(matches!(w.close(), Err(WriteError::Io { .. })));
        assert!(!w.is_closed());
        // Dropping gives up without hanging.
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
