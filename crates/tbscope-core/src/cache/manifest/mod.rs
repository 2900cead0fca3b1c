//! The manifest: a small binary encoding (varints, length-prefixed bytes) with a CRC-32C, read
//! in one pass. Repeated strings (tag names, metadata, file versions) are stored once; file
//! paths as names within their run's directory. A logdir of 100,000 small runs has a manifest
//! of ~20 MB. In sections, so that a warm open decodes only what it needs: the change check's
//! index (run names, file identities, directory listings) apart from the runs' state and the
//! pieces, which `pending` decodes when they are first needed.

mod codec;

use std::collections::HashMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) use self::codec::{severity_code, severity_of, time_of, DResult, Dec, Enc};
use super::segments::{Piece, Segment};
use super::stamp::FileSum;
use crate::event_file::SeriesMeta;
use crate::load::{rel_name, Reader, ReportEntry, RunState};
use crate::logdir::{run_name, time_parts, Listing};

/// Bump when the manifest or segment layout changes: older caches are then read again.
/// 2: the runs' state apart from the change-check index; facts and statistics tables.
/// 3: every file's size and CRC-32C in the manifest.
/// 4: the text table's `shape`; session logs and log messages (source, message, checkpoint
/// path) in the runs' state. (Main's single-file cache also called its layout 3 for this; 4
/// keeps the two apart.)
const FORMAT_VERSION: u32 = 4;
const MAGIC: &[u8; 8] = b"TBSCACHE";

/// The directory of a run: the root for ".", else the run name below it.
pub(super) fn run_dir(root: &Path, run: &str) -> PathBuf {
    if run == "." {
        root.to_path_buf()
    } else {
        root.join(run)
    }
}

/// A string table: each distinct string once, referenced by index.
#[derive(Default)]
pub(super) struct Strings<'a> {
    pub(super) index: HashMap<&'a str, u64>,
    pub(super) list: Vec<&'a str>,
}

impl<'a> Strings<'a> {
    pub(super) fn id(&mut self, s: &'a str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.index.insert(s, i);
        self.list.push(s);
        i
    }
}

pub(super) type MetaKey<'a> = (&'a str, &'a [u8], &'a str, &'a str, i32);

/// What makes two series' metadata the same entry of the manifest's metadata table.
fn meta_key(m: &SeriesMeta) -> MetaKey<'_> {
    (
        m.plugin_name.as_str(),
        m.plugin_content.as_slice(),
        m.display_name.as_str(),
        m.description.as_str(),
        m.data_class,
    )
}

/// Adds `m` to the metadata table unless an equal entry is there.
fn intern_meta<'a>(
    metas: &mut HashMap<MetaKey<'a>, u64>,
    list: &mut Vec<&'a SeriesMeta>,
    m: &'a SeriesMeta,
) {
    metas.entry(meta_key(m)).or_insert_with(|| {
        list.push(m);
        list.len() as u64 - 1
    });
}

