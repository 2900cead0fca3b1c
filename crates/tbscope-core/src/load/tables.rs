//! The tables a reader answers from its state and rows: the kinds' tables, series, runs, logs,
//! hparams and the health report.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};

use super::{intern, Reader, ReportEntry, Restarts, RunFacts, RunState, TagState};
use crate::columns::{binary_array, string_array, to_batch, Dicts, Tables};
use crate::data_compat::Kind;
use crate::error::{Error, Result};
use crate::event_file::{SessionEvent, Severity};

/// Per (run, tag, state, kind): whether the series is listed and with which (points, first
/// step, last step), as `Reader::series_with` takes it. Defined here, beside its user, so that
/// `runstats` depends on `load` and not the other way round.
pub(crate) type SeriesPick<'a> = &'a dyn Fn(&str, &str, &TagState, Kind) -> Option<(u64, i64, i64)>;

impl Reader {
    fn plugin_id(&mut self, run: i32, tag: i32) -> i32 {
        let run_name = &self.run_names[run as usize];
        let tag_name = &self.tag_names[tag as usize];
        let plugin = self.runs[run_name]
            .tags
            .get(tag_name.as_str())
            .and_then(|t| t.meta.as_ref())
            .map_or(String::new(), |m| m.plugin_name.clone());
        intern(&mut self.plugin_names, &mut self.plugin_index, &plugin)
    }

    pub(super) fn take_batches(&mut self, mut merged: Tables) -> Vec<(Kind, RecordBatch)> {
        let rows = merged.rows();
        // Plugin ids for every (run, tag) that the plugin-carrying tables use.
        let mut plugin_ids: HashMap<(i32, i32), i32> = HashMap::new();
        for c in [&merged.tensors.c, &merged.blobs.b.c] {
            for (&r, &t) in c.run.iter().zip(&c.tag) {
                plugin_ids.entry((r, t)).or_insert(-1);
            }
        }
        // Sorted, so plugin dictionaries come out the same on every scan.
        let mut keys: Vec<(i32, i32)> = plugin_ids.keys().copied().collect();
        keys.sort_unstable();
        for (r, t) in keys {
            let id = self.plugin_id(r, t);
            plugin_ids.insert((r, t), id);
        }
        let plugin_of = |r: i32, t: i32| plugin_ids[&(r, t)];
        let dicts = Dicts {
            runs: &self.run_names,
            tags: &self.tag_names,
            files: &self.file_names,
            plugin_of: &plugin_of,
            plugins: &self.plugin_names,
        };
        Kind::ALL
            .into_iter()
            .filter(|&k| rows[k as usize] > 0)
            .map(|k| {
                (
                    k,
                    to_batch(&mut merged, k, &dicts, self.opts.file.provenance),
                )
            })
            .collect()
    }

    /// Forgets everything read from `run` (its files, tags, facts and report lines), so the next
    /// plan reads it again from the start. The caller drops its rows.
    pub(crate) fn forget_run(&mut self, run: &str) {
        self.runs.remove(run);
        self.report.retain(|e| e.run != run);
    }

    /// Everything read so far for `kind`, with restart handling and the step bound applied.
    pub fn table(&self, kind: Kind) -> Result<Vec<RecordBatch>> {
        let batches = &self.batches[kind as usize];
        if self.opts.restarts == Restarts::All && self.opts.step_lo.is_none() {
            return Ok(batches.clone());
        }
        crate::restarts::apply(
            batches,
            self.opts.restarts == Restarts::Preempt,
            self.opts.step_lo,
        )
    }

    /// The schema of `kind`'s table even when it has no rows.
    pub fn schema(&self, kind: Kind) -> Arc<Schema> {
        if let Some(b) = self.batches[kind as usize].first() {
            return b.schema();
        }
        empty_schema(kind, self.opts.file.provenance)
    }

    pub fn run_names(&self) -> Vec<String> {
        self.runs.keys().cloned().collect()
    }

    /// One row per (run, tag): kind and metadata.
    pub fn series(&self) -> RecordBatch {
        self.series_with(&self.series_pick())
    }

    /// Which series an uncached scan shows, with their (points, first step, last step). With a
    /// step range, those with points in it: records outside the range still decide kinds, so a
    /// series seen only there is known but has nothing to show.
    pub(crate) fn series_pick(
        &self,
    ) -> impl Fn(&str, &str, &TagState, Kind) -> Option<(u64, i64, i64)> {
        let kinds = self.opts.file.kinds;
        let ranged = self.opts.file.step_lo.is_some() || self.opts.file.step_hi.is_some();
        move |_, _, ts, k| {
            (kinds.contains(k) && (ts.points > 0 || !ranged)).then_some((
                ts.points,
                ts.first_step,
                ts.last_step,
            ))
        }
    }

