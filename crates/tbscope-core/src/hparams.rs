//! The hparams plugin: session start/end records into one row per run.
//!
//! The data lives in `SummaryMetadata.plugin_data.content` as an `HParamsPluginData`
//! (`tensorboard/plugins/hparams/plugin_data.proto`), not in the tensor. Values are
//! `google.protobuf.Value`s: numbers, strings or bools.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use crate::proto::{Fields, Result, Wire};

/// One hyperparameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum HValue {
    Number(f64),
    Text(String),
    Bool(bool),
}

/// What the hparams records of one run say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    pub hparams: BTreeMap<String, HValue>,
    pub group_name: Option<String>,
    pub start_time: Option<f64>,
    pub status: Option<i32>,
    pub end_time: Option<f64>,
    /// Metric tags an `_hparams_/experiment` record declares (`group/tag`, or `tag`).
    pub metrics: Vec<String>,
}

fn value(buf: &[u8]) -> Result<Option<HValue>> {
    let mut out = None;
    for f in Fields::new(buf) {
        match f? {
            (2, Wire::Fixed64(v)) => out = Some(HValue::Number(f64::from_bits(v))),
            (3, Wire::Bytes(b)) => {
                out = Some(HValue::Text(String::from_utf8_lossy(b).into_owned()))
            }
            (4, Wire::Varint(v)) => out = Some(HValue::Bool(v != 0)),
            _ => {}
        }
    }
    Ok(out)
}

/// Folds one record's plugin content into `s`. Later records win for the same field.
pub fn apply(content: &[u8], s: &mut Session) -> Result<()> {
    for f in Fields::new(content) {
        match f? {
            (3, Wire::Bytes(start)) => {
                for g in Fields::new(start) {
                    match g? {
                        (1, Wire::Bytes(entry)) => {
                            let (mut key, mut val) = (String::new(), None);
                            for h in Fields::new(entry) {
                                match h? {
                                    (1, Wire::Bytes(k)) => {
                                        key = String::from_utf8_lossy(k).into_owned()
                                    }
                                    (2, Wire::Bytes(v)) => val = value(v)?,
                                    _ => {}
                                }
                            }
                            if let Some(v) = val {
                                s.hparams.insert(key, v);
                            }
                        }
                        (4, Wire::Bytes(g)) => {
                            s.group_name = Some(String::from_utf8_lossy(g).into_owned())
                        }
                        (5, Wire::Fixed64(t)) => s.start_time = Some(f64::from_bits(t)),
                        _ => {}
                    }
                }
            }
            (4, Wire::Bytes(end)) => {
                for g in Fields::new(end) {
                    match g? {
                        (1, Wire::Varint(v)) => s.status = Some(v as i32),
                        (2, Wire::Fixed64(t)) => s.end_time = Some(f64::from_bits(t)),
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(exp)) => {
                for g in Fields::new(exp) {
                    if let (5, Wire::Bytes(mi)) = g? {
                        for h in Fields::new(mi) {
                            if let (1, Wire::Bytes(name)) = h? {
                                let (mut group, mut tag) = (String::new(), String::new());
                                for k in Fields::new(name) {
                                    match k? {
                                        (1, Wire::Bytes(b)) => {
                                            group = String::from_utf8_lossy(b).into_owned()
                                        }
                                        (2, Wire::Bytes(b)) => {
                                            tag = String::from_utf8_lossy(b).into_owned()
                                        }
                                        _ => {}
                                    }
                                }
                                s.metrics.push(if group.is_empty() {
                                    tag
                                } else {
                                    format!("{group}/{tag}")
                                });
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

const STATUS: [&str; 4] = ["unknown", "success", "failure", "running"];

/// One row per run with hparams: run, session columns, then one typed column per key
/// (float64 if every value is a number, bool if every value is a bool, else string).
pub fn table(sessions: &[(String, Session)]) -> RecordBatch {
    let mut keys: BTreeMap<&str, Vec<&HValue>> = BTreeMap::new();
    for (_, s) in sessions {
        for (k, v) in &s.hparams {
            keys.entry(k).or_default().push(v);
        }
    }
    let mut fields = vec![Field::new("run", DataType::Utf8, false)];
    let mut cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(
        sessions.iter().map(|(r, _)| r),
    ))];
    let mut add = |name: &str, a: ArrayRef| {
        fields.push(Field::new(name, a.data_type().clone(), true));
        cols.push(a);
    };
    add(
        "group_name",
        Arc::new(StringArray::from_iter(
            sessions.iter().map(|(_, s)| s.group_name.clone()),
        )),
    );
    add(
        "start_time",
        Arc::new(Float64Array::from_iter(
            sessions.iter().map(|(_, s)| s.start_time),
        )),
    );
    add(
        "end_time",
        Arc::new(Float64Array::from_iter(
            sessions.iter().map(|(_, s)| s.end_time),
        )),
    );
    add(
        "status",
        Arc::new(StringArray::from_iter(sessions.iter().map(|(_, s)| {
            s.status
                .map(|v| STATUS.get(v as usize).copied().unwrap_or("unknown"))
        }))),
    );
    for (key, vals) in keys {
        let col = format!("hparam:{key}");
        fn get<'s>(s: &'s Session, key: &str) -> Option<&'s HValue> {
            s.hparams.get(key)
        }
        if vals.iter().all(|v| matches!(v, HValue::Number(_))) {
            add(
                &col,
                Arc::new(Float64Array::from_iter(sessions.iter().map(
                    |(_, s)| match get(s, key) {
                        Some(HValue::Number(x)) => Some(*x),
                        _ => None,
                    },
                ))),
            );
        } else if vals.iter().all(|v| matches!(v, HValue::Bool(_))) {
            add(
                &col,
                Arc::new(BooleanArray::from_iter(sessions.iter().map(
                    |(_, s)| match get(s, key) {
                        Some(HValue::Bool(b)) => Some(*b),
                        _ => None,
                    },
                ))),
            );
        } else {
            // Mixed types become strings, as TensorBoard's hparams plugin does.
            add(
                &col,
                Arc::new(StringArray::from_iter(sessions.iter().map(|(_, s)| {
                    get(s, key).map(|v| match v {
                        HValue::Number(x) => format!("{x}"),
                        HValue::Text(t) => t.clone(),
                        HValue::Bool(b) => b.to_string(),
                    })
                }))),
            );
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("columns match their schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(field: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![(field << 3) | 2, body.len() as u8];
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn decodes_session_start_and_end() {
        let mut num = vec![0x11];
        num.extend_from_slice(&0.5f64.to_le_bytes());
        let entry_lr = [msg(1, b"lr"), msg(2, &num)].concat();
        let entry_opt = [msg(1, b"opt"), msg(2, &msg(3, b"adam"))].concat();
        let start = [msg(1, &entry_lr), msg(1, &entry_opt), msg(4, b"g1")].concat();
        let content = [vec![0x08, 0x00], msg(3, &start)].concat();
        let mut s = Session::default();
        apply(&content, &mut s).unwrap();
        apply(&msg(4, &[0x08, 0x01]), &mut s).unwrap();
        assert_eq!(s.hparams["lr"], HValue::Number(0.5));
        assert_eq!(s.hparams["opt"], HValue::Text("adam".into()));
        assert_eq!(s.group_name.as_deref(), Some("g1"));
        assert_eq!(s.status, Some(1));
        let t = table(&[("a".into(), s.clone()), ("b".into(), Session::default())]);
        assert_eq!(t.num_rows(), 2);
        assert_eq!(
            t.schema().field_with_name("hparam:lr").unwrap().data_type(),
            &DataType::Float64
        );
    }
}
