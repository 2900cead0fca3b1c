//! TFRecord framing: `u64 length | u32 masked_crc(length) | data | u32 masked_crc(data)`.
//!
//! All integers are little-endian; there is no file header, footer or index. [`parse_frame`]
//! classifies what starts at a position of a byte window; [`Walker`] walks a file's records
//! with the one set of rules every reader here uses: whole records, damage skipped up to the
//! next whole record (resynchronisation, at CRC cost linear in the bytes skipped), and what a
//! record running past the end of the bytes means ([`End`]: a pending tail, a torn record or
//! a stopped tail, damage before a segment cut). Which [`End`] applies to a file is the
//! loader's decision (`load`), not the walker's.
//!
//! `frame`: one record's bytes (parsing, writing). `source`: where a walk reads from.
//! `walk`: the [`Walker`]. `resync`: finding the next record boundary in damaged bytes.

mod frame;
mod resync;
mod source;
mod walk;

pub use frame::{
    data_crc_ok, framed, parse_frame, payload, write_record, Corruption, Frame, FOOTER_LEN,
    HEADER_LEN, OVERHEAD,
};
pub use source::Source;
pub use walk::{Damage, End, Step, WalkOptions, Walker};