pub(super) fn encode_manifest(
    r: &Reader,
    segments: &[Segment],
    files: &[[Option<FileSum>; 8]],
    pieces: &[Vec<Piece>; 8],
    dirs: &HashMap<PathBuf, DirListing>,
    derived: [Option<FileSum>; 2],
    kept: Option<&Kept>,
) -> std::result::Result<Vec<u8>, String> {
    let mut e = Enc::default();
    e.0.extend_from_slice(MAGIC);
    e.0.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    e.s(env!("CARGO_PKG_VERSION"));
    let root = fs::canonicalize(&r.root).map_err(|err| format!("{}: {err}", r.root.display()))?;
    e.b(root.as_os_str().as_bytes());
    e.flag(r.opts.file.verify);
    e.u(r.opts.file.max_len);
    e.flag(r.opts.file.provenance);
    e.u(segments.len() as u64);
    for (s, files) in segments.iter().zip(files) {
        e.s(&s.name);
        for f in files {
            e.file_sum(*f);
        }
    }
    // Tables of repeated strings and metadata, then runs referring to them.
    let mut strings = Strings::default();
    let mut metas: HashMap<MetaKey<'_>, u64> = HashMap::new();
    let mut meta_list: Vec<&SeriesMeta> = Vec::new();
    // The previous generation's tables first, in their order: the parts of runs kept as
    // encoded refer to them by index.
    if let Some(k) = kept {
        for s in &k.strings {
            strings.id(s);
        }
        for m in &k.metas {
            intern_meta(&mut metas, &mut meta_list, m);
        }
    }
    // Every run, in order, with its state: None for a run a partial load did not decode (its
    // parts are copied from the previous manifest). A run read again that the reader no
    // longer has is gone.
    let entries: Vec<(&str, Option<&RunState>)> = match kept.filter(|k| k.partial) {
        Some(k) => {
            let mut decoded = r.runs.iter().peekable();
            let mut out = Vec::with_capacity(k.nruns.max(r.runs.len()));
            for name in k.names(r) {
                while let Some((n, s)) = decoded.next_if(|(n, _)| *n < name) {
                    out.push((n.as_str(), Some(s)));
                }
                let state = decoded.next_if(|(n, _)| *n == name).map(|(_, s)| s);
                if state.is_some() || !k.again.contains(name) {
                    out.push((name.as_str(), state));
                }
            }
            out.extend(decoded.map(|(n, s)| (n.as_str(), Some(s))));
            out
        }
        None => r.runs.iter().map(|(n, s)| (n.as_str(), Some(s))).collect(),
    };
    let without_state = |name: &str| format!("run {name} without its state");
    // Per run, where its parts lie in the previous manifest when they are kept as encoded.
    let copied: Vec<Option<(usize, usize, usize, usize)>> = match kept {
        Some(k) => {
            let mut old = k.names(r).iter().enumerate().peekable();
            entries
                .iter()
                .map(|&(name, _)| {
                    while old.next_if(|(_, n)| n.as_str() < name).is_some() {}
                    let (i, _) = old.next_if(|(_, n)| n.as_str() == name)?;
                    if k.again.contains(name) {
                        return None;
                    }
                    let (ia, ib) = (k.index_at[i] as usize, k.index_at[i + 1] as usize);
                    let (sa, sb) = (k.state_at[i] as usize, k.state_at[i + 1] as usize);
                    Some((ia, ib, sa, sb))
                })
                .collect()
        }
        None => vec![None; entries.len()],
    };
    for ((name, st), _) in entries.iter().zip(&copied).filter(|(_, c)| c.is_none()) {
        let st = st.ok_or_else(|| without_state(name))?;
        for (t, ts) in &st.tags {
            strings.id(t);
            if let Some(m) = &ts.meta {
                intern_meta(&mut metas, &mut meta_list, m);
            }
        }
        for f in st.files.values() {
            for v in [&f.file_version, &f.writer].into_iter().flatten() {
                strings.id(v);
            }
        }
    }
    e.u(strings.list.len() as u64);
    for s in &strings.list {
        e.s(s);
    }
    e.u(meta_list.len() as u64);
    for m in &meta_list {
        e.s(&m.plugin_name);
        e.b(&m.plugin_content);
        e.s(&m.display_name);
        e.s(&m.description);
        e.i(i64::from(m.data_class));
    }
    let root_is_file = r.root.is_file();
    // The runs in order: pieces and directories name their run by its index here.
    let run_list: Vec<&str> = entries.iter().map(|e| e.0).collect();
    // The runs' names, one length-prefixed section (a warm open that finds nothing changed
    // needs none of them); then the change-check index: per run its files' identities. The
    // state follows as one more section, so that a warm open can leave it undecoded.
    e.u(entries.len() as u64);
    let mut names = Enc::default();
    let mut prev: &[u8] = b"";
    for name in &run_list {
        names.prefixed(prev, name.as_bytes());
        prev = name.as_bytes();
    }
    e.b(&names.0);
    for ((name, st), copy) in entries.iter().zip(&copied) {
        if let (Some((a, b, _, _)), Some(k)) = (copy, kept) {
            e.0.extend_from_slice(&k.manifest[*a..*b]);
            continue;
        }
        let st = st.ok_or_else(|| without_state(name))?;
        let dir = run_dir(&r.root, name);
        e.u(st.files.len() as u64);
        for f in st.files.values() {
            let path = &f.path;
            if root_is_file {
                e.u(2);
            } else if path.parent() == Some(dir.as_path()) {
                e.u(1);
                e.b(path.file_name().unwrap_or_default().as_bytes());
            } else {
                e.u(0);
                e.b(path
                    .strip_prefix(&r.root)
                    .map_err(|_| format!("{} is outside the logdir", path.display()))?
                    .as_os_str()
                    .as_bytes());
            }
            let display = &r.file_names[f.id as usize];
            let usual = *display == rel_name(&r.root, root_is_file, path);
            e.flag(!usual);
            if !usual {
                e.s(display);
            }
            e.u(f.dev);
            e.u(f.ino);
            e.u(f.size);
            e.flag(f.mtime.is_some());
            let (secs, nanos) = f.mtime.map_or((0, 0), time_parts);
            e.i(secs);
            e.u(nanos);
            // Bit 0: the read failed; bit 1: the file was left with a pending tail.
            e.u(u64::from(f.failed) | (u64::from(f.pending) << 1));
        }
    }
    let mut st_enc = Enc::default();
    for ((name, st), copy) in entries.iter().zip(&copied) {
        let e = &mut st_enc;
        if let (Some((_, _, a, b)), Some(k)) = (copy, kept) {
            e.0.extend_from_slice(&k.manifest[*a..*b]);
            continue;
        }
        let st = st.ok_or_else(|| without_state(name))?;
        e.opt_f(st.first_wall);
        e.opt_f(st.last_wall);
        e.flag(st.max_step.is_some());
        e.i(st.max_step.unwrap_or(0));
        e.u(st.corrupt);
        e.u(st.sessions.len() as u64);
        for s in &st.sessions {
            e.i(s.step);
            e.f(s.wall);
            e.i(i64::from(s.status));
            e.u(s.offset);
            e.u(u64::from(s.source));
            e.s(&s.message);
            e.s(&s.checkpoint_path);
        }
        for f in st.files.values() {
            e.u(f.cursor.offset);
            e.u(f.records);
            e.u(f.tail);
            for v in [&f.file_version, &f.writer] {
                e.u(v.as_deref().map_or(0, |s| strings.id(s) + 1));
            }
        }
        e.u(st.tag_order.len() as u64);
        for t in &st.tag_order {
            let ts = &st.tags[t];
            e.u(strings.id(t));
            e.u(ts.kind.map_or(0, |k| k as u64 + 1));
            let meta = ts.meta.as_ref().map_or(0, |m| metas[&meta_key(m)] + 1);
            e.u(meta);
            e.u(ts.points);
            e.i(ts.first_step);
            e.i(ts.last_step);
        }
    }
    e.b(&st_enc.0);
    // Each kind's pieces length-prefixed: decoded when a table of that kind is asked for.
    for kind in pieces {
        let mut k = Enc::default();
        k.u(kind.len() as u64);
        // Pieces come in run order: the run's index is found by walking with them.
        let mut at = 0usize;
        for p in kind {
            let run = &*p.run;
            if run_list.get(at).is_some_and(|n| *n != run) {
                at = match run_list.get(at + 1) {
                    Some(n) if *n == run => at + 1,
                    _ => run_list.binary_search(&run).unwrap_or(usize::MAX),
                };
            }
            k.u(p.seg as u64);
            k.u(p.start as u64);
            k.u(p.len as u64);
            if run_list.get(at).is_none_or(|n| *n != run) {
                return Err(format!("rows of run {run} without its state"));
            }
            k.u(at as u64);
        }
        e.b(&k.0);
    }
    e.u(r.report.len() as u64);
    for x in &r.report {
        e.s(&x.run);
        e.s(&x.file);
        e.u(severity_code(x.severity));
        e.u(x.offset);
        e.u(x.length);
        e.s(&x.reason);
    }
    // Directories in path order, which is a depth-first walk (a parent, then its subtrees in
    // name order), each with its parent's index and its run's: the change check of a warm
    // open walks them without building a path or looking anything up.
    // Kept as encoded when no directory changed and the runs are the same (their indices too).
    if let Some(k) = kept.filter(|k| {
        k.dirs_same
            && k.nruns == run_list.len()
            && k.names(r)
                .iter()
                .map(String::as_str)
                .eq(run_list.iter().copied())
    }) {
        e.0.extend_from_slice(&k.manifest[k.dirs_at.0..k.dirs_at.1]);
        for f in derived {
            e.file_sum(f);
        }
        let crc = crc32c::crc32c(&e.0);
        e.0.extend_from_slice(&crc.to_le_bytes());
        return Ok(e.0);
    }
    // Path order is the order of the names' bytes with the separator lowest (components compare
    // before the rest of a name): sorted by those bytes, without splitting paths up.
    fn key(p: &Path) -> impl Iterator<Item = u8> + '_ {
        let bytes = p.as_os_str().as_bytes().iter();
        bytes.map(|&c| if c == b'/' { 0 } else { c })
    }
    let mut dir_list: Vec<(&PathBuf, &DirListing)> = dirs.iter().collect();
    dir_list.sort_unstable_by(|a, b| key(a.0).cmp(key(b.0)));
    e.u(dir_list.len() as u64);
    // The directories from the root down to the last one encoded, with their indices: a
    // directory's parent is on it (depth first).
    let mut stack: Vec<(&[u8], u64)> = Vec::new();
    for (i, (rel, d)) in dir_list.into_iter().enumerate() {
        let bytes = rel.as_os_str().as_bytes();
        let parent = match rel.parent() {
            None => 0,
            Some(p) => {
                let p = p.as_os_str().as_bytes();
                while stack.last().is_some_and(|(s, _)| *s != p) {
                    stack.pop();
                }
                let (_, at) = stack.last().ok_or_else(|| {
                    format!("directory {} listed without its parent", rel.display())
                })?;
                at + 1
            }
        };
        stack.push((bytes, i as u64));
        e.u(parent);
        e.b(rel.file_name().map_or(&[][..], |n| n.as_bytes()));
        let run = d.has_files.then(|| match rel.to_str() {
            // (`run_name` of a path below the root, without building it.)
            Some("") => run_list.binary_search(&"."),
            Some(name) if !name.starts_with('/') && !name.contains("//") => {
                run_list.binary_search(&name)
            }
            _ => run_list.binary_search(&run_name(rel).as_str()),
        });
        e.u(run.and_then(|r| r.ok()).map_or(0, |i| i as u64 + 1));
        e.u(d.dev);
        e.u(d.ino);
        e.i(d.mtime.0);
        e.u(d.mtime.1);
        // 2: unsure because it holds symlinks (older tbscopes read any non-zero as unsure).
        e.u(if d.links { 2 } else { u64::from(d.unsure) });
        e.flag(d.has_files);
        for names in [&d.subdirs, &d.odd] {
            e.u(names.len() as u64);
            for n in names {
                e.b(n.as_bytes());
            }
        }
    }
    // The stored facts and statistics tables.
    for f in derived {
        e.file_sum(f);
    }
    let crc = crc32c::crc32c(&e.0);
    e.0.extend_from_slice(&crc.to_le_bytes());
    Ok(e.0)
}

