//! The mutation oracle shared by `mutation.rs` and `split.rs`: sources framed by the reference
//! loop, random mutations that keep track of where each source byte went, and the checks run
//! on every mutant. See `mutation.rs` for the reasoning.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;
use tbscope_core::event_file::Severity;
use tbscope_core::load::{ReaderOptions, ReportEntry};
use tbscope_core::tf_record::{parse_frame, Frame};

/// The default record length cap (`Options::default().max_len`).
pub const CAP: u64 = 256 << 20;
pub const FILE: &str = "events.out.tfevents.1.mutated";
/// Bytes of mutated files read per test; the debug build reads ~10-20 MB/s.
pub const BUDGET: usize = 16 << 20;
/// No single read may take longer than this (it would mean a quadratic path or a wait).
pub const MAX_READ: Duration = Duration::from_secs(5);

/// A source file, framed and read once undamaged.
pub struct Source {
    pub name: String,
    pub bytes: Vec<u8>,
    /// `(offset, span)` of its records.
    pub records: Vec<(usize, usize)>,
    /// Rows per record offset (any kind), and scalar `(tag, step, value bits)` per offset.
    pub rows: BTreeMap<i64, usize>,
    pub scalars: BTreeMap<i64, Vec<(String, i64, u64)>>,
}

/// Reads `bytes` as one event file with provenance: rows per record offset, scalars per
/// record offset, the report, and how long the read took.
fn read(
    bytes: &[u8],
    o: &ReaderOptions,
) -> (
    BTreeMap<i64, usize>,
    BTreeMap<i64, Vec<(String, i64, u64)>>,
    Vec<ReportEntry>,
    Duration,
) {
    let dir = TempDir::new("mutation");
    let path = dir.write(FILE, bytes);
    let t = Instant::now();
    let (reader, rows, report) = load_once(&path, o.clone());
    let took = t.elapsed();
    let per_record = rows_by_record(&reader)
        .into_iter()
        .map(|((_, o), n)| (o, n))
        .collect();
    let mut scalars: BTreeMap<i64, Vec<_>> = BTreeMap::new();
    for r in rows {
        scalars
            .entry(r.offset.unwrap())
            .or_default()
            .push((r.tag, r.step, r.value.to_bits()));
    }
    (per_record, scalars, report, took)
}

pub fn source(name: String, bytes: Vec<u8>, o: &ReaderOptions) -> Option<Source> {
    let scan = reference_frames(&bytes, CAP);
    if !scan.gaps.is_empty() || scan.tail.is_some() {
        // Not a clean file: the oracle needs clean originals.
        println!(
            "note: {name} is not cleanly framed ({} gaps, tail {:?}); skipped",
            scan.gaps.len(),
            scan.tail
        );
        return None;
    }
    let (rows, scalars, report, _) = read(&bytes, o);
    assert!(
        report.iter().all(|e| !matches!(
            e.severity,
            Severity::Corrupt | Severity::Truncated | Severity::Error
        )),
        "{name}: the undamaged file has problems: {report:?}"
    );
    Some(Source {
        name,
        bytes,
        records: scan.records,
        rows,
        scalars,
    })
}

/// Event files under shared/data/wild, or none (with a note) when the data is not there.
pub fn wild(o: &ReaderOptions) -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/wild");
    if !root.is_dir() {
        println!(
            "note: {} is missing; only generated files are mutated",
            root.display()
        );
        return Vec::new();
    }
    let mut paths = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .contains("tfevents")
            {
                paths.push(p);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p: PathBuf| {
            let name = p.strip_prefix(&root).unwrap().display().to_string();
            source(name, std::fs::read(&p).unwrap(), o)
        })
        .collect()
}

pub fn generated(seed: u64, n: usize, o: &ReaderOptions) -> Source {
    let mut rng = Rng::new(seed);
    let (bytes, _) = synth_file(&mut rng, n);
    source(format!("generated-{seed}"), bytes, o).unwrap()
}

