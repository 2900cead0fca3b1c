//! What `tbscope ls` and `summary` show, computed natively: per run its facts (the runs table,
//! how many series it has and their step range, its newest file mtime), per scalar series its
//! statistics (first, last, min, max, mean, count, argmin, argmax).
//!
//! A reader computes them from its state and rows; the cache stores both for the unfiltered
//! load in every generation, so a warm open that finds nothing changed answers from them
//! without decoding a run's state or touching a row (see `cache`). Both ways use the functions
//! below, so they agree to the bit.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow_schema::{DataType, Field, Schema};

use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::load::Reader;
use crate::logdir::seconds;
// Re-exported: the cache's views take it from here.
pub(crate) use crate::load::SeriesPick;

/// The columns `run_facts` adds after the runs table's.
pub const FACT_COLUMNS: [&str; 4] = ["last_modified", "series", "first_step", "last_step"];

impl Reader {
    /// One row per run the scan selects: the runs table's columns, then `last_modified` (the
    /// newest mtime of its event files, seconds), `series` (how many series `series()` lists
    /// for it) and `first_step` / `last_step` (the step range of those series). What `tbscope
    /// ls` shows, without building the series table.
    pub fn run_facts(&self) -> Result<RecordBatch> {
        Ok(self.facts_from(self.runs_table(), &self.series_pick()))
    }

    /// Per scalar series the scan selects: statistics of its points (see [`scalar_stats_of`]).
    pub fn scalar_stats(&self) -> Result<RecordBatch> {
        scalar_stats_of(&self.table(Kind::Scalars)?)
    }

    /// The statistics of [`Reader::scalar_stats`] as one row per run of `runs_table()` and, for
    /// every tag with scalar points (sorted by name) and every `(statistic, suffix)` of
    /// `stats`, a column `<tag>:<suffix>`: float64 for values (NaN where the run lacks the
    /// tag), int64 for `count` (0 there), nullable int64 for `argmin`/`argmax` steps and
    /// `points`. What `summary()` shows, without a Python pass over every series.
    pub fn summary_table(&self, stats: &[(String, String)]) -> Result<RecordBatch> {
        let runs = self.runs_table();
        summary_of(&runs, &self.scalar_stats()?, stats)
    }

    /// The runs table `table` (rows in run order, a subset of the runs) with the facts columns
    /// appended; series are counted as `pick` lists them.
    pub(crate) fn facts_from(&self, table: RecordBatch, pick: SeriesPick<'_>) -> RecordBatch {
        let names = table.column(0).as_string::<i32>();
        let n = names.len();
        let mut newest: Vec<Option<f64>> = Vec::with_capacity(n);
        let mut series: Vec<i64> = Vec::with_capacity(n);
        let mut first: Vec<Option<i64>> = Vec::with_capacity(n);
        let mut last: Vec<Option<i64>> = Vec::with_capacity(n);
        // Both in run-name order: walk them together instead of looking every run up.
        let mut states = self.runs.iter();
        for i in 0..n {
            let run = names.value(i);
            let state = loop {
                match states.next() {
                    Some((name, s)) if name == run => break Some(s),
                    Some(_) => continue,
                    None => break None,
                }
            };
            let Some(s) = state else {
                newest.push(None);
                series.push(0);
                first.push(None);
                last.push(None);
                continue;
            };
            newest.push(s.files.values().filter_map(|f| f.mtime).max().map(seconds));
            let (mut count, mut lo, mut hi) = (0i64, None::<i64>, None::<i64>);
            for tag in &s.tag_order {
                let ts = &s.tags[tag];
                let Some(k) = ts.kind else { continue };
                let Some((points, a, b)) = pick(run, tag, ts, k) else {
                    continue;
                };
                count += 1;
                if points > 0 {
                    lo = Some(lo.map_or(a, |x| x.min(a)));
                    hi = Some(hi.map_or(b, |x| x.max(b)));
                }
            }
            series.push(count);
            first.push(lo);
            last.push(hi);
        }
        let extra: [ArrayRef; 4] = [
            Arc::new(Float64Array::from(newest)),
            Arc::new(Int64Array::from(series)),
            Arc::new(Int64Array::from(first)),
            Arc::new(Int64Array::from(last)),
        ];
        append_columns(&table, &FACT_COLUMNS, extra)
    }
}

