//! Fuzz target: `tf_record::parse_frame` and `resync` over arbitrary bytes.
//!
//! Walks the input the way the reader does (parse a frame; on corruption resync from the next
//! byte) and checks it against a byte-at-a-time reference framing: the same records at the
//! same offsets, the same tail. Also: spans are in bounds, `Found` positions really parse, and
//! `write_record` round-trips. Input byte 0 picks the length cap; the rest is the file.
#![cfg_attr(feature = "libfuzzer", no_main)]

#[path = "driver.rs"]
mod driver;

use tbscope_core::tf_record::{data_crc_ok, parse_frame, resync, write_record, Frame, Resync, HEADER_LEN, OVERHEAD};

fn check(input: &[u8]) {
    let Some((&sel, buf)) = input.split_first() else { return };
    let cap = driver::cap(sel);
    for verify in [true, false] {
        let mut recs = Vec::new();
        let mut tail = None;
        let mut pos = 0usize;
        let mut corrupt = false;
        while pos < buf.len() {
            if corrupt {
                match resync(buf, pos, cap) {
                    Resync::Found(p) => {
                        assert!(p >= pos);
                        assert!(matches!(parse_frame(&buf[p..], cap, true), Frame::Record { .. }), "Found({p}) does not parse");
                        pos = p;
                        corrupt = false;
                    }
                    Resync::Candidate { pos: p, need } => {
                        assert!(p >= pos && need > buf.len() - p && need >= OVERHEAD);
                        tail = Some(p);
                        break;
                    }
                    Resync::Exhausted(p) => {
                        assert!(p >= pos && buf.len() - p.min(buf.len()) < HEADER_LEN);
                        tail = Some(p);
                        break;
                    }
                }
                continue;
            }
            match parse_frame(&buf[pos..], cap, verify) {
                Frame::Record { data, span } => {
                    assert!(span >= OVERHEAD && data.len() + OVERHEAD == span && pos + span <= buf.len());
                    assert!(data.len() as u64 <= cap);
                    if verify || data_crc_ok(&buf[pos..], span) {
                        recs.push((pos, span));
                        pos += span;
                    } else {
                        // The reader only accepts an unverified record whose payload decodes;
                        // for framing purposes a bad data CRC is corruption.
                        corrupt = true;
                        pos += 1;
                    }
                }
                Frame::NeedMore { need } => {
                    assert!(need > buf.len() - pos);
                    tail = Some(pos);
                    break;
                }
                Frame::Corrupt(_) => {
                    corrupt = true;
                    pos += 1;
                }
            }
        }
        if corrupt && tail.is_none() && pos >= buf.len() {
            // Corruption running to the very end: the reference calls the last <12 bytes a tail.
            tail = Some(pos);
        }
        let (want, want_tail) = driver::reference_frames(buf, cap);
        assert_eq!(recs, want, "records (verify={verify})");
        // An empty tail (corruption ending exactly at EOF) and no tail are the same thing.
        let norm = |t: Option<usize>| t.filter(|&t| t < buf.len());
        assert_eq!(norm(tail), norm(want_tail), "tail (verify={verify})");
    }
    // Round trip.
    let mut out = Vec::new();
    write_record(&mut out, buf);
    match parse_frame(&out, buf.len() as u64, true) {
        Frame::Record { data, span } => assert!(data == buf && span == out.len()),
        other => panic!("write_record output does not parse: {other:?}"),
    }
}

#[cfg(feature = "libfuzzer")]
libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data));

#[cfg(not(feature = "libfuzzer"))]
fn main() {
    driver::run(check);
}
