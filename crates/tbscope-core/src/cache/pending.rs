//! A restored generation whose runs' state is still encoded: the manifest in memory, with the
//! change check's index decoded and everything else (run names, pieces, the runs' state, the
//! directory listings) decoded when first needed.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;

use super::manifest::{
    run_dir, time_of, DResult, Dec, DirIndex, DirListing, FileIndex, Manifest, RunIndex,
};
use super::segments::{Piece, Segment};
use crate::data_compat::Kind;
use crate::event_file::{Cursor, SeriesMeta, SessionEvent};
use crate::load::{rel_name, FileState, RunState, TagState};

/// A restored generation whose runs' state is still encoded (see the module docs).
pub(super) struct Pending {
    /// The manifest, held (`files::hold`) and checked.
    pub(super) manifest: Buffer,
    pub(super) nruns: usize,
    /// The runs' names, until decoded into `Reader::run_names`.
    pub(super) names: Option<(u32, u32)>,
    /// Each kind's pieces, until decoded into `Cache::pieces`.
    pub(super) pieces: [Option<(u32, u32)>; 8],
    /// The runs' names as pieces hold them, once needed.
    pub(super) run_arcs: Option<Vec<Arc<str>>>,
    pub(super) state: (usize, usize),
    pub(super) strings: Vec<Arc<str>>,
    pub(super) metas: Vec<Arc<SeriesMeta>>,
    pub(super) index: RunIndex,
    pub(super) dirs: Vec<DirIndex>,
    /// Where the directory listings section lies in the manifest.
    pub(super) dirs_at: (usize, usize),
    /// The generation's facts (`Reader::run_facts`, unfiltered) and scalar statistics.
    pub(super) facts: Option<RecordBatch>,
    pub(super) stats: Option<RecordBatch>,
}

impl Pending {
    /// What the manifest `m` was decoded from leaves to decode when first needed, with the
    /// generation's stored tables. `with_names_and_pieces`: the reader still needs the runs'
    /// names and the pieces from it (a warm open), or holds them already (the refresh that
    /// just wrote it).
    pub(super) fn of(
        manifest: Buffer,
        m: Manifest,
        with_names_and_pieces: bool,
        facts: Option<RecordBatch>,
        stats: Option<RecordBatch>,
    ) -> Pending {
        let (names, pieces) = if with_names_and_pieces {
            (Some(m.names), m.pieces.map(Some))
        } else {
            (None, [None; 8])
        };
        Pending {
            manifest,
            nruns: m.nruns,
            names,
            pieces,
            run_arcs: None,
            state: m.state,
            strings: m.strings,
            metas: m.metas,
            index: m.index,
            dirs: m.dirs,
            dirs_at: m.dirs_at,
            facts,
            stats,
        }
    }

    /// The runs' names, in order.
    pub(super) fn decode_names(&self, (at, n): (u32, u32)) -> DResult<Vec<String>> {
        let mut d = Dec {
            buf: &self.manifest[..(at + n) as usize],
            pos: at as usize,
        };
        let mut names: Vec<String> = Vec::with_capacity(self.nruns);
        let mut prev: Vec<u8> = Vec::new();
        for _ in 0..self.nruns {
            d.prefixed_into(&mut prev)?;
            let name = std::str::from_utf8(&prev).map_err(|_| "bad UTF-8".to_string())?;
            if names.last().is_some_and(|p| p.as_str() >= name) {
                return Err("runs out of order".into());
            }
            names.push(name.to_string());
        }
        if d.pos != d.buf.len() {
            return Err("names section has trailing bytes".into());
        }
        Ok(names)
    }

