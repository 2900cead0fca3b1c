//! What happens to each record: the Editor's per-tag decisions (tags, steps, metadata that
//! moves to the first kept value), the records a restart superseded as the reader decides
//! them, and the field-level edits of an Event that loses some values.

use super::*;

// ------------------------------------------------------------------------------------------
// Decisions, record by record.

/// What happens to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Copied byte for byte.
    Keep,
    /// Left out.
    Drop,
    /// Written as this Event instead (some values dropped or given metadata).
    Replace(Vec<u8>),
}

/// What decides a series' metadata, as the reader sees it: a legacy value (its plugin, plus
/// display name and description from metadata it may carry) or a value with metadata.
/// `Some(None)`: a legacy value without metadata.
pub(super) type Decider = Option<Option<Vec<u8>>>;

#[derive(Debug, Default)]
pub(super) struct TagState {
    pub(super) wanted: bool,
    /// The first decider of this tag in the input, once seen.
    pub(super) first: Decider,
    /// The output already holds a value that decides the same way.
    pub(super) out_decided: bool,
}

/// Per-run state: filters are matched once per tag, and each tag's first metadata is followed
/// so that dropping the value holding it does not change the output's series.
pub struct Editor<'o> {
    pub(super) opts: &'o RewriteOptions,
    pub(super) tags: HashMap<Vec<u8>, TagState, FxBuild>,
    pub values_dropped: u64,
    pub metadata_moved: u64,
}

impl<'o> Editor<'o> {
    pub fn new(opts: &'o RewriteOptions) -> Self {
        Editor {
            opts,
            tags: HashMap::default(),
            values_dropped: 0,
            metadata_moved: 0,
        }
    }

    pub(super) fn state(&mut self, tag: &[u8]) -> &mut TagState {
        if !self.tags.contains_key(tag) {
            let wanted = self.opts.tag_wanted(&String::from_utf8_lossy(tag));
            self.tags.insert(
                tag.to_vec(),
                TagState {
                    wanted,
                    ..Default::default()
                },
            );
        }
        self.tags.get_mut(tag).expect("inserted above")
    }

    /// Decides one record. `superseded(tag, k)` says whether the `k`-th value of `tag` in this
    /// record is one that preemption drops. An error means the record is not a valid Event in
    /// the reader's eyes (it skips such records whole, so the rewrite drops them too).
    pub fn decide(
        &mut self,
        data: &[u8],
        superseded: &dyn Fn(&[u8], u32) -> bool,
    ) -> std::result::Result<Decision, DecodeError> {
        if let Some(d) = self.simple(data, superseded) {
            return Ok(d);
        }
        let ev = Event::decode(data)?;
        // The same validation as the reader's: a record is used whole or not at all.
        match ev.what {
            What::TaggedRunMetadata(t) => {
                TaggedRunMetadata::decode(t)?;
            }
            What::SessionLog(b) => {
                SessionLog::decode(b)?;
            }
            _ => {}
        }
        let step_dropped = self.opts.step_dropped(ev.step);
        let blob_tag: &[u8] = match ev.what {
            What::Summary(s) => return self.summary(data, s, step_dropped, superseded),
            What::GraphDef(_) => GRAPH_TAG.as_bytes(),
            What::MetaGraphDef(_) => META_GRAPH_TAG.as_bytes(),
            What::TaggedRunMetadata(t) => TaggedRunMetadata::decode(t)?.tag,
            // file_version, session logs, log messages: not data of any series, always kept.
            _ => return Ok(Decision::Keep),
        };
        let wanted = self.state(blob_tag).wanted;
        if wanted && !step_dropped && !superseded(blob_tag, 0) {
            Ok(Decision::Keep)
        } else {
            self.values_dropped += 1;
            Ok(Decision::Drop)
        }
    }

    /// The commonest record (one `simple_value`, nothing else; see `proto::simple_scalar`)
    /// without the general path's allocations. None: take the general path (not that layout,
    /// or the value is the first kept one of a tag whose first metadata must move onto it).
    pub(super) fn simple(
        &mut self,
        data: &[u8],
        superseded: &dyn Fn(&[u8], u32) -> bool,
    ) -> Option<Decision> {
        let s = crate::proto::simple_scalar(data)?;
        let step_dropped = self.opts.step_dropped(s.step);
        let st = self.state(s.tag);
        // A legacy value without metadata decides its series by itself.
        if st.first.is_none() {
            st.first = Some(None);
        }
        if !st.wanted || step_dropped || superseded(s.tag, 0) {
            self.values_dropped += 1;
            return Some(Decision::Drop);
        }
        if !st.out_decided {
            if matches!(st.first, Some(Some(_))) {
                return None;
            }
            st.out_decided = true;
        }
        Some(Decision::Keep)
    }