fn append_columns(table: &RecordBatch, names: &[&str], extra: [ArrayRef; 4]) -> RecordBatch {
    let mut fields: Vec<Field> = table
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut cols: Vec<ArrayRef> = table.columns().to_vec();
    for (name, a) in names.iter().zip(extra) {
        fields.push(Field::new(*name, a.data_type().clone(), true));
        cols.push(a);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("columns match their schema")
}

/// The runs table's columns of a facts table (the facts columns dropped).
pub(crate) fn runs_table_of_facts(facts: &RecordBatch) -> RecordBatch {
    let keep: Vec<usize> = (0..facts.num_columns() - FACT_COLUMNS.len()).collect();
    facts.project(&keep).expect("indices are in range")
}

/// Running statistics of one series.
struct Acc {
    run: u32,
    tag: u32,
    points: i64,
    first: f64,
    last: f64,
    min: f64,
    max: f64,
    sum: f64,
    count: i64,
    argmin: Option<i64>,
    argmax: Option<i64>,
}

/// Statistics per (run, tag) of scalar rows, in order of first appearance: `points` (rows),
/// `first` / `last` (the values of the first and last row, NaN included: a diverged run must
/// not look fine), `min` / `max` (NaN skipped, NaN only when every value is), `mean` and
/// `count` (of the non-NaN values), `argmin` / `argmax` (the step of the first row holding the
/// minimum / maximum; null when every value is NaN). `run` and `tag` are dictionary-encoded.
///
/// Rows are folded in order, the way NumPy's `fmin.at` / `add.at` fold them: a tie keeps the
/// later value (so `min(0.0, -0.0)` is `-0.0`), and sums add in row order.
pub fn scalar_stats_of(batches: &[RecordBatch]) -> Result<RecordBatch> {
    let mut fold = StatsFold::default();
    for b in batches {
        fold.fold(b)?;
    }
    Ok(fold.table())
}

/// [`scalar_stats_of`] a batch at a time: the batches folded in turn give its table to the
/// bit, and none of them needs to be kept (a summary without a cache folds each piece of a
/// logdir as it is read and drops its rows). The one implementation of the statistics.
#[derive(Default)]
pub struct StatsFold {
    run_ids: HashMap<Arc<str>, u32>,
    run_names: Vec<Arc<str>>,
    tag_ids: HashMap<Arc<str>, u32>,
    tag_names: Vec<Arc<str>>,
    index: HashMap<(u32, u32), u32>,
    accs: Vec<Acc>,
}

/// The id of `name` in a dictionary numbered by first appearance.
fn name_id(ids: &mut HashMap<Arc<str>, u32>, names: &mut Vec<Arc<str>>, name: &str) -> u32 {
    if let Some(&id) = ids.get(name) {
        return id;
    }
    let a: Arc<str> = Arc::from(name);
    names.push(a.clone());
    ids.insert(a, names.len() as u32 - 1);
    names.len() as u32 - 1
}

impl StatsFold {
    /// Folds one batch of scalar rows (run, tag, step, ..., value) into the statistics.
    pub fn fold(&mut self, b: &RecordBatch) -> Result<()> {
        if b.num_rows() == 0 {
            return Ok(());
        }
        let value_at = b
            .schema()
            .index_of("value")
            .map_err(|e| Error::Other(format!("scalar rows without values: {e}")))?;
        let runs = b.column(0).as_dictionary::<Int32Type>();
        let tags = b.column(1).as_dictionary::<Int32Type>();
        let run_values = runs.values().as_string::<i32>();
        let tag_values = tags.values().as_string::<i32>();
        let steps = b.column(2).as_primitive::<Int64Type>().values();
        let values = b
            .column(value_at)
            .as_primitive::<arrow_array::types::Float64Type>();
        let values = values.values();
        // Rows come grouped by run: per run, its tags' accumulators by dictionary key (a
        // vector over the batch's tag dictionary, reset where the run used it: no hash per row).
        const NONE: u32 = u32::MAX;
        let mut cur_run_key = -1i32;
        let mut cur_run = 0u32;
        let mut local: Vec<u32> = vec![NONE; tag_values.len()];
        let mut used: Vec<usize> = Vec::new();
        for (i, (&rk, &tk)) in runs
            .keys()
            .values()
            .iter()
            .zip(tags.keys().values().iter())
            .enumerate()
        {
            if rk != cur_run_key {
                cur_run_key = rk;
                cur_run = name_id(
                    &mut self.run_ids,
                    &mut self.run_names,
                    run_values.value(rk as usize),
                );
                for &t in &used {
                    local[t] = NONE;
                }
                used.clear();
            }
            let a = match local[tk as usize] {
                NONE => {
                    let tag = name_id(
                        &mut self.tag_ids,
                        &mut self.tag_names,
                        tag_values.value(tk as usize),
                    );
                    let accs = &mut self.accs;
                    let a = *self.index.entry((cur_run, tag)).or_insert_with(|| {
                        accs.push(Acc {
                            run: cur_run,
                            tag,
                            points: 0,
                            first: f64::NAN,
                            last: f64::NAN,
                            min: f64::NAN,
                            max: f64::NAN,
                            sum: 0.0,
                            count: 0,
                            argmin: None,
                            argmax: None,
                        });
                        accs.len() as u32 - 1
                    });
                    local[tk as usize] = a;
                    used.push(tk as usize);
                    a
                }
                a => a,
            };
            let acc = &mut self.accs[a as usize];
            let (v, step) = (values[i], steps[i]);
            if acc.points == 0 {
                acc.first = v;
            }
            acc.points += 1;
            acc.last = v;
            if !v.is_nan() {
                // The first row holding the final minimum is the first that lowered the running
                // one (a tie, -0.0 after 0.0, changes the value kept but not the row).
                if acc.min.is_nan() || v < acc.min {
                    acc.argmin = Some(step);
                }
                if acc.max.is_nan() || v > acc.max {
                    acc.argmax = Some(step);
                }
                if acc.min.is_nan() || acc.min >= v {
                    acc.min = v;
                }
                if acc.max.is_nan() || acc.max <= v {
                    acc.max = v;
                }
                acc.sum += v;
                acc.count += 1;
            }
        }
        Ok(())
    }

    /// The table of what was folded so far (see [`scalar_stats_of`]).
    pub fn table(&self) -> RecordBatch {
        let accs = &self.accs;
        let dict = |keys: Vec<i32>, names: &[Arc<str>]| -> ArrayRef {
            let values = Arc::new(StringArray::from_iter_values(names.iter().map(|n| &**n)));
            Arc::new(
                DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), values)
                    .expect("keys index the dictionary"),
            )
        };
        let f64s = |f: &dyn Fn(&Acc) -> f64| -> ArrayRef {
            Arc::new(Float64Array::from_iter_values(accs.iter().map(f)))
        };
        let cols: Vec<ArrayRef> = vec![
            dict(accs.iter().map(|a| a.run as i32).collect(), &self.run_names),
            dict(accs.iter().map(|a| a.tag as i32).collect(), &self.tag_names),
            Arc::new(Int64Array::from_iter_values(accs.iter().map(|a| a.points))),
            f64s(&|a| a.first),
            f64s(&|a| a.last),
            f64s(&|a| a.min),
            f64s(&|a| a.max),
            f64s(&|a| {
                if a.count > 0 {
                    a.sum / a.count as f64
                } else {
                    f64::NAN
                }
            }),
            Arc::new(Int64Array::from_iter_values(accs.iter().map(|a| a.count))),
            Arc::new(accs.iter().map(|a| a.argmin).collect::<Int64Array>()),
            Arc::new(accs.iter().map(|a| a.argmax).collect::<Int64Array>()),
        ];
        RecordBatch::try_new(stats_schema(), cols).expect("columns match their schema")
    }
}

