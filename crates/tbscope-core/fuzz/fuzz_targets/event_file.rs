//! Fuzz target: `event_file::read_file` over arbitrary file contents.
//!
//! Writes the input to a temp file and reads it with several option sets. Checks: no panic;
//! the end cursor, problems and tail stay inside the file; the records found match a
//! byte-at-a-time reference framing (verify=true); and reading in two steps (a prefix of the
//! file, then the rest from the returned cursor, as a reader following a growing file does)
//! finds the same number of records as one read of the whole file. Finally the file is cut with
//! `split_points` (as `Reader::load` does for large files) and read segment by segment: cuts
//! must be increasing and inside the file, and no segment read may panic or run past its end.
//! Input byte 0 picks the length cap and the split point; the rest is the file.
#![cfg_attr(feature = "libfuzzer", no_main)]

#[path = "driver.rs"]
mod driver;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use tbscope_core::event_file::{read_file, split_points, Cursor, FileChunk, Options};

fn temp_path() -> PathBuf {
    std::env::temp_dir().join(format!("tbscope-fuzz-{}.tfevents", std::process::id()))
}

fn read(path: &std::path::Path, bytes: &[u8], from: u64, o: &Options) -> FileChunk {
    std::fs::write(path, bytes).unwrap();
    read_file(path, Cursor { offset: from }, None, o, &HashMap::new(), &AtomicBool::new(false))
}

fn check(input: &[u8]) {
    let Some((&sel, buf)) = input.split_first() else { return };
    let path = temp_path();
    let size = buf.len() as u64;
    for (verify, provenance) in [(true, false), (false, true)] {
        let o = Options { verify, provenance, max_len: driver::cap(sel), ..Options::default() };
        let whole = read(&path, buf, 0, &o);
        assert_eq!(whole.end.offset + whole.tail, size, "end cursor + tail must be the file size");
        for p in &whole.problems {
            assert!(p.offset <= size && p.offset + p.length <= size, "{p:?} in a {size}-byte file");
        }
        if verify {
            let (recs, _) = driver::reference_frames(buf, o.max_len);
            assert_eq!(whole.records, recs.len() as u64, "records vs reference");
        }
        // Two-step read: a prefix, then the whole file from the cursor the first step returned.
        let split = (sel as usize >> 2) * buf.len() / 64;
        let first = read(&path, &buf[..split], 0, &o);
        let second = read(&path, buf, first.end.offset, &o);
        assert_eq!(first.records + second.records, whole.records, "split at {split}");
        assert_eq!(second.end, whole.end, "split at {split}");
        // Segmented read, as for a large file split across threads.
        std::fs::write(&path, buf).unwrap();
        let piece = 1 + (sel as u64 >> 2);
        let cuts = split_points(&path, 0, piece, o.max_len);
        let mut start = 0u64;
        for (i, &c) in cuts.iter().enumerate() {
            assert!(c > start && c < size, "cut {i} at {c} after {start} in a {size}-byte file");
            let seg = read_file(&path, Cursor { offset: start }, Some(c), &o, &HashMap::new(), &AtomicBool::new(false));
            assert!(seg.end.offset <= c, "segment [{start}, {c}) ended at {}", seg.end.offset);
            start = c;
        }
        let last = read_file(&path, Cursor { offset: start }, None, &o, &HashMap::new(), &AtomicBool::new(false));
        assert_eq!(last.end.offset + last.tail, size);
    }
    let _ = std::fs::remove_file(&path);
}

#[cfg(feature = "libfuzzer")]
libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data));

#[cfg(not(feature = "libfuzzer"))]
fn main() {
    driver::run(check);
}
