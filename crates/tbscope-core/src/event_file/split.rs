//! Where to cut one large file so that several threads can parse it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::model::CHUNK;
use crate::tf_record::HEADER_LEN;

/// Record boundaries after `from`, about `piece` bytes apart, found by hopping from header to
/// header (length and its CRC only; payloads are not decoded), so one large file can be parsed
/// by several threads. Stops early at a header that does not check out: from there on the
/// single reader that takes the last piece handles corruption as usual.
pub fn split_points(path: &Path, from: u64, piece: u64, max_len: u64) -> Vec<u64> {
    split_points_within(path, from, piece, max_len, u64::MAX)
}

/// [`split_points`] in the first `end` bytes of the file (those of a file still being filled
/// in that are there: see [`super::Until::Upto`]).
pub(crate) fn split_points_within(
    path: &Path,
    from: u64,
    piece: u64,
    max_len: u64,
    end: u64,
) -> Vec<u64> {
    let mut cuts = Vec::new();
    let Ok(file) = File::open(path) else {
        return cuts;
    };
    let Ok(size) = file.metadata().map(|m| m.len().min(end)) else {
        return cuts;
    };
    let mut buf = vec![0u8; CHUNK];
    let (mut win_start, mut win_len) = (0u64, 0usize);
    let mut pos = from;
    let mut next_cut = from.saturating_add(piece);
    while pos + HEADER_LEN as u64 <= size {
        if !(pos >= win_start && pos + HEADER_LEN as u64 <= win_start + win_len as u64) {
            // Refill at the header; payloads of records longer than the window are never read.
            let want = (size - pos).min(CHUNK as u64) as usize;
            win_start = pos;
            win_len = 0;
            while win_len < want {
                match file.read_at(&mut buf[win_len..want], pos + win_len as u64) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => win_len += n,
                }
            }
            if win_len < HEADER_LEN {
                break;
            }
        }
        let h = &buf[(pos - win_start) as usize..][..HEADER_LEN];
        let len = u64::from_le_bytes(h[..8].try_into().unwrap());
        if len > max_len
            || crate::masked_crc::masked_crc32c(&h[..8])
                != u32::from_le_bytes(h[8..12].try_into().unwrap())
        {
            break;
        }
        // A cut goes only where a header has just checked out.
        if pos >= next_cut && pos > from {
            cuts.push(pos);
            next_cut = pos.saturating_add(piece);
        }
        let next = pos + crate::tf_record::OVERHEAD as u64 + len;
        if next >= size {
            break;
        }
        pos = next;
    }
    cuts
}