/// Where each row of a merge of two tables sorted by run name comes from, in output order:
/// `(0, i)` is row `i` of the first table (`prev`, `n_prev` rows, run of row `i` by `prev_run`),
/// `(1, j)` row `j` of the second (`fresh`); rows of `prev` that `dropped` says yes to are left
/// out. A run is in one table or the other (`fresh` holds the runs read again, dropped from
/// `prev`), so no tie between the two needs a rule; `prev` would come first.
pub(crate) fn merge_order<'a>(
    n_prev: usize,
    n_fresh: usize,
    prev_run: impl Fn(usize) -> &'a str,
    fresh_run: impl Fn(usize) -> &'a str,
    dropped: impl Fn(usize) -> bool,
) -> Vec<(usize, usize)> {
    let mut order = Vec::with_capacity(n_prev + n_fresh);
    let (mut i, mut j) = (0usize, 0usize);
    while i < n_prev || j < n_fresh {
        if i < n_prev && dropped(i) {
            i += 1;
            continue;
        }
        if j == n_fresh || (i < n_prev && prev_run(i) <= fresh_run(j)) {
            order.push((0, i));
            i += 1;
        } else {
            order.push((1, j));
            j += 1;
        }
    }
    order
}

/// The statistics of a load that read some runs again: `prev`'s rows of every run not
/// `replaced`, and `fresh`'s (the statistics of the replaced runs' rows), in run-name order.
/// Rows are grouped by run, runs in name order and each run's series in the order of its rows,
/// so this is the table [`scalar_stats_of`] gives on all the rows, to the bit, without
/// folding the rows of the runs that stayed.
pub(crate) fn merge_stats(
    prev: &RecordBatch,
    fresh: &RecordBatch,
    replaced: &dyn Fn(&str) -> bool,
) -> Result<RecordBatch> {
    let runs = |b: &RecordBatch| {
        let d = b.column(0).as_dictionary::<Int32Type>();
        let values = d.values().as_string::<i32>().clone();
        (d.keys().values().clone(), values)
    };
    let (pkeys, pnames) = runs(prev);
    let (fkeys, fnames) = runs(fresh);
    let dropped: Vec<bool> = (0..pnames.len())
        .map(|k| replaced(pnames.value(k)))
        .collect();
    let order = merge_order(
        pkeys.len(),
        fkeys.len(),
        |i| pnames.value(pkeys[i] as usize),
        |j| fnames.value(fkeys[j] as usize),
        |i| dropped[pkeys[i] as usize],
    );
    let err = |e: arrow_schema::ArrowError| Error::Other(format!("merging statistics: {e}"));
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(prev.num_columns());
    for c in 0..prev.num_columns() {
        let (a, b) = (prev.column(c), fresh.column(c));
        if c < 2 {
            // Dictionaries numbered by first appearance, as `scalar_stats_of` numbers them.
            let (da, db) = (
                a.as_dictionary::<Int32Type>(),
                b.as_dictionary::<Int32Type>(),
            );
            let (va, vb) = (
                da.values().as_string::<i32>(),
                db.values().as_string::<i32>(),
            );
            let mut ids: HashMap<&str, i32> = HashMap::new();
            let mut names: Vec<&str> = Vec::new();
            let keys: Vec<i32> = order
                .iter()
                .map(|&(t, r)| {
                    let name = if t == 0 {
                        va.value(da.keys().value(r) as usize)
                    } else {
                        vb.value(db.keys().value(r) as usize)
                    };
                    *ids.entry(name).or_insert_with(|| {
                        names.push(name);
                        names.len() as i32 - 1
                    })
                })
                .collect();
            let values = Arc::new(StringArray::from_iter_values(names));
            let d = DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), values)
                .map_err(err)?;
            cols.push(Arc::new(d));
        } else {
            cols.push(
                arrow_select::interleave::interleave(&[a.as_ref(), b.as_ref()], &order)
                    .map_err(err)?,
            );
        }
    }
    RecordBatch::try_new(stats_schema(), cols).map_err(err)
}

