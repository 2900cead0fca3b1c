//! Whole records without the tables, for callers that decode records themselves (the Python
//! compat layer): their payloads, or the little TensorBoard's accumulators read from each.

use std::fs::File;
use std::path::Path;

use super::model::lossy;
use crate::proto::{Event, SessionLog, What};
use crate::tf_record::{payload, End, Step, WalkOptions, Walker};

/// Payloads of whole records of one file (both CRCs good), with their offsets, read with the
/// reader's framing: for callers that decode records themselves (the Python compat layer).
/// With `offsets`, the records starting there, in that order (an error if one does not: the
/// file changed since the offset was read); otherwise every record of the file, or only those
/// whose payload contains `containing`. Whether the file may still be written is decided as a
/// load decides it, with its directory as its run ([`crate::load::file_may_grow`]).
pub fn raw_records(
    path: &Path,
    offsets: Option<&[u64]>,
    containing: Option<&[u8]>,
    max_len: u64,
) -> std::io::Result<Vec<(u64, Vec<u8>)>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let Some(offsets) = offsets else {
        let mut w = whole_file(&file, path, size, max_len, buf);
        loop {
            match w.next() {
                Step::Record { offset, framed } => {
                    let data = payload(framed);
                    if containing.is_none_or(|c| c.is_empty() || contains(data, c)) {
                        out.push((offset, data.to_vec()));
                    }
                }
                Step::ReadError { error, .. } => return Err(error),
                Step::End => return Ok(out),
                Step::Damage { .. } | Step::Tail { .. } => {}
            }
        }
    };
    // One record each: small reads (a record longer than that grows the buffer).
    let opts = WalkOptions {
        max_len,
        verify: true,
        min_read: 4096,
    };
    for &at in offsets {
        let mut w = Walker::new(&file, at, size, End::Final, opts, buf);
        match w.next() {
            Step::Record { offset, framed } if offset == at => {
                out.push((offset, payload(framed).to_vec()));
            }
            Step::ReadError { error, .. } => return Err(error),
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("no whole record at offset {at}; the file changed since it was read"),
                ))
            }
        }
        buf = w.into_buf();
    }
    Ok(out)
}

/// One whole record of an event file as TensorBoard's accumulators see it: where it starts, its
/// step and wall time, which `Event.what` field it carries and the little they read from it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordHead {
    pub offset: u64,
    pub step: i64,
    pub wall_time: f64,
    /// The `Event` field number of `what` (3 file_version, 4 graph_def, 5 summary, 6
    /// log_message, 7 session_log, 8 tagged_run_metadata, 9 meta_graph_def), 0 for none.
    pub what: u8,
    /// `SessionLog.status` of a session_log event (1 = START), else 0.
    pub status: i32,
    /// `file_version` of a file_version event.
    pub file_version: Option<String>,
    /// `source_metadata.writer`, when the event has source metadata.
    pub writer: Option<String>,
}

/// The head of every whole, decodable record of one file, in file order, read with the
/// reader's framing (both CRCs checked; damage is skipped as the reader skips it). For the
/// Python compat layer, which replays TensorBoard's accumulators (purges, most recent step,
/// source writer) over these without decoding the records in Python.
pub fn record_heads(path: &Path, max_len: u64) -> std::io::Result<Vec<RecordHead>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut w = whole_file(&file, path, size, max_len, Vec::new());
    let mut out = Vec::new();
    loop {
        match w.next() {
            Step::Record { offset, framed } => {
                let Ok(ev) = Event::decode(payload(framed)) else {
                    continue;
                };
                let mut head = RecordHead {
                    offset,
                    step: ev.step,
                    wall_time: ev.wall_time,
                    writer: ev.source_metadata.map(|m| {
                        let writer = crate::proto::Fields::new(m).find_map(|f| match f {
                            Ok((1, crate::proto::Wire::Bytes(b))) => Some(b),
                            _ => None,
                        });
                        lossy(writer.unwrap_or_default())
                    }),
                    ..RecordHead::default()
                };
                match ev.what {
                    What::Nothing => {}
                    What::FileVersion(v) => {
                        head.what = 3;
                        head.file_version = Some(lossy(v));
                    }
                    What::GraphDef(_) => head.what = 4,
                    What::Summary(_) => head.what = 5,
                    What::LogMessage(_) => head.what = 6,
                    What::SessionLog(b) => {
                        head.what = 7;
                        head.status = SessionLog::decode(b).map(|s| s.status).unwrap_or(0);
                    }
                    What::TaggedRunMetadata(_) => head.what = 8,
                    What::MetaGraphDef(_) => head.what = 9,
                }
                out.push(head);
            }
            Step::ReadError { error, .. } => return Err(error),
            Step::End => return Ok(out),
            Step::Damage { .. } | Step::Tail { .. } => {}
        }
    }
}

