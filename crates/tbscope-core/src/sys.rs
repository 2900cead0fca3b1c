//! What tbscope asks of the operating system besides reading and writing files: the host's
//! name and making a directory's entries durable. One implementation each, so every caller
//! gets the same behaviour.

use std::fs::File;
use std::io;
use std::path::Path;

/// The host's name, as TensorBoard's writers put it in event file names
/// (`socket.gethostname()`), with any `/` replaced by `_` so it can never make a path;
/// `localhost` when the system gives no name. Callers with a stricter naming scheme (the
/// cache's generation names) filter further.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL either way.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let name = if ok {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).replace('/', "_")
    } else {
        String::new()
    };
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

/// Syncs the directory `dir` itself, so that entries just created or renamed in it survive a
/// crash. Some filesystems refuse to sync a directory: callers for which that is only a lost
/// guarantee, not a failure, ignore the error.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_is_a_file_name_part() {
        let h = hostname();
        assert!(!h.is_empty() && !h.contains('/') && !h.contains('\0'));
    }

    #[test]
    fn sync_dir_reports_a_missing_directory() {
        let dir = std::env::temp_dir();
        sync_dir(&dir).unwrap();
        let gone = dir.join(format!("tbscope-sys-missing-{}", std::process::id()));
        assert_eq!(sync_dir(&gone).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
