//! Fuzz target: the framing walker (`tf_record::Walker`) and `parse_frame` over arbitrary bytes.
//!
//! Walks the input from memory with each end rule (live, final, cut) and checks: no panic; the
//! steps tile the bytes in order (a live walk may end at a pending tail, which runs to the
//! end); the records are exactly those of a byte-at-a-time reference (`driver::
//! reference_frames`): every whole record outside a pending tail is read, in a final walk every
//! whole record at all
//! (a cut walk as a final one, unless a record runs past the cut); the CRC work stays within `driver::crc_bound`; and `write_record`
//! round-trips. Input byte 0 picks the length cap and the buffer size; the rest is the file.
#![cfg_attr(feature = "libfuzzer", no_main)]

#[path = "driver.rs"]
mod driver;

use tbscope_core::tf_record::{
    parse_frame, write_record, Damage, End, Frame, Step, WalkOptions, Walker,
};

fn check(input: &[u8]) {
    let Some((&sel, buf)) = input.split_first() else {
        return;
    };
    let cap = driver::cap(sel);
    // Small buffers too, so refills land everywhere.
    let min_read = [16usize, 100, 4096, 256 << 10][(sel >> 2) as usize % 4];
    for end in [End::Live, End::Final, End::Cut] {
        let opts = WalkOptions {
            max_len: cap,
            verify: true,
            min_read,
        };
        let mut w = Walker::new(buf, 0, buf.len() as u64, end, opts, Vec::new());
        let mut at = 0u64;
        let mut recs = Vec::new();
        let mut tail = None;
        let mut past_cut = false;
        loop {
            match w.next() {
                Step::Record { offset, framed } => {
                    assert_eq!(offset, at, "{end:?}: record out of order");
                    assert!(
                        matches!(parse_frame(framed, cap, true), Frame::Record { span, .. } if span == framed.len())
                    );
                    recs.push((offset as usize, framed.len()));
                    at += framed.len() as u64;
                }
                Step::Damage {
                    offset,
                    length,
                    why,
                } => {
                    assert_eq!(offset, at, "{end:?}: damage out of order");
                    assert!(length > 0);
                    past_cut |= why == Damage::PastCut;
                    at += length;
                }
                Step::Tail {
                    offset,
                    length,
                    stopped,
                } => {
                    assert_eq!(offset, at, "{end:?}: tail out of order");
                    assert_eq!(stopped, end == End::Final, "{end:?}: tail kind");
                    assert_ne!(end, End::Cut, "a cut walk has no tail");
                    tail = Some(offset as usize);
                    at += length;
                }
                Step::ReadError { .. } => panic!("memory does not fail"),
                Step::End => break,
            }
        }
        assert_eq!(
            at,
            buf.len() as u64,
            "{end:?}: steps do not cover the bytes"
        );
        assert!(
            w.crc_bytes() <= driver::crc_bound(buf.len()),
            "{end:?}: {} CRC bytes for {}",
            w.crc_bytes(),
            buf.len()
        );
        let (want, want_tail) = driver::reference_frames(buf, cap, end == End::Live);
        // A record running past a cut ends a segment's walk (the loader then reads the file in
        // one piece); short of that, a cut walk reads what a final one does.
        if !past_cut {
            assert_eq!(recs, want, "{end:?}: records");
        }
        if end == End::Live {
            // An empty tail (damage ending exactly at the end) and no tail are the same thing.
            let norm = |t: Option<usize>| t.filter(|&t| t < buf.len());
            assert_eq!(norm(tail), norm(want_tail), "live tail");
            assert_eq!(
                w.cursor() as usize,
                tail.unwrap_or(buf.len()),
                "live cursor"
            );
        }
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