/// What a directory held when it was last listed. A directory's mtime moves whenever an entry
/// is added, removed or renamed in it, so while (device, inode, mtime) stay the same its listing
/// does too and only a stat is needed; the event files themselves are still stat'ed every time
/// (appending to a file does not touch its directory).
#[derive(Debug, Clone)]
pub(super) struct DirListing {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) mtime: (i64, u64),
    /// Listed within a few seconds of its last change (a change in the same clock tick would
    /// not move the mtime), or holding symlinks (their targets change without the directory
    /// knowing): list it again next time.
    pub(super) unsure: bool,
    /// It holds symlinks (then `unsure` too): listing it again cannot tell what changed.
    pub(super) links: bool,
    /// It holds event files: the files of the run named after it, as the reader has them.
    pub(super) has_files: bool,
    pub(super) subdirs: Vec<std::ffi::OsString>,
    /// Entries named like event files that are not regular files (reported, not read).
    pub(super) odd: Vec<std::ffi::OsString>,
}

impl DirListing {
    /// What the cache keeps of a listing: the files are the run's, as the reader has them.
    pub(super) fn of(l: Listing) -> DirListing {
        DirListing {
            dev: l.dev,
            ino: l.ino,
            mtime: l.mtime,
            unsure: l.unsure,
            links: l.links,
            has_files: l.has_files,
            subdirs: l.subdirs,
            odd: l.odd,
        }
    }
}

