//! One tag's rows of a scalar table, grouped by run: a counting sort.
//!
//! The reader keeps scalars in run, file and record order with the tags interleaved; a chart
//! wants one tag across many runs, each run's points contiguous (a range for
//! [`crate::downsample::m4`]). [`count`] and [`fill`] make that layout in two passes over the
//! table's run and tag codes, stable (each run's points stay in reading order) and without
//! sorting. Both take the table's chunks as they are (every chunk has its own dictionaries).

/// One chunk of a table: its rows' dictionary codes and the columns to gather.
pub struct Chunk<'a> {
    /// The run code of each row.
    pub runs: &'a [i32],
    /// The tag code of each row.
    pub tags: &'a [i32],
    /// The code of the wanted tag in this chunk's dictionary (None: the chunk has none of it).
    pub tag: Option<i32>,
    /// The group of each run code, or -1 to leave that run out.
    pub group: &'a [i64],
    /// Columns of 8-byte values (int64 or float64 bits), one value per row.
    pub columns: Vec<&'a [u64]>,
}

/// Rows are looked at in blocks: a block of one run (the usual case, runs being contiguous)
/// costs one group lookup and a vectorised count of its tag codes.
const BLOCK: usize = 64;

impl Chunk<'_> {
    fn group_of(&self, run: i32) -> Result<Option<usize>, String> {
        match usize::try_from(run).ok().and_then(|r| self.group.get(r)) {
            Some(&g) if g < 0 => Ok(None),
            Some(&g) => Ok(Some(g as usize)),
            None => Err(format!(
                "run code {run} is outside the {} groups given",
                self.group.len()
            )),
        }
    }

    fn check(&self, groups: usize) -> Result<(), String> {
        if self.runs.len() != self.tags.len()
            || self.columns.iter().any(|c| c.len() != self.runs.len())
        {
            return Err("a chunk's codes and columns differ in length".into());
        }
        if self.group.iter().any(|&g| g >= groups as i64) {
            return Err(format!("a group is not below the {groups} groups"));
        }
        Ok(())
    }
}

