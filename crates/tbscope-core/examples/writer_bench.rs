//! Times the writer's hot paths without Python: `cargo run --release --example writer_bench`.
//!
//! Best of several rounds (the machine is shared: the best round is the one nobody else
//! disturbed). Histograms are timed at a size one thread bins alone and at 1M values, where a
//! second thread may help.

use std::time::Instant;

use tbscope_core::histogram::{self, Edges, Values, PARALLEL_MIN};
use tbscope_core::proto::encode::put_simple_value;
use tbscope_core::writer::{EventWriter, Options, ScalarStyle};

/// Best time of `rounds` runs of `f`, in seconds.
fn best(rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let w = EventWriter::memory(Options::default()).unwrap();
    let n = 1_000_000;
    let t = best(3, || {
        for i in 0..n {
            w.scalar("loss", 0.5, Some(i), None, ScalarStyle::Simple)
                .unwrap();
        }
        w.take().unwrap();
    });
    println!(
        "scalar (memory mode, wall time read per call): {:.1} ns/call",
        t * 1e9 / n as f64
    );

    // 100 tags per step, the way the bindings' dict path builds them.
    let tags: Vec<String> = (0..100).map(|j| format!("metrics/m{j:03}")).collect();
    let steps = 20_000;
    let mut body = Vec::new();
    let t = best(3, || {
        for i in 0..steps {
            body.clear();
            for (j, tag) in tags.iter().enumerate() {
                put_simple_value(&mut body, tag, (i + j) as f64 * 0.25);
            }
            w.summary(&body, Some(i as i64), Some(1.0)).unwrap();
        }
        w.take().unwrap();
    });
    println!(
        "100 scalars per event (encoded and queued): {:.1} M scalars/s",
        (steps * 100) as f64 / t / 1e6
    );

    // Histograms of normal-ish values.
    let mut x = 0x1234_5678u64;
    let vals: Vec<f64> = (0..1_000_000)
        .map(|_| {
            let mut s = 0.0;
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s += (x >> 11) as f64 / (1u64 << 53) as f64;
            }
            (s - 2.0) * 1.7
        })
        .collect();
    let v32: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
    let lin: Vec<f64> = (0..=30).map(|i| -3.0 + i as f64 * 0.2).collect();
    let lin = Edges::new(&lin).unwrap();
    let one_thread = PARALLEL_MIN - 1;
    for (name, edges) in [("tf-default", None), ("30 bins", Some(&lin))] {
        for len in [one_thread, vals.len()] {
            for (ty, v) in [
                ("f64", Values::F64(&vals[..len])),
                ("f32", Values::F32(&v32[..len])),
            ] {
                let t = best(50, || {
                    let h = histogram::histogram(v, edges, None).unwrap();
                    assert_eq!(h.num, len as f64);
                });
                println!(
                    "histogram {name} {ty} {len}: {:.3} ms ({:.2} ns/value)",
                    t * 1e3,
                    t * 1e9 / len as f64
                );
            }
        }
    }
}
