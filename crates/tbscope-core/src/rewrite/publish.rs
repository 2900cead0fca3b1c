//! Where the output goes: checks that refuse unsafe destinations, the staging directory beside
//! it, and the rename that publishes it.

use super::*;

// ------------------------------------------------------------------------------------------
// Where the output goes: checks, staging, publishing.

/// `p` made absolute with symlinks resolved as far as it exists (the rest appended as given).
pub(super) fn resolve(p: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(p).map_err(|e| Error::io(e, p))?;
    let mut existing = abs.clone();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(_)) => {
                rest.push(name.to_os_string());
                existing.pop();
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "cannot resolve {}; give a plain directory path",
                    p.display()
                )))
            }
        }
    }
    let mut out = existing
        .canonicalize()
        .map_err(|e| Error::io(e, &existing))?;
    for r in rest.into_iter().rev() {
        out.push(r);
    }
    Ok(out)
}

pub(super) fn is_empty_dir(p: &Path) -> Result<bool> {
    let mut it = std::fs::read_dir(p).map_err(|e| Error::io(e, p))?;
    Ok(it.next().is_none())
}

pub(super) fn exists_error(path: &Path, why: &str) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: io::Error::new(io::ErrorKind::AlreadyExists, why.to_string()),
    }
}

/// Checks that writing `dst` cannot touch `src`; returns both resolved.
pub(super) fn check_paths(src: &Path, dst: &Path, force: bool) -> Result<(PathBuf, PathBuf)> {
    let src_real = src.canonicalize().map_err(|e| Error::io(e, src))?;
    let dst_real = resolve(dst)?;
    if dst_real == src_real {
        return Err(Error::InvalidArgument(format!(
            "the output {} is the input; rewrite never changes its input: choose a new directory",
            dst.display()
        )));
    }
    if dst_real.starts_with(&src_real) {
        return Err(Error::InvalidArgument(format!(
            "the output {} is inside the input {} (it would be read as runs of it); choose a directory outside it",
            dst.display(),
            src.display()
        )));
    }
    if src_real.starts_with(&dst_real) {
        return Err(Error::InvalidArgument(format!(
            "the input {} is inside the output {}, which replacing would delete; choose another output",
            src.display(),
            dst.display()
        )));
    }
    match std::fs::metadata(&dst_real) {
        Ok(m) if !m.is_dir() => {
            return Err(exists_error(
                dst,
                "exists and is not a directory; choose a directory path for the new logdir",
            ))
        }
        Ok(_) if !is_empty_dir(&dst_real)? => {
            if !force {
                return Err(exists_error(
                    dst,
                    "exists and is not empty; choose a new or empty directory",
                ));
            }
            // force replaces a logdir (an earlier output, typically), never a directory that
            // holds anything else: a mistyped path must not cost someone their files.
            if let Some(other) = not_a_logdir(&dst_real)? {
                return Err(Error::InvalidArgument(format!(
                    "{} holds {}, which is not an event file; force replaces only a logdir \
                     (event files and directories of them): choose another output",
                    dst.display(),
                    other.display()
                )));
            }
        }
        _ => {}
    }
    Ok((src_real, dst_real))
}

/// The first entry under `dir` that is neither a directory nor an event file (symlinks
/// included: removing the tree would not follow them, but what they stand for is unknown).
pub(super) fn not_a_logdir(dir: &Path) -> Result<Option<PathBuf>> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(e, dir))? {
        let entry = entry.map_err(|e| Error::io(e, dir))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| Error::io(e, &path))?;
        if ft.is_dir() {
            if let Some(p) = not_a_logdir(&path)? {
                return Ok(Some(p));
            }
        } else if !(ft.is_file()
            && crate::logdir::is_event_file_name(&entry.file_name().to_string_lossy()))
        {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

pub(super) fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}.{nanos}", std::process::id())
}

pub(super) fn sibling(dst: &Path, what: &str) -> PathBuf {
    let name = dst
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    dst.with_file_name(format!(".{name}.tbscope-{what}.{}", unique_suffix()))
}

/// Checks the paths and creates the staging directory next to `dst`, where [`write`] goes.
///
/// Refused: an output that is the input, inside it or contains it (even with `force`); an
/// existing file; an existing non-empty directory unless `force`.
pub fn stage(src: &Path, dst: &Path, force: bool) -> Result<PathBuf> {
    let (_, dst_real) = check_paths(src, dst, force)?;
    if let Some(parent) = dst_real.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(e, parent))?;
    }
    let staging = sibling(&dst_real, "rewrite");
    std::fs::create_dir(&staging).map_err(|e| Error::io(e, &staging))?;
    Ok(staging)
}

/// Publishes `staging` as `dst`: one rename, or with `force` and a non-empty `dst`, the old
/// directory moved aside, the new one renamed in and the old one removed. The paths are
/// checked again (something may have appeared at `dst` since [`stage`]).
pub fn commit(src: &Path, staging: &Path, dst: &Path, force: bool) -> Result<()> {
    let (_, dst_real) = check_paths(src, dst, force)?;
    let staging_real = staging.canonicalize().map_err(|e| Error::io(e, staging))?;
    let ours = staging_real.parent() == dst_real.parent()
        && staging_real
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(".tbscope-rewrite."));
    if !ours {
        return Err(Error::InvalidArgument(format!(
            "{} is not a staging directory of {}",
            staging.display(),
            dst.display()
        )));
    }
    let occupied = dst_real.is_dir() && !is_empty_dir(&dst_real)?;
    if !occupied {
        // rename(2) replaces an empty directory, and fails on a non-empty one that appeared
        // in between, which is then reported rather than overwritten.
        std::fs::rename(&staging_real, &dst_real).map_err(|e| Error::io(e, &dst_real))?;
    } else {
        let old = sibling(&dst_real, "old");
        std::fs::rename(&dst_real, &old).map_err(|e| Error::io(e, &dst_real))?;
        if let Err(e) = std::fs::rename(&staging_real, &dst_real) {
            let _ = std::fs::rename(&old, &dst_real);
            return Err(Error::io(e, &dst_real));
        }
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(e, &old))?;
    }
    if let Some(parent) = dst_real.parent() {
        // Best effort: some filesystems refuse to sync a directory.
        let _ = crate::sys::sync_dir(parent);
    }
    Ok(())
}