/// What a new generation keeps of the one it continues, for the runs a load did not read again
/// (`Cache::load` on a change to a few runs): their parts of the runs' index and state
/// sections, copied as encoded instead of encoded again, with the string and metadata tables
/// they refer to (the new tables start with these, in this order).
pub(super) struct Kept {
    pub(super) manifest: arrow_buffer::Buffer,
    /// A partial load (`carry.rs`): the reader holds the state of the runs read again only.
    pub(super) partial: bool,
    /// How many runs the previous generation has: they are the first of the reader's
    /// `run_names`, in order (a load only appends to those).
    pub(super) nruns: usize,
    /// Where run `i`'s part of the index and of the state sections lie: `at[i]..at[i + 1]`.
    pub(super) index_at: Vec<u32>,
    pub(super) state_at: Vec<u32>,
    pub(super) strings: Vec<Arc<str>>,
    pub(super) metas: Vec<Arc<SeriesMeta>>,
    /// The runs read again (or dropped): encoded anew.
    pub(super) again: std::collections::HashSet<String>,
    /// Where the directory listings section lies, and whether it still holds (no directory
    /// changed): then it is copied too.
    pub(super) dirs_at: (usize, usize),
    pub(super) dirs_same: bool,
}

impl Kept {
    /// The previous generation's runs, in order.
    pub(super) fn names<'a>(&self, r: &'a Reader) -> &'a [String] {
        &r.run_names[..self.nruns.min(r.run_names.len())]
    }
}

