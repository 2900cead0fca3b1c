//! What PyTorch's `make_histogram` does with the counts: the errors it raises, grouping to
//! `max_bins`, trimming to the support with one empty bucket on the left, and the legacy
//! `HistogramProto` it returns.

use std::borrow::Cow;

use super::{default_edges, tally_values, Edges, Values};
use crate::proto::HistogramProto;

/// What `make_histogram` in PyTorch returns for these values and edges (default: TensorFlow's
/// buckets), with the same errors.
pub fn histogram(
    values: Values<'_>,
    edges: Option<&Edges>,
    max_bins: Option<usize>,
) -> Result<HistogramProto, String> {
    if values.is_empty() {
        return Err("The input has no element.".into());
    }
    if max_bins == Some(0) {
        return Err("max_bins must be at least 1 (or None for no limit)".into());
    }
    let edges = edges.unwrap_or_else(|| default_edges());
    let t = tally_values(values, edges);
    let mut counts = t.counts();
    // Borrowed unless grouping makes new ones: only the trimmed part is ever copied.
    let mut limits = Cow::Borrowed(edges.edges());
    if let Some(m) = max_bins {
        let bins = counts.len();
        if bins > m {
            // Buckets summed in groups, the last group padded with empty buckets; the left
            // edge of each group kept, plus the last edge.
            let group = bins / m;
            counts = counts.chunks(group).map(|c| c.iter().sum()).collect();
            let mut l: Vec<f64> = limits[..bins].iter().step_by(group).copied().collect();
            l.push(limits[bins]);
            limits = l.into();
        }
    }
    // Trim to the support, keeping one empty bucket on the left (TensorBoard stores right
    // edges only, so that bucket's right edge is the support's left edge).
    let first = counts.iter().position(|&c| c > 0);
    let last = counts.iter().rposition(|&c| c > 0);
    let (out_counts, out_limits): (Vec<f64>, Vec<f64>) = match (first, last) {
        (Some(start), Some(last)) => {
            let end = last + 1;
            let c: Vec<f64> = if start > 0 {
                counts[start - 1..end].iter().map(|&c| c as f64).collect()
            } else {
                std::iter::once(0.0)
                    .chain(counts[..end].iter().map(|&c| c as f64))
                    .collect()
            };
            (c, limits[start..=end].to_vec())
        }
        _ => {
            // Nothing counted (every value NaN or outside the edges). numpy's searchsorted
            // then yields start = len, end = 1: a one-bucket histogram keeps its single
            // (empty) bucket, anything longer comes out empty and PyTorch raises.
            if counts.len() == 1 {
                (vec![0.0], vec![limits[1]])
            } else {
                return Err(format!(
                    "The histogram is empty: none of the {} values lies within the bucket edges \
                     [{}, {}] (NaN is never counted); pass edges that cover the values",
                    values.len(),
                    limits[0],
                    limits[limits.len() - 1]
                ));
            }
        }
    };
    Ok(HistogramProto {
        min: t.min,
        max: t.max,
        num: values.len() as f64,
        sum: t.sum,
        sum_squares: t.sum_squares,
        bucket_limit: out_limits,
        bucket: out_counts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_like_torch() {
        // Buckets [0,1) [1,2) [2,3) [3,4]; values in buckets 1 and 2 only.
        let edges = Edges::new(&[0.0, 1.0, 2.0, 3.0, 4.0]).unwrap();
        let h = histogram(Values::F64(&[1.5, 2.5, 2.6]), Some(&edges), None).unwrap();
        // One empty bucket to the left (right edge 1.0), then the support.
        assert_eq!(h.bucket_limit, vec![1.0, 2.0, 3.0]);
        assert_eq!(h.bucket, vec![0.0, 1.0, 2.0]);
        assert_eq!((h.min, h.max, h.num), (1.5, 2.6, 3.0));
        // Support starting at bucket 0: a zero bucket whose right edge is the first edge.
        let h = histogram(Values::F64(&[0.5, 4.0]), Some(&edges), None).unwrap();
        assert_eq!(h.bucket_limit, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(h.bucket, vec![0.0, 1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn max_bins_groups_like_torch() {
        // 5 buckets, max 2: groups of 2, padded to 6: counts [a+b, c+d, e+0].
        let edges = Edges::new(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let vals = [0.5, 1.5, 1.6, 2.5, 4.5, 4.6, 4.7];
        let h = histogram(Values::F64(&vals), Some(&edges), Some(2)).unwrap();
        // Grouped limits [0, 2, 4, 5]; counts [3, 1, 3]; trimmed with a zero bucket first.
        assert_eq!(h.bucket_limit, vec![0.0, 2.0, 4.0, 5.0]);
        assert_eq!(h.bucket, vec![0.0, 3.0, 1.0, 3.0]);
    }

    #[test]
    fn errors_like_torch() {
        assert_eq!(
            histogram(Values::F64(&[]), None, None).unwrap_err(),
            "The input has no element."
        );
        let e = histogram(Values::F64(&[f64::NAN, 1e30]), None, None).unwrap_err();
        assert!(e.starts_with("The histogram is empty"), "{e}");
        assert!(Edges::new(&[1.0, 0.0])
            .unwrap_err()
            .contains("monotonically"));
        assert!(Edges::new(&[1.0]).is_err());
        assert!(Edges::new(&[0.0, f64::NAN]).is_err());
        // One bucket and nothing in it: numpy's arithmetic keeps the empty bucket.
        let one = Edges::new(&[0.0, 1.0]).unwrap();
        let h = histogram(Values::F64(&[5.0]), Some(&one), None).unwrap();
        assert_eq!(
            (h.bucket_limit.clone(), h.bucket.clone()),
            (vec![1.0], vec![0.0])
        );
    }

    #[test]
    fn nan_makes_min_max_nan() {
        let h = histogram(Values::F32(&[1.0, f32::NAN, -2.0]), None, None).unwrap();
        assert!(h.min.is_nan() && h.max.is_nan() && h.sum.is_nan());
        assert_eq!(h.bucket.iter().sum::<f64>(), 2.0);
        // inf - inf is NaN too, but min and max stay what they are.
        let h = histogram(
            Values::F64(&[f64::INFINITY, 1.0, f64::NEG_INFINITY]),
            None,
            None,
        )
        .unwrap();
        assert!(h.sum.is_nan());
        assert_eq!((h.min, h.max), (f64::NEG_INFINITY, f64::INFINITY));
    }
}
