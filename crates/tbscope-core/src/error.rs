//! The core's error type. The bindings map it to Python exceptions in one place.

use std::fmt;
use std::path::Path;

#[derive(Debug)]
pub enum Error {
    /// A path could not be read (missing, permission, ...).
    Io {
        source: std::io::Error,
        path: String,
    },
    /// Bad data found while `strict` reading was asked for.
    Corrupt {
        file: String,
        offset: u64,
        reason: String,
    },
    /// The caller's arguments cannot work; the message says what to do instead.
    InvalidArgument(String),
    /// The read was cancelled (Ctrl-C).
    Interrupted,
    Other(String),
}

impl Error {
    pub fn io(source: std::io::Error, path: &Path) -> Error {
        Error::Io {
            source,
            path: path.display().to_string(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { source, path } => write!(f, "{path}: {source}"),
            Error::Corrupt {
                file,
                offset,
                reason,
            } => write!(f, "{file} at byte {offset}: {reason}"),
            Error::InvalidArgument(m) | Error::Other(m) => f.write_str(m),
            Error::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
