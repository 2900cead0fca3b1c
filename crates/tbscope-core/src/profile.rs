//! Profiles: Chrome trace files (torch.profiler's `*.pt.trace.json`, the `<host>.trace.json.gz`
//! of TensorBoard's profile plugin) into one Arrow table of events.
//!
//! The Chrome trace format is JSON: an object whose `traceEvents` is a list of events, or the
//! bare list. Each event has a phase `ph`: `X` is a complete event (`ts` and `dur`, in
//! microseconds), `B`/`E` open and close one on a thread's stack, `M` is metadata (process and
//! thread names), and the rest (`i` instants, `C` counters, `s`/`t`/`f` flows, ...) are points
//! in time. Metadata becomes the `process` and `thread` names; `B`/`E` pairs become one row
//! like an `X`; everything else is a row of its own, without a duration.
//!
//! Each row with a duration also gets its *self* duration: its duration less the time its
//! direct children on the same thread take, which is what a profiler's "self time" means.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float64Array, LargeStringArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, Result};

/// A process or thread id: JSON numbers (torch, TensorFlow) or strings (some torch tracks).
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
enum Id {
    Int(i64),
    Float(f64),
    Str(String),
}

impl Id {
    fn text(&self) -> String {
        match self {
            Id::Int(i) => i.to_string(),
            Id::Float(f) => f.to_string(),
            Id::Str(s) => s.clone(),
        }
    }
    fn number(&self) -> Option<f64> {
        match self {
            Id::Int(i) => Some(*i as f64),
            Id::Float(f) => Some(*f),
            Id::Str(s) => s.trim().parse().ok(),
        }
    }
}

#[derive(Deserialize, Debug)]
struct RawEvent<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    cat: Option<String>,
    #[serde(default)]
    ph: Option<String>,
    #[serde(default)]
    ts: Option<Id>,
    #[serde(default)]
    dur: Option<Id>,
    #[serde(default)]
    pid: Option<Id>,
    #[serde(default)]
    tid: Option<Id>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct TraceObject<'a> {
    #[serde(rename = "traceEvents", default, borrow)]
    trace_events: Vec<RawEvent<'a>>,
}

#[derive(Deserialize)]
struct NameArgs {
    #[serde(default)]
    name: Option<String>,
}

/// Reads a Chrome trace file (gzip-compressed when its name ends in `.gz` or its bytes start
/// with gzip's magic number) into the events table of [`parse_trace`].
pub fn read_trace(path: &Path) -> Result<RecordBatch> {
    let raw = std::fs::read(path).map_err(|e| Error::io(e, path))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 8);
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| bad(path, &format!("not a readable gzip file ({e})")))?;
        out
    } else {
        raw
    };
    parse_trace(&bytes).map_err(|m| bad(path, &m))
}

fn bad(path: &Path, msg: &str) -> Error {
    Error::InvalidArgument(format!(
        "{}: not a Chrome trace ({msg}); tbscope opens Chrome trace JSON (torch.profiler's *.pt.trace.json, the profile plugin's *.trace.json.gz)",
        path.display()
    ))
}

/// One row of the output before it becomes columns.
struct Row<'a> {
    name: String,
    cat: String,
    ph: String,
    start: f64,
    dur: Option<f64>,
    pid: String,
    tid: String,
    args: Option<&'a RawValue>,
}