    /// The series table with `pick` deciding, per (run, tag, state, kind), whether the row is
    /// there and with which (points, first step, last step).
    pub(crate) fn series_with(&self, pick: SeriesPick<'_>) -> RecordBatch {
        let mut run = Vec::new();
        let mut tag = Vec::new();
        let mut kind = Vec::new();
        let mut plugin = Vec::new();
        let mut content: Vec<Vec<u8>> = Vec::new();
        let mut display = Vec::new();
        let mut desc = Vec::new();
        let mut class = Vec::new();
        let mut points = Vec::new();
        let mut first = Vec::new();
        let mut last = Vec::new();
        for (rname, state) in &self.runs {
            for tname in &state.tag_order {
                let ts = &state.tags[tname];
                let Some(k) = ts.kind else { continue };
                let Some((n, lo, hi)) = pick(rname, tname, ts, k) else {
                    continue;
                };
                let m = ts.meta.as_deref().cloned().unwrap_or_default();
                run.push(rname.clone());
                tag.push(tname.to_string());
                kind.push(k.name().to_string());
                plugin.push(m.plugin_name);
                content.push(m.plugin_content);
                display.push(m.display_name);
                desc.push(m.description);
                class.push(m.data_class);
                points.push(n as i64);
                first.push((n > 0).then_some(lo));
                last.push((n > 0).then_some(hi));
            }
        }
        let cols: Vec<(&str, ArrayRef)> = vec![
            ("run", string_array(run)),
            ("tag", string_array(tag)),
            ("kind", string_array(kind)),
            ("plugin", string_array(plugin)),
            (
                "plugin_content",
                binary_array(content.iter().map(|c| c.as_slice())),
            ),
            ("display_name", string_array(display)),
            ("description", string_array(desc)),
            ("data_class", Arc::new(Int32Array::from(class))),
            ("points", Arc::new(Int64Array::from(points))),
            ("first_step", Arc::new(Int64Array::from(first))),
            ("last_step", Arc::new(Int64Array::from(last))),
        ];
        batch(cols)
    }

    /// One row per run: files, bytes, time range, steps, per-kind points, data loss.
    pub fn runs_table(&self) -> RecordBatch {
        self.runs_table_with(&|_, s| Some((s.max_step, kind_counts(s))))
    }

    /// The runs table with `facts` deciding, per run, whether its row is there and with which
    /// max step and per-kind point counts.
    pub(crate) fn runs_table_with(&self, facts: RunFacts<'_>) -> RecordBatch {
        let mut name = Vec::new();
        let mut files = Vec::new();
        let mut bytes = Vec::new();
        let mut first = Vec::new();
        let mut last = Vec::new();
        let mut max_step = Vec::new();
        let mut records = Vec::new();
        let mut corrupt = Vec::new();
        let mut tail = Vec::new();
        let mut restarts = Vec::new();
        let mut writer = Vec::new();
        let mut per_kind: Vec<Vec<i64>> = vec![Vec::new(); 8];
        for (rname, s) in &self.runs {
            let Some((ms, counts)) = facts(rname, s) else {
                continue;
            };
            name.push(rname.clone());
            files.push(s.files.len() as i64);
            bytes.push(s.files.values().map(|f| f.size).sum::<u64>());
            first.push(s.first_wall);
            last.push(s.last_wall);
            max_step.push(ms);
            records.push(s.files.values().map(|f| f.records).sum::<u64>());
            corrupt.push(s.corrupt);
            tail.push(s.files.values().map(|f| f.tail).sum::<u64>());
            // SessionLog START after the first one marks a restart (TF1 writers).
            restarts.push(
                s.sessions
                    .iter()
                    .filter(|e| e.is_start())
                    .count()
                    .saturating_sub(1) as i64,
            );
            writer.push(
                s.files
                    .values()
                    .find_map(|f| f.writer.as_deref().map(str::to_string))
                    .unwrap_or_default(),
            );
            for (v, c) in per_kind.iter_mut().zip(counts) {
                v.push(c);
            }
        }
        let mut cols: Vec<(&str, ArrayRef)> = vec![
            ("run", string_array(name)),
            ("files", Arc::new(Int64Array::from(files))),
            ("bytes", Arc::new(UInt64Array::from(bytes))),
            ("first_wall_time", Arc::new(Float64Array::from(first))),
            ("last_wall_time", Arc::new(Float64Array::from(last))),
            ("max_step", Arc::new(Int64Array::from(max_step))),
            ("records", Arc::new(UInt64Array::from(records))),
            ("corrupt_records", Arc::new(UInt64Array::from(corrupt))),
            ("truncated_bytes", Arc::new(UInt64Array::from(tail))),
            ("restarts", Arc::new(Int64Array::from(restarts))),
            ("writer", string_array(writer)),
        ];
        let names = [
            "scalars",
            "histograms",
            "images",
            "audio",
            "text",
            "hparams",
            "blobs",
            "tensors",
        ];
        for (n, v) in names.iter().zip(per_kind) {
            cols.push((n, Arc::new(Int64Array::from(v))));
        }
        batch(cols)
    }

