//! Walks one file with the framing walker and prints what it found and what it cost:
//! `cargo run --release --example walk_file -- FILE [live|final]`.
use tbscope_core::tf_record::{End, Step, WalkOptions, Walker};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a file");
    let end = match args.next().as_deref() {
        Some("live") => End::Live,
        _ => End::Final,
    };
    let file = std::fs::File::open(&path).unwrap();
    let size = file.metadata().unwrap().len();
    let t0 = std::time::Instant::now();
    let mut w = Walker::new(&file, 0, size, end, WalkOptions::default(), Vec::new());
    let (mut records, mut damage, mut tails) = (0u64, 0u64, 0u64);
    loop {
        match w.next() {
            Step::Record { .. } => records += 1,
            Step::Damage { length, .. } => damage += length,
            Step::Tail { length, .. } => tails += length,
            Step::ReadError { error, .. } => panic!("{error}"),
            Step::End => break,
        }
    }
    println!(
        "{size} bytes: {records} records, {damage} bytes of damage, {tails} bytes of tail; {} CRC bytes ({:.1}x) in {:?}",
        w.crc_bytes(),
        w.crc_bytes() as f64 / size as f64,
        t0.elapsed()
    );
}
