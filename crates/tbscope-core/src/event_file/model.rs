//! The data of one file's read: options, the report's problems, series metadata, where to
//! resume, and what one pass returns.

use regex::Regex;

use crate::columns::Tables;
use crate::data_compat::{Kind, KindSet};
use crate::proto::Metadata;

/// How a stopped tail's report line starts (a reload that finds the file grown replaces it).
pub const STOPPED_TAIL: &str = "stopped tail";

/// The smallest read; larger records grow the buffer. Small enough that the buffer stays in a
/// core's L2 cache: the kernel's copy into it and the parse reading it back then never go
/// through main memory (measured against larger buffers: bench/README.md, "Measurements behind
/// code choices").
pub(super) const CHUNK: usize = 256 << 10;

/// What to read and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Check data CRCs (length CRCs are always checked).
    pub verify: bool,
    /// Records longer than this are corruption, not a truncated tail.
    pub max_len: u64,
    /// Keep each row's record offset.
    pub provenance: bool,
    pub kinds: KindSet,
    pub tags: Option<Regex>,
    /// Steps outside `[lo, hi)` are skipped before their summaries are decoded.
    pub step_lo: Option<i64>,
    pub step_hi: Option<i64>,
    /// Only the records starting in `[start, end)` of each file (`end` a record boundary, e.g.
    /// from [`split_points`](super::split_points); None: to the end): one piece of a large file
    /// read on its own, as a Dask partition is, without copying it out.
    pub byte_range: Option<(u64, Option<u64>)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            verify: true,
            max_len: 256 << 20,
            provenance: false,
            kinds: KindSet::ALL,
            tags: None,
            step_lo: None,
            step_hi: None,
            byte_range: None,
        }
    }
}

/// How serious a reported problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Bytes that could not be read as records: skipped.
    Corrupt,
    /// A record read fine but a value in it could not be used as its series' kind.
    Warning,
    /// The file ends inside a record: normal while a writer is still writing.
    Truncated,
    /// The file could not be read at all.
    Error,
    /// Worth knowing, nothing lost: an empty file (a writer that has not written yet).
    Info,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Corrupt => "corrupt",
            Severity::Warning => "warning",
            Severity::Truncated => "truncated",
            Severity::Error => "error",
            Severity::Info => "info",
        }
    }
}

/// One entry of the health report: where, how many bytes, why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub severity: Severity,
    pub offset: u64,
    pub length: u64,
    pub reason: String,
}

/// Metadata of a series, owned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesMeta {
    pub plugin_name: String,
    pub plugin_content: Vec<u8>,
    pub display_name: String,
    pub description: String,
    pub data_class: i32,
}

impl SeriesMeta {
    pub(super) fn from_proto(m: &Metadata<'_>) -> Self {
        SeriesMeta {
            plugin_name: lossy(m.plugin_name),
            plugin_content: m.plugin_content.to_vec(),
            display_name: lossy(m.display_name),
            description: lossy(m.description),
            data_class: m.data_class,
        }
    }
    pub(super) fn plugin(name: &str) -> Self {
        SeriesMeta {
            plugin_name: name.to_string(),
            ..Default::default()
        }
    }
}

/// What a run already knows about a tag before this file is read.
#[derive(Debug, Clone)]
pub struct Known {
    pub kind: Kind,
}

/// A tag as seen in one file.
#[derive(Debug, Clone)]
pub struct LocalTag {
    pub name: String,
    pub wanted: bool,
    pub kind: Option<Kind>,
    /// First metadata seen in this file (legacy values synthesise their plugin's).
    pub meta: Option<SeriesMeta>,
    pub points: u64,
    pub first_step: i64,
    pub last_step: i64,
    pub last_wall: f64,
}

/// A SessionLog event (restarts, checkpoints) or a LogMessage event: the `logs` table.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub step: i64,
    pub wall: f64,
    /// `SessionLog.status` ([`SessionEvent::SESSION_LOG`]) or `LogMessage.level`.
    pub status: i32,
    pub offset: u64,
    /// Which event: [`SessionEvent::SESSION_LOG`] or [`SessionEvent::LOG_MESSAGE`].
    pub source: u8,
    /// `SessionLog.msg` or `LogMessage.message`.
    pub message: String,
    /// `SessionLog.checkpoint_path` (empty for log messages).
    pub checkpoint_path: String,
}

impl SessionEvent {
    pub const SESSION_LOG: u8 = 0;
    pub const LOG_MESSAGE: u8 = 1;

    /// A SessionLog START: a (re)start of the writing job.
    pub fn is_start(&self) -> bool {
        self.source == Self::SESSION_LOG && self.status == 1
    }
}

/// Where a read of a file ends, and what a record running past that end is
/// ([`crate::tf_record::End`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The file's current size; the file may still be written, so a record running past it is
    /// a pending tail: no rows, read again on a reload.
    Live,
    /// The file's current size; nothing more will be written to the file, so a record running
    /// past it is torn: damage when whole records follow, a stopped tail otherwise.
    Final,
    /// A record boundary inside the file, from [`split_points`].
    Cut(u64),
    /// A file still being filled in, not in order (a remote mirror's concurrent ranged reads):
    /// only its first `n` bytes are there, the rest may be holes. Read as [`Until::Live`] at
    /// that size: a record running past it is a pending tail, read on the next load.
    Upto(u64),
}

/// Where to resume reading a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub offset: u64,
}

/// Everything read from one file in one pass.
#[derive(Debug, Default)]
pub struct FileChunk {
    pub tags: Vec<LocalTag>,
    /// The rows, when the file was read into tables of its own ([`read_file`]); None when
    /// they went into the caller's ([`read_file_into`]). Boxed and optional: a load moves a
    /// chunk per file around several times, `Tables` is large, and an empty one allocates.
    pub tables: Option<Box<Tables>>,
    /// Per kind, the range of rows this file added to the tables it was read into.
    pub rows: [(usize, usize); 8],
    /// Values skipped because their series' kind was not known yet (a tensor before any
    /// metadata). The loader reads such a file again once the run has decided the kind.
    pub deferred: u64,
    pub problems: Vec<Problem>,
    pub sessions: Vec<SessionEvent>,
    pub end: Cursor,
    /// Bytes of an incomplete record at the end (0 when the file ends on a record boundary).
    pub tail: u64,
    /// The tail is pending (the file may still be written), not a stopped one.
    pub tail_pending: bool,
    /// Bytes fed to CRC-32C by the framing (see `tf_record::Walker::crc_bytes`).
    pub crc_bytes: u64,
    /// The read stopped exactly at its end on a record boundary, not inside damage.
    pub clean_end: bool,
    pub size: u64,
    pub records: u64,
    pub bytes_read: u64,
    pub first_wall: Option<f64>,
    pub last_wall: Option<f64>,
    pub max_step: Option<i64>,
    pub file_version: Option<String>,
    pub writer: Option<String>,
}

pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// FxHash (rustc's hasher): tags are short and trusted, so SipHash's DoS resistance only costs.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            h = (h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().unwrap())).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(super) type FxBuild = std::hash::BuildHasherDefault<FxHasher>;
