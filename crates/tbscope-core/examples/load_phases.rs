//! Times the phases of a load on a logdir, for profiling: raw reads, framing and CRCs, full
//! parse, and the whole load with merging. Run with
//! `cargo run --release --example load_phases -- LOGDIR [threads]`.

use std::fs::File;
use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use tbscope_core::data_compat::Kind;
use tbscope_core::tf_record::{parse_frame, Frame};
use tbscope_core::{Reader, ReaderOptions};

fn files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let (found, _) = tbscope_core::logdir::discover(root, None).expect("logdir");
    found.into_values().flatten().collect()
}

/// CPU seconds used by this process so far (user + system), from /proc: on a busy machine
/// wall time says more about the neighbours than about the code.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = std::path::PathBuf::from(&args[1]);
    let threads: usize = args.get(2).map_or(1, |t| t.parse().unwrap());
    let paths = files(&root);
    // LOAD_ONLY=1 skips the raw-read phases, so a profiler sees only the load.
    let load_only = std::env::var_os("LOAD_ONLY").is_some();
    for _ in 0..3 {
        let t = Instant::now();
        let mut buf = Vec::new();
        let mut bytes = 0;
        let mut records = 0u64;
        for p in paths.iter().filter(|_| !load_only) {
            buf.clear();
            File::open(p).unwrap().read_to_end(&mut buf).unwrap();
            bytes += buf.len();
        }
        let read = t.elapsed();
        let t = Instant::now();
        for p in paths.iter().filter(|_| !load_only) {
            buf.clear();
            File::open(p).unwrap().read_to_end(&mut buf).unwrap();
            let mut pos = 0;
            while let Frame::Record { span, .. } = parse_frame(&buf[pos..], 1 << 28, true) {
                pos += span;
                records += 1;
            }
        }
        let framed = t.elapsed();
        let t = Instant::now();
        let c0 = cpu_seconds();
        let opts = ReaderOptions {
            threads,
            ..Default::default()
        };
        let mut r = Reader::new(&root, opts).unwrap();
        let stats = r.load(&AtomicBool::new(false)).unwrap();
        let loaded = t.elapsed();
        let cpu = cpu_seconds() - c0;
        let rows: usize = r
            .table(Kind::Scalars)
            .unwrap()
            .iter()
            .map(|b| b.num_rows())
            .sum();
        println!(
            "{bytes} bytes, {records} records: read {read:?}, read+frame+crc {framed:?}, load {loaded:?} (cpu {cpu:.2}s; {} rows, {rows} scalars)",
            stats.rows
        );
    }
}
