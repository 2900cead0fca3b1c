//! Writing a run: its files read in order through the reader's framing, each record decided
//! and copied or re-encoded into one merged event file per run, runs in parallel.

use super::*;

// ------------------------------------------------------------------------------------------
// Writing.

/// One output file, created on its first record (a file with nothing to hold is not made).
pub(super) struct Output {
    pub(super) path: PathBuf,
    pub(super) rel: String,
    pub(super) file: Option<File>,
    pub(super) buf: Vec<u8>,
    pub(super) bytes: u64,
}

impl Output {
    pub(super) fn new(path: PathBuf, rel: String) -> Self {
        Output {
            path,
            rel,
            file: None,
            buf: Vec::new(),
            bytes: 0,
        }
    }

    pub(super) fn write(&mut self, framed: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(framed);
        self.bytes += framed.len() as u64;
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    pub(super) fn flush(&mut self) -> Result<()> {
        if self.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(e, dir))?;
            }
            // create_new: two inputs can never end up in one output file by a name clash.
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&self.path)
                .map_err(|e| Error::io(e, &self.path))?;
            self.file = Some(f);
        }
        let f = self.file.as_mut().expect("opened above");
        f.write_all(&self.buf)
            .map_err(|e| Error::io(e, &self.path))?;
        self.buf.clear();
        Ok(())
    }

    /// Flushes and syncs; returns the file's name relative to the output and its size when
    /// one was made.
    pub(super) fn finish(mut self) -> Result<Option<(String, u64)>> {
        if self.bytes == 0 {
            return Ok(None);
        }
        self.flush()?;
        if let Some(f) = &self.file {
            // Durable before the rename that publishes it.
            f.sync_all().map_err(|e| Error::io(e, &self.path))?;
        }
        Ok(Some((self.rel, self.bytes)))
    }
}

/// The merged file's name: TensorBoard's `events.out.tfevents.<time>.<host>...` pattern, with
/// `tbscope-rewrite` where a writer puts its process id.
pub fn merged_file_name(time: u64, host: &str) -> String {
    format!("events.out.tfevents.{time:010}.{host}.tbscope-rewrite.0")
}

pub(super) struct RunJob<'a> {
    pub(super) run: &'a str,
    pub(super) files: &'a [PathBuf],
}

