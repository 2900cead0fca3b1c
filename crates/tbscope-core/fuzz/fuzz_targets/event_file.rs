//! Fuzz target: `event_file::read_file` over arbitrary file contents.
//!
//! Writes the input to a temp file and reads it with several option sets. Checks: no panic;
//! the end cursor, problems and tail stay inside the file; read as final, every whole record is
//! read, and read as live, every whole record outside the pending tail (both against a
//! byte-at-a-time reference, with verify=true); the CRC work stays within `driver::crc_bound`;
//! reading in two steps (a prefix of the file, then the rest from the returned cursor, as a
//! reader following a growing file does) finds the same records as one read of the whole
//! file. Finally the file is cut with `split_points` (as `Reader::load` does for large files)
//! and read segment by segment: cuts must be increasing and inside the file, and no segment
//! read may panic or run past its end. Input byte 0 picks the length cap and the split point;
//! the rest is the file.
#![cfg_attr(feature = "libfuzzer", no_main)]

#[path = "driver.rs"]
mod driver;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use tbscope_core::event_file::{read_file, split_points, Cursor, FileChunk, Options, Until};

fn temp_path() -> PathBuf {
    std::env::temp_dir().join(format!("tbscope-fuzz-{}.tfevents", std::process::id()))
}

fn read(path: &std::path::Path, bytes: &[u8], from: u64, until: Until, o: &Options) -> FileChunk {
    std::fs::write(path, bytes).unwrap();
    read_file(
        path,
        Cursor { offset: from },
        until,
        o,
        &HashMap::new(),
        &AtomicBool::new(false),
    )
}

fn check(input: &[u8]) {
    let Some((&sel, buf)) = input.split_first() else {
        return;
    };
    let path = temp_path();
    let size = buf.len() as u64;
    for (verify, provenance) in [(true, false), (false, true)] {
        let o = Options {
            verify,
            provenance,
            max_len: driver::cap(sel),
            ..Options::default()
        };
        for until in [Until::Live, Until::Final] {
            let whole = read(&path, buf, 0, until, &o);
            assert_eq!(
                whole.end.offset + whole.tail,
                size,
                "{until:?}: end cursor + tail must be the file size"
            );
            for p in &whole.problems {
                assert!(
                    p.offset <= size && p.offset + p.length <= size,
                    "{p:?} in a {size}-byte file"
                );
            }
            assert!(
                whole.crc_bytes <= driver::crc_bound(buf.len()),
                "{until:?}: {} CRC bytes for {size}",
                whole.crc_bytes
            );
            if verify {
                let (recs, _) = driver::reference_frames(buf, o.max_len, until == Until::Live);
                assert_eq!(
                    whole.records,
                    recs.len() as u64,
                    "{until:?}: records vs reference"
                );
            }
            // Two-step read: a prefix, then the whole file from the cursor the first step
            // returned. The prefix is read live: in a final read a cut record is judged torn.
            let split = (sel as usize >> 2) * buf.len() / 64;
            let first = read(&path, &buf[..split], 0, Until::Live, &o);
            let second = read(&path, buf, first.end.offset, until, &o);
            // Unverified, a record at the cursor is taken when its payload decodes, while a
            // whole read reaching it by resynchronisation wants both CRCs (and the reverse for
            // a damaged record the prefix cut): only verified reads agree to the record.
            if verify {
                assert_eq!(
                    first.records + second.records,
                    whole.records,
                    "{until:?}: split at {split}"
                );
                assert_eq!(second.end, whole.end, "{until:?}: split at {split}");
            }
        }
        // Segmented read, as for a large file split across threads.
        std::fs::write(&path, buf).unwrap();
        let piece = 1 + (sel as u64 >> 2);
        let cuts = split_points(&path, 0, piece, o.max_len);
        let mut start = 0u64;
        for (i, &c) in cuts.iter().enumerate() {
            assert!(
                c > start && c < size,
                "cut {i} at {c} after {start} in a {size}-byte file"
            );
            let seg = read_file(
                &path,
                Cursor { offset: start },
                Until::Cut(c),
                &o,
                &HashMap::new(),
                &AtomicBool::new(false),
            );
            assert!(
                seg.end.offset <= c,
                "segment [{start}, {c}) ended at {}",
                seg.end.offset
            );
            start = c;
        }
        let last = read_file(
            &path,
            Cursor { offset: start },
            Until::Live,
            &o,
            &HashMap::new(),
            &AtomicBool::new(false),
        );
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