/// "Bytes [at, at + len) of the mutated file are bytes [from, from + len) of source `src`."
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub at: usize,
    pub len: usize,
    pub src: usize,
    pub from: usize,
}

#[derive(Debug)]
pub struct Mutant {
    pub what: String,
    pub bytes: Vec<u8>,
    pub segments: Vec<Segment>,
    /// Mutated bytes before this offset are an unmodified prefix of source 0.
    pub prefix: usize,
}

/// One random mutation of `srcs[0]` (`srcs[1]` is the donor for splices).
pub fn mutate(rng: &mut Rng, srcs: &[&Source]) -> Mutant {
    let a = &srcs[0].bytes;
    let n = a.len();
    let whole = |len| {
        vec![Segment {
            at: 0,
            len,
            src: 0,
            from: 0,
        }]
    };
    let pos = |rng: &mut Rng, n: usize| rng.range(0, n.saturating_sub(1));
    match rng.below(7) {
        0 => {
            // Bit flips: 1..8 of them anywhere.
            let mut b = a.clone();
            let k = rng.range(1, 8);
            let mut first = n;
            for _ in 0..k {
                let p = pos(rng, n);
                first = first.min(p);
                b[p] ^= 1 << rng.below(8);
            }
            Mutant {
                what: format!("{k} bit flips"),
                bytes: b,
                segments: whole(n),
                prefix: first,
            }
        }
        1 => {
            // Overwrite a range with random bytes or a constant (0x00, 0xff).
            let mut b = a.clone();
            let p = pos(rng, n);
            let len = rng.range(1, 2000).min(n - p);
            let fill = rng.below(3);
            for x in &mut b[p..p + len] {
                *x = match fill {
                    0 => 0,
                    1 => 0xff,
                    _ => rng.next_u64() as u8,
                };
            }
            Mutant {
                what: format!("overwrite [{p}, {}) fill {fill}", p + len),
                bytes: b,
                segments: whole(n),
                prefix: p,
            }
        }
        2 => {
            // Truncation at any byte.
            let c = rng.range(0, n);
            Mutant {
                what: format!("truncate at {c}"),
                bytes: a[..c].to_vec(),
                segments: whole(c),
                prefix: c,
            }
        }
        3 => {
            // Delete a range.
            let p = pos(rng, n);
            let len = rng.range(1, 5000).min(n - p);
            let mut b = a[..p].to_vec();
            b.extend_from_slice(&a[p + len..]);
            let segments = vec![
                Segment {
                    at: 0,
                    len: p,
                    src: 0,
                    from: 0,
                },
                Segment {
                    at: p,
                    len: n - p - len,
                    src: 0,
                    from: p + len,
                },
            ];
            Mutant {
                what: format!("delete [{p}, {})", p + len),
                bytes: b,
                segments,
                prefix: p,
            }
        }
        4 | 5 => {
            // Splice: a range of the donor (another file, or this one) inserted at a position.
            let donor = if rng.below(2) == 0 { 0 } else { 1 };
            let d = &srcs[donor].bytes;
            let s = pos(rng, d.len());
            let len = rng.range(1, 5000).min(d.len() - s);
            let p = rng.range(0, n);
            let mut b = a[..p].to_vec();
            b.extend_from_slice(&d[s..s + len]);
            b.extend_from_slice(&a[p..]);
            let segments = vec![
                Segment {
                    at: 0,
                    len: p,
                    src: 0,
                    from: 0,
                },
                Segment {
                    at: p,
                    len,
                    src: donor,
                    from: s,
                },
                Segment {
                    at: p + len,
                    len: n - p,
                    src: 0,
                    from: p,
                },
            ];
            Mutant {
                what: format!("splice donor {donor} [{s}, {}) at {p}", s + len),
                bytes: b,
                segments,
                prefix: p,
            }
        }
        _ => {
            // Concatenate a prefix of this file with a suffix of the donor.
            let d = &srcs[1].bytes;
            let c = rng.range(0, n);
            let s = rng.range(0, d.len());
            let mut b = a[..c].to_vec();
            b.extend_from_slice(&d[s..]);
            let segments = vec![
                Segment {
                    at: 0,
                    len: c,
                    src: 0,
                    from: 0,
                },
                Segment {
                    at: c,
                    len: d.len() - s,
                    src: 1,
                    from: s,
                },
            ];
            Mutant {
                what: format!("concat [0, {c}) + donor [{s}, ..)"),
                bytes: b,
                segments,
                prefix: c,
            }
        }
    }
}

