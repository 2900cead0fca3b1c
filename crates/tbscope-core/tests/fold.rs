//! A scan that folds its scalars into statistics while reading (`fold::FoldingReader`, what a
//! `summary` without a cache uses) gives the statistics and summary of the columns, to the bit,
//! however the logdir is cut into pieces. (tests/python/test_summary_fold.py compares the
//! whole `tbscope summary` output on files written by tensorboardX.)

mod common;

use std::sync::atomic::AtomicBool;

use arrow_array::RecordBatch;
use common::{file_version_event, opts, record, scalar_event, TempDir};
use tbscope_core::event_file::Severity;
use tbscope_core::fold::FoldingReader;
use tbscope_core::{Kind, Reader, Restarts, Scan};

/// Runs with NaN, duplicate steps, -0.0 after 0.0, a run without scalars, a run of two files,
/// a corrupt record (bad data CRC) and a truncated tail.
fn logdir(dir: &TempDir) {
    for r in 0..40 {
        let mut out = record(&file_version_event(1.0));
        for s in 0..30i64 {
            let x = (r * 7 + s as i32) as f32 / 3.0;
            let v = match (r % 5, s) {
                (0, 3 | 9) => f32::NAN,
                (1, _) => f32::NAN,
                (2, 4) => -0.0,
                (2, 3) => 0.0,
                _ => x.sin(),
            };
            // Steps repeat in runs 3 mod 5 (a restarted job wrote them again).
            let step = if r % 5 == 3 { s % 12 } else { s };
            out.extend(record(&scalar_event(
                1000.0 + s as f64,
                step,
                &[("loss", v), ("acc", x.cos())],
            )));
            if r % 4 == 0 {
                out.extend(record(&scalar_event(
                    1000.0 + s as f64,
                    step,
                    &[("lr", 0.1)],
                )));
            }
        }
        if r == 17 {
            // Flip a byte of a record's data: a corrupt record, skipped and reported.
            let n = out.len();
            out[n - 30] ^= 0x55;
        }
        if r == 23 {
            out.truncate(out.len() - 5);
        }
        dir.write(
            &format!("sweep_{}/trial_{r:02}/events.out.tfevents.1.a", r / 10),
            &out,
        );
        if r % 9 == 0 {
            let more = record(&scalar_event(2000.0, 99, &[("loss", 0.5), ("extra", 1.0)]));
            dir.write(
                &format!("sweep_{}/trial_{r:02}/events.out.tfevents.2.a", r / 10),
                &more,
            );
        }
    }
    // A run with no scalars at all.
    dir.write(
        "sweep_9/empty/events.out.tfevents.1.a",
        &record(&file_version_event(1.0)),
    );
}

fn same(a: &RecordBatch, b: &RecordBatch) {
    assert_eq!(a.schema(), b.schema());
    assert_eq!(a.num_rows(), b.num_rows());
    for c in 0..a.num_columns() {
        // Arrow's equality compares NaN by bits, so -0.0 and NaN payloads count.
        assert_eq!(
            a.column(c).to_data(),
            b.column(c).to_data(),
            "column {}",
            a.schema().field(c).name()
        );
    }
}

#[test]
fn folded_statistics_equal_the_columns_whatever_the_pieces() {
    let dir = TempDir::new("fold");
    logdir(&dir);
    let cancel = AtomicBool::new(false);
    let mut plain = Reader::new(dir.path(), opts(false, true)).unwrap();
    plain.load(&cancel).unwrap();
    let stats = plain.scalar_stats().unwrap();
    let report = Scan::report(&mut plain).unwrap();
    assert!(report.iter().any(|e| e.severity == Severity::Corrupt));
    assert_eq!(stats.num_rows(), 95); // 40 runs × (loss, acc), lr in 10, extra in 5
    let pick = [("last", "last"), ("min", "min"), ("argmax", "argmax_step")]
        .map(|(a, b)| (a.to_string(), b.to_string()));
    let summary = plain.summary_table(&pick).unwrap();
    // One piece, a piece per file or so, and pieces cut inside runs of two files.
    for piece in [1u64 << 30, 1, 700, 3000] {
        for threads in [1, 2] {
            let mut o = opts(false, true);
            o.threads = threads;
            let mut f = FoldingReader::with_piece_bytes(Reader::new(dir.path(), o).unwrap(), piece)
                .unwrap();
            let st = f.load(&cancel).unwrap();
            assert!(st.files_read > 40);
            same(&f.scalar_stats().unwrap(), &stats);
            same(&f.summary_table(&pick).unwrap(), &summary);
            assert_eq!(f.runs_table().unwrap(), plain.runs_table());
            assert_eq!(f.series().unwrap(), plain.series());
            assert_eq!(f.report().unwrap(), Scan::report(&mut plain).unwrap());
            assert!(f.table(Kind::Scalars).is_err());
        }
    }
    // The restart rule needs the rows it drops: not offered.
    let mut o = opts(false, true);
    o.restarts = Restarts::Preempt;
    assert!(FoldingReader::new(Reader::new(dir.path(), o).unwrap()).is_err());
}

#[test]
fn a_reload_folds_on_like_the_columns() {
    let dir = TempDir::new("fold-reload");
    let mut first = record(&file_version_event(1.0));
    for s in 0..5 {
        first.extend(record(&scalar_event(1.0, s, &[("loss", s as f32)])));
    }
    let path = dir.write("run/events.out.tfevents.1.a", &first);
    let cancel = AtomicBool::new(false);
    let mut plain = Reader::new(dir.path(), opts(false, true)).unwrap();
    let mut f = FoldingReader::new(Reader::new(dir.path(), opts(false, true)).unwrap()).unwrap();
    plain.load(&cancel).unwrap();
    f.load(&cancel).unwrap();
    let mut more = first.clone();
    for s in 5..9 {
        more.extend(record(&scalar_event(2.0, s, &[("loss", -(s as f32))])));
    }
    std::fs::write(&path, &more).unwrap();
    plain.load(&cancel).unwrap();
    f.load(&cancel).unwrap();
    same(&f.scalar_stats().unwrap(), &plain.scalar_stats().unwrap());
}