/// Whether `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let first = needle[0];
    hay.iter().enumerate().any(|(i, &b)| {
        b == first && hay.len() - i >= needle.len() && &hay[i..i + needle.len()] == needle
    })
}

/// A walk over the whole of `file` (`size` bytes), its tail judged as a load judges it: with
/// its directory as its run ([`crate::load::file_may_grow`]).
fn whole_file<'f>(
    file: &'f File,
    path: &Path,
    size: u64,
    max_len: u64,
    buf: Vec<u8>,
) -> Walker<'f, File> {
    let end = if crate::load::file_may_grow(path) {
        End::Live
    } else {
        End::Final
    };
    let opts = WalkOptions {
        max_len,
        ..WalkOptions::default()
    };
    Walker::new(file, 0, size, end, opts, buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `record_heads`: each whole record's offset, step, wall time, `Event.what` field,
    /// SessionLog status, file version and source writer, in file order; bytes that are not a
    /// record are skipped as the reader skips them.
    #[test]
    fn record_heads_reports_each_record() {
        fn len_field(out: &mut Vec<u8>, number: u8, body: &[u8]) {
            out.push((number << 3) | 2);
            let mut n = body.len();
            while n >= 0x80 {
                out.push((n as u8 & 0x7f) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
            out.extend_from_slice(body);
        }
        fn event(wall: f64, step: u8) -> Vec<u8> {
            let mut e = vec![0x09];
            e.extend_from_slice(&wall.to_le_bytes());
            e.extend_from_slice(&[0x10, step]);
            e
        }
        let mut version = event(1.5, 0);
        len_field(&mut version, 3, b"brain.Event:1");
        let mut start = event(2.5, 3);
        len_field(&mut start, 7, &[0x08, 0x01]); // SessionLog { status: START }
        let mut writer = Vec::new();
        len_field(&mut writer, 1, b"w1");
        len_field(&mut start, 10, &writer); // source_metadata
        let mut summary = event(3.5, 4);
        len_field(&mut summary, 5, b"");
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        for (i, e) in [&version, &start, &summary].into_iter().enumerate() {
            if i == 2 {
                data.extend_from_slice(b"not a record at all");
            }
            offsets.push(data.len() as u64);
            crate::tf_record::write_record(&mut data, e);
        }
        let path = std::env::temp_dir().join(format!(
            "tbscope-record-heads-{}.tfevents",
            std::process::id()
        ));
        std::fs::write(&path, &data).unwrap();
        let heads = record_heads(&path, 1 << 20).unwrap();
        std::fs::remove_file(&path).unwrap();
        let got: Vec<_> = heads
            .iter()
            .map(|h| {
                (
                    h.offset,
                    h.step,
                    h.wall_time,
                    h.what,
                    h.status,
                    h.file_version.clone(),
                    h.writer.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    offsets[0],
                    0,
                    1.5,
                    3,
                    0,
                    Some("brain.Event:1".to_string()),
                    None
                ),
                (offsets[1], 3, 2.5, 7, 1, None, Some("w1".to_string())),
                (offsets[2], 4, 3.5, 5, 0, None, None),
            ]
        );
    }
}
