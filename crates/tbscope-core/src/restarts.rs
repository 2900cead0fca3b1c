//! Restart handling over loaded tables: TensorBoard's preemption rule and the step bound.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, BooleanArray, RecordBatch};

use crate::error::{Error, Result};

/// Per (run, tag): the rows still kept, as (batch, row, step), in increasing step order.
type Stack = Vec<(usize, usize, i64)>;

/// Applies preemption (when `preempt`) and then `step >= step_lo` to batches in row order.
///
/// Preemption: a record at step s removes the earlier records of its (run, tag) with step >= s,
/// which is what TensorBoard's reservoirs do when a job restarts from a checkpoint. Kept steps
/// of a series therefore always increase, so each series needs only a stack of kept rows.
pub fn apply(
    batches: &[RecordBatch],
    preempt: bool,
    step_lo: Option<i64>,
) -> Result<Vec<RecordBatch>> {
    let mut keep: Vec<Vec<bool>> = batches.iter().map(|b| vec![true; b.num_rows()]).collect();
    if preempt {
        // Each batch has its own (compacted) dictionaries: series are keyed by name ids shared
        // across batches.
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut ids = |col: &dyn Array| -> Vec<usize> {
            let dict = col.as_dictionary::<Int32Type>();
            let values = dict.values().as_string::<i32>();
            let local: Vec<usize> = (0..values.len())
                .map(|i| {
                    let n = names.len();
                    *names.entry(values.value(i).to_string()).or_insert(n)
                })
                .collect();
            dict.keys()
                .values()
                .iter()
                .map(|&k| local[k as usize])
                .collect()
        };
        let mut stacks: HashMap<(usize, usize), Stack> = HashMap::new();
        for (bi, b) in batches.iter().enumerate() {
            let runs = ids(b.column(0).as_ref());
            let tags = ids(b.column(1).as_ref());
            let steps = b.column(2).as_primitive::<Int64Type>();
            // Rows with index > 0 are further elements of the same record (images of one
            // summary, text elements): they do not preempt their own siblings.
            let index = b
                .schema()
                .index_of("index")
                .ok()
                .map(|i| b.column(i).as_primitive::<Int32Type>().clone());
            for i in 0..b.num_rows() {
                let s = steps.value(i);
                let stack = stacks.entry((runs[i], tags[i])).or_default();
                let continuation = index.as_ref().is_some_and(|ix| ix.value(i) > 0);
                while let Some(&(pb, pi, ps)) = stack.last() {
                    if continuation {
                        break;
                    }
                    if ps < s {
                        break;
                    }
                    keep[pb][pi] = false;
                    stack.pop();
                }
                stack.push((bi, i, s));
            }
        }
    }
    if let Some(lo) = step_lo {
        for (b, k) in batches.iter().zip(keep.iter_mut()) {
            let steps = b.column(2).as_primitive::<Int64Type>();
            for (i, kk) in k.iter_mut().enumerate() {
                *kk &= steps.value(i) >= lo;
            }
        }
    }
    batches
        .iter()
        .zip(keep)
        .map(|(b, k)| {
            arrow_select::filter::filter_record_batch(b, &BooleanArray::from(k))
                .map_err(|e| Error::Other(format!("filtering rows failed: {e}")))
        })
        .collect()
}
