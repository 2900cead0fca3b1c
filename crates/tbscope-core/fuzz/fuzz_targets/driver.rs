//! Shared by the fuzz targets: the plain-binary driver used when libFuzzer is not available, and
//! the references the targets check against.
//!
//! `cargo run --release --no-default-features --bin <target> -- [OPTIONS] [PATH...]`:
//! - with paths, runs the target on every file given (directories: every file inside, e.g. a
//!   saved corpus or artifacts/) and stops;
//! - otherwise runs generated inputs until `--seconds S` (or `FUZZ_SECONDS`) pass or
//!   `FUZZ_ITERS` inputs ran (default 20,000 when neither is set). Inputs are valid records
//!   with random damage, crafted resynchronisation bait (headers whose length CRCs hold, each
//!   claiming a long payload that is not there), and, with `--seeds DIR` (repeatable), real
//!   event files found under DIR (names containing "tfevents") with the same damage;
//! - `--seed N` changes the pseudo-random sequence (default fixed, so a run is repeatable).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tbscope_core::masked_crc::masked_crc32c;

#[path = "../../tests/common/rng.rs"]
mod rng;
pub use rng::Rng;

fn files_under(p: &Path, out: &mut Vec<PathBuf>, only_events: bool) {
    if p.is_dir() {
        let Ok(rd) = std::fs::read_dir(p) else { return };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        entries.sort();
        for e in entries {
            files_under(&e, out, only_events);
        }
    } else if p.is_file()
        && (!only_events
            || p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("tfevents")))
    {
        out.push(p.to_path_buf());
    }
}

/// A 12-byte header claiming `len` bytes, its length CRC good.
pub fn header(len: u64) -> Vec<u8> {
    let mut h = len.to_le_bytes().to_vec();
    h.extend_from_slice(&masked_crc32c(&len.to_le_bytes()).to_le_bytes());
    h
}

/// Resynchronisation bait: headers every 12 bytes claiming `len` (a few lengths, some landing
/// on the next header), optionally around real records.
fn crafted(rng: &mut Rng, around: &[u8]) -> Vec<u8> {
    let lens = [
        1u64 << 20,
        (1 << 20) + 4,
        5000,
        64,
        17,
        20 + 12 * rng.below(100),
    ];
    let len = lens[rng.below(lens.len() as u64) as usize];
    let n = 1 + rng.below(4000) as usize;
    let mut bait = Vec::with_capacity(12 * n);
    for _ in 0..n {
        bait.extend(header(len));
    }
    let at = if around.is_empty() {
        0
    } else {
        rng.below(around.len() as u64) as usize
    };
    let mut out = around[..at].to_vec();
    out.extend(bait);
    out.extend_from_slice(&around[at..]);
    out
}

fn damage(rng: &mut Rng, buf: &mut Vec<u8>, donor: &[u8]) {
    for _ in 0..rng.below(5) {
        if buf.len() < 2 {
            return;
        }
        let p = 1 + rng.below(buf.len() as u64 - 1) as usize;
        match rng.below(6) {
            0 => buf[p] ^= 1 << rng.below(8),
            1 => buf.truncate(p),
            2 => {
                let q = p + rng.below((buf.len() - p) as u64) as usize;
                buf.drain(p..q);
            }
            3 => {
                let n = rng.below(20) as usize;
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                buf.splice(p..p, bytes);
            }
            // A torn record: the first bytes of a piece of another file, whole records after.
            4 if !donor.is_empty() => {
                let a = rng.below(donor.len() as u64) as usize;
                let b = (a + 1 + rng.below(400) as usize).min(donor.len());
                buf.splice(p..p, donor[a..b].iter().copied());
            }
            _ => {
                let h = header(rng.below(1 << 16));
                buf.splice(p..p, h);
            }
        }
    }
}

