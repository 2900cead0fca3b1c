//! Deferred writes: a load that changed something publishes its rows to the caller at once and
//! leaves the new generation to be written afterwards, by another thread, without the reader.
//!
//! `tbscope serve` reads a logdir once and serves it while it keeps reading; the first answer
//! should not wait for the cache (hundreds of MiB on a large logdir) to be written. With
//! deferred writes on, [`CachedReader::load`] only marks the cache as behind; the caller then
//! takes a [`CacheWrite`] (a copy of what a generation holds: the reader's state, the
//! segments' batches shared, not copied, the pieces and listings), runs it without holding the
//! reader (so requests and reloads go on), and hands the outcome back. The generation is
//! written and published exactly as a synchronous load does (`Cache::publish`: a temporary
//! directory, then an atomic switch of CURRENT under the lock), so an interrupted write leaves
//! the current generation as it was. A write can be abandoned (the server stopping): it checks
//! the flag before each step and before publishing, and removes its temporary directory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use super::generation::{write_hold, ABANDONED};
use super::segments::Segment;
use super::stamp::FileSum;
use super::{Cache, CachedReader};
use crate::load::Reader;

/// A generation to write, taken from a [`CachedReader`] whose loads left the cache behind.
pub struct CacheWrite {
    /// A cache holding what the generation will: the segments (batches shared with the
    /// reader's), pieces and listings as of the take.
    cache: Cache,
    /// The reader's state as of the take (the manifest and the stored tables come from it).
    reader: Reader,
}

/// What a [`CacheWrite`] did, for [`CachedReader::finish_write`].
pub struct WriteDone {
    outcome: std::result::Result<Published, String>,
}

struct Published {
    generation: String,
    home: PathBuf,
    /// Per segment written, its name and what the manifest says about its files.
    segments: Vec<(String, [Option<FileSum>; 8])>,
}

impl WriteDone {
    /// The generation published, if one was.
    pub fn generation(&self) -> Option<&str> {
        self.outcome.as_ref().ok().map(|p| p.generation.as_str())
    }
}

impl CacheWrite {
    /// Writes and publishes the generation; `abandon` set stops it before the next file and
    /// before it is published (its temporary directory is then removed).
    pub fn run(mut self, abandon: &AtomicBool) -> WriteDone {
        let outcome = (|| {
            write_hold(abandon);
            if abandon.load(Ordering::Relaxed) {
                return Err(ABANDONED.to_string());
            }
            let generation = self.cache.publish_unless(&self.reader, abandon)?;
            let home = self.cache.dir.join(&generation);
            let segments = self
                .cache
                .segments
                .iter()
                .map(|s| (s.name.clone(), s.files))
                .collect();
            Ok(Published {
                generation,
                home,
                segments,
            })
        })();
        WriteDone { outcome }
    }
}

impl CachedReader {
    /// Loads from now on leave the cache's generation to [`CachedReader::take_write`] instead
    /// of writing it themselves (or write it again, `false`).
    pub fn defer_writes(&mut self, on: bool) {
        self.cache.deferred = on;
    }

    /// The generation that loads left unwritten, to run on another thread; None when the cache
    /// is up to date or a write taken earlier has not been finished yet (its
    /// [`CachedReader::finish_write`] leaves the cache behind again if a load changed
    /// something meanwhile).
    pub fn take_write(&mut self) -> Option<CacheWrite> {
        let c = &mut self.cache;
        if !c.behind || c.writing || c.pending.is_some() {
            return None;
        }
        // As a synchronous load does before it publishes (the reader's own segments, so that
        // what the write links stays what the reader holds).
        if let Err(e) = c.compact_if_needed() {
            c.warn(format!("cache segments could not be compacted: {e}"));
        }
        let segments = c
            .segments
            .iter()
            .map(|s| {
                let mut copy = Segment::new(s.name.clone(), s.home.clone());
                copy.batches.clone_from(&s.batches);
                // Files of a restored generation not decoded: linked from their home.
                for (u, f) in copy.unread.iter_mut().zip(&s.unread) {
                    *u = f.as_ref().and_then(|f| f.try_clone().ok());
                }
                copy.files = s.files;
                copy
            })
            .collect();
        let mut cache = Cache::new(&c.dir, c.view.clone());
        cache.segments = segments;
        cache.pieces = c.pieces.clone();
        cache.dirs = c.dirs.clone();
        let r = &self.reader;
        let reader = Reader {
            root: r.root.clone(),
            opts: r.opts.clone(),
            runs: r.runs.clone(),
            run_names: r.run_names.clone(),
            tag_names: r.tag_names.clone(),
            tag_index: r.tag_index.clone(),
            file_names: r.file_names.clone(),
            plugin_names: r.plugin_names.clone(),
            plugin_index: r.plugin_index.clone(),
            batches: r.batches.clone(),
            report: r.report.clone(),
            // A cache is written from whole files only (its reader never fetches).
            fetching: Default::default(),
        };
        c.behind = false;
        c.writing = true;
        Some(CacheWrite { cache, reader })
    }

    /// Takes back what a write did: the segments it wrote are linked from its generation by
    /// later writes, and `cache_info` names it. A write that failed is a warning; one that was
    /// abandoned leaves the cache behind.
    pub fn finish_write(&mut self, done: WriteDone) {
        let c = &mut self.cache;
        c.writing = false;
        match done.outcome {
            Ok(p) => {
                for s in c.segments.iter_mut() {
                    if let Some((_, files)) = p.segments.iter().find(|(n, _)| *n == s.name) {
                        s.home = Some(p.home.clone());
                        s.files = *files;
                    }
                }
                c.info.generation = Some(p.generation);
                c.info.written = true;
            }
            Err(e) if e == ABANDONED => c.behind = true,
            Err(e) => {
                let msg = format!(
                    "cache {} not written ({e}); the next scan reads the logdir again",
                    c.dir.display()
                );
                c.warn(msg);
            }
        }
    }
}
