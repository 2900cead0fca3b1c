// Scratch benchmark (not committed): M4 over 1,000 series x 10,000 points.
use std::time::Instant;
use tbscope_core::downsample::m4_many;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args.get(1).map_or(1, |s| s.parse().unwrap());
    let reps: usize = args.get(2).map_or(5, |s| s.parse().unwrap());
    let series: usize = std::env::var("SERIES").map_or(1000, |s| s.parse().unwrap());
    let n = 10_000usize;
    let mut x: Vec<i64> = Vec::with_capacity(series * n);
    let mut y: Vec<f64> = Vec::with_capacity(series * n);
    let mut s: u64 = 12345;
    for r in 0..series {
        for i in 0..n {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            x.push(i as i64);
            y.push((-(i as f64) / (2000.0 + r as f64)).exp() + (s % 1000) as f64 * 1e-5);
        }
    }
    let ranges: Vec<(usize, usize)> = (0..series).map(|r| (r * n, (r + 1) * n)).collect();
    let mut best = f64::MAX;
    let mut kept = 0;
    for _ in 0..reps {
        let t = Instant::now();
        let c0 = tcpu();
        let out = m4_many(&x, &y, &ranges, 1000, None, None, threads);
        let dt = if threads == 1 {
            tcpu() - c0
        } else {
            t.elapsed().as_secs_f64()
        };
        kept = out.iter().map(|v| v.0.len()).sum::<usize>();
        best = best.min(dt);
    }
    let mut fbest = f64::MAX;
    for _ in 0..reps {
        let c0 = tcpu();
        let mut acc = 0.0f64;
        let mut xa = 0i64;
        for (a, b) in x.iter().zip(&y) {
            acc += *b;
            xa ^= *a;
        }
        std::hint::black_box((acc, xa));
        fbest = fbest.min(tcpu() - c0);
    }
    println!("floor (read x and y once): {:.1} ms", fbest * 1e3);
    let cpu = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru.ru_utime.tv_sec as f64 + ru.ru_utime.tv_usec as f64 * 1e-6
    };
    println!(
        "threads {threads}: best {:.1} ms, kept {kept}, process user cpu {:.2} s",
        best * 1e3,
        cpu
    );
}

fn tcpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
