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

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::histogram::Histogram;
use crate::masked_crc::masked_crc32c;
use crate::tf_record::HEADER_LEN;

/// The `file_version` every event file starts with; readers use it to pick a restart policy.
pub const FILE_VERSION: &str = "brain.Event:2";

// ------------------------------------------------------------------------------------------
// Protobuf encoding.
//
// Only what events need: varints, fixed64/fixed32, and length-delimited fields whose length
// is known only after their body is written. Keys of fields 1-15 are one byte, so they are
// constants below.

const WIRE_VARINT: u8 = 0;
const WIRE_FIXED64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_FIXED32: u8 = 5;

/// The one-byte key of field `n` (`n <= 15`).
const fn key(n: u8, wire: u8) -> u8 {
    (n << 3) | wire
}

/// Bytes a varint of `v` takes.
#[inline(always)]
pub fn varint_len(v: u64) -> usize {
    // 1 + (index of the highest set bit) / 7; `| 1` makes 0 take one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends `v` as a varint.
#[inline(always)]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint of exactly `buf.len()` bytes (the caller sized it with
/// [`varint_len`]).
#[inline(always)]
fn varint_into(buf: &mut [u8], mut v: u64) {
    let last = buf.len() - 1;
    for b in &mut buf[..last] {
        *b = v as u8 | 0x80;
        v >>= 7;
    }
    buf[last] = v as u8;
}

#[inline(always)]
fn put_f64(out: &mut Vec<u8>, k: u8, v: f64) {
    out.push(k);
    out.extend_from_slice(&v.to_le_bytes());
}

#[inline(always)]
fn put_bytes(out: &mut Vec<u8>, k: u8, b: &[u8]) {
    out.push(k);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A length-delimited field whose body `f` writes in place.
///
/// The length goes before the body but is known only after it, so `hint` (the expected body
/// size) decides how many bytes to leave for it; when the guess is off the body is moved by a
/// byte or two. Callers that know the size exactly pass it and nothing moves; small messages
/// pass a small hint and nothing moves either.
#[inline(always)]
fn nested<R>(out: &mut Vec<u8>, k: u8, hint: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    out.push(k);
    let at = out.len();
    let reserved = varint_len(hint as u64);
    out.extend_from_slice(&[0u8; 10][..reserved]);
    let r = f(out);
    let body = at + reserved;
    let len = out.len() - body;
    let need = varint_len(len as u64);
    if need > reserved {
        out.extend_from_slice(&[0u8; 10][..need - reserved]);
        out.copy_within(body..body + len, at + need);
    } else if need < reserved {
        out.copy_within(body..body + len, at + need);
        out.truncate(at + need + len);
    }
    varint_into(&mut out[at..at + need], len as u64);
    r
}

/// Frames the Event that `f` encodes as one TFRecord, in place at the end of `out`.
///
/// Same bytes as [`write_record`], without encoding into a separate buffer first.
#[inline(always)]
fn framed(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    f(out);
    let len = ((out.len() - start - HEADER_LEN) as u64).to_le_bytes();
    out[start..start + 8].copy_from_slice(&len);
    out[start + 8..start + HEADER_LEN].copy_from_slice(&masked_crc32c(&len).to_le_bytes());
    let crc = masked_crc32c(&out[start + HEADER_LEN..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

// Field keys, named after the proto fields (see `proto.rs` for the reading side).
const EV_WALL_TIME: u8 = key(1, WIRE_FIXED64);
const EV_STEP: u8 = key(2, WIRE_VARINT);
const EV_FILE_VERSION: u8 = key(3, WIRE_LEN);
const EV_SUMMARY: u8 = key(5, WIRE_LEN);
const SUMMARY_VALUE: u8 = key(1, WIRE_LEN);
const VAL_TAG: u8 = key(1, WIRE_LEN);
const VAL_SIMPLE: u8 = key(2, WIRE_FIXED32);
const VAL_HISTO: u8 = key(5, WIRE_LEN);
const VAL_TENSOR: u8 = key(8, WIRE_LEN);
const VAL_METADATA: u8 = key(9, WIRE_LEN);
const META_PLUGIN_DATA: u8 = key(1, WIRE_LEN);
const PLUGIN_NAME: u8 = key(1, WIRE_LEN);
const TENSOR_DTYPE: u8 = key(1, WIRE_VARINT);
const TENSOR_SHAPE: u8 = key(2, WIRE_LEN);
const TENSOR_CONTENT: u8 = key(4, WIRE_LEN);
const TENSOR_FLOAT_VAL: u8 = key(5, WIRE_LEN);
const TENSOR_DOUBLE_VAL: u8 = key(6, WIRE_LEN);
const SHAPE_DIM: u8 = key(2, WIRE_LEN);
const DIM_SIZE: u8 = key(1, WIRE_VARINT);
const HISTO_MIN: u8 = key(1, WIRE_FIXED64);
const HISTO_MAX: u8 = key(2, WIRE_FIXED64);
const HISTO_NUM: u8 = key(3, WIRE_FIXED64);
const HISTO_SUM: u8 = key(4, WIRE_FIXED64);
const HISTO_SUM_SQUARES: u8 = key(5, WIRE_FIXED64);
const HISTO_BUCKET_LIMIT: u8 = key(6, WIRE_LEN);
const HISTO_BUCKET: u8 = key(7, WIRE_LEN);

const DT_FLOAT: u64 = 1;
const DT_DOUBLE: u64 = 2;
const DT_STRING: i32 = 7;

/// `wall_time` and, when given, `step`: the fields every event starts with.
#[inline(always)]
fn event_head(out: &mut Vec<u8>, wall: f64, step: Option<i64>) {
    put_f64(out, EV_WALL_TIME, wall);
    if let Some(s) = step {
        out.push(EV_STEP);
        // int64 on the wire: negative steps are their two's complement, ten bytes.
        put_varint(out, s as u64);
    }
}

/// How a scalar is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarStyle {
    /// `Summary.Value.simple_value` (float32): what TF1, tensorboardX and PyTorch write.
    Simple,
    /// A rank-0 DT_FLOAT tensor with `scalars` plugin metadata: TF2's form.
    Tensor32,
    /// A rank-0 DT_DOUBLE tensor: keeps all 53 bits (TensorBoard's Rust server ignores these;
    /// its Python server and tbscope read them).
    Tensor64,
}

/// Seconds since the Unix epoch, as event files store them.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Encodes the first event of every file.
pub fn encode_file_version(out: &mut Vec<u8>, wall: f64) {
    put_f64(out, EV_WALL_TIME, wall);
    put_bytes(out, EV_FILE_VERSION, FILE_VERSION.as_bytes());
}

fn encode_scalar_value(out: &mut Vec<u8>, tag: &str, value: f64, style: ScalarStyle) {
    nested(out, SUMMARY_VALUE, tag.len() + 40, |out| {
        put_bytes(out, VAL_TAG, tag.as_bytes());
        match style {
            ScalarStyle::Simple => {
                out.push(VAL_SIMPLE);
                out.extend_from_slice(&(value as f32).to_le_bytes());
            }
            ScalarStyle::Tensor32 | ScalarStyle::Tensor64 => {
                let double = style == ScalarStyle::Tensor64;
                nested(out, VAL_TENSOR, 16, |out| {
                    out.push(TENSOR_DTYPE);
                    put_varint(out, if double { DT_DOUBLE } else { DT_FLOAT });
                    // An empty shape: rank 0.
                    out.extend_from_slice(&[TENSOR_SHAPE, 0]);
                    if double {
                        out.extend_from_slice(&[TENSOR_DOUBLE_VAL, 8]);
                        out.extend_from_slice(&value.to_le_bytes());
                    } else {
                        out.extend_from_slice(&[TENSOR_FLOAT_VAL, 4]);
                        out.extend_from_slice(&(value as f32).to_le_bytes());
                    }
                });
                nested(out, VAL_METADATA, 11, |out| {
                    nested(out, META_PLUGIN_DATA, 9, |out| {
                        put_bytes(out, PLUGIN_NAME, b"scalars");
                    });
                });
            }
        }
    });
}

/// One scalar event.
pub fn encode_scalar(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    tag: &str,
    value: f64,
    style: ScalarStyle,
) {
    event_head(out, wall, step);
    nested(out, EV_SUMMARY, tag.len() + 44, |out| {
        encode_scalar_value(out, tag, value, style)
    });
}

/// Appends one `Summary.value` entry holding `tag` and a `simple_value` (float32): what
/// `encode_scalar_value` writes for [`ScalarStyle::Simple`], with every length known up
/// front, so nothing is moved. Batched logging builds whole `Summary` bodies from these.
#[inline]
pub fn put_simple_value(out: &mut Vec<u8>, tag: &str, value: f64) {
    let t = tag.len();
    let body = 1 + varint_len(t as u64) + t + 5;
    out.reserve(1 + varint_len(body as u64) + body);
    out.push(SUMMARY_VALUE);
    put_varint(out, body as u64);
    out.push(VAL_TAG);
    put_varint(out, t as u64);
    out.extend_from_slice(tag.as_bytes());
    out.push(VAL_SIMPLE);
    out.extend_from_slice(&(value as f32).to_le_bytes());
}

/// One event holding a `simple_value` per tag.
pub fn encode_scalars<'a>(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    items: impl Iterator<Item = (&'a str, f64)>,
    hint: usize,
) {
    event_head(out, wall, step);
    nested(out, EV_SUMMARY, hint, |out| {
        for (tag, value) in items {
            put_simple_value(out, tag, value);
        }
    });
}

/// Bytes of a packed repeated double field's body.
fn packed_f64(out: &mut Vec<u8>, k: u8, v: &[f64]) {
    out.push(k);
    put_varint(out, (v.len() * 8) as u64);
    #[cfg(target_endian = "little")]
    {
        // The wire format is the in-memory one: one copy instead of a push per value.
        // SAFETY: any f64 is 8 initialised bytes; the slice covers exactly `v`.
        out.extend_from_slice(unsafe {
            std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v))
        });
    }
    #[cfg(not(target_endian = "little"))]
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// One histogram event: a legacy `HistogramProto` in `Summary.Value.histo`.
pub fn encode_histogram(out: &mut Vec<u8>, wall: f64, step: Option<i64>, tag: &str, h: &Histogram) {
    // Exact sizes, so a histogram of thousands of buckets is never moved.
    let packed = |n: usize| 1 + varint_len((n * 8) as u64) + n * 8;
    let histo = 5 * 9 + packed(h.limits.len()) + packed(h.counts.len());
    let value = 1 + varint_len(tag.len() as u64) + tag.len() + 1 + varint_len(histo as u64) + histo;
    let summary = 1 + varint_len(value as u64) + value;
    event_head(out, wall, step);
    nested(out, EV_SUMMARY, summary, |out| {
        nested(out, SUMMARY_VALUE, value, |out| {
            put_bytes(out, VAL_TAG, tag.as_bytes());
            nested(out, VAL_HISTO, histo, |out| {
                put_f64(out, HISTO_MIN, h.min);
                put_f64(out, HISTO_MAX, h.max);
                put_f64(out, HISTO_NUM, h.num);
                put_f64(out, HISTO_SUM, h.sum);
                put_f64(out, HISTO_SUM_SQUARES, h.sum_squares);
                packed_f64(out, HISTO_BUCKET_LIMIT, &h.limits);
                packed_f64(out, HISTO_BUCKET, &h.counts);
            });
        });
    });
}

/// One tensor event: `TensorProto{dtype, tensor_shape, tensor_content}` plus optional
/// already-encoded `SummaryMetadata`.
#[allow(clippy::too_many_arguments)]
pub fn encode_tensor(
    out: &mut Vec<u8>,
    wall: f64,
    step: Option<i64>,
    tag: &str,
    data: &[u8],
    dtype: i32,
    shape: &[i64],
    metadata: Option<&[u8]>,
) {
    let dims: usize = shape
        .iter()
        .map(|&d| {
            let dim = 1 + varint_len(d as u64);
            1 + varint_len(dim as u64) + dim
        })
        .sum();
    let content = if data.is_empty() {
        0
    } else {
        1 + varint_len(data.len() as u64) + data.len()
    };
    let tensor = 1 + varint_len(dtype as u64) + 1 + varint_len(dims as u64) + dims + content;
    let meta = metadata.map_or(0, |m| 1 + varint_len(m.len() as u64) + m.len());
    let value = 1
        + varint_len(tag.len() as u64)
        + tag.len()
        + 1
        + varint_len(tensor as u64)
        + tensor
        + meta;
    let summary = 1 + varint_len(value as u64) + value;
    event_head(out, wall, step);
    nested(out, EV_SUMMARY, summary, |out| {
        nested(out, SUMMARY_VALUE, value, |out| {
            put_bytes(out, VAL_TAG, tag.as_bytes());
            nested(out, VAL_TENSOR, tensor, |out| {
                out.push(TENSOR_DTYPE);
                put_varint(out, dtype as u64);
                nested(out, TENSOR_SHAPE, dims, |out| {
                    for &d in shape {
                        nested(out, SHAPE_DIM, 1 + varint_len(d as u64), |out| {
                            out.push(DIM_SIZE);
                            put_varint(out, d as u64);
                        });
                    }
                });
                // proto3 leaves empty bytes out; readers see the same either way.
                if !data.is_empty() {
                    put_bytes(out, TENSOR_CONTENT, data);
                }
            });
            if let Some(m) = metadata {
                put_bytes(out, VAL_METADATA, m);
            }
        });
    });
}

/// An already-encoded `Summary` wrapped in an event.
pub fn encode_summary(out: &mut Vec<u8>, wall: f64, step: Option<i64>, summary: &[u8]) {
    event_head(out, wall, step);
    put_bytes(out, EV_SUMMARY, summary);
}

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

#[derive(Default)]
struct State {
    /// Framed records not yet taken by the thread.
    buf: Vec<u8>,
    records: u64,
    /// Taken by the thread and being written.
    in_flight_bytes: u64,
    in_flight_records: u64,
    bytes_written: u64,
    records_written: u64,
    /// Flush requests: the thread has served every request up to `flush_done`.
    flush_req: u64,
    flush_done: u64,
    fsync_req: bool,
    /// Set by close: the thread exits once everything is written.
    stop: bool,
    /// Set when dropping a writer whose data cannot be written: the thread exits anyway.
    abandon: bool,
    closed: bool,
    /// The last write failed and its batch is back in `buf`: only an explicit request
    /// (flush, close, back-pressure) retries, so a full disk is not hammered.
    failed: bool,
    /// To be reported by the next call.
    failure: Option<Failure>,
    /// The thread sleeps and must be woken (a plain flag: it is only read under the lock).
    idle: bool,
    /// The thread has exited.
    gone: bool,
    /// Where the records go now (changes if the file had to be re-created elsewhere).
    path: Option<PathBuf>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the thread.
    wake: Condvar,
    /// Wakes callers waiting for a flush.
    done: Condvar,
    opts: Options,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if something did, the state is still
        // consistent (every update is a few plain assignments), so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
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
        h: &Histogram,
        step: Option<i64>,
        wall: Option<f64>,
    ) -> Result<Backlog> {
        if h.limits.len() != h.counts.len() {
            return Err(WriteError::InvalidArgument(format!(
                "a histogram needs one bucket limit per bucket count; got {} limits and {} counts",
                h.limits.len(),
                h.counts.len()
            )));
        }
        let wall = wall.unwrap_or_else(now);
        self.append(|out| encode_histogram(out, wall, step, tag, h))
    }

    #[allow(clippy::too_many_arguments)]
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

// ------------------------------------------------------------------------------------------
// The background thread and the file it owns.

/// The open file, and how far it holds whole records.
struct Sink {
    file: File,
    path: PathBuf,
    /// Bytes of whole records in the file: where the next batch goes, and where a failed
    /// write is cut back to.
    len: u64,
    /// What `path` was when the file was created (device and inode): a path that stats as
    /// something else was removed or replaced since. Kept rather than asking the descriptor
    /// each time: one system call per batch instead of two.
    ident: Ident,
}

/// A file's identity on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ident(u64, u64);

impl Ident {
    #[cfg(unix)]
    fn of(m: &std::fs::Metadata) -> Ident {
        use std::os::unix::fs::MetadataExt;
        Ident(m.dev(), m.ino())
    }

    /// Without inode numbers only "the path is gone" can be detected.
    #[cfg(not(unix))]
    fn of(_: &std::fs::Metadata) -> Ident {
        Ident(0, 0)
    }
}

/// What a successful write did besides writing the batch.
#[derive(Default)]
struct Wrote {
    /// Bytes and records of a `file_version` record written into a re-created file.
    extra_bytes: u64,
    extra_records: u64,
    replaced: Option<Failure>,
}

impl Sink {
    fn create(path: &Path, first: &[u8]) -> io::Result<Sink> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        let ident = Ident::of(&file.metadata()?);
        let mut sink = Sink {
            file,
            path: path.to_path_buf(),
            len: 0,
            ident,
        };
        if let Err(e) = sink.write_at_end(first, false) {
            // Not even the first record fits: leave no empty file behind.
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(sink)
    }

    /// Appends `data` at `len`; on failure cuts the file back so it ends on a whole record.
    fn write_at_end(&mut self, data: &[u8], fsync: bool) -> io::Result<()> {
        let res = write_all_at(&self.file, data, self.len).and_then(|()| {
            if fsync {
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        match res {
            Ok(()) => {
                self.len += data.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A torn record followed by later ones would read as corruption; best effort,
                // the original error is the one worth reporting.
                let _ = self.file.set_len(self.len);
                Err(e)
            }
        }
    }

    /// Is `path` still the file this writer created?
    fn still_there(&self) -> io::Result<bool> {
        match std::fs::metadata(&self.path) {
            Ok(m) => Ok(Ident::of(&m) == self.ident),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Re-creates the file after it vanished: the directory too, then a fresh file with its
    /// own `file_version` record. A path now taken by another file is left alone and the
    /// records go to `<path>.1` (`.2`, ...), still a `tfevents` name in the same run.
    fn recreate(&mut self) -> io::Result<Wrote> {
        let removed = !self.path.exists();
        if let Some(dir) = self.path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        let mut first = Vec::new();
        framed(&mut first, |out| encode_file_version(out, now()));
        let old = self.path.clone();
        let mut n = 0u32;
        let fresh = loop {
            let candidate = if n == 0 {
                old.clone()
            } else {
                let mut s = old.clone().into_os_string();
                s.push(format!(".{n}"));
                PathBuf::from(s)
            };
            match Sink::create(&candidate, &first) {
                Ok(s) => break s,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(e),
            }
        };
        *self = fresh;
        Ok(Wrote {
            extra_bytes: first.len() as u64,
            extra_records: 1,
            replaced: Some(Failure::Replaced {
                old,
                new: self.path.clone(),
                removed,
            }),
        })
    }

    /// Writes one batch (after checking the file is still ours).
    fn write(&mut self, data: &[u8], fsync: bool) -> std::result::Result<Wrote, Failure> {
        let fail = |source: io::Error, path: &Path, what: &'static str| Failure::Io {
            source,
            path: path.to_path_buf(),
            what,
        };
        let mut wrote = Wrote::default();
        match self.still_there() {
            Ok(true) => {}
            Ok(false) => {
                wrote = self
                    .recreate()
                    .map_err(|e| fail(e, &self.path, "re-creating the removed event file"))?;
            }
            Err(e) => return Err(fail(e, &self.path, "checking the event file")),
        }
        if data.is_empty() && !fsync {
            return Ok(wrote);
        }
        let what = if fsync {
            "writing and syncing"
        } else {
            "writing"
        };
        self.write_at_end(data, fsync)
            .map_err(|e| fail(e, &self.path, what))?;
        Ok(wrote)
    }
}

#[cfg(unix)]
fn write_all_at(f: &File, data: &[u8], at: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(data, at)
}

#[cfg(not(unix))]
fn write_all_at(mut f: &File, data: &[u8], at: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    f.seek(SeekFrom::Start(at))?;
    f.write_all(data)
}

/// Marks the thread gone however it ends, so no caller waits for it forever.
struct Gone<'a>(&'a Shared);

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.gone = true;
        st.idle = false;
        drop(st);
        self.0.done.notify_all();
    }
}

/// The shortest time between two writes started because `max_queue` records waited.
///
/// With TensorBoard's default of 10, a loop logging a million scalars a second would wake the
/// thread 100,000 times a second, and each wake-up is a system call on the caller's side and
/// a context switch. Batching for at least a millisecond caps that at a thousand, while data
/// still reaches the OS within a millisecond or so of `max_queue` records waiting.
const MIN_GAP: Duration = Duration::from_millis(1);

/// Spare capacity kept between batches; a one-off burst larger than this is given back.
const KEEP_CAPACITY: usize = 64 << 20;

fn background(sh: &Shared, mut sink: Sink) {
    let _gone = Gone(sh);
    let every = sh.opts.flush_every;
    let mut spare: Vec<u8> = Vec::new();
    let mut deadline = Instant::now() + every;
    let mut calm_until = Instant::now();
    let mut st = sh.lock();
    loop {
        // Sleep until there is something to do.
        loop {
            if st.abandon {
                return;
            }
            if st.flush_req != st.flush_done {
                break;
            }
            if st.stop && !st.failed {
                break;
            }
            let now = Instant::now();
            if !st.failed && !st.buf.is_empty() {
                if now >= deadline {
                    break;
                }
                if st.records >= sh.opts.max_queue as u64 {
                    if now >= calm_until {
                        break;
                    }
                    // Too soon after the last write: let the batch grow a little longer,
                    // asleep and not to be woken (`idle` stays false) except by a flush.
                    st = sh
                        .wake
                        .wait_timeout(st, calm_until - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    continue;
                }
            } else if now >= deadline {
                deadline = now + every;
            }
            st.idle = true;
            st = sh
                .wake
                .wait_timeout(st, deadline.saturating_duration_since(now))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            st.idle = false;
        }
        if st.stop && !st.failed && st.buf.is_empty() && st.flush_req == st.flush_done {
            return;
        }
        let served = st.flush_req;
        let fsync = std::mem::take(&mut st.fsync_req);
        std::mem::swap(&mut st.buf, &mut spare);
        let records = std::mem::take(&mut st.records);
        st.in_flight_bytes = spare.len() as u64;
        st.in_flight_records = records;
        drop(st);

        let res = sink.write(&spare, fsync);

        st = sh.lock();
        st.in_flight_bytes = 0;
        st.in_flight_records = 0;
        match res {
            Ok(w) => {
                st.bytes_written += spare.len() as u64 + w.extra_bytes;
                st.records_written += records + w.extra_records;
                st.failed = false;
                if let Some(r) = w.replaced {
                    st.path = Some(sink.path.clone());
                    st.failure = Some(r);
                }
                spare.clear();
            }
            Err(f) => {
                // The batch goes back in front of whatever was queued meanwhile.
                spare.extend_from_slice(&st.buf);
                std::mem::swap(&mut st.buf, &mut spare);
                spare.clear();
                st.records += records;
                st.failed = true;
                st.failure = Some(f);
            }
        }
        if spare.capacity() > KEEP_CAPACITY {
            spare = Vec::new();
        }
        st.flush_done = served;
        sh.done.notify_all();
        let now = Instant::now();
        deadline = now + every;
        calm_until = now + MIN_GAP;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tf_record::write_record;

    #[test]
    fn varint_lengths() {
        for (v, n) in [
            (0u64, 1),
            (127, 1),
            (128, 2),
            (16383, 2),
            (16384, 3),
            (u64::MAX, 10),
        ] {
            assert_eq!(varint_len(v), n, "{v}");
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), n);
            let mut pos = 0;
            assert_eq!(crate::proto::read_varint(&out, &mut pos).unwrap(), v);
        }
    }

    #[test]
    fn nested_moves_body_when_hint_is_off() {
        for (hint, body) in [(0usize, 300usize), (5000, 3), (200, 200), (1, 20000)] {
            let mut out = vec![0xee];
            nested(&mut out, 0x0a, hint, |o| {
                o.extend_from_slice(&vec![7u8; body])
            });
            let mut pos = 2;
            assert_eq!(out[1], 0x0a);
            let len = crate::proto::read_varint(&out, &mut pos).unwrap() as usize;
            assert_eq!(len, body, "hint {hint}");
            assert_eq!(out.len(), pos + body);
            assert!(out[pos..].iter().all(|&b| b == 7));
        }
    }

    #[test]
    fn framing_matches_write_record() {
        let mut payload = Vec::new();
        encode_scalar(
            &mut payload,
            1.5e9,
            Some(3),
            "loss",
            0.25,
            ScalarStyle::Simple,
        );
        let mut a = Vec::new();
        write_record(&mut a, &payload);
        let mut b = vec![1, 2, 3];
        framed(&mut b, |o| {
            encode_scalar(o, 1.5e9, Some(3), "loss", 0.25, ScalarStyle::Simple)
        });
        assert_eq!(&b[3..], &a[..]);
    }

    #[test]
    fn simple_values_match_the_general_encoder() {
        // Short tags and ones whose lengths need two-byte varints.
        for n in [0usize, 1, 20, 119, 120, 121, 122, 127, 128, 300] {
            let tag = "t".repeat(n);
            for v in [0.0, -1.5, f64::NAN, 1e300] {
                let mut a = Vec::new();
                encode_scalar_value(&mut a, &tag, v, ScalarStyle::Simple);
                let mut b = vec![9u8];
                put_simple_value(&mut b, &tag, v);
                assert_eq!(&b[1..], &a[..], "tag of {n} bytes");
            }
        }
    }

    #[test]
    fn scalar_bytes_match_tensorflow_layout() {
        // The TF2 record quoted in the format reference (section 1.3), modulo wall time.
        let mut out = Vec::new();
        encode_scalar(
            &mut out,
            0.0,
            Some(77),
            "accuracy",
            0.99,
            ScalarStyle::Tensor32,
        );
        let tail = &out[9..];
        assert_eq!(&tail[..2], &[0x10, 0x4d]);
        let mut expect = vec![0x2a, 0x25, 0x0a, 0x23, 0x0a, 0x08];
        expect.extend_from_slice(b"accuracy");
        // Ours uses float_val (field 5) where TF uses tensor_content; same length.
        expect.extend_from_slice(&[0x42, 0x0a, 0x08, 0x01, 0x12, 0x00, 0x2a, 0x04]);
        expect.extend_from_slice(&0.99f32.to_le_bytes());
        expect.extend_from_slice(&[0x4a, 0x0b, 0x0a, 0x09, 0x0a, 0x07]);
        expect.extend_from_slice(b"scalars");
        assert_eq!(&tail[2..], &expect[..]);
    }

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
