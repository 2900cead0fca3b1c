//! Times the writer's hot paths without Python: `cargo run --release --example writer_bench`.

use std::time::Instant;

use tbscope_core::histogram::{self, Edges, Values};
use tbscope_core::writer::{EventWriter, Options, ScalarStyle};

fn main() {
    let w = EventWriter::memory(Options::default()).unwrap();
    let n = 2_000_000;
    for round in 0..3 {
        let t = Instant::now();
        for i in 0..n {
            w.scalar("loss", 0.5, Some(i), None, ScalarStyle::Simple)
                .unwrap();
        }
        let el = t.elapsed();
        let bytes = w.take().unwrap().len();
        println!(
            "round {round}: scalar (memory mode) {:.1} ns/call, {bytes} bytes",
            el.as_nanos() as f64 / n as f64
        );
    }
    let t = Instant::now();
    for i in 0..n {
        w.scalar("loss", 0.5, Some(i), Some(1.0), ScalarStyle::Simple)
            .unwrap();
    }
    println!(
        "scalar with wall_time given: {:.1} ns/call",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    w.take().unwrap();

    // Histograms of 1M normal-ish values.
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
    baseline(&vals);
    let v32: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
    let lin: Vec<f64> = (0..=30).map(|i| -3.0 + i as f64 * 0.2).collect();
    let lin = Edges::new(&lin).unwrap();
    for (name, edges) in [("tf-default", None), ("30 bins", Some(&lin))] {
        for (ty, v) in [("f64", Values::F64(&vals)), ("f32", Values::F32(&v32))] {
            let mut best = f64::MAX;
            for _ in 0..10 {
                let t = Instant::now();
                let h = histogram::histogram(v, edges, None).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
                assert_eq!(h.num, 1e6);
            }
            println!("histogram {name} {ty} 1M: {:.2} ms", best * 1e3);
        }
    }
}

fn baseline(vals: &[f64]) {
    let t = Instant::now();
    let mut s = 0.0;
    for _ in 0..10 {
        s += vals.iter().map(|v| v * v).sum::<f64>();
    }
    println!(
        "baseline sum of squares 1M: {:.2} ms ({s})",
        t.elapsed().as_secs_f64() * 100.0
    );
}