/// The options a cache was written with.
pub(super) struct Header {
    pub(super) tbscope: String,
    pub(super) root: Vec<u8>,
    pub(super) verify: bool,
    pub(super) max_len: u64,
    pub(super) provenance: bool,
}

/// A decoded manifest, with file paths rebuilt below the reader's root.
pub(super) struct Manifest {
    /// Per segment: its name and (rows, bytes) of its file of each kind.
    pub(super) segments: Vec<(String, [Option<FileSum>; 8])>,
    pub(super) nruns: usize,
    /// Where the runs' names lie (decoded by `Pending::names`).
    pub(super) names: (u32, u32),
    pub(super) index: RunIndex,
    pub(super) strings: Vec<Arc<str>>,
    pub(super) metas: Vec<Arc<SeriesMeta>>,
    /// Where the runs' state section lies in the manifest.
    pub(super) state: (usize, usize),
    /// Where each kind's pieces lie (decoded by `Pending::pieces`).
    pub(super) pieces: [(u32, u32); 8],
    pub(super) report: Vec<ReportEntry>,
    pub(super) dirs: Vec<DirIndex>,
    /// Where the directory listings section lies in the manifest.
    pub(super) dirs_at: (usize, usize),
    /// Rows of the stored facts and statistics tables, when the generation has them.
    pub(super) derived: [Option<FileSum>; 2],
}

