//! A scan's view of the cached load: the cache holds the unfiltered load, and a scan's filters
//! (runs, tags, kinds, steps, provenance, restarts) are applied to what it returns, so that
//! every table equals what a read with those filters returns (docs/cache.md, "What is cached").

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, DictionaryArray, Int32Array, RecordBatch};
use arrow_array::{RecordBatchOptions, StringArray};
use arrow_schema::{DataType, Schema, SchemaRef};
use regex::Regex;

use super::{Cache, Need};
use crate::data_compat::{plugin_names, Kind, KindSet};
use crate::error::{Error, Result};
use crate::event_file::Options;
use crate::load::{empty_schema, Reader, ReaderOptions, ReportEntry, TagState};
use crate::runstats::{runs_table_of_facts, scalar_stats_of, SeriesPick};

/// A scan's filters, applied to what the cache returns.
#[derive(Debug, Clone)]
pub(super) struct View {
    pub(super) runs: Option<Regex>,
    pub(super) tags: Option<Regex>,
    pub(super) kinds: KindSet,
    /// The step range as the native read applies it (with `preempt`, only the upper bound; the
    /// lower one is applied after preemption by `Reader::table`).
    pub(super) step_lo: Option<i64>,
    pub(super) step_hi: Option<i64>,
    pub(super) provenance: bool,
    /// Tables go through `restarts::apply` (preemption, or its lower step bound).
    pub(super) restarts: bool,
}

impl View {
    pub(super) fn run_ok(&self, run: &str) -> bool {
        self.runs.as_ref().is_none_or(|re| re.is_match(run))
    }
    pub(super) fn tag_ok(&self, tag: &str) -> bool {
        self.tags.as_ref().is_none_or(|re| re.is_match(tag))
    }
    pub(super) fn has_steps(&self) -> bool {
        self.step_lo.is_some() || self.step_hi.is_some()
    }
    pub(super) fn step_ok(&self, s: i64) -> bool {
        self.step_lo.is_none_or(|lo| s >= lo) && self.step_hi.is_none_or(|hi| s < hi)
    }
}

/// The options of the load the cache holds (everything, unfiltered) and the scan's filters.
pub(super) fn split_options(opts: ReaderOptions) -> (ReaderOptions, View) {
    let view = View {
        runs: opts.runs.clone(),
        tags: opts.file.tags.clone(),
        kinds: opts.file.kinds,
        step_lo: opts.file.step_lo,
        step_hi: opts.file.step_hi,
        provenance: opts.file.provenance,
        restarts: opts.restarts == crate::load::Restarts::Preempt || opts.step_lo.is_some(),
    };
    let base = ReaderOptions {
        file: Options {
            verify: opts.file.verify,
            max_len: opts.file.max_len,
            provenance: opts.file.provenance,
            kinds: KindSet::ALL,
            tags: None,
            step_lo: None,
            step_hi: None,
            // The cache holds whole files (a reader with a byte range has no cache).
            byte_range: None,
        },
        runs: None,
        // Applied to the view's rows by `table`, as for a reader without a cache.
        restarts: opts.restarts,
        threads: opts.threads,
        step_lo: opts.step_lo,
        tail_timeout: opts.tail_timeout,
    };
    (base, view)
}

impl Cache {
    /// `kind`'s rows that the view selects, before restart handling.
    pub(super) fn filtered(&self, kind: Kind) -> Result<Vec<RecordBatch>> {
        if !self.view.kinds.contains(kind) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for b in self.served(kind)? {
            if let Some(b) = self.select(&b)? {
                out.push(b);
            }
        }
        Ok(out)
    }

    pub(super) fn table(&self, r: &Reader, kind: Kind) -> Result<Vec<RecordBatch>> {
        let batches = self.filtered(kind)?;
        if r.opts.restarts == crate::load::Restarts::All && r.opts.step_lo.is_none() {
            return Ok(batches);
        }
        crate::restarts::apply(
            &batches,
            r.opts.restarts == crate::load::Restarts::Preempt,
            r.opts.step_lo,
        )
    }