/// Intact records of the mutant: `(new offset, source, original offset, span)`.
fn intact(m: &Mutant, srcs: &[&Source]) -> Vec<(usize, usize, usize, usize)> {
    let mut out = Vec::new();
    for seg in &m.segments {
        let src = srcs[seg.src];
        for &(off, span) in &src.records {
            if off >= seg.from && off + span <= seg.from + seg.len {
                let at = seg.at + (off - seg.from);
                if m.bytes[at..at + span] == src.bytes[off..off + span] {
                    out.push((at, seg.src, off, span));
                }
            }
        }
    }
    out.sort();
    out
}

/// Sorted, merged `[a, b)` ranges.
fn merge(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(l) if l.1 == a => l.1 = b,
            Some(l) => {
                assert!(l.1 < a, "overlapping report entries {l:?} and {:?}", (a, b));
                out.push((a, b));
            }
            None => out.push((a, b)),
        }
    }
    out
}

/// Runs one mutant through the reader and checks everything the oracle can say about it.
pub fn check(m: &Mutant, srcs: &[&Source], o: &ReaderOptions) {
    let verify = o.file.verify;
    let ctx = format!(
        "{} / {}: {} (verify={verify})",
        srcs[0].name,
        srcs.get(1).map_or("-", |s| s.name.as_str()),
        m.what
    );
    let (rows, scalars, report, took) = read(&m.bytes, o);
    assert!(took < MAX_READ, "{ctx}: read took {took:?}");
    // A fresh file is live; a zero tail timeout makes it final.
    let fin = o.tail_timeout.is_zero();
    let scan = if fin {
        reference_frames_final(&m.bytes, CAP)
    } else {
        reference_frames(&m.bytes, CAP)
    };
    let found: std::collections::BTreeSet<usize> = scan.records.iter().map(|r| r.0).collect();
    let intact = intact(m, srcs);

    // The untouched prefix is always recovered, whatever the mode.
    for &(at, src, off, _) in intact.iter().filter(|r| r.0 + r.3 <= m.prefix && r.1 == 0) {
        let want = srcs[src].rows.get(&(off as i64)).copied().unwrap_or(0);
        assert_eq!(
            rows.get(&(at as i64)).copied().unwrap_or(0),
            want,
            "{ctx}: prefix record at {at}"
        );
    }

    if !verify {
        // Rows only where a header with a valid length CRC starts.
        for &o in rows.keys() {
            assert!(
                matches!(
                    parse_frame(&m.bytes[o as usize..], CAP, false),
                    Frame::Record { .. }
                ),
                "{ctx}: row at {o}, which is not a record start"
            );
        }
        return;
    }

    // Oracle sanity: every intact record is a reference record unless it is in the tail (which
    // in a final file is a stopped tail: nothing whole after it).
    for &(at, _, _, _) in &intact {
        assert!(
            found.contains(&at) || scan.tail.is_some_and(|t| at >= t),
            "{ctx}: oracle: intact record at {at} not framed by the reference (tail {:?})",
            scan.tail
        );
    }
    // Intact records come back with all their rows (and the same scalars).
    for &(at, src, off, _) in intact.iter().filter(|r| found.contains(&r.0)) {
        let s = srcs[src];
        let want = s.rows.get(&(off as i64)).copied().unwrap_or(0);
        let got = rows.get(&(at as i64)).copied().unwrap_or(0);
        assert_eq!(
            got, want,
            "{ctx}: rows of intact record at {at} (originally {off} in {})",
            s.name
        );
        if let Some(sc) = s.scalars.get(&(off as i64)) {
            assert_eq!(
                scalars.get(&(at as i64)),
                Some(sc),
                "{ctx}: scalars of the record at {at}"
            );
        }
    }
    // Rows only from reference records: nothing from bytes that fail a CRC.
    for &o in rows.keys() {
        assert!(
            found.contains(&(o as usize)),
            "{ctx}: row at {o}, where the reference finds no valid record"
        );
    }
    // The report: Corrupt "skipped" entries tile the gaps, Truncated is the tail, decode
    // failures are at reference records.
    let mut skipped = Vec::new();
    let mut truncated = Vec::new();
    for e in &report {
        match e.severity {
            Severity::Corrupt if e.reason.contains("not a valid Event") => {
                assert!(found.contains(&(e.offset as usize)), "{ctx}: {e:?}");
            }
            Severity::Corrupt => skipped.push((e.offset, e.offset + e.length)),
            Severity::Truncated if !fin => truncated.push((e.offset, e.length)),
            Severity::Warning if fin && e.reason.starts_with("stopped tail") => {
                truncated.push((e.offset, e.length))
            }
            Severity::Truncated => panic!("{ctx}: a pending tail in a final file: {e:?}"),
            Severity::Error => panic!("{ctx}: {e:?}"),
            // Notes about values or the file as a whole (non-finite wall times, kind conflicts,
            // an empty file): not about byte ranges.
            _ => {}
        }
    }
    let gaps: Vec<(u64, u64)> = scan
        .gaps
        .iter()
        .map(|&(a, b)| (a as u64, b as u64))
        .collect();
    assert_eq!(
        merge(skipped),
        merge(gaps),
        "{ctx}: corrupt entries vs the reference's gaps"
    );
    let tail: Vec<(u64, u64)> = scan
        .tail
        .map(|t| (t as u64, (m.bytes.len() - t) as u64))
        .into_iter()
        .collect();
    assert_eq!(truncated, tail, "{ctx}: tail entries");
}

