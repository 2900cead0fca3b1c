//! Log surgery (`tbscope_core::rewrite`): `rewrite` writes into a staging directory, and
//! `commit_rewrite` publishes it once the Python side has verified it (or `rewrite` at once with
//! `commit=True`); the GIL is released meanwhile.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDictMethods;

use crate::funnel::{detached, guarded, Outcome};
use crate::{regex, REWRITE_GRACE};

/// Rewrites `src` into a staging directory next to `dst` and returns what it did as a dict
/// (`staging`: where the output is, or None once committed; counts; `files_out`; `problems`
/// as report tuples). With `commit`, publishes it as `dst` at once.
#[pyfunction]
#[pyo3(signature = (src, dst, *, runs=None, tags=None, drop_tags=None, drop_steps=None,
                    preempt=false, merge=true, force=false, commit=false, threads=0))]
#[allow(
    clippy::too_many_arguments,
    reason = "one parameter per Python keyword argument (pyo3 maps them)"
)]
pub(crate) fn rewrite<'py>(
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
) -> Outcome<Bound<'py, pyo3::types::PyDict>> {
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
    let (stats, staging) = detached(py, "tbscope-rewrite", REWRITE_GRACE, move |cancel| {
        let staging = rw::stage(&src, &dst, force)?;
        let stats = match rw::write(&src, &staging, &opts, cancel) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(e.into());
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
pub(crate) fn commit_rewrite(
    src: PathBuf,
    staging: PathBuf,
    dst: PathBuf,
    force: bool,
) -> Outcome<()> {
    guarded(|| Ok(tbscope_core::rewrite::commit(&src, &staging, &dst, force)?))
}