    pub(super) fn schema(&self, kind: Kind) -> Result<SchemaRef> {
        if !self.decoded(kind) {
            return Err(not_ready("rows"));
        }
        let first = self
            .segments
            .iter()
            .find_map(|s| s.batches[kind as usize].as_ref());
        Ok(match first {
            Some(b) => self.project(b.schema().as_ref()).0,
            None => empty_schema(kind, self.view.provenance),
        })
    }

    /// The schema without the provenance columns when the cache has them and the view does not
    /// want them, with the indices of the columns kept.
    fn project(&self, schema: &Schema) -> (SchemaRef, Option<Vec<usize>>) {
        if self.view.provenance || schema.index_of("offset").is_err() {
            return (Arc::new(schema.clone()), None);
        }
        let keep: Vec<usize> = (0..schema.fields().len())
            .filter(|&i| !matches!(schema.field(i).name().as_str(), "file" | "offset"))
            .collect();
        (
            Arc::new(schema.project(&keep).expect("indices are in range")),
            Some(keep),
        )
    }

    /// Which rows of a batch keyed by (run, tag) dictionaries (columns 0 and 1) the view's run
    /// and tag filters keep, each pattern matched once per dictionary value; None when no
    /// filter leaves anything out.
    fn run_tag_mask(&self, b: &RecordBatch) -> Option<Vec<bool>> {
        let v = &self.view;
        let mut mask: Option<Vec<bool>> = None;
        for (col, re) in [(0, &v.runs), (1, &v.tags)] {
            let Some(re) = re else { continue };
            let dict = b.column(col).as_dictionary::<Int32Type>();
            let values = dict.values().as_string::<i32>();
            let ok: Vec<bool> = (0..values.len())
                .map(|i| re.is_match(values.value(i)))
                .collect();
            if ok.iter().all(|&x| x) {
                continue;
            }
            let keys = dict.keys().values();
            match &mut mask {
                None => mask = Some(keys.iter().map(|&k| ok[k as usize]).collect()),
                Some(m) => {
                    for (x, &k) in m.iter_mut().zip(keys.iter()) {
                        *x &= ok[k as usize];
                    }
                }
            }
        }
        mask
    }

    /// The rows of one batch the view selects: run and tag through their dictionaries, then
    /// the step range. Filtered batches get compacted dictionaries, as a filtered read has.
    fn select(&self, b: &RecordBatch) -> Result<Option<RecordBatch>> {
        let v = &self.view;
        let mut mask = self.run_tag_mask(b);
        if v.has_steps() {
            let steps = b.column(2).as_primitive::<Int64Type>().values();
            match &mut mask {
                None => mask = Some(steps.iter().map(|&s| v.step_ok(s)).collect()),
                Some(m) => {
                    for (x, &s) in m.iter_mut().zip(steps.iter()) {
                        *x &= v.step_ok(s);
                    }
                }
            }
        }
        let b = match mask {
            Some(m) if !m.iter().all(|&x| x) => {
                if !m.iter().any(|&x| x) {
                    return Ok(None);
                }
                let f = arrow_select::filter::filter_record_batch(b, &BooleanArray::from(m))
                    .map_err(|e| Error::Other(format!("filtering cached rows failed: {e}")))?;
                compact_dicts(&f)?
            }
            _ => b.clone(),
        };
        let (schema, keep) = self.project(b.schema().as_ref());
        Ok(Some(match keep {
            None => b,
            Some(keep) => {
                let cols = keep.iter().map(|&i| b.column(i).clone()).collect();
                RecordBatch::try_new(schema, cols)
                    .map_err(|e| Error::Other(format!("projecting cached rows failed: {e}")))?
            }
        }))
    }

