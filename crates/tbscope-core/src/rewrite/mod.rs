//! Log surgery: a new logdir from an old one, with tags, step ranges or records a restart
//! superseded left out, and each run's files merged into one. The input is only ever read.
//!
//! Records are read with the reader's own framing ([`Walker`], which `event_file` uses too, with
//! the same decision about each file's end), so the output holds exactly the records a scan of
//! the input returns, minus what was asked to go. A record goes out byte for byte
//! unless part of it is dropped: an Event whose Summary loses some of its values is re-encoded
//! with the kept values copied as raw bytes, every other field of the Event untouched.
//!
//! Order: a run's files are concatenated in name order, records in file order. That is the
//! order every TensorBoard loader and `tbscope.scan` read them in, so per-tag arrival order,
//! which decides duplicate steps and restarts, is the same in the output. (Sorting by wall time
//! would not be: clocks differ between ranks, and a restart's records would interleave with
//! the ones they replace.)
//!
//! Metadata: a series' kind and description come from its first metadata. When the value that
//! carried it is dropped, the first kept value of that tag gets it instead, so the output's
//! series look like the input's.
//!
//! Safety: the output is written into a staging directory next to it and renamed into place by
//! [`commit`]; an interrupted rewrite leaves nothing under the final name.

mod decisions;
mod output;
mod publish;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use rayon::prelude::*;
use regex::Regex;

use crate::data_compat::{legacy_plugin, Kind};
use crate::error::{Error, Result};
use crate::event_file::{self, Severity};
use crate::load::{thread_count, ReaderOptions, ReportEntry, Restarts};
use crate::logdir::discover;
use crate::proto::encode::{edit_event, ValueEdit};
use crate::proto::{
    summary_values, DecodeError, Event, SessionLog, SummaryValue, TaggedRunMetadata, ValueKind,
    What,
};
use crate::tf_record::{payload, write_record, End, Step, WalkOptions, Walker};

/// Tags are short and trusted: the reader's fast hasher.
type FxBuild = std::hash::BuildHasherDefault<event_file::FxHasher>;

/// Tags the reader gives events that are not summaries (see `event_file`).
const GRAPH_TAG: &str = "__run_graph__";
const META_GRAPH_TAG: &str = "__meta_graph__";

/// The smallest read; longer records grow the buffer.
const CHUNK: usize = 4 << 20;

pub use decisions::{superseded, Decision, Editor, Superseded};
pub use output::{merged_file_name, write};
pub use publish::{commit, stage};

/// What to leave out and how to lay the output out.
#[derive(Debug, Clone)]
pub struct RewriteOptions {
    /// Only runs whose name matches (others are not written at all).
    pub runs: Option<Regex>,
    /// Keep only tags that match (graph records count as `__run_graph__`/`__meta_graph__`).
    pub tags: Option<Regex>,
    /// Drop tags that match.
    pub drop_tags: Option<Regex>,
    /// Drop records with `lo <= step < hi`; an open end is None.
    pub drop_steps: Option<(Option<i64>, Option<i64>)>,
    /// Drop what TensorBoard's preemption rule drops (see [`superseded`]).
    pub preempt: bool,
    /// One output file per run (true) or one per input file, under the input file's name.
    pub merge: bool,
    /// Records longer than this are corruption (the reader's cap).
    pub max_len: u64,
    /// Worker threads (0: automatic); runs are rewritten in parallel.
    pub threads: usize,
}

impl Default for RewriteOptions {
    fn default() -> Self {
        RewriteOptions {
            runs: None,
            tags: None,
            drop_tags: None,
            drop_steps: None,
            preempt: false,
            merge: true,
            max_len: 256 << 20,
            threads: 0,
        }
    }
}

impl RewriteOptions {
    fn step_dropped(&self, step: i64) -> bool {
        self.drop_steps
            .is_some_and(|(lo, hi)| lo.is_none_or(|lo| step >= lo) && hi.is_none_or(|hi| step < hi))
    }

    fn tag_wanted(&self, tag: &str) -> bool {
        self.tags.as_ref().is_none_or(|re| re.is_match(tag))
            && !self.drop_tags.as_ref().is_some_and(|re| re.is_match(tag))
    }
}