/// Runs `cases` mutants of each source (round robin donors) in both modes.
pub fn run(srcs: &[Source], seed0: u64, budget: usize, o: &ReaderOptions) {
    if srcs.is_empty() {
        return;
    }
    let t0 = Instant::now();
    let mut cases = 0;
    for (i, s) in srcs.iter().enumerate() {
        // Each file gets an equal share of the byte budget, at least 3 cases, at most 40.
        let n = (budget / srcs.len() / s.bytes.len().max(1)).clamp(3, 40);
        // The donor for splices: the next file that is not huge (a multi-MB donor would make
        // every splice of a tiny file a multi-MB read).
        let donor = (1..=srcs.len())
            .map(|k| &srcs[(i + k) % srcs.len()])
            .find(|d| d.bytes.len() <= 1 << 19)
            .unwrap_or(s);
        let t = Instant::now();
        for c in 0..n {
            let mut rng = Rng::new(seed0 + (i as u64) * 1000 + c as u64);
            let pair = [s, donor];
            if s.bytes.is_empty() {
                continue;
            }
            let m = mutate(&mut rng, &pair);
            check(&m, &pair, o);
            if c % 4 == 0 {
                check(&m, &pair, &unverified(o));
            }
            cases += 1;
        }
        if std::env::var_os("MUTATION_TRACE").is_some() {
            println!(
                "{}: {n} cases, {} bytes, {:?}",
                s.name,
                s.bytes.len(),
                t.elapsed()
            );
        }
    }
    println!(
        "{cases} mutants of {} files in {:?}",
        srcs.len(),
        t0.elapsed()
    );
}

/// The same options with verify=false.
pub fn unverified(o: &ReaderOptions) -> ReaderOptions {
    let mut u = o.clone();
    u.file.verify = false;
    u
}