/// Parses a Chrome trace: columns `name`, `category`, `phase` (dictionary strings), `start`
/// and `duration` (float64 microseconds, as in the trace; `duration` null for events without
/// one), `self_duration` (float64, see the module's docs), `process` and `thread` (names from
/// the trace's metadata, else the ids), `pid` and `tid` (the ids as text) and `args` (the
/// event's `args` as JSON text, null when absent). Rows keep the trace's order, except that a
/// `B`/`E` pair becomes one row where the `E` was.
pub fn parse_trace(bytes: &[u8]) -> std::result::Result<RecordBatch, String> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    let events: Vec<RawEvent<'_>> = match first {
        Some(b'[') => serde_json::from_slice(bytes).map_err(|e| e.to_string())?,
        Some(b'{') => {
            serde_json::from_slice::<TraceObject<'_>>(bytes)
                .map_err(|e| e.to_string())?
                .trace_events
        }
        _ => return Err("it does not start with a JSON object or list".into()),
    };
    let mut process_names: HashMap<String, String> = HashMap::new();
    let mut thread_names: HashMap<(String, String), String> = HashMap::new();
    let mut open: HashMap<(String, String), Vec<Row<'_>>> = HashMap::new();
    let mut rows: Vec<Row<'_>> = Vec::with_capacity(events.len());
    for ev in events {
        let ph = ev.ph.unwrap_or_default();
        let pid = ev.pid.as_ref().map(Id::text).unwrap_or_default();
        let tid = ev.tid.as_ref().map(Id::text).unwrap_or_default();
        let name = ev.name.unwrap_or_default();
        if ph == "M" {
            let label = ev
                .args
                .and_then(|a| serde_json::from_str::<NameArgs>(a.get()).ok())
                .and_then(|a| a.name);
            match (name.as_str(), label) {
                ("process_name", Some(l)) => {
                    process_names.insert(pid, l);
                }
                ("thread_name", Some(l)) => {
                    thread_names.insert((pid, tid), l);
                }
                _ => {}
            }
            continue;
        }
        let start = ev.ts.as_ref().and_then(Id::number).unwrap_or(f64::NAN);
        let row = Row {
            name,
            cat: ev.cat.unwrap_or_default(),
            ph: ph.clone(),
            start,
            dur: None,
            pid,
            tid,
            args: ev.args,
        };
        match ph.as_str() {
            "X" => rows.push(Row {
                dur: Some(ev.dur.as_ref().and_then(Id::number).unwrap_or(0.0)),
                ..row
            }),
            "B" => open
                .entry((row.pid.clone(), row.tid.clone()))
                .or_default()
                .push(row),
            "E" => match open
                .get_mut(&(row.pid.clone(), row.tid.clone()))
                .and_then(Vec::pop)
            {
                Some(b) => rows.push(Row {
                    dur: Some(row.start - b.start),
                    ph: "X".into(),
                    ..b
                }),
                // An end without a beginning (the trace started mid-event): a point in time.
                None => rows.push(row),
            },
            _ => rows.push(row),
        }
    }
    // Events still open when the trace ended: kept, without a duration.
    let mut rest: Vec<_> = open.into_values().flatten().collect();
    rest.sort_by(|a, b| a.start.total_cmp(&b.start));
    rows.extend(rest);
    let self_dur = self_durations(&rows);
    Ok(to_batch(rows, self_dur, &process_names, &thread_names))
}

/// Each row's duration less the parts of it its direct children on the same thread cover.
fn self_durations(rows: &[Row<'_>]) -> Vec<Option<f64>> {
    let mut out: Vec<Option<f64>> = rows.iter().map(|r| r.dur).collect();
    let mut by_thread: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.dur.is_some() && r.start.is_finite() {
            by_thread
                .entry((r.pid.as_str(), r.tid.as_str()))
                .or_default()
                .push(i);
        }
    }
    for mut idx in by_thread.into_values() {
        // Parents first: earlier start, then the longer one.
        idx.sort_by(|&a, &b| {
            let (ra, rb) = (&rows[a], &rows[b]);
            ra.start
                .total_cmp(&rb.start)
                .then(rb.dur.unwrap_or(0.0).total_cmp(&ra.dur.unwrap_or(0.0)))
        });
        let mut stack: Vec<(usize, f64)> = Vec::new();
        for i in idx {
            let (start, dur) = (rows[i].start, rows[i].dur.unwrap_or(0.0));
            while stack.last().is_some_and(|&(_, end)| end <= start) {
                stack.pop();
            }
            if let Some(&(parent, end)) = stack.last() {
                let covered = (start + dur).min(end) - start;
                if let Some(s) = out[parent].as_mut() {
                    *s -= covered;
                }
            }
            stack.push((i, start + dur));
        }
    }
    out
}

fn dict<S: AsRef<str>>(values: impl Iterator<Item = S>) -> ArrayRef {
    let values: Vec<S> = values.collect();
    Arc::new(
        values
            .iter()
            .map(AsRef::as_ref)
            .collect::<DictionaryArray<Int32Type>>(),
    )
}