/// The number of rows of the wanted tag in each of `groups` groups, over all chunks.
pub fn count(chunks: &[Chunk<'_>], groups: usize) -> Result<Vec<usize>, String> {
    let mut counts = vec![0usize; groups];
    for c in chunks {
        c.check(groups)?;
        let Some(tag) = c.tag else { continue };
        // Counting needs no row positions: a block of one run adds its matches at once.
        for (rb, tb) in c.runs.chunks(BLOCK).zip(c.tags.chunks(BLOCK)) {
            let r0 = rb[0];
            let mut same = true;
            let mut hits = 0usize;
            for (&r, &t) in rb.iter().zip(tb) {
                same &= r == r0;
                hits += usize::from(t == tag);
            }
            if hits == 0 {
                continue;
            }
            if same {
                if let Some(g) = c.group_of(r0)? {
                    counts[g] += hits;
                }
            } else {
                for (&r, &t) in rb.iter().zip(tb) {
                    if t == tag {
                        if let Some(g) = c.group_of(r)? {
                            counts[g] += 1;
                        }
                    }
                }
            }
        }
    }
    Ok(counts)
}

/// Writes the wanted rows' columns into `outs` (one per column), group after group in the
/// order of `counts` (as [`count`] gave them), each group's rows in chunk and row order.
pub fn fill(chunks: &[Chunk<'_>], counts: &[usize], outs: &mut [&mut [u64]]) -> Result<(), String> {
    let total: usize = counts.iter().sum();
    if outs.iter().any(|o| o.len() != total) {
        return Err(format!("each output must hold the {total} rows counted"));
    }
    let mut at: Vec<usize> = Vec::with_capacity(counts.len());
    let mut sum = 0;
    for &c in counts {
        at.push(sum);
        sum += c;
    }
    let ends: Vec<usize> = at.iter().zip(counts).map(|(a, c)| a + c).collect();
    let overflow = || "the chunks hold more rows than counted".to_string();
    for c in chunks {
        c.check(counts.len())?;
        if c.columns.len() != outs.len() {
            return Err("every chunk needs one column per output".into());
        }
        let Some(tag) = c.tag else { continue };
        // The block's rows of the tag, then each column copied for them: the tag codes are
        // read once and each output is written in sequence.
        let mut hits = [0u8; BLOCK];
        for (b, (rb, tb)) in c.runs.chunks(BLOCK).zip(c.tags.chunks(BLOCK)).enumerate() {
            let base = b * BLOCK;
            let r0 = rb[0];
            let mut same = true;
            let mut n = 0usize;
            for (i, (&r, &t)) in rb.iter().zip(tb).enumerate() {
                same &= r == r0;
                hits[n] = i as u8;
                n += usize::from(t == tag);
            }
            if n == 0 {
                continue;
            }
            if same {
                let Some(g) = c.group_of(r0)? else { continue };
                let pos = at[g];
                if pos + n > ends[g] {
                    return Err(overflow());
                }
                for (o, col) in outs.iter_mut().zip(&c.columns) {
                    let (dst, src) = (&mut o[pos..pos + n], &col[base..base + rb.len()]);
                    for (d, &i) in dst.iter_mut().zip(&hits[..n]) {
                        *d = src[i as usize];
                    }
                }
                at[g] = pos + n;
            } else {
                for &i in &hits[..n] {
                    let Some(g) = c.group_of(rb[i as usize])? else {
                        continue;
                    };
                    if at[g] >= ends[g] {
                        return Err(overflow());
                    }
                    for (o, col) in outs.iter_mut().zip(&c.columns) {
                        o[at[g]] = col[base + i as usize];
                    }
                    at[g] += 1;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_one_tag_are_grouped_stably() {
        // Two chunks (a reload appended one), runs interleaved across them; tag 1 wanted.
        let runs_a = [0, 0, 0, 0, 1, 1, 1, 2, 2];
        let tags_a = [1, 0, 1, 1, 1, 0, 1, 1, 1];
        let vals_a: Vec<u64> = (0..9).collect();
        let runs_b = [0, 0, 1];
        let tags_b = [0, 0, 0]; // its own dictionary: the wanted tag is code 0 here
        let vals_b: Vec<u64> = (100..103).collect();
        // Chunk a's run 2 is left out; chunk b's runs map to groups in another order.
        let chunks = [
            Chunk {
                runs: &runs_a,
                tags: &tags_a,
                tag: Some(1),
                group: &[1, 0, -1],
                columns: vec![&vals_a],
            },
            Chunk {
                runs: &runs_b,
                tags: &tags_b,
                tag: Some(0),
                group: &[1, 0],
                columns: vec![&vals_b],
            },
        ];
        let counts = count(&chunks, 2).unwrap();
        assert_eq!(counts, vec![3, 5]);
        let mut out = vec![0u64; 8];
        fill(&chunks, &counts, &mut [&mut out]).unwrap();
        assert_eq!(out, vec![4, 6, 102, 0, 2, 3, 100, 101]);
    }

    #[test]
    fn long_runs_and_mixed_blocks_agree_with_a_plain_loop() {
        let mut runs = Vec::new();
        let mut tags = Vec::new();
        let mut s = 1u64;
        for r in 0..37 {
            let len = (r * 53) % 300;
            for i in 0..len {
                runs.push(r as i32);
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                tags.push(if i % 5 == 0 {
                    (s % 7) as i32
                } else {
                    (i % 3) as i32
                });
            }
        }
        let vals: Vec<u64> = (0..runs.len() as u64).collect();
        let group: Vec<i64> = (0..37)
            .map(|r| if r % 6 == 5 { -1 } else { (36 - r) as i64 / 2 })
            .collect();
        let chunk = [Chunk {
            runs: &runs,
            tags: &tags,
            tag: Some(2),
            group: &group,
            columns: vec![&vals, &vals],
        }];
        let counts = count(&chunk, 19).unwrap();
        let mut want: Vec<Vec<u64>> = vec![Vec::new(); 19];
        for i in 0..runs.len() {
            let g = group[runs[i] as usize];
            if tags[i] == 2 && g >= 0 {
                want[g as usize].push(i as u64);
            }
        }
        assert_eq!(counts, want.iter().map(Vec::len).collect::<Vec<_>>());
        let total = counts.iter().sum();
        let (mut a, mut b) = (vec![0u64; total], vec![0u64; total]);
        fill(&chunk, &counts, &mut [&mut a, &mut b]).unwrap();
        assert_eq!(a, want.concat());
        assert_eq!(a, b);
    }

    #[test]
    fn bad_codes_are_errors() {
        let chunk = [Chunk {
            runs: &[0, 3],
            tags: &[0, 0],
            tag: Some(0),
            group: &[0, 0],
            columns: vec![],
        }];
        assert!(count(&chunk, 1).is_err());
        let chunk = [Chunk {
            runs: &[0],
            tags: &[0],
            tag: Some(0),
            group: &[5],
            columns: vec![],
        }];
        assert!(count(&chunk, 1).is_err());
        let chunk = [Chunk {
            runs: &[0],
            tags: &[0],
            tag: Some(0),
            group: &[0],
            columns: vec![],
        }];
        assert!(fill(&chunk, &[0], &mut []).is_err());
    }
}
