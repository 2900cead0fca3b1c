//! The file a writer owns: whole records appended at a known length, cut back after a failed
//! write, and re-created when the path is removed or replaced under the writer.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::{now, Failure};
use crate::proto::encode::encode_file_version;
use crate::tf_record::framed;

/// The open file, and how far it holds whole records.
pub(super) struct Sink {
    pub(super) file: File,
    pub(super) path: PathBuf,
    /// Bytes of whole records in the file: where the next batch goes, and where a failed
    /// write is cut back to.
    pub(super) len: u64,
    /// What `path` was when the file was created (device and inode): a path that stats as
    /// something else was removed or replaced since. Kept rather than asking the descriptor
    /// each time: one system call per batch instead of two.
    pub(super) ident: Ident,
}

/// A file's identity on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ident(u64, u64);

impl Ident {
    #[cfg(unix)]
    pub(super) fn of(m: &std::fs::Metadata) -> Ident {
        use std::os::unix::fs::MetadataExt;
        Ident(m.dev(), m.ino())
    }

    /// Without inode numbers only "the path is gone" can be detected.
    #[cfg(not(unix))]
    pub(super) fn of(_: &std::fs::Metadata) -> Ident {
        Ident(0, 0)
    }
}

/// What a successful write did besides writing the batch.
#[derive(Default)]
pub(super) struct Wrote {
    /// Bytes and records of a `file_version` record written into a re-created file.
    pub(super) extra_bytes: u64,
    pub(super) extra_records: u64,
    pub(super) replaced: Option<Failure>,
}

impl Sink {
    pub(super) fn create(path: &Path, first: &[u8]) -> io::Result<Sink> {
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
    pub(super) fn write(
        &mut self,
        data: &[u8],
        fsync: bool,
    ) -> std::result::Result<Wrote, Failure> {
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
