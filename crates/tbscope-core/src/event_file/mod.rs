//! Reads one event file (from a saved offset) into per-kind columns.
//!
//! Files are read with `pread` into a reused buffer, never mapped: a file truncated under a
//! mapping kills the process with SIGBUS. Bytes past the size seen at the start are left for the
//! next reload, so a file that keeps growing cannot keep a read going forever.

//!
//! By concept: [`model`] (options, problems, series metadata, cursors, what a pass returns),
//! [`parser`] (the record loop, [`read_file`]), [`fused`] (its CRC flavours and short byte
//! compare), [`append`] (a value into its table), [`split`]
//! (cut points for parallel parsing) and [`records`] (whole records for the compat layer).

mod append;
mod fused;
mod model;
mod parser;
pub mod records;
mod split;

pub use append::{append, append_tensor};
pub use model::*;
pub use parser::{read_file, read_file_into};
pub use split::split_points;
pub(crate) use split::split_points_within;