    /// The `logs` table: TF1's SessionLog (start, stop, checkpoint) and LogMessage events,
    /// one row each, runs in name order and events in file order.
    pub fn logs(&self) -> RecordBatch {
        let (lo, hi) = (self.opts.file.step_lo, self.opts.file.step_hi);
        self.logs_with(&|_| true, &|s| {
            lo.is_none_or(|lo| s >= lo) && hi.is_none_or(|hi| s < hi)
        })
    }

    pub(crate) fn logs_with(
        &self,
        run_ok: &dyn Fn(&str) -> bool,
        step_ok: &dyn Fn(i64) -> bool,
    ) -> RecordBatch {
        const STATUS: [&str; 4] = ["STATUS_UNSPECIFIED", "START", "STOP", "CHECKPOINT"];
        let level_name = |l: i32| match l {
            0 => "UNKNOWN".to_string(),
            10 => "DEBUGGING".to_string(),
            20 => "INFO".to_string(),
            30 => "WARN".to_string(),
            40 => "ERROR".to_string(),
            50 => "FATAL".to_string(),
            other => other.to_string(),
        };
        let mut run = Vec::new();
        let mut step = Vec::new();
        let mut wall = Vec::new();
        let mut source = Vec::new();
        let mut status: Vec<Option<String>> = Vec::new();
        let mut level: Vec<Option<String>> = Vec::new();
        let mut message = Vec::new();
        let mut path: Vec<Option<String>> = Vec::new();
        for (name, s) in &self.runs {
            if !run_ok(name) {
                continue;
            }
            for e in s.sessions.iter().filter(|e| step_ok(e.step)) {
                run.push(name.as_str());
                step.push(e.step);
                wall.push(e.wall.is_finite().then_some(e.wall));
                if e.source == SessionEvent::LOG_MESSAGE {
                    source.push("log_message");
                    status.push(None);
                    level.push(Some(level_name(e.status)));
                    path.push(None);
                } else {
                    source.push("session_log");
                    status.push(Some(
                        usize::try_from(e.status)
                            .ok()
                            .and_then(|i| STATUS.get(i))
                            .map_or_else(|| e.status.to_string(), |s| s.to_string()),
                    ));
                    level.push(None);
                    path.push(Some(e.checkpoint_path.clone()));
                }
                message.push(e.message.clone());
            }
        }
        let dict = |v: Vec<&str>| -> ArrayRef {
            Arc::new(
                v.into_iter()
                    .collect::<arrow_array::DictionaryArray<arrow_array::types::Int32Type>>(),
            )
        };
        let ts: Vec<Option<i64>> = wall
            .iter()
            .map(|w| w.map(|w| (w * 1e9).round() as i64))
            .collect();
        let cols: Vec<(&str, ArrayRef)> = vec![
            ("run", dict(run)),
            ("step", Arc::new(Int64Array::from(step))),
            ("wall_time", Arc::new(Float64Array::from(wall))),
            (
                "timestamp",
                Arc::new(arrow_array::TimestampNanosecondArray::from(ts).with_timezone("UTC")),
            ),
            ("source", dict(source)),
            ("status", Arc::new(StringArray::from(status))),
            ("level", Arc::new(StringArray::from(level))),
            ("message", string_array(message)),
            ("checkpoint_path", Arc::new(StringArray::from(path))),
        ];
        batch(cols)
    }