    /// Every run's name in order: the state's, or while it is pending the restored list (a
    /// generation's runs are its state's, in name order).
    fn all_run_names<'a>(
        &'a self,
        r: &'a Reader,
    ) -> Result<Box<dyn Iterator<Item = &'a String> + 'a>> {
        Ok(match &self.pending {
            Some(p) if p.names.is_some() => return Err(not_ready("run names")),
            Some(_) => Box::new(r.run_names.iter()),
            None => Box::new(r.runs.keys()),
        })
    }

    pub(super) fn run_names(&self, r: &Reader) -> Result<Vec<String>> {
        Ok(self
            .all_run_names(r)?
            .filter(|n| self.view.run_ok(n))
            .cloned()
            .collect())
    }

    pub(super) fn report(&self, r: &Reader) -> Result<Vec<ReportEntry>> {
        // Lines about a file or directory outside any run (discovery) stay, as in a filtered
        // read; lines of runs the view leaves out go.
        let mut out: Vec<ReportEntry> = r
            .report
            .iter()
            .filter(|e| e.run.is_empty() || e.file.is_empty() || self.view.run_ok(&e.run))
            .cloned()
            .collect();
        // A read whose runs filter matches nothing says so, when it has nothing else to say.
        if out.is_empty() && !self.all_run_names(r)?.any(|n| self.view.run_ok(n)) {
            out.push(crate::load::no_runs_entry(&r.root));
        }
        Ok(out)
    }

    pub(super) fn series(&self, r: &Reader) -> Result<RecordBatch> {
        self.with_series_pick(|pick| r.series_with(pick))
    }

    /// The logs table of the runs and steps the view selects.
    pub(super) fn logs(&self, r: &Reader) -> Result<RecordBatch> {
        if self.pending.is_some() {
            return Err(not_ready("the runs' state"));
        }
        let v = &self.view;
        Ok(r.logs_with(&|run| v.run_ok(run), &|s| v.step_ok(s)))
    }

    /// Calls `f` with what decides the view's series rows (see `Reader::series_with`).
    fn with_series_pick<T>(&self, f: impl FnOnce(SeriesPick<'_>) -> T) -> Result<T> {
        if self.pending.is_some() {
            return Err(not_ready("the runs' state"));
        }
        let v = &self.view;
        if !v.has_steps() {
            return Ok(f(&|run, tag, ts, k| {
                (v.run_ok(run) && v.tag_ok(tag) && v.kinds.contains(k)).then_some((
                    ts.points,
                    ts.first_step,
                    ts.last_step,
                ))
            }));
        }
        let stats = self.step_stats()?;
        Ok(f(&|run, tag, _, k| {
            if !(v.run_ok(run) && v.tag_ok(tag) && v.kinds.contains(k)) {
                return None;
            }
            stats
                .get(&(run.to_string(), tag.to_string(), k))
                .map(|s| (s.points, s.first, s.last))
        }))
    }

    /// The stored facts of the runs the view selects (pending state, `serves(RunFacts)`).
    fn stored_facts(&self) -> Result<RecordBatch> {
        let Some(facts) = self.pending.as_ref().and_then(|p| p.facts.as_ref()) else {
            return Err(not_ready("the stored facts"));
        };
        let Some(re) = &self.view.runs else {
            return Ok(facts.clone());
        };
        let names = facts.column(0).as_string::<i32>();
        let keep: BooleanArray = (0..names.len())
            .map(|i| Some(re.is_match(names.value(i))))
            .collect();
        arrow_select::filter::filter_record_batch(facts, &keep)
            .map_err(|e| Error::Other(format!("filtering cached facts failed: {e}")))
    }

    pub(super) fn run_facts(&self, r: &Reader) -> Result<RecordBatch> {
        if self.pending.is_some() {
            if !self.serves(Need::RunFacts) {
                return Err(not_ready("the runs' state"));
            }
            return self.stored_facts();
        }
        let table = self.runs_table(r)?;
        self.with_series_pick(|pick| r.facts_from(table, pick))
    }

    pub(super) fn scalar_stats(&self, r: &Reader) -> Result<RecordBatch> {
        if self.pending.is_none() || !self.view.kinds.contains(Kind::Scalars) {
            return scalar_stats_of(&self.table(r, Kind::Scalars)?);
        }
        let stats = match self.pending.as_ref().and_then(|p| p.stats.as_ref()) {
            Some(stats) if self.serves(Need::ScalarStats) => stats,
            _ => return Err(not_ready("the rows")),
        };
        Ok(self
            .select_series(stats)?
            .unwrap_or_else(|| stats.slice(0, 0)))
    }

    /// The rows of a table keyed by (run, tag) dictionaries that the view's run and tag
    /// filters select, dictionaries compacted; None when no row is selected.
    fn select_series(&self, b: &RecordBatch) -> Result<Option<RecordBatch>> {
        let Some(m) = self.run_tag_mask(b) else {
            return Ok(Some(b.clone()));
        };
        if !m.iter().any(|&x| x) {
            return Ok(None);
        }
        let f = arrow_select::filter::filter_record_batch(b, &BooleanArray::from(m))
            .map_err(|e| Error::Other(format!("filtering cached statistics failed: {e}")))?;
        compact_dicts(&f).map(Some)
    }

    pub(super) fn runs_table(&self, r: &Reader) -> Result<RecordBatch> {
        let v = &self.view;
        if self.pending.is_some() {
            if !self.serves(Need::RunsTable) {
                return Err(not_ready("the runs' state"));
            }
            let table = runs_table_of_facts(&self.stored_facts()?);
            return Ok(self.zero_kinds_left_out(table));
        }
        if !v.has_steps() {
            return Ok(r.runs_table_with(&|run, s| {
                if !v.run_ok(run) {
                    return None;
                }
                let mut counts = [0i64; 8];
                for (t, ts) in &s.tags {
                    if let Some(k) = ts.kind {
                        if v.tag_ok(t) && v.kinds.contains(k) {
                            counts[k as usize] += ts.points as i64;
                        }
                    }
                }
                Some((s.max_step, counts))
            }));
        }
        // With a step range, a read counts only points in range and dates the run by the
        // summaries in range (of any tag): derive both from the rows.
        let stats = self.step_stats()?;
        let mut per_run: HashMap<&str, (Option<i64>, [i64; 8])> = HashMap::new();
        for ((run, tag, k), s) in &stats {
            let Some(state) = r.runs.get(run) else {
                continue;
            };
            let ts = state.tags.get(tag.as_str());
            let e = per_run.entry(run.as_str()).or_insert((None, [0; 8]));
            if !event_blob(tag, ts, *k) {
                e.0 = Some(e.0.map_or(s.last, |m: i64| m.max(s.last)));
            }
            if v.tag_ok(tag) && v.kinds.contains(*k) && ts.and_then(|t| t.kind) == Some(*k) {
                e.1[*k as usize] += s.points as i64;
            }
        }
        Ok(r.runs_table_with(&|run, _| {
            if !v.run_ok(run) {
                return None;
            }
            Some(per_run.get(run).copied().unwrap_or((None, [0; 8])))
        }))
    }

    /// Points and step range per (run, tag, table) within the view's runs and step range (all
    /// tags and kinds: the runs table needs the others too).
    fn step_stats(&self) -> Result<HashMap<(String, String, Kind), StepStats>> {
        let v = &self.view;
        let mut out: HashMap<(String, String, Kind), StepStats> = HashMap::new();
        for k in Kind::ALL {
            for b in self.served(k)? {
                let runs = b.column(0).as_dictionary::<Int32Type>();
                let tags = b.column(1).as_dictionary::<Int32Type>();
                let run_names = runs.values().as_string::<i32>();
                let tag_names = tags.values().as_string::<i32>();
                let run_ok: Vec<bool> = (0..run_names.len())
                    .map(|i| v.run_ok(run_names.value(i)))
                    .collect();
                let steps = b.column(2).as_primitive::<Int64Type>().values();
                let mut local: HashMap<(i32, i32), StepStats> = HashMap::new();
                for ((&r, &t), &s) in runs
                    .keys()
                    .values()
                    .iter()
                    .zip(tags.keys().values().iter())
                    .zip(steps.iter())
                {
                    if !run_ok[r as usize] || !v.step_ok(s) {
                        continue;
                    }
                    local.entry((r, t)).or_default().add(s);
                }
                for ((r, t), s) in local {
                    let key = (
                        run_names.value(r as usize).to_string(),
                        tag_names.value(t as usize).to_string(),
                        k,
                    );
                    out.entry(key).or_default().merge(&s);
                }
            }
        }
        Ok(out)
    }

    /// A runs table from the stored facts, with the counts of kinds the view leaves out at 0
    /// (as `runs_table` counts only the kinds kept).
    fn zero_kinds_left_out(&self, table: RecordBatch) -> RecordBatch {
        if self.view.kinds.0 == 0xff {
            return table;
        }
        let schema = table.schema();
        let cols: Vec<ArrayRef> = (0..table.num_columns())
            .map(|i| {
                let kept = Kind::from_name(schema.field(i).name())
                    .is_none_or(|k| self.view.kinds.contains(k));
                if kept {
                    table.column(i).clone()
                } else {
                    Arc::new(arrow_array::Int64Array::from(vec![0i64; table.num_rows()]))
                        as ArrayRef
                }
            })
            .collect();
        RecordBatch::try_new(schema, cols).expect("same columns")
    }
}