/// Rewrites one run into `out_dir`.
pub(super) fn rewrite_run(
    root: &Path,
    job: &RunJob<'_>,
    out_dir: &Path,
    merged_name: &str,
    opts: &RewriteOptions,
    preempted: Option<&Superseded>,
    cancel: &AtomicBool,
) -> Result<RewriteStats> {
    let mut st = RewriteStats {
        files_in: job.files.len(),
        ..Default::default()
    };
    let run_dir = if job.run == "." {
        out_dir.to_path_buf()
    } else {
        out_dir.join(job.run)
    };
    let rel_out = |name: &str| {
        if job.run == "." {
            name.to_string()
        } else {
            format!("{}/{name}", job.run)
        }
    };
    let mut editor = Editor::new(opts);
    let mut out: Option<Output> = None;
    let mut scratch = Vec::new();
    let mut since_check = 0u32;
    let no_map = HashMap::default();
    let mut buf = Vec::new();
    // Whether each file may still be written: the reader's decision (see `load::may_grow`).
    let now = SystemTime::now();
    let stats: Vec<(&Path, Option<SystemTime>)> = job
        .files
        .iter()
        .map(|p| {
            let mtime = std::fs::metadata(p).and_then(|m| m.modified()).ok();
            (p.as_path(), mtime)
        })
        .collect();
    let live: Vec<(&PathBuf, bool)> = job
        .files
        .iter()
        .zip(crate::load::may_grow(
            &stats,
            now,
            crate::load::TAIL_TIMEOUT,
        ))
        .collect();
    // Files are named as the reader names them, so `preempted` (the reader's) keys match.
    let root_is_file = root.is_file();
    for path in job.files {
        let rel = crate::load::rel_name(root, root_is_file, path);
        let dropped = preempted.and_then(|p| p.get(&rel)).unwrap_or(&no_map);
        if !opts.merge || out.is_none() {
            let name = if opts.merge {
                merged_name.to_string()
            } else {
                path.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            };
            out = Some(Output::new(run_dir.join(&name), rel_out(&name)));
        }
        let o = out.as_mut().expect("set above");
        let file = File::open(path).map_err(|e| Error::io(e, path))?;
        let meta = file.metadata().map_err(|e| Error::io(e, path))?;
        if !meta.is_file() {
            return Err(Error::io(io::Error::other("not a regular file"), path));
        }
        st.bytes_in += meta.len();
        let end = if live.iter().any(|(p, l)| *p == path && *l) {
            End::Live
        } else {
            End::Final
        };
        let walk = WalkOptions {
            max_len: opts.max_len,
            verify: true,
            min_read: CHUNK,
        };
        let mut records = Walker::new(&file, 0, meta.len(), end, walk, std::mem::take(&mut buf));
        let problem =
            |st: &mut RewriteStats, sev: Severity, offset: u64, length: u64, why: String| {
                st.problems.push(ReportEntry {
                    run: job.run.to_string(),
                    file: rel.clone(),
                    severity: sev,
                    offset,
                    length,
                    reason: why,
                })
            };
        loop {
            let item = records.next();
            since_check += 1;
            if since_check >= 4096 {
                since_check = 0;
                if cancel.load(Ordering::Relaxed) {
                    return Err(Error::Interrupted);
                }
            }
            match item {
                Step::End => break,
                Step::ReadError { error, .. } => return Err(Error::io(error, path)),
                Step::Record { offset, framed } => {
                    let data = payload(framed);
                    st.records_in += 1;
                    let here = dropped.get(&offset);
                    // The reader's tags are the lossy UTF-8 of the bytes.
                    let sup = |tag: &[u8], k: u32| {
                        here.is_some_and(|v| {
                            v.iter().any(|(t, kk)| {
                                *kk == k && String::from_utf8_lossy(tag) == t.as_str()
                            })
                        })
                    };
                    match editor.decide(data, &sup) {
                        Ok(Decision::Keep) => {
                            o.write(framed)?;
                            st.records_out += 1;
                        }
                        Ok(Decision::Drop) => st.records_dropped += 1,
                        Ok(Decision::Replace(event)) => {
                            scratch.clear();
                            write_record(&mut scratch, &event);
                            o.write(&scratch)?;
                            st.records_out += 1;
                            st.records_rewritten += 1;
                        }
                        Err(e) => {
                            st.bytes_skipped += framed.len() as u64;
                            problem(
                                &mut st,
                                Severity::Corrupt,
                                offset,
                                framed.len() as u64,
                                format!("record is not a valid Event: {e}; left out"),
                            );
                        }
                    }
                }
                Step::Damage {
                    offset,
                    length,
                    why,
                } => {
                    st.bytes_skipped += length;
                    problem(
                        &mut st,
                        Severity::Corrupt,
                        offset,
                        length,
                        format!("{why}; skipped to the next valid record, not copied"),
                    );
                }
                Step::Tail {
                    offset,
                    length,
                    stopped,
                } => {
                    st.bytes_skipped += length;
                    let (sev, why) = if stopped {
                        (Severity::Warning, format!("{}: the file ends inside a record and is no longer written (a writer stopped mid-record); not copied", event_file::STOPPED_TAIL))
                    } else {
                        (Severity::Truncated, "file ends inside a record still being written (a pending tail); not copied".into())
                    };
                    problem(&mut st, sev, offset, length, why);
                }
            }
        }
        buf = records.into_buf();
        if !opts.merge {
            if let Some((name, bytes)) = out.take().expect("set above").finish()? {
                st.files_out.push(name);
                st.bytes_out += bytes;
            }
        }
    }
    if let Some(o) = out.take() {
        if let Some((name, bytes)) = o.finish()? {
            st.files_out.push(name);
            st.bytes_out += bytes;
        }
    }
    st.values_dropped = editor.values_dropped;
    st.metadata_moved = editor.metadata_moved;
    st.runs = usize::from(!st.files_out.is_empty());
    Ok(st)
}

/// Writes the rewritten logdir into `out_dir`, an existing empty directory (a staging
/// directory from [`stage`], normally). Runs are written in parallel; the stats and problems
/// come in run order.
pub fn write(
    src: &Path,
    out_dir: &Path,
    opts: &RewriteOptions,
    cancel: &AtomicBool,
) -> Result<RewriteStats> {
    let (found, errors) = discover(src, opts.runs.as_ref()).map_err(|e| Error::io(e, src))?;
    if let Some((path, e)) = errors.into_iter().next() {
        // A run that cannot be listed would silently be missing from the output.
        return Err(Error::Io {
            path: path.display().to_string(),
            source: io::Error::new(e.kind(), format!("{e}; the rewrite would miss its data")),
        });
    }
    let threads = thread_count(opts.threads);
    let preempted = if opts.preempt {
        Some(superseded(
            src,
            opts.runs.as_ref(),
            opts.max_len,
            threads,
            cancel,
        )?)
    } else {
        None
    };
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let merged_name = merged_file_name(time, &crate::sys::hostname());
    let jobs: Vec<RunJob<'_>> = found
        .iter()
        .map(|(run, files)| RunJob { run, files })
        .collect();
    let one = |job: &RunJob<'_>| {
        rewrite_run(
            src,
            job,
            out_dir,
            &merged_name,
            opts,
            preempted.as_ref(),
            cancel,
        )
    };
    // One run needs no pool; one the system refuses fails the rewrite.
    let pool = if jobs.len() <= 1 {
        None
    } else {
        crate::pool::worker_pool(threads, "rewrite-")?
    };
    let results: Vec<Result<RewriteStats>> = match pool {
        Some(pool) => pool.install(|| jobs.par_iter().map(one).collect()),
        None => jobs.iter().map(one).collect(),
    };
    let mut total = RewriteStats::default();
    for r in results {
        total.add(r?);
    }
    // Best effort: some filesystems refuse to sync a directory.
    let _ = crate::sys::sync_dir(out_dir);
    Ok(total)
}