/// The runs' files as the change check needs them: run `i` has `files[start[i]..start[i + 1]]`.
pub(super) struct RunIndex {
    pub(super) start: Vec<u32>,
    pub(super) files: Vec<FileIndex>,
    /// Where run `i`'s part of this section lies in the manifest: `at[i]..at[i + 1]`.
    pub(super) at: Vec<u32>,
}

/// One event file of a restored run. Names are ranges of the manifest: a warm open of many
/// runs allocates nothing per file.
pub(super) struct FileIndex {
    /// 2: the logdir is this file; 1: `path` is a name in the run's directory; 0: `path` is
    /// below the root.
    pub(super) code: u8,
    pub(super) path: (u32, u32),
    /// Its name in `file` columns when that is not the usual one (`rel_name`).
    pub(super) display: Option<String>,
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) size: u64,
    pub(super) mtime: Option<(i64, u64)>,
    pub(super) failed: bool,
    /// Left with a pending tail: nothing changed still means nothing to read only while the
    /// file may still be written.
    pub(super) pending: bool,
}

/// One directory of a restored generation's listings: a tree in depth-first order.
pub(super) struct DirIndex {
    /// Index of the parent directory (`u32::MAX` for the root).
    pub(super) parent: u32,
    pub(super) name: (u32, u32),
    /// The run whose files it holds (`u32::MAX`: none).
    pub(super) run: u32,
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) mtime: (i64, u64),
    pub(super) unsure: bool,
    /// Unsure because it holds symlinks.
    pub(super) links: bool,
    pub(super) has_files: bool,
    /// (offset, count) of its subdirectory and odd-entry names, length-prefixed in the manifest.
    pub(super) subdirs: (u32, u32),
    pub(super) odd: (u32, u32),
}

/// Checks magic, checksum and format version; returns the header and where the body starts.
pub(super) fn decode_header(buf: &[u8]) -> DResult<(Header, Dec<'_>)> {
    if buf.len() < MAGIC.len() + 8 || &buf[..MAGIC.len()] != MAGIC {
        return Err("not a tbscope cache manifest".into());
    }
    let (body, crc) = buf.split_at(buf.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
        return Err("checksum mismatch (damaged)".into());
    }
    let version = u32::from_le_bytes(body[8..12].try_into().unwrap());
    if version != FORMAT_VERSION {
        return Err(format!(
            "cache format {version}, this tbscope reads format {FORMAT_VERSION}"
        ));
    }
    let mut d = Dec { buf: body, pos: 12 };
    let h = Header {
        tbscope: d.s()?,
        root: d.b()?.to_vec(),
        verify: d.flag()?,
        max_len: d.u()?,
        provenance: d.flag()?,
    };
    Ok((h, d))
}