fn to_batch(
    rows: Vec<Row<'_>>,
    self_dur: Vec<Option<f64>>,
    process_names: &HashMap<String, String>,
    thread_names: &HashMap<(String, String), String>,
) -> RecordBatch {
    let process = |r: &Row<'_>| {
        process_names
            .get(&r.pid)
            .cloned()
            .unwrap_or_else(|| r.pid.clone())
    };
    let thread = |r: &Row<'_>| {
        thread_names
            .get(&(r.pid.clone(), r.tid.clone()))
            .cloned()
            .unwrap_or_else(|| r.tid.clone())
    };
    let d = || DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let fields = vec![
        Field::new("name", d(), false),
        Field::new("category", d(), false),
        Field::new("phase", d(), false),
        Field::new("start", DataType::Float64, true),
        Field::new("duration", DataType::Float64, true),
        Field::new("self_duration", DataType::Float64, true),
        Field::new("process", d(), false),
        Field::new("thread", d(), false),
        Field::new("pid", d(), false),
        Field::new("tid", d(), false),
        Field::new("args", DataType::LargeUtf8, true),
    ];
    let cols: Vec<ArrayRef> = vec![
        dict(rows.iter().map(|r| r.name.as_str())),
        dict(rows.iter().map(|r| r.cat.as_str())),
        dict(rows.iter().map(|r| r.ph.as_str())),
        Arc::new(Float64Array::from_iter(
            rows.iter().map(|r| r.start.is_finite().then_some(r.start)),
        )),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.dur))),
        Arc::new(Float64Array::from(self_dur)),
        dict(rows.iter().map(process)),
        dict(rows.iter().map(thread)),
        dict(rows.iter().map(|r| r.pid.as_str())),
        dict(rows.iter().map(|r| r.tid.as_str())),
        Arc::new(LargeStringArray::from_iter(
            rows.iter().map(|r| r.args.map(RawValue::get)),
        )),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("columns match their schema")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float64Type;
    use arrow_array::Array;

    fn strings(b: &RecordBatch, col: &str) -> Vec<String> {
        let d = b.column_by_name(col).unwrap().as_dictionary::<Int32Type>();
        let values = d.values().as_string::<i32>();
        d.keys()
            .iter()
            .map(|k| values.value(k.unwrap() as usize).to_string())
            .collect()
    }

    #[test]
    fn complete_begin_end_metadata_and_self_time() {
        let trace = br#"{"traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "main"}},
            {"ph": "X", "name": "step", "cat": "cpu_op", "ts": 100, "dur": 50, "pid": 1, "tid": 7, "args": {"k": [1, 2]}},
            {"ph": "X", "name": "mm", "cat": "cpu_op", "ts": 110, "dur": 20, "pid": 1, "tid": 7},
            {"ph": "X", "name": "add", "cat": "cpu_op", "ts": 115, "dur": 5, "pid": 1, "tid": 7},
            {"ph": "B", "name": "io", "ts": 200, "pid": 1, "tid": "t2"},
            {"ph": "E", "ts": 230.5, "pid": 1, "tid": "t2"},
            {"ph": "i", "name": "mark", "ts": 140, "pid": 1, "tid": 7}
        ], "displayTimeUnit": "ms"}"#;
        let b = parse_trace(trace).unwrap();
        assert_eq!(strings(&b, "name"), ["step", "mm", "add", "io", "mark"]);
        assert_eq!(strings(&b, "phase"), ["X", "X", "X", "X", "i"]);
        assert_eq!(strings(&b, "process"), ["python"; 5]);
        assert_eq!(
            strings(&b, "thread"),
            ["main", "main", "main", "t2", "main"]
        );
        let col = |n: &str| -> Vec<Option<f64>> {
            b.column_by_name(n)
                .unwrap()
                .as_primitive::<Float64Type>()
                .iter()
                .collect()
        };
        assert_eq!(
            col("duration"),
            [Some(50.0), Some(20.0), Some(5.0), Some(30.5), None]
        );
        // step: 50 less mm's 20; mm: 20 less add's 5; add and io have no children.
        assert_eq!(
            col("self_duration"),
            [Some(30.0), Some(15.0), Some(5.0), Some(30.5), None]
        );
        let args = b.column_by_name("args").unwrap().as_string::<i64>();
        assert_eq!(args.value(0), r#"{"k": [1, 2]}"#);
        assert!(args.is_null(1));
    }

    #[test]
    fn bare_lists_and_bad_input() {
        let b =
            parse_trace(br#"[{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": "p", "tid": 3}]"#)
                .unwrap();
        assert_eq!(b.num_rows(), 1);
        assert_eq!(strings(&b, "pid"), ["p"]);
        assert!(parse_trace(b"not json").is_err());
        assert!(parse_trace(br#"{"traceEvents": [{"ph": 3}]}"#).is_err());
        assert_eq!(parse_trace(b"{}").unwrap().num_rows(), 0);
    }
}