    /// Per run (as `run_names`), the newest modification time of its event files in seconds
    /// (null when none could be stat'ed), as of the last load.
    pub fn run_mtimes(&self) -> RecordBatch {
        self.run_mtimes_of(self.run_names())
    }

    /// [`Reader::run_mtimes`] of the runs `names` (known runs, in order).
    pub(crate) fn run_mtimes_of(&self, names: Vec<String>) -> RecordBatch {
        let newest: Vec<Option<f64>> = names
            .iter()
            .map(|n| {
                self.runs[n]
                    .files
                    .values()
                    .filter_map(|f| f.mtime)
                    .max()
                    .map(crate::logdir::seconds)
            })
            .collect();
        batch(vec![
            ("run", string_array(names)),
            ("last_modified", Arc::new(Float64Array::from(newest))),
        ])
    }

    /// One row per run that has hparams records: session fields and a column per hparam.
    pub fn hparams(&self) -> Result<RecordBatch> {
        hparams_of(&self.batches[Kind::Hparams as usize])
    }

    /// The health report: one row per problem found so far.
    pub fn report(&self) -> &[ReportEntry] {
        &self.report
    }

    /// The report as a user sees it: while no run is known and nothing else is reported, one
    /// line says that no event files were found: derived, never stored, so it goes once files
    /// appear (and a cache never keeps it).
    pub fn report_entries(&self) -> std::borrow::Cow<'_, [ReportEntry]> {
        if self.report.is_empty() && self.runs.is_empty() {
            return std::borrow::Cow::Owned(vec![no_runs_entry(&self.root)]);
        }
        std::borrow::Cow::Borrowed(&self.report)
    }

    /// Absolute path of a file by its dictionary name (for lazy blob reads).
    pub fn file_path(&self, rel: &str) -> Option<PathBuf> {
        self.runs
            .values()
            .flat_map(|r| r.files.values())
            .find(|f| self.file_names[f.id as usize] == rel)
            .map(|f| f.path.clone())
    }
}

/// The report line of a read that found no run.
/// A run's points per kind (the runs table's per-kind columns, unfiltered).
pub(crate) fn kind_counts(s: &RunState) -> [i64; 8] {
    let mut counts = [0i64; 8];
    for t in s.tags.values() {
        if let Some(k) = t.kind {
            counts[k as usize] += t.points as i64;
        }
    }
    counts
}

pub(crate) fn no_runs_entry(root: &Path) -> ReportEntry {
    ReportEntry {
        run: String::new(),
        file: String::new(),
        severity: Severity::Warning,
        offset: 0,
        length: 0,
        reason: format!(
            "no event files under {} (a run is a directory holding files named *tfevents*)",
            root.display()
        ),
    }
}

/// The schema of `kind`'s table when it has no rows.
pub(crate) fn empty_schema(kind: Kind, provenance: bool) -> Arc<Schema> {
    let mut empty = Tables::default();
    let none = |_: i32, _: i32| 0;
    let dicts = Dicts {
        runs: &[],
        tags: &[],
        files: &[],
        plugin_of: &none,
        plugins: &[],
    };
    to_batch(&mut empty, kind, &dicts, provenance).schema()
}

/// The hparams table (one row per run with sessions) from hparams record batches.
pub(crate) fn hparams_of(batches: &[RecordBatch]) -> Result<RecordBatch> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    let mut sessions: BTreeMap<String, crate::hparams::Session> = BTreeMap::new();
    for b in batches {
        // Dictionaries are compacted per batch: go through the values, not global ids.
        let runs = b.column(0).as_dictionary::<Int32Type>();
        let run_values = runs.values().as_string::<i32>();
        let idx = b
            .schema()
            .index_of("plugin_content")
            .expect("hparams batches carry content");
        let content = b.column(idx).as_binary::<i64>();
        for i in 0..b.num_rows() {
            let run = run_values.value(runs.keys().value(i) as usize);
            let s = sessions.entry(run.to_string()).or_default();
            crate::hparams::apply(content.value(i), s).map_err(|e| {
                Error::Other(format!("run {run}: hparams record is not valid: {e}"))
            })?;
        }
    }
    Ok(crate::hparams::table(
        &sessions.into_iter().collect::<Vec<_>>(),
    ))
}

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = cols
        .iter()
        .map(|(n, a)| {
            Field::new(
                *n,
                a.data_type().clone(),
                a.data_type() != &DataType::Utf8 || a.null_count() > 0,
            )
        })
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        cols.into_iter().map(|(_, a)| a).collect(),
    )
    .expect("columns match their schema")
}