    /// One kind's pieces, checked against the segments' rows.
    pub(super) fn decode_pieces(
        &self,
        kind: Kind,
        (at, n): (u32, u32),
        runs: &[Arc<str>],
        segments: &[Segment],
    ) -> DResult<Vec<Piece>> {
        let mut d = Dec {
            buf: &self.manifest[..(at + n) as usize],
            pos: at as usize,
        };
        let count = d.n()?;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let seg = d.index(segments.len())?;
            let start = d.u()? as usize;
            let len = d.u()? as usize;
            let run = runs[d.index(runs.len())?].clone();
            let rows = segments[seg].rows(kind);
            if start.checked_add(len).is_none_or(|end| end > rows) {
                return Err("a piece points past its segment".into());
            }
            out.push(Piece {
                seg,
                start,
                len,
                run,
            });
        }
        if d.pos != d.buf.len() {
            return Err("pieces section has trailing bytes".into());
        }
        Ok(out)
    }

    pub(super) fn run_files(&self, run: usize) -> &[FileIndex] {
        &self.index.files[self.index.start[run] as usize..self.index.start[run + 1] as usize]
    }

    pub(super) fn bytes(&self, (at, n): (u32, u32)) -> &[u8] {
        &self.manifest[at as usize..(at + n) as usize]
    }

    /// The `n` length-prefixed names at `at`.
    pub(super) fn names(&self, (at, n): (u32, u32)) -> DResult<Vec<std::ffi::OsString>> {
        let mut d = Dec {
            buf: &self.manifest,
            pos: at as usize,
        };
        (0..n)
            .map(|_| Ok(std::ffi::OsStr::from_bytes(d.b()?).to_os_string()))
            .collect()
    }

    /// The path of a file of run `run` (whose directory is `dir`).
    pub(super) fn file_path(&self, root: &Path, dir: &Path, f: &FileIndex) -> PathBuf {
        let rel = std::ffi::OsStr::from_bytes(self.bytes(f.path));
        match f.code {
            2 => root.to_path_buf(),
            1 => dir.join(rel),
            _ => root.join(rel),
        }
    }

    /// The directory listings as discovery keeps them, keyed by path below the root.
    pub(super) fn listings(&self) -> DResult<HashMap<PathBuf, DirListing>> {
        let mut rels: Vec<PathBuf> = Vec::with_capacity(self.dirs.len());
        let mut out = Vec::with_capacity(self.dirs.len());
        for d in &self.dirs {
            let rel = if d.parent == u32::MAX {
                PathBuf::new()
            } else {
                rels[d.parent as usize].join(std::ffi::OsStr::from_bytes(self.bytes(d.name)))
            };
            let listing = DirListing {
                dev: d.dev,
                ino: d.ino,
                mtime: d.mtime,
                unsure: d.unsure,
                links: d.links,
                has_files: d.has_files,
                subdirs: self.names(d.subdirs)?,
                odd: self.names(d.odd)?,
            };
            out.push(listing);
            rels.push(rel);
        }
        Ok(rels.into_iter().zip(out).collect())
    }
}

/// The runs' state as [`decode_state`] gives it: the runs, their file names, and where each
/// run's part of the section starts (the last entry: where the section ends).
pub(super) type DecodedState = (BTreeMap<String, RunState>, Vec<String>, Vec<u32>);

/// Decodes the runs' state section of a pending generation: the runs as a load left them,
/// with their file names (file ids in manifest order, as `decode` always numbered them).
pub(super) fn decode_state(
    p: &Pending,
    run_names: &[String],
    root: &Path,
) -> DResult<DecodedState> {
    decode_state_where(p, run_names, root, &|_| true)
}

/// [`decode_state`] for the runs `want` says yes to (by index); every other run's part of the
/// section is only stepped over (the map leaves it out, its files' names are empty), for a
/// new manifest to copy as it is (`carry.rs`).
pub(super) fn decode_state_where(
    p: &Pending,
    run_names: &[String],
    root: &Path,
    want: &dyn Fn(usize) -> bool,
) -> DResult<DecodedState> {
    let root_is_file = root.is_file();
    let mut d = Dec {
        buf: &p.manifest[..p.state.1],
        pos: p.state.0,
    };
    // In name order: built in bulk at the end (inserting 100,000 runs one by one walks the
    // tree each time).
    let mut runs: Vec<(String, RunState)> = Vec::with_capacity(run_names.len());
    let mut file_names = Vec::with_capacity(p.index.files.len());
    // Where each run's part of the section starts (and, last, where it ends).
    let mut at: Vec<u32> = Vec::with_capacity(run_names.len() + 1);
    if run_names.len() != p.nruns {
        return Err("run names and state disagree".into());
    }
    for (id, name) in run_names.iter().enumerate() {
        at.push(d.pos as u32);
        let state = if want(id) {
            decode_run(p, &mut d, id, name, root, root_is_file, &mut file_names)?
        } else {
            skip_run(p, &mut d, id)?;
            file_names.resize(p.index.start[id + 1] as usize, String::new());
            continue;
        };
        runs.push((name.clone(), state));
    }
    if d.pos != p.state.1 {
        return Err("state section has trailing bytes".into());
    }
    at.push(d.pos as u32);
    Ok((runs.into_iter().collect(), file_names, at))
}