pub(super) fn decode_body(mut d: Dec<'_>) -> DResult<Manifest> {
    if d.buf.len() > u32::MAX as usize {
        return Err("manifest too large".into());
    }
    let nseg = d.n()?;
    let mut segments = Vec::with_capacity(nseg);
    for _ in 0..nseg {
        let name = d.s()?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err("bad segment name".into());
        }
        let mut files = [None; 8];
        for f in files.iter_mut() {
            *f = d.file_sum()?;
        }
        segments.push((name, files));
    }
    let nstr = d.n()?;
    let mut strings: Vec<Arc<str>> = Vec::with_capacity(nstr);
    for _ in 0..nstr {
        strings.push(Arc::from(d.s()?.as_str()));
    }
    let nmeta = d.n()?;
    let mut metas: Vec<Arc<SeriesMeta>> = Vec::with_capacity(nmeta);
    for _ in 0..nmeta {
        metas.push(Arc::new(SeriesMeta {
            plugin_name: d.s()?,
            plugin_content: d.b()?.to_vec(),
            display_name: d.s()?,
            description: d.s()?,
            data_class: d.i()? as i32,
        }));
    }
    let nruns = d.n()?;
    let names = d.range()?;
    let mut index = RunIndex {
        start: Vec::with_capacity(nruns + 1),
        files: Vec::with_capacity(nruns),
        at: Vec::with_capacity(nruns + 1),
    };
    for _ in 0..nruns {
        index.start.push(index.files.len() as u32);
        index.at.push(d.pos as u32);
        let nf = d.n()?;
        for _ in 0..nf {
            let code = d.u()?;
            let path = match code {
                2 => (0, 0),
                0 | 1 => d.range()?,
                _ => return Err("bad file path".into()),
            };
            let display = if d.flag()? { Some(d.s()?) } else { None };
            let dev = d.u()?;
            let ino = d.u()?;
            let size = d.u()?;
            let has_mtime = d.flag()?;
            let secs = d.i()?;
            let nanos = d.u()?;
            if nanos >= 1_000_000_000 {
                return Err("bad mtime".into());
            }
            let bits = d.u()?;
            if bits > 3 {
                return Err("bad file flags".into());
            }
            index.files.push(FileIndex {
                code: code as u8,
                path,
                display,
                dev,
                ino,
                size,
                mtime: has_mtime.then_some((secs, nanos)),
                failed: bits & 1 != 0,
                pending: bits & 2 != 0,
            });
        }
    }
    index.start.push(index.files.len() as u32);
    index.at.push(d.pos as u32);
    let state_len = d.n()?;
    let state = (d.pos, d.pos + state_len);
    d.pos += state_len;
    let mut pieces = [(0u32, 0u32); 8];
    for kind in pieces.iter_mut() {
        *kind = d.range()?;
    }
    let nrep = d.n()?;
    let mut report = Vec::with_capacity(nrep);
    for _ in 0..nrep {
        report.push(ReportEntry {
            run: d.s()?,
            file: d.s()?,
            severity: severity_of(d.u()?)?,
            offset: d.u()?,
            length: d.u()?,
            reason: d.s()?,
        });
    }
    let dirs_at = d.pos;
    let ndirs = d.n()?;
    let mut dirs = Vec::with_capacity(ndirs);
    for i in 0..ndirs {
        let parent = match d.u()? {
            0 if i == 0 => u32::MAX,
            p if p > 0 && (p as usize) <= i => p as u32 - 1,
            _ => return Err("bad directory parent".into()),
        };
        let name = d.range()?;
        let run = match d.u()? {
            0 => u32::MAX,
            r if (r as usize) <= nruns => r as u32 - 1,
            _ => return Err("bad directory run".into()),
        };
        let dev = d.u()?;
        let ino = d.u()?;
        let mtime = (d.i()?, d.u()?);
        let unsure = d.u()?;
        let (unsure, links) = (unsure != 0, unsure == 2);
        let has_files = d.flag()?;
        let mut lists = [(0u32, 0u32); 2];
        for list in lists.iter_mut() {
            let n = d.n()?;
            *list = (d.pos as u32, n as u32);
            for _ in 0..n {
                d.b()?;
            }
        }
        dirs.push(DirIndex {
            parent,
            name,
            run,
            dev,
            ino,
            mtime,
            unsure,
            links,
            has_files,
            subdirs: lists[0],
            odd: lists[1],
        });
    }
    let dirs_at = (dirs_at, d.pos);
    let mut derived = [None; 2];
    for f in derived.iter_mut() {
        *f = d.file_sum()?;
    }
    if d.pos != d.buf.len() {
        return Err("trailing bytes".into());
    }
    Ok(Manifest {
        segments,
        nruns,
        names,
        index,
        strings,
        metas,
        state,
        pieces,
        report,
        dirs,
        dirs_at,
        derived,
    })
}