/// What a rewrite read, wrote and skipped.
#[derive(Debug, Clone, Default)]
pub struct RewriteStats {
    /// Runs written (a run with nothing left to write is not created).
    pub runs: usize,
    pub files_in: usize,
    /// Files written, relative to the output directory, `/`-separated.
    pub files_out: Vec<String>,
    /// Whole, valid records read.
    pub records_in: u64,
    pub records_out: u64,
    /// Records left out entirely (every value dropped, or a graph record dropped).
    pub records_dropped: u64,
    /// Records written re-encoded (some values dropped, or metadata moved onto them).
    pub records_rewritten: u64,
    pub values_dropped: u64,
    /// Values that received the first metadata of their tag from a dropped value.
    pub metadata_moved: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Bytes not copied because they were corrupt, undecodable or a truncated tail.
    pub bytes_skipped: u64,
    pub problems: Vec<ReportEntry>,
}

impl RewriteStats {
    fn add(&mut self, o: RewriteStats) {
        self.runs += o.runs;
        self.files_in += o.files_in;
        self.files_out.extend(o.files_out);
        self.records_in += o.records_in;
        self.records_out += o.records_out;
        self.records_dropped += o.records_dropped;
        self.records_rewritten += o.records_rewritten;
        self.values_dropped += o.values_dropped;
        self.metadata_moved += o.metadata_moved;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.bytes_skipped += o.bytes_skipped;
        self.problems.extend(o.problems);
    }
}