    pub(super) fn summary(
        &mut self,
        data: &[u8],
        summary: &[u8],
        step_dropped: bool,
        superseded: &dyn Fn(&[u8], u32) -> bool,
    ) -> std::result::Result<Decision, DecodeError> {
        let values = summary_values(summary).collect::<std::result::Result<Vec<_>, _>>()?;
        let decoded = values
            .iter()
            .map(|v| SummaryValue::decode(v))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut edits = Vec::with_capacity(decoded.len());
        for (i, sv) in decoded.iter().enumerate() {
            let tag = sv.effective_tag();
            let k = decoded[..i]
                .iter()
                .filter(|o| o.effective_tag() == tag)
                .count() as u32;
            let legacy = legacy_plugin(&sv.value).is_some();
            let decider: Decider =
                if legacy || (sv.metadata.is_some() && sv.value != ValueKind::ObsoleteHisto) {
                    Some(sv.metadata.map(<[u8]>::to_vec))
                } else {
                    None
                };
            let st = self.state(tag);
            if st.first.is_none() {
                st.first.clone_from(&decider);
            }
            let kept = st.wanted && !step_dropped && !superseded(tag, k);
            if !kept {
                edits.push(ValueEdit::Drop);
                continue;
            }
            let mut edit = ValueEdit::Keep;
            if !st.out_decided {
                if let Some(first) = &st.first {
                    // The input has decided this series by now; the output's first deciding
                    // value must decide the same way.
                    st.out_decided = true;
                    match first {
                        Some(m) if sv.metadata != Some(m.as_slice()) => {
                            edit = ValueEdit::SetMeta(m.clone())
                        }
                        // Only a legacy value can lose its metadata and still decide its kind.
                        None if sv.metadata.is_some() && legacy => edit = ValueEdit::StripMeta,
                        _ => {}
                    }
                }
            }
            edits.push(edit);
        }
        let dropped = edits.iter().filter(|e| **e == ValueEdit::Drop).count();
        self.values_dropped += dropped as u64;
        self.metadata_moved += edits
            .iter()
            .filter(|e| matches!(e, ValueEdit::SetMeta(_) | ValueEdit::StripMeta))
            .count() as u64;
        if edits.iter().all(|e| *e == ValueEdit::Keep) {
            Ok(Decision::Keep)
        } else if dropped == edits.len() {
            Ok(Decision::Drop)
        } else {
            Ok(Decision::Replace(edit_event(data, &edits)?))
        }
    }
}

// ------------------------------------------------------------------------------------------
// Preemption, decided by the reader itself.

/// Values preemption drops, per input file (by its name relative to the input, as the
/// reader's `file` column has it) and record offset: each as (tag, k), the `k`-th value of
/// that tag in the record.
pub type Superseded = HashMap<String, HashMap<u64, Vec<(String, u32)>, FxBuild>>;

/// Which values TensorBoard's preemption rule drops (a record at step s drops the earlier
/// records of its tag with step >= s), decided on the rows the reader files, so the output is
/// exactly what `scan(restarts="preempt")` returns: which values count as points (kinds decided
/// across files, values unusable as their kind) is the reader's call, not a copy of it here.
/// Costs one read of the input with provenance, memory as for a scan of it.
pub fn superseded(
    src: &Path,
    runs: Option<&Regex>,
    max_len: u64,
    threads: usize,
    cancel: &AtomicBool,
) -> Result<Superseded> {
    // Data CRCs checked, as the rewrite's own reading does.
    let file = event_file::Options {
        provenance: true,
        max_len,
        verify: true,
        ..Default::default()
    };
    let opts = ReaderOptions {
        file,
        runs: runs.cloned(),
        restarts: Restarts::All,
        threads,
        step_lo: None,
        ..Default::default()
    };
    let mut reader = crate::load::Reader::new(src, opts)?;
    reader.load(cancel)?;
    let mut out = Superseded::new();
    for kind in Kind::ALL {
        preempt_kind(&reader.table(kind)?, &mut out)?;
    }
    Ok(out)
}