/// [`Reader::summary_table`] from a runs table and a statistics table.
pub fn summary_of(
    runs: &RecordBatch,
    st: &RecordBatch,
    stats: &[(String, String)],
) -> Result<RecordBatch> {
    let run_names = runs.column(0).as_string::<i32>();
    let n = run_names.len();
    let run_dict = st.column(0).as_dictionary::<Int32Type>();
    let tag_dict = st.column(1).as_dictionary::<Int32Type>();
    let run_values = run_dict.values().as_string::<i32>();
    let tag_values = tag_dict.values().as_string::<i32>();
    // Row of each run of the statistics' dictionary (usually the same runs in the same order).
    let same = run_values.len() == n && (0..n).all(|i| run_values.value(i) == run_names.value(i));
    let row_of: Vec<Option<usize>> = if same {
        (0..n).map(Some).collect()
    } else {
        let index: HashMap<&str, usize> = (0..n).map(|i| (run_names.value(i), i)).collect();
        (0..run_values.len())
            .map(|i| index.get(run_values.value(i)).copied())
            .collect()
    };
    let rkeys = run_dict.keys().values();
    let tkeys = tag_dict.keys().values();
    let mut used = vec![false; tag_values.len()];
    for &k in tkeys.iter() {
        used[k as usize] = true;
    }
    let mut tags: Vec<(&str, usize)> = (0..tag_values.len())
        .filter(|&i| used[i])
        .map(|i| (tag_values.value(i), i))
        .collect();
    tags.sort_unstable();
    tags.dedup_by(|a, b| a.0 == b.0);
    let tag_count = tags.len();
    let column: HashMap<&str, usize> = tags.iter().enumerate().map(|(j, t)| (t.0, j)).collect();
    let col_of: Vec<usize> = (0..tag_values.len())
        .map(|i| {
            column
                .get(tag_values.value(i))
                .copied()
                .unwrap_or(usize::MAX)
        })
        .collect();
    // (column, row) of every statistics row, as column * runs + row (u32::MAX: not shown). A
    // table of 100,000 runs is millions of cells: small indices, no intermediate per cell.
    const NOT: u32 = u32::MAX;
    if n.saturating_mul(tag_count) >= NOT as usize {
        return Err(Error::InvalidArgument("summary too large".into()));
    }
    let cells: Vec<u32> = rkeys
        .iter()
        .zip(tkeys.iter())
        .map(|(&r, &t)| match (row_of[r as usize], col_of[t as usize]) {
            (Some(row), c) if c != usize::MAX => (c * n + row) as u32,
            _ => NOT,
        })
        .collect();
    let mut fields: Vec<Field> = Vec::with_capacity(tag_count * stats.len());
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(tag_count * stats.len());
    let mut per_stat: Vec<(DataType, Vec<ArrayRef>)> = Vec::with_capacity(stats.len());
    for (stat, _) in stats {
        let src = st
            .column_by_name(stat)
            .ok_or_else(|| Error::InvalidArgument(format!("no statistic {stat:?}")))?;
        let dt = src.data_type().clone();
        let columns: Vec<ArrayRef> = match &dt {
            DataType::Float64 => {
                let v = src
                    .as_primitive::<arrow_array::types::Float64Type>()
                    .values();
                let mut m = vec![f64::NAN; n * tag_count];
                for (&cell, &x) in cells.iter().zip(v.iter()) {
                    if cell != NOT {
                        m[cell as usize] = x;
                    }
                }
                let m = arrow_buffer::Buffer::from_vec(m);
                (0..tag_count)
                    .map(|c| {
                        let values = arrow_buffer::ScalarBuffer::new(m.clone(), c * n, n);
                        Arc::new(Float64Array::new(values, None)) as ArrayRef
                    })
                    .collect()
            }
            DataType::Int64 => {
                let a = src.as_primitive::<Int64Type>();
                // Counts are 0 where a run lacks the tag; steps and points are missing there.
                let zero = *stat == "count";
                let mut values = vec![0i64; n * tag_count];
                let mut valid = vec![zero; n * tag_count];
                for (i, &cell) in cells.iter().enumerate() {
                    if cell != NOT {
                        values[cell as usize] = a.value(i);
                        valid[cell as usize] = a.is_valid(i);
                    }
                }
                let values = arrow_buffer::Buffer::from_vec(values);
                (0..tag_count)
                    .map(|c| {
                        let v = arrow_buffer::ScalarBuffer::new(values.clone(), c * n, n);
                        let nulls = arrow_buffer::NullBuffer::from(&valid[c * n..(c + 1) * n]);
                        let nulls = (nulls.null_count() > 0).then_some(nulls);
                        Arc::new(Int64Array::new(v, nulls)) as ArrayRef
                    })
                    .collect()
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "statistic {stat:?} is {other}, not a number"
                )))
            }
        };
        per_stat.push((dt, columns));
    }
    for (j, (tag, _)) in tags.iter().enumerate() {
        for ((_, suffix), (dt, columns)) in stats.iter().zip(&per_stat) {
            let nullable = columns[j].null_count() > 0 || *dt == DataType::Int64;
            fields.push(Field::new(format!("{tag}:{suffix}"), dt.clone(), nullable));
            cols.push(columns[j].clone());
        }
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        cols,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(|e| Error::Other(format!("summary table: {e}")))
}