/// Stages, writes and commits: the whole rewrite for callers that do not verify in between.
/// The staging directory is removed when writing fails.
pub fn rewrite(
    src: &Path,
    dst: &Path,
    opts: &RewriteOptions,
    force: bool,
    cancel: &AtomicBool,
) -> Result<RewriteStats> {
    let staging = stage(src, dst, force)?;
    match write(src, &staging, opts, cancel) {
        Ok(stats) => {
            commit(src, &staging, dst, force)?;
            Ok(stats)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::decisions::*;
    use super::publish::unique_suffix;
    use super::*;
    use crate::proto::Metadata;
    use crate::tf_record::HEADER_LEN;

    use crate::proto::encode::put_varint;

    /// A length-delimited field (`number` <= 15).
    fn put_len_field(out: &mut Vec<u8>, number: u8, body: &[u8]) {
        out.push((number << 3) | 2);
        put_varint(out, body.len() as u64);
        out.extend_from_slice(body);
    }

    // Hand-built protobuf, so the tests do not lean on the writer under test elsewhere.
    fn event(wall: f64, step: i64, what: &[u8]) -> Vec<u8> {
        let mut e = vec![0x09];
        e.extend_from_slice(&wall.to_le_bytes());
        e.push(0x10);
        put_varint(&mut e, step as u64);
        e.extend_from_slice(what);
        e
    }

    fn summary(values: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        for v in values {
            put_len_field(&mut body, 1, v);
        }
        let mut what = Vec::new();
        put_len_field(&mut what, 5, &body);
        what
    }

    fn simple(tag: &str, x: f32, meta: Option<&[u8]>) -> Vec<u8> {
        let mut v = Vec::new();
        put_len_field(&mut v, 1, tag.as_bytes());
        v.push(0x15);
        v.extend_from_slice(&x.to_le_bytes());
        if let Some(m) = meta {
            put_len_field(&mut v, 9, m);
        }
        v
    }

    /// A rank-0 float tensor value, with the metadata given.
    fn tensor(tag: &str, x: f32, meta: Option<&[u8]>) -> Vec<u8> {
        let mut t = vec![0x08, 0x01, 0x12, 0x00];
        put_len_field(&mut t, 4, &x.to_le_bytes());
        let mut v = Vec::new();
        put_len_field(&mut v, 1, tag.as_bytes());
        put_len_field(&mut v, 8, &t);
        if let Some(m) = meta {
            put_len_field(&mut v, 9, m);
        }
        v
    }

    fn plugin_meta(plugin: &str, display: &str) -> Vec<u8> {
        let mut pd = Vec::new();
        put_len_field(&mut pd, 1, plugin.as_bytes());
        let mut m = Vec::new();
        put_len_field(&mut m, 1, &pd);
        if !display.is_empty() {
            put_len_field(&mut m, 2, display.as_bytes());
        }
        m
    }

    fn file_version(wall: f64) -> Vec<u8> {
        let mut e = vec![0x09];
        e.extend_from_slice(&wall.to_le_bytes());
        put_len_field(&mut e, 3, b"brain.Event:2");
        e
    }

    fn frame_all(events: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in events {
            write_record(&mut out, e);
        }
        out
    }

    fn none(_: &[u8], _: u32) -> bool {
        false
    }

    fn values_of(ev: &[u8]) -> Vec<Vec<u8>> {
        let What::Summary(s) = Event::decode(ev).unwrap().what else {
            panic!("not a summary")
        };
        summary_values(s).map(|v| v.unwrap().to_vec()).collect()
    }

    fn tmp(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tbscope-rewrite-{label}-{}-{}",
            std::process::id(),
            unique_suffix()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn untouched_records_are_kept_byte_for_byte() {
        let opts = RewriteOptions {
            drop_tags: Some(Regex::new("^other$").unwrap()),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let ev = event(1.5, 3, &summary(&[simple("loss", 0.5, None)]));
        assert_eq!(ed.decide(&ev, &none).unwrap(), Decision::Keep);
        assert_eq!(
            ed.decide(&file_version(1.0), &none).unwrap(),
            Decision::Keep
        );
    }

    #[test]
    fn dropping_some_values_reencodes_with_the_rest_as_raw_bytes() {
        let opts = RewriteOptions {
            drop_tags: Some(Regex::new("^b$").unwrap()),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let (a, b, c) = (
            simple("a", 1.0, None),
            simple("b", 2.0, None),
            tensor("c", 3.0, Some(&plugin_meta("scalars", ""))),
        );
        let mut ev = event(7.25, 1 << 40, &summary(&[a.clone(), b, c.clone()]));
        // An unknown Event field must survive the re-encoding.
        ev.extend_from_slice(&[0xf8, 0x01, 0x2a]);
        let Decision::Replace(out) = ed.decide(&ev, &none).unwrap() else {
            panic!("expected a re-encoded event")
        };
        assert_eq!(values_of(&out), vec![a, c]);
        let d = Event::decode(&out).unwrap();
        assert_eq!((d.wall_time, d.step), (7.25, 1 << 40));
        assert!(out.ends_with(&[0xf8, 0x01, 0x2a]));
        assert_eq!(ed.values_dropped, 1);
        // Every value dropped: the record goes.
        let only_b = event(1.0, 2, &summary(&[simple("b", 1.0, None)]));
        assert_eq!(ed.decide(&only_b, &none).unwrap(), Decision::Drop);
    }

    #[test]
    fn step_ranges_drop_data_records_only() {
        let opts = RewriteOptions {
            drop_steps: Some((Some(10), Some(20))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        for (step, want) in [
            (9, Decision::Keep),
            (10, Decision::Drop),
            (19, Decision::Drop),
            (20, Decision::Keep),
        ] {
            let ev = event(1.0, step, &summary(&[simple("x", 1.0, None)]));
            assert_eq!(ed.decide(&ev, &none).unwrap(), want, "step {step}");
        }
        // A SessionLog START at a dropped step stays: it is not a point of any series.
        let mut session = Vec::new();
        put_len_field(&mut session, 7, &[0x08, 0x01]);
        assert_eq!(
            ed.decide(&event(1.0, 15, &session), &none).unwrap(),
            Decision::Keep
        );
        // Graphs are series of their own tag, so the range applies to them.
        let mut graph = Vec::new();
        put_len_field(&mut graph, 4, b"graph bytes");
        assert_eq!(
            ed.decide(&event(1.0, 15, &graph), &none).unwrap(),
            Decision::Drop
        );
        assert_eq!(
            ed.decide(&event(1.0, 5, &graph), &none).unwrap(),
            Decision::Keep
        );
    }

    #[test]
    fn graph_records_follow_tag_filters() {
        let mut graph = Vec::new();
        put_len_field(&mut graph, 4, b"graph bytes");
        let ev = event(1.0, 0, &graph);
        let drop = RewriteOptions {
            drop_tags: Some(Regex::new("^__run_graph__$").unwrap()),
            ..Default::default()
        };
        assert_eq!(
            Editor::new(&drop).decide(&ev, &none).unwrap(),
            Decision::Drop
        );
        let keep_loss = RewriteOptions {
            tags: Some(Regex::new("^loss$").unwrap()),
            ..Default::default()
        };
        assert_eq!(
            Editor::new(&keep_loss).decide(&ev, &none).unwrap(),
            Decision::Drop
        );
        assert_eq!(
            Editor::new(&RewriteOptions::default())
                .decide(&ev, &none)
                .unwrap(),
            Decision::Keep
        );
    }

    #[test]
    fn first_metadata_moves_to_the_first_kept_value() {
        let opts = RewriteOptions {
            drop_steps: Some((None, Some(1))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let md = plugin_meta("scalars", "Loss");
        let first = event(1.0, 0, &summary(&[tensor("t", 1.0, Some(&md))]));
        assert_eq!(ed.decide(&first, &none).unwrap(), Decision::Drop);
        let bare = tensor("t", 2.0, None);
        let Decision::Replace(out) = ed
            .decide(&event(2.0, 1, &summary(std::slice::from_ref(&bare))), &none)
            .unwrap()
        else {
            panic!("expected the metadata to move")
        };
        let v = values_of(&out);
        let sv = SummaryValue::decode(&v[0]).unwrap();
        assert_eq!(sv.metadata, Some(md.as_slice()));
        assert_eq!(
            Metadata::decode(sv.metadata.unwrap()).unwrap().display_name,
            b"Loss"
        );
        assert_eq!(sv.value, SummaryValue::decode(&bare).unwrap().value);
        assert_eq!(ed.metadata_moved, 1);
        // Later values are left as they are.
        let later = event(3.0, 2, &summary(&[bare]));
        assert_eq!(ed.decide(&later, &none).unwrap(), Decision::Keep);
    }

    #[test]
    fn the_fast_path_hands_over_when_metadata_must_move() {
        // A one-simple_value record (the fast path's layout) that is the first kept value of a
        // tag whose first metadata was on a dropped value.
        let opts = RewriteOptions {
            drop_steps: Some((None, Some(1))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let md = plugin_meta("scalars", "Shown");
        let first = event(1.0, 0, &summary(&[simple("s", 1.0, Some(&md))]));
        assert_eq!(ed.decide(&first, &none).unwrap(), Decision::Drop);
        let bare = event(2.0, 1, &summary(&[simple("s", 2.0, None)]));
        assert!(crate::proto::simple_scalar(&bare).is_some());
        let Decision::Replace(out) = ed.decide(&bare, &none).unwrap() else {
            panic!("expected the metadata to move")
        };
        assert_eq!(values_of(&out), vec![simple("s", 2.0, Some(&md))]);
        assert_eq!(ed.decide(&bare, &none).unwrap(), Decision::Keep);
        // Superseded fast-path values are dropped.
        assert_eq!(ed.decide(&bare, &|_, _| true).unwrap(), Decision::Drop);
    }

    #[test]
    fn a_legacy_series_without_metadata_stays_without() {
        // The first (dropped) value decides with no display name; a later one carrying a
        // display name must not change the output's series.
        let opts = RewriteOptions {
            drop_steps: Some((None, Some(1))),
            ..Default::default()
        };
        let mut ed = Editor::new(&opts);
        let first = event(1.0, 0, &summary(&[simple("s", 1.0, None)]));
        assert_eq!(ed.decide(&first, &none).unwrap(), Decision::Drop);
        let with = simple("s", 2.0, Some(&plugin_meta("scalars", "Shown")));
        let Decision::Replace(out) = ed.decide(&event(2.0, 1, &summary(&[with])), &none).unwrap()
        else {
            panic!("expected the metadata to go")
        };
        assert_eq!(values_of(&out), vec![simple("s", 2.0, None)]);
    }

    #[test]
    fn superseded_values_are_dropped_by_tag_and_position() {
        let opts = RewriteOptions::default();
        let mut ed = Editor::new(&opts);
        let ev = event(
            1.0,
            5,
            &summary(&[
                simple("a", 1.0, None),
                simple("a", 2.0, None),
                simple("b", 3.0, None),
            ]),
        );
        let second_a = |tag: &[u8], k: u32| tag == b"a" && k == 1;
        let Decision::Replace(out) = ed.decide(&ev, &second_a).unwrap() else {
            panic!("expected a re-encoded event")
        };
        assert_eq!(
            values_of(&out),
            vec![simple("a", 1.0, None), simple("b", 3.0, None)]
        );
    }

    #[test]
    fn invalid_events_are_errors() {
        let opts = RewriteOptions::default();
        let mut ed = Editor::new(&opts);
        assert!(ed.decide(&[0x0b], &none).is_err());
        // A summary whose value does not decode makes the whole record invalid, as for the
        // reader.
        let mut bad = Vec::new();
        put_len_field(&mut bad, 5, &[0x0a, 0x02, 0x0b, 0x00]);
        assert!(ed.decide(&event(1.0, 0, &bad), &none).is_err());
    }

    #[test]
    fn corrupt_and_truncated_bytes_are_reported_and_not_copied() {
        let src = tmp("corrupt-src");
        let run = src.join("run");
        std::fs::create_dir_all(&run).unwrap();
        let good: Vec<Vec<u8>> = (0..5)
            .map(|i| {
                event(
                    f64::from(i),
                    i64::from(i),
                    &summary(&[simple("x", i as f32, None)]),
                )
            })
            .collect();
        let mut bytes = frame_all(&[file_version(0.5)]);
        bytes.extend(frame_all(&good[..2]));
        let bad_at = bytes.len();
        let mut damaged = frame_all(&good[2..3]);
        damaged[HEADER_LEN + 3] ^= 0x40; // data CRC no longer holds
        bytes.extend(&damaged);
        bytes.extend(b"garbage between records");
        bytes.extend(frame_all(&good[3..]));
        let tail = frame_all(&[good[0].clone()]);
        bytes.extend(&tail[..tail.len() - 3]);
        std::fs::write(run.join("events.out.tfevents.1.h"), &bytes).unwrap();

        let dst = tmp("corrupt-dst").join("out");
        let cancel = AtomicBool::new(false);
        let stats = rewrite(&src, &dst, &RewriteOptions::default(), false, &cancel).unwrap();
        assert_eq!(stats.files_out.len(), 1);
        assert!(stats.files_out[0].starts_with("run/events.out.tfevents."));
        assert!(stats.files_out[0].ends_with(".tbscope-rewrite.0"));
        let written = std::fs::read(dst.join(&stats.files_out[0])).unwrap();
        let mut want = frame_all(&[file_version(0.5)]);
        want.extend(frame_all(&good[..2]));
        want.extend(frame_all(&good[3..]));
        assert_eq!(written, want);
        let kinds: Vec<_> = stats
            .problems
            .iter()
            .map(|p| (p.severity, p.offset))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Severity::Corrupt, bad_at as u64),
                (Severity::Truncated, (bytes.len() - (tail.len() - 3)) as u64)
            ]
        );
        assert_eq!((stats.records_in, stats.records_out), (5, 5));
        assert_eq!(
            stats.bytes_skipped,
            (damaged.len() + b"garbage between records".len() + tail.len() - 3) as u64
        );
        std::fs::remove_dir_all(&src).unwrap();
        std::fs::remove_dir_all(dst.parent().unwrap()).unwrap();
    }

    #[test]
    fn merging_concatenates_files_in_name_order_and_preempt_matches_the_reader() {
        let src = tmp("merge-src");
        let run = src.join("r");
        std::fs::create_dir_all(&run).unwrap();
        // A restart: steps 0..6, then again from 3 (the first file's 3..6 are superseded), in
        // two files; tag b only in the first.
        let first: Vec<Vec<u8>> = (0..6)
            .map(|s| {
                event(
                    f64::from(s),
                    i64::from(s),
                    &summary(&[simple("a", s as f32, None), simple("b", 1.0, None)]),
                )
            })
            .collect();
        let second: Vec<Vec<u8>> = (3..8)
            .map(|s| {
                event(
                    100.0 + f64::from(s),
                    i64::from(s),
                    &summary(&[simple("a", 100.0 + s as f32, None)]),
                )
            })
            .collect();
        let f1 = frame_all(&[vec![file_version(0.0)], first].concat());
        let f2 = frame_all(&[vec![file_version(99.0)], second].concat());
        std::fs::write(run.join("events.out.tfevents.1.h"), &f1).unwrap();
        std::fs::write(run.join("events.out.tfevents.2.h"), &f2).unwrap();
        let cancel = AtomicBool::new(false);

        let plain = tmp("merge-dst").join("plain");
        let stats = rewrite(&src, &plain, &RewriteOptions::default(), false, &cancel).unwrap();
        assert_eq!(stats.files_out.len(), 1);
        assert_eq!(
            std::fs::read(plain.join(&stats.files_out[0])).unwrap(),
            [f1.clone(), f2.clone()].concat()
        );
        assert_eq!(
            (stats.records_in, stats.records_out, stats.records_rewritten),
            (13, 13, 0)
        );

        let opts = RewriteOptions {
            preempt: true,
            ..Default::default()
        };
        let trimmed = plain.with_file_name("trimmed");
        let stats = rewrite(&src, &trimmed, &opts, false, &cancel).unwrap();
        // Records at steps 3..6 of the first file lose a (re-encoded), b stays.
        assert_eq!(stats.records_rewritten, 3);
        assert_eq!(stats.values_dropped, 3);
        let read = |root: &Path, restarts: Restarts| {
            let mut r = crate::load::Reader::new(
                root,
                ReaderOptions {
                    restarts,
                    threads: 1,
                    ..Default::default()
                },
            )
            .unwrap();
            r.load(&cancel).unwrap();
            let mut rows = Vec::new();
            for b in r.table(Kind::Scalars).unwrap() {
                let tag = b.column(1).as_dictionary::<Int32Type>();
                let names = tag.values().as_string::<i32>();
                let steps = b.column(2).as_primitive::<Int64Type>();
                let values = b
                    .column(b.schema().index_of("value").unwrap())
                    .as_primitive::<arrow_array::types::Float64Type>();
                for i in 0..b.num_rows() {
                    rows.push((
                        names.value(tag.keys().value(i) as usize).to_string(),
                        steps.value(i),
                        values.value(i),
                    ));
                }
            }
            rows
        };
        let want = read(&src, Restarts::Preempt);
        assert_eq!(read(&trimmed, Restarts::All), want);
        assert_eq!(want.iter().filter(|r| r.0 == "a").count(), 8);

        // One output file per input file, under the input's name.
        let split = plain.with_file_name("split");
        let opts = RewriteOptions {
            merge: false,
            ..Default::default()
        };
        let stats = rewrite(&src, &split, &opts, false, &cancel).unwrap();
        assert_eq!(
            stats.files_out,
            vec!["r/events.out.tfevents.1.h", "r/events.out.tfevents.2.h"]
        );
        assert_eq!(
            std::fs::read(split.join("r/events.out.tfevents.2.h")).unwrap(),
            f2
        );
        std::fs::remove_dir_all(&src).unwrap();
        std::fs::remove_dir_all(plain.parent().unwrap()).unwrap();
    }

    #[test]
    fn unsafe_outputs_are_refused_and_force_replaces() {
        let base = tmp("paths");
        let src = base.join("in");
        std::fs::create_dir_all(src.join("run")).unwrap();
        std::fs::write(
            src.join("run/events.out.tfevents.1.h"),
            frame_all(&[file_version(1.0)]),
        )
        .unwrap();
        let cancel = AtomicBool::new(false);
        let opts = RewriteOptions::default();
        for bad in [
            src.clone(),
            src.join("run"),
            src.join("new/deeper"),
            base.clone(),
        ] {
            let e = rewrite(&src, &bad, &opts, true, &cancel).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
        }
        let dst = base.join("out");
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(dst.join("keep.txt"), b"x").unwrap();
        let e = rewrite(&src, &dst, &opts, false, &cancel).unwrap_err();
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists),
            "{e}"
        );
        // force replaces logdirs only.
        let e = rewrite(&src, &dst, &opts, true, &cancel).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("keep.txt")),
            "{e}"
        );
        assert!(dst.join("keep.txt").exists());
        std::fs::remove_file(dst.join("keep.txt")).unwrap();
        std::fs::create_dir_all(dst.join("old/run")).unwrap();
        std::fs::write(dst.join("old/run/events.out.tfevents.0.h"), b"").unwrap();
        rewrite(&src, &dst, &opts, true, &cancel).unwrap();
        assert!(!dst.join("old").exists());
        assert!(dst.join("run").is_dir());
        // Nothing left next to it: no staging or old directory.
        let names: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // An empty existing directory is fine without force.
        let empty = base.join("empty");
        std::fs::create_dir(&empty).unwrap();
        rewrite(&src, &empty, &opts, false, &cancel).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_no_output() {
        let base = tmp("fail");
        let src = base.join("in");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("events.out.tfevents.1.h"),
            frame_all(&[file_version(1.0)]),
        )
        .unwrap();
        let cancel = AtomicBool::new(true);
        // Cancelled before the first record check: nothing under the name, no staging left.
        let many: Vec<Vec<u8>> = (0..5000).map(|i| file_version(f64::from(i))).collect();
        std::fs::write(src.join("events.out.tfevents.1.h"), frame_all(&many)).unwrap();
        let e = rewrite(
            &src,
            &base.join("out"),
            &RewriteOptions::default(),
            false,
            &cancel,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Interrupted));
        let names: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("in")]);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
