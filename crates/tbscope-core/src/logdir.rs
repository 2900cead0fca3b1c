//! Finding runs and event files, with TensorBoard's rules.
//!
//! A run is any directory (the logdir itself included) that directly holds a file whose name
//! contains `tfevents`. Its name is the path relative to the logdir with `/` separators on every
//! OS, `.` for the root. Files are read in name order, which is creation order thanks to the
//! zero-padded timestamp in the name.

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use regex::Regex;

/// The substring that marks an event file (TensorBoard's `EVENT_FILE_BASENAME_INFIX`).
pub const EVENT_FILE_INFIX: &str = "tfevents";

/// Runs found under a path: run name → event files in read order.
pub type Discovered = BTreeMap<String, Vec<PathBuf>>;

pub fn is_event_file_name(name: &str) -> bool {
    name.contains(EVENT_FILE_INFIX)
}

/// Finds the runs under `root`, keeping those whose name `runs` matches.
///
/// `root` may be a single event file (one run named `.`). A missing path is an error; a
/// directory that cannot be listed is skipped and returned in the second value.
pub fn discover(
    root: &Path,
    runs: Option<&Regex>,
) -> io::Result<(Discovered, Vec<(PathBuf, io::Error)>)> {
    let meta = std::fs::metadata(root)?;
    let mut out = Discovered::new();
    let mut errors = Vec::new();
    if meta.is_file() {
        if runs.is_none_or(|re| re.is_match(".")) {
            out.insert(".".into(), vec![root.to_path_buf()]);
        }
        return Ok((out, errors));
    }
    let mut seen = HashSet::new();
    walk(root, root, runs, &mut out, &mut errors, &mut seen);
    Ok((out, errors))
}

fn run_name(root: &Path, dir: &Path) -> String {
    match dir.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
        Ok(rel) => rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/"),
        Err(_) => dir.to_string_lossy().into_owned(),
    }
}

fn walk(
    root: &Path,
    dir: &Path,
    runs: Option<&Regex>,
    out: &mut Discovered,
    errors: &mut Vec<(PathBuf, io::Error)>,
    seen: &mut HashSet<(u64, u64)>,
) {
    use std::os::unix::fs::MetadataExt;
    // Symlinks are followed (as TensorBoard does); a directory seen twice is a cycle.
    match std::fs::metadata(dir) {
        Ok(m) => {
            if !seen.insert((m.dev(), m.ino())) {
                return;
            }
        }
        Err(e) => {
            errors.push((dir.to_path_buf(), e));
            return;
        }
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            errors.push((dir.to_path_buf(), e));
            return;
        }
    };
    let mut files = Vec::new();
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        let is_dir = ft.is_dir() || (ft.is_symlink() && path.is_dir());
        if is_dir {
            subdirs.push(path);
        } else if is_event_file_name(&entry.file_name().to_string_lossy()) {
            // Only regular files (or links to them): opening a FIFO or device would block or
            // read forever.
            // A dangling link is kept: reading it fails and is reported against the file.
            let dangling = ft.is_symlink() && std::fs::metadata(&path).is_err();
            if ft.is_file() || path.is_file() || dangling {
                files.push(path);
            } else {
                errors.push((
                    path,
                    io::Error::other("named like an event file but not a regular file; skipped"),
                ));
            }
        }
    }
    if !files.is_empty() {
        let name = run_name(root, dir);
        if runs.is_none_or(|re| re.is_match(&name)) {
            files.sort();
            out.insert(name, files);
        }
    }
    subdirs.sort();
    for sub in subdirs {
        walk(root, &sub, runs, out, errors, seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_runs_like_tensorboard() {
        let tmp = std::env::temp_dir().join(format!("tbscope-logdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        for p in ["a/b", "c", "d"] {
            std::fs::create_dir_all(tmp.join(p)).unwrap();
        }
        for f in [
            "events.out.tfevents.2.x",
            "a/b/events.out.tfevents.1.x",
            "c/events.out.tfevents.2.y",
            "c/events.out.tfevents.1.y",
            "d/notes.txt",
        ] {
            std::fs::write(tmp.join(f), b"").unwrap();
        }
        let (found, errors) = discover(&tmp, None).unwrap();
        assert!(errors.is_empty());
        assert_eq!(
            found.keys().cloned().collect::<Vec<_>>(),
            vec![".", "a/b", "c"]
        );
        let c: Vec<_> = found["c"]
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            c,
            vec!["events.out.tfevents.1.y", "events.out.tfevents.2.y"]
        );
        let re = Regex::new("^a/").unwrap();
        assert_eq!(discover(&tmp, Some(&re)).unwrap().0.len(), 1);
        assert_eq!(
            discover(&tmp.join("missing"), None).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