/// The schema of [`scalar_stats_of`]'s table.
pub fn stats_schema() -> Arc<Schema> {
    let dict = || DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let mut fields = vec![
        Field::new("run", dict(), false),
        Field::new("tag", dict(), false),
        Field::new("points", DataType::Int64, false),
    ];
    for name in ["first", "last", "min", "max", "mean"] {
        fields.push(Field::new(name, DataType::Float64, false));
    }
    fields.push(Field::new("count", DataType::Int64, false));
    fields.push(Field::new("argmin", DataType::Int64, true));
    fields.push(Field::new("argmax", DataType::Int64, true));
    Arc::new(Schema::new(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalars(rows: &[(&str, &str, i64, f64)]) -> RecordBatch {
        let dict = |v: Vec<&str>| -> ArrayRef {
            Arc::new(v.into_iter().collect::<DictionaryArray<Int32Type>>())
        };
        let schema = Schema::new(vec![
            Field::new(
                "run",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                false,
            ),
            Field::new(
                "tag",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                false,
            ),
            Field::new("step", DataType::Int64, false),
            Field::new("value", DataType::Float64, false),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                dict(rows.iter().map(|r| r.0).collect()),
                dict(rows.iter().map(|r| r.1).collect()),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.3))),
            ],
        )
        .unwrap()
    }

    fn col_f64(b: &RecordBatch, name: &str) -> Vec<f64> {
        b.column_by_name(name)
            .unwrap()
            .as_primitive::<arrow_array::types::Float64Type>()
            .values()
            .to_vec()
    }

    #[test]
    fn stats_follow_numpy_folding() {
        let nan = f64::NAN;
        let a = scalars(&[
            ("r", "x", 0, 2.0),
            ("r", "y", 0, nan),
            ("r", "x", 1, 0.0),
            ("r", "x", 2, -0.0),
            ("r", "x", 3, nan),
            ("r", "y", 1, nan),
        ]);
        // The same run continues in a later batch (a reload's rows).
        let b = scalars(&[("s", "x", 5, 1.0), ("r", "x", 4, 5.0)]);
        let t = scalar_stats_of(&[a, b]).unwrap();
        assert_eq!(t.num_rows(), 3);
        let runs = t.column(0).as_dictionary::<Int32Type>();
        let names: Vec<&str> = runs
            .keys()
            .values()
            .iter()
            .map(|&k| runs.values().as_string::<i32>().value(k as usize))
            .collect();
        assert_eq!(names, ["r", "r", "s"]);
        let min = col_f64(&t, "min");
        // min over 2, 0, -0 (tie keeps the later), 5: -0.0
        assert!(min[0] == 0.0 && min[0].is_sign_negative());
        assert_eq!(col_f64(&t, "max")[0], 5.0);
        assert!(col_f64(&t, "last")[0] == 5.0 && col_f64(&t, "first")[0] == 2.0);
        assert_eq!(col_f64(&t, "mean")[0], 7.0 / 4.0);
        let argmin = t
            .column_by_name("argmin")
            .unwrap()
            .as_primitive::<Int64Type>();
        let argmax = t
            .column_by_name("argmax")
            .unwrap()
            .as_primitive::<Int64Type>();
        assert_eq!((argmin.value(0), argmax.value(0)), (1, 4));
        // all-NaN series: NaN stats, null arg steps, count 0, points 2
        assert!(col_f64(&t, "min")[1].is_nan() && col_f64(&t, "mean")[1].is_nan());
        assert!(argmin.is_null(1) && argmax.is_null(1));
        let count = t
            .column_by_name("count")
            .unwrap()
            .as_primitive::<Int64Type>();
        let points = t
            .column_by_name("points")
            .unwrap()
            .as_primitive::<Int64Type>();
        assert_eq!((count.value(1), points.value(1)), (0, 2));
        assert!(col_f64(&t, "last")[1].is_nan());
        assert_eq!(scalar_stats_of(&[]).unwrap().num_rows(), 0);
    }

    #[test]
    fn summary_pivots_per_run_and_sorted_tag() {
        let st = scalar_stats_of(&[scalars(&[
            ("b", "y", 3, 1.0),
            ("b", "x", 3, 2.0),
            ("c", "y", 7, f64::NAN),
        ])])
        .unwrap();
        // Runs as the runs table lists them: "a" has no scalars, "c" only a NaN point.
        let runs = RecordBatch::try_from_iter(vec![(
            "run",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
        )])
        .unwrap();
        let stats = [
            ("last", "last"),
            ("count", "count"),
            ("argmax", "argmax_step"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        let t = summary_of(&runs, &st, &stats).unwrap();
        let names: Vec<String> = t
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "x:last",
                "x:count",
                "x:argmax_step",
                "y:last",
                "y:count",
                "y:argmax_step"
            ]
        );
        let x_last = col_f64(&t, "x:last");
        assert!(x_last[0].is_nan() && x_last[1] == 2.0 && x_last[2].is_nan());
        let y_count = t
            .column_by_name("y:count")
            .unwrap()
            .as_primitive::<Int64Type>();
        assert_eq!(y_count.values().to_vec(), [0, 1, 0]);
        let y_arg = t
            .column_by_name("y:argmax_step")
            .unwrap()
            .as_primitive::<Int64Type>();
        assert!(y_arg.is_null(0) && y_arg.value(1) == 3 && y_arg.is_null(2));
        assert!(summary_of(&runs, &st, &[("run".into(), "x".into())]).is_err());
    }
}
