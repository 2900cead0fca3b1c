//! Shared by the fuzz targets: the plain-binary driver used when libFuzzer is not available.
//!
//! `cargo run --release --no-default-features --bin <target> -- [PATH...]` runs the target on
//! every file given (directories: every file inside, e.g. a saved corpus or artifacts/) and, if
//! no path is given, on a stream of seeded pseudo-random inputs built from valid records with
//! random damage, so it also works as a cheap smoke fuzzer on stable Rust.

#![allow(dead_code)]

pub fn run(check: fn(&[u8])) {
    let paths: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    if !paths.is_empty() {
        let mut n = 0;
        for p in paths {
            let files: Vec<std::path::PathBuf> = if p.is_dir() {
                std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_file()).collect()
            } else {
                vec![p]
            };
            for f in files {
                check(&std::fs::read(&f).unwrap());
                n += 1;
            }
        }
        eprintln!("ran {n} inputs");
        return;
    }
    let iters: u64 = std::env::var("FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        // SplitMix64.
        rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for _ in 0..iters {
        // A few valid records (random payloads), then random damage.
        let mut buf = vec![(next() % 4) as u8]; // the targets' option byte
        for _ in 0..next() % 6 {
            let len = (next() % 40) as usize;
            let payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            tbscope_core::tf_record::write_record(&mut buf, &payload);
        }
        for _ in 0..next() % 4 {
            if buf.len() < 2 {
                break;
            }
            let p = 1 + (next() as usize) % (buf.len() - 1);
            match next() % 4 {
                0 => buf[p] ^= 1 << (next() % 8),
                1 => buf.truncate(p),
                2 => {
                    let q = p + (next() as usize) % (buf.len() - p);
                    buf.drain(p..q);
                }
                _ => buf.splice(p..p, (0..next() % 20).map(|_| next() as u8)).for_each(drop),
            }
        }
        check(&buf);
    }
    eprintln!("ran {iters} generated inputs");
}

/// The framing contract, a byte at a time (as in tests/common): records where both CRCs hold,
/// an unfinished tail where a valid header runs past the end or under 12 bytes remain, and
/// everything else skipped. Returns record `(offset, span)`s and the tail start.
pub fn reference_frames(b: &[u8], max_len: u64) -> (Vec<(usize, usize)>, Option<usize>) {
    use tbscope_core::masked_crc::masked_crc32c;
    let mut recs = Vec::new();
    let mut pos = 0usize;
    while pos < b.len() {
        if b.len() - pos < 12 {
            return (recs, Some(pos));
        }
        let len = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap());
        let ok = masked_crc32c(&b[pos..pos + 8]) == u32::from_le_bytes(b[pos + 8..pos + 12].try_into().unwrap());
        if ok && len <= max_len {
            let span = 16 + len as usize;
            if b.len() - pos < span {
                return (recs, Some(pos));
            }
            let crc = u32::from_le_bytes(b[pos + span - 4..pos + span].try_into().unwrap());
            if masked_crc32c(&b[pos + 12..pos + span - 4]) == crc {
                recs.push((pos, span));
                pos += span;
                continue;
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