#[derive(Debug, Clone, Copy)]
struct StepStats {
    points: u64,
    first: i64,
    last: i64,
}

impl Default for StepStats {
    fn default() -> Self {
        StepStats {
            points: 0,
            first: i64::MAX,
            last: i64::MIN,
        }
    }
}

impl StepStats {
    fn add(&mut self, s: i64) {
        self.points += 1;
        self.first = self.first.min(s);
        self.last = self.last.max(s);
    }
    fn merge(&mut self, o: &StepStats) {
        self.points += o.points;
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
    }
}

/// Blob rows that come from an Event's graph fields rather than a summary: those do not date a
/// run's max step.
fn event_blob(tag: &str, ts: Option<&TagState>, k: Kind) -> bool {
    k == Kind::Blobs
        && (tag == "__run_graph__"
            || tag == "__meta_graph__"
            || ts
                .and_then(|t| t.meta.as_ref())
                .is_some_and(|m| m.plugin_name == plugin_names::GRAPH_TAGGED_RUN_METADATA))
}

pub(super) fn is_string_dict(t: &DataType) -> bool {
    matches!(t, DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8)
}

/// Drops dictionary values no row uses (a filtered read's dictionaries hold only its values).
pub(super) fn compact_dicts(b: &RecordBatch) -> Result<RecordBatch> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(b.num_columns());
    for (i, f) in b.schema().fields().iter().enumerate() {
        let col = b.column(i);
        if !is_string_dict(f.data_type()) || col.null_count() > 0 {
            cols.push(col.clone());
            continue;
        }
        let dict = col.as_dictionary::<Int32Type>();
        let values = dict.values().as_string::<i32>();
        let mut remap = vec![-1i32; values.len()];
        for &k in dict.keys().values().iter() {
            remap[k as usize] = 0;
        }
        let mut used = Vec::new();
        for (j, r) in remap.iter_mut().enumerate() {
            if *r == 0 {
                *r = used.len() as i32;
                used.push(values.value(j));
            }
        }
        if used.len() == values.len() {
            cols.push(col.clone());
            continue;
        }
        let keys: Int32Array = dict
            .keys()
            .values()
            .iter()
            .map(|&k| remap[k as usize])
            .collect();
        let values = Arc::new(StringArray::from_iter_values(used));
        cols.push(Arc::new(
            DictionaryArray::<Int32Type>::try_new(keys, values)
                .map_err(|e| Error::Other(format!("compacting a dictionary failed: {e}")))?,
        ));
    }
    RecordBatch::try_new_with_options(
        b.schema(),
        cols,
        &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
    )
    .map_err(|e| Error::Other(format!("compacting dictionaries failed: {e}")))
}

/// A part of the restored generation used before it was decoded: a bug in tbscope, reported
/// as an error rather than a panic.
fn not_ready(what: &str) -> Error {
    Error::Other(format!("cache: {what} used before being decoded"))
}
