//! tbscope-core: TensorBoard event files to Arrow columns, losslessly and near disk speed.
//!
//! Layers, bottom up: [`masked_crc`] → [`tf_record`] (framing) → [`proto`] / [`tensor`]
//! (zero-copy decoding) → [`data_compat`] (kinds) → [`event_file`] (one file into columns) →
//! [`logdir`] (runs and files) → [`load`] (parallel reads, merging, reloads) → [`columns`]
//! (Arrow). The other direction: [`writer`] encodes and frames events on a background thread,
//! with [`histogram`] binning values like PyTorch. For drawing: [`downsample`] (M4 and
//! TensorBoard's smoothing). [`cache`] wraps a reader with a cache directory. No Python here:
//! `tbscope-py` is a thin binding over [`scan::Scan`] (a [`load::Reader`] or a
//! [`cache::CachedReader`]) and [`writer::EventWriter`].

pub mod cache;
pub mod columns;
pub mod data_compat;
pub mod downsample;
pub mod error;
pub mod event_file;
pub mod fold;
pub mod free;
pub mod group;
pub mod histogram;
pub mod hparams;
pub mod load;
pub mod logdir;
pub mod masked_crc;
pub mod media;
pub mod mem;
pub mod pool;
pub mod profile;
pub mod proto;
pub mod restarts;
pub mod rewrite;
pub mod runstats;
pub mod scan;
pub mod sys;
pub mod tensor;
pub mod text;
pub mod tf_record;
pub mod writer;

pub use cache::{CacheWrite, CachedReader, WriteDone};
pub use data_compat::Kind;
pub use error::{Error, Result};
pub use load::{Reader, ReaderOptions, Restarts};
pub use scan::Scan;