/// Steps over run `id`'s part of the state section (as [`decode_run`] reads it), checking
/// what it steps over as far as the bytes go.
fn skip_run(p: &Pending, d: &mut Dec<'_>, id: usize) -> DResult<()> {
    let nfiles = (p.index.start[id + 1] - p.index.start[id]) as usize;
    for _ in 0..2 {
        d.opt_f()?;
    }
    d.flag()?;
    d.i()?;
    d.u()?;
    let ns = d.n()?;
    for _ in 0..ns {
        d.i()?;
        d.f()?;
        d.i()?;
        d.u()?;
        d.u()?;
        d.b()?;
        d.b()?;
    }
    for _ in 0..nfiles {
        d.u()?;
        d.u()?;
        d.u()?;
        d.index(p.strings.len() + 1)?;
        d.index(p.strings.len() + 1)?;
    }
    let nt = d.n()?;
    for _ in 0..nt {
        d.index(p.strings.len())?;
        if d.u()? as usize > Kind::ALL.len() {
            return Err("bad kind".into());
        }
        d.index(p.metas.len() + 1)?;
        d.u()?;
        d.i()?;
        d.i()?;
    }
    Ok(())
}

/// Decodes run `id`'s part of the state section; its files' names go to `file_names` (their
/// ids are their positions there).
fn decode_run(
    p: &Pending,
    d: &mut Dec<'_>,
    id: usize,
    name: &str,
    root: &Path,
    root_is_file: bool,
    file_names: &mut Vec<String>,
) -> DResult<RunState> {
    let (strings, metas) = (&p.strings, &p.metas);
    let (a, b) = (p.index.start[id] as usize, p.index.start[id + 1] as usize);
    let index = &p.index.files[a..b];
    // File ids are positions in the manifest's file index, whatever was decoded before.
    file_names.resize(a, String::new());
    let dir = run_dir(root, name);
    let first_wall = d.opt_f()?;
    let last_wall = d.opt_f()?;
    let has_max = d.flag()?;
    let max = d.i()?;
    let corrupt = d.u()?;
    let ns = d.n()?;
    let mut sessions = Vec::with_capacity(ns);
    for _ in 0..ns {
        sessions.push(SessionEvent {
            step: d.i()?,
            wall: d.f()?,
            status: d.i()? as i32,
            offset: d.u()?,
            source: d.u()? as u8,
            message: d.s()?,
            checkpoint_path: d.s()?,
        });
    }
    let mut files = crate::load::FileMap::with_capacity(index.len());
    for f in index {
        let cursor = Cursor { offset: d.u()? };
        let records = d.u()?;
        let tail = d.u()?;
        let mut opt: [Option<Arc<str>>; 2] = [None, None];
        for v in opt.iter_mut() {
            let i = d.index(strings.len() + 1)?;
            if i > 0 {
                *v = Some(strings[i - 1].clone());
            }
        }
        let [file_version, writer] = opt;
        let fid = file_names.len() as i32;
        let path = p.file_path(root, &dir, f);
        file_names.push(
            f.display
                .clone()
                .unwrap_or_else(|| rel_name(root, root_is_file, &path)),
        );
        files.insert(FileState {
            path,
            id: fid,
            cursor,
            size: f.size,
            mtime: f.mtime.map(|(s, n)| time_of(s, n)),
            dev: f.dev,
            ino: f.ino,
            records,
            tail,
            pending: f.pending,
            file_version,
            writer,
            failed: f.failed,
        });
    }
    let nt = d.n()?;
    let mut tags = HashMap::with_capacity(nt);
    let mut tag_order = Vec::with_capacity(nt);
    for _ in 0..nt {
        let t = strings[d.index(strings.len())?].clone();
        let kind = match d.u()? {
            0 => None,
            k => Some(*Kind::ALL.get(k as usize - 1).ok_or("bad kind")?),
        };
        let meta = match d.index(metas.len() + 1)? {
            0 => None,
            i => Some(metas[i - 1].clone()),
        };
        let ts = TagState {
            kind,
            meta,
            points: d.u()?,
            first_step: d.i()?,
            last_step: d.i()?,
        };
        tags.insert(t.clone(), ts);
        tag_order.push(t);
    }
    Ok(RunState {
        id: id as i32,
        files,
        tags,
        tag_order,
        first_wall,
        last_wall,
        max_step: has_max.then_some(max),
        sessions,
        corrupt,
    })
}