pub fn run(check: fn(&[u8])) {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut seeds_dirs: Vec<PathBuf> = Vec::new();
    let mut seconds: Option<f64> = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--seeds") => seeds_dirs.push(args.next().expect("--seeds DIR").into()),
            Some("--seconds") => {
                seconds = Some(
                    args.next()
                        .and_then(|v| v.to_str()?.parse().ok())
                        .expect("--seconds S"),
                )
            }
            Some("--seed") => {
                seed = args
                    .next()
                    .and_then(|v| v.to_str()?.parse().ok())
                    .expect("--seed N")
            }
            _ => paths.push(a.into()),
        }
    }
    if !paths.is_empty() {
        let mut files = Vec::new();
        for p in &paths {
            files_under(p, &mut files, false);
        }
        for f in &files {
            check(&std::fs::read(f).unwrap());
        }
        eprintln!("ran {} inputs", files.len());
        return;
    }
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for d in &seeds_dirs {
        let mut files = Vec::new();
        files_under(d, &mut files, true);
        for f in files {
            if let Ok(mut b) = std::fs::read(&f) {
                // Long files: their first 256 KiB (a window, not a record boundary, at times).
                b.truncate(256 << 10);
                seeds.push(b);
            }
        }
    }
    let iters: u64 = std::env::var("FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if seconds.is_some() { u64::MAX } else { 20_000 });
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs_f64(s));
    let mut rng = Rng::new(seed);
    let t0 = Instant::now();
    let mut n = 0u64;
    let mut kinds = [0u64; 3];
    while n < iters && deadline.is_none_or(|d| Instant::now() < d) {
        let sel = rng.next_u64() as u8; // the targets' option byte
        let kind = rng.below(if seeds.is_empty() { 2 } else { 3 });
        kinds[kind as usize] += 1;
        let mut buf = match kind {
            // A few valid records (random payloads).
            0 => {
                let mut b = Vec::new();
                for _ in 0..rng.below(6) {
                    let most = if rng.below(4) == 0 { 300 } else { 40 };
                    let len = rng.below(most) as usize;
                    let payload: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                    tbscope_core::tf_record::write_record(&mut b, &payload);
                }
                b
            }
            // Crafted headers, alone or around records.
            1 => {
                let around = if seeds.is_empty() || rng.below(2) == 0 {
                    Vec::new()
                } else {
                    let s = &seeds[rng.below(seeds.len() as u64) as usize];
                    s[..s.len().min(1 + rng.below(8192) as usize)].to_vec()
                };
                crafted(&mut rng, &around)
            }
            // A real file.
            _ => seeds[rng.below(seeds.len() as u64) as usize].clone(),
        };
        let donor = if seeds.is_empty() {
            Vec::new()
        } else {
            seeds[rng.below(seeds.len() as u64) as usize].clone()
        };
        damage(&mut rng, &mut buf, &donor);
        let mut input = vec![sel];
        input.extend(buf);
        check(&input);
        n += 1;
    }
    eprintln!(
        "ran {n} generated inputs in {:.1} s ({} plain, {} crafted, {} from {} seed files)",
        t0.elapsed().as_secs_f64(),
        kinds[0],
        kinds[1],
        kinds[2],
        seeds.len()
    );
}

/// The framing contract, a byte at a time (as in tests/common): records where both CRCs hold,
/// taken greedily. With `live`, the walk stops at the first position it reaches that may start
/// a record still being written (a header whose length CRC holds running past the end, or
/// fewer than 12 bytes left): the pending tail. Returns record `(offset, span)`s and the tail.
pub fn reference_frames(
    b: &[u8],
    max_len: u64,
    live: bool,
) -> (Vec<(usize, usize)>, Option<usize>) {
    let mut recs = Vec::new();
    let mut pos = 0usize;
    while pos < b.len() {
        if b.len() - pos < 12 {
            if live {
                return (recs, Some(pos));
            }
            break;
        }
        let len = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap());
        let ok = masked_crc32c(&b[pos..pos + 8])
            == u32::from_le_bytes(b[pos + 8..pos + 12].try_into().unwrap());
        if ok && len <= max_len {
            let span = 16 + len as usize;
            if b.len() - pos < span {
                if live {
                    return (recs, Some(pos));
                }
            } else {
                let crc = u32::from_le_bytes(b[pos + span - 4..pos + span].try_into().unwrap());
                if masked_crc32c(&b[pos + 12..pos + span - 4]) == crc {
                    recs.push((pos, span));
                    pos += span;
                    continue;
                }
            }
        }
        pos += 1;
    }
    (recs, None)
}

/// A record cap chosen by the input's first byte, so the cap path is exercised too.
pub fn cap(sel: u8) -> u64 {
    match sel % 4 {
        0 => 0,
        1 => 24,
        2 => 4096,
        _ => 256 << 20,
    }
}

/// The CRC work the walker may do on `n` bytes: a small multiple of them (see
/// `tf_record::Walker::crc_bytes`), plus a constant for tiny inputs.
pub fn crc_bound(n: usize) -> u64 {
    48 * n as u64 + (64 << 10)
}