/// Names of a dictionary column's rows as ids shared across batches.
pub(super) fn name_ids(col: &dyn Array, names: &mut HashMap<String, usize>) -> Result<Vec<usize>> {
    let dict = col
        .as_dictionary_opt::<Int32Type>()
        .ok_or_else(|| Error::Other("expected a dictionary column".into()))?;
    let values = dict.values().as_string::<i32>();
    let local: Vec<usize> = (0..values.len())
        .map(|i| {
            let n = names.len();
            *names.entry(values.value(i).to_string()).or_insert(n)
        })
        .collect();
    Ok(dict
        .keys()
        .values()
        .iter()
        .map(|&k| local[k as usize])
        .collect())
}

/// The preemption rule over one kind's rows, as `restarts::apply` runs it; dropped values are
/// added to `out`.
pub(super) fn preempt_kind(batches: &[RecordBatch], out: &mut Superseded) -> Result<()> {
    let mut names: HashMap<String, usize> = HashMap::new();
    struct Rows {
        run: Vec<usize>,
        tag: Vec<usize>,
        file: Vec<usize>,
        step: Vec<i64>,
        offset: Vec<i64>,
        index: Option<Vec<i32>>,
    }
    let mut all = Vec::with_capacity(batches.len());
    for b in batches {
        let col = |name: &str| {
            b.schema()
                .index_of(name)
                .map(|i| b.column(i).clone())
                .map_err(|_| Error::Other(format!("the reader's table has no {name} column")))
        };
        all.push(Rows {
            run: name_ids(col("run")?.as_ref(), &mut names)?,
            tag: name_ids(col("tag")?.as_ref(), &mut names)?,
            file: name_ids(col("file")?.as_ref(), &mut names)?,
            step: col("step")?.as_primitive::<Int64Type>().values().to_vec(),
            offset: col("offset")?.as_primitive::<Int64Type>().values().to_vec(),
            index: col("index")
                .ok()
                .map(|c| c.as_primitive::<Int32Type>().values().to_vec()),
        });
    }
    let mut dropped: Vec<Vec<bool>> = all.iter().map(|r| vec![false; r.step.len()]).collect();
    // Per (run, tag): the kept rows as (batch, row, step), steps increasing.
    type Stack = Vec<(usize, usize, i64)>;
    let mut stacks: HashMap<(usize, usize), Stack, FxBuild> = HashMap::default();
    for (bi, r) in all.iter().enumerate() {
        for i in 0..r.step.len() {
            let s = r.step[i];
            // Further rows of one value (images of one summary, text elements) do not
            // preempt their own siblings.
            let continuation = r.index.as_ref().is_some_and(|ix| ix[i] > 0);
            let stack = stacks.entry((r.run[i], r.tag[i])).or_default();
            while let Some(&(pb, pi, ps)) = stack.last() {
                if continuation || ps < s {
                    break;
                }
                dropped[pb][pi] = true;
                stack.pop();
            }
            stack.push((bi, i, s));
        }
    }
    // A row's value is the k-th of its tag in its record; a record's rows are contiguous.
    // Ids first, names once per file and tag at the end.
    type ById = HashMap<usize, HashMap<u64, Vec<(usize, u32)>, FxBuild>, FxBuild>;
    let mut found: ById = HashMap::default();
    for (r, d) in all.iter().zip(&dropped) {
        let mut record: Option<(usize, i64)> = None;
        // Values of this record so far, per tag: records hold a handful, a Vec beats a map.
        let mut seen: Vec<(usize, u32)> = Vec::new();
        for i in 0..r.step.len() {
            if r.index.as_ref().is_some_and(|ix| ix[i] > 0) {
                continue;
            }
            if record != Some((r.file[i], r.offset[i])) {
                record = Some((r.file[i], r.offset[i]));
                seen.clear();
            }
            let k = match seen.iter_mut().find(|(t, _)| *t == r.tag[i]) {
                Some((_, n)) => {
                    *n += 1;
                    *n - 1
                }
                None => {
                    seen.push((r.tag[i], 1));
                    0
                }
            };
            if d[i] {
                found
                    .entry(r.file[i])
                    .or_default()
                    .entry(r.offset[i] as u64)
                    .or_default()
                    .push((r.tag[i], k));
            }
        }
    }
    let by_id: Vec<&String> = {
        let mut v: Vec<(&String, &usize)> = names.iter().collect();
        v.sort_by_key(|(_, &i)| i);
        v.into_iter().map(|(n, _)| n).collect()
    };
    for (file, records) in found {
        let dst = out.entry(by_id[file].clone()).or_default();
        for (offset, values) in records {
            dst.entry(offset)
                .or_default()
                .extend(values.into_iter().map(|(t, k)| (by_id[t].clone(), k)));
        }
    }
    Ok(())
}
