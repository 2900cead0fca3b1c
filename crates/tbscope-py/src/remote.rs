//! `S3Fetcher`: listings, and ranged GETs into mirror files, for `tbscope/_mirror.py`, over
//! `tbscope-remote`. Plumbing: credentials come resolved from Python, the plan stays there.

use pyo3::prelude::*;
use tbscope_remote::{ObjectInfo, S3Config, S3Fetcher as Fetcher};

use crate::funnel::{guarded, Failure, Outcome};

/// A client of one S3 bucket; its methods may be called from many threads at once.
#[pyclass(frozen, module = "tbscope._core")]
pub struct S3Fetcher {
    inner: Fetcher,
}

#[pymethods]
impl S3Fetcher {
    #[new]
    #[pyo3(signature = (bucket, *, region=None, endpoint=None, key_id=None, secret=None, token=None, anonymous=false, retries=2))]
    #[allow(clippy::too_many_arguments)] // keyword-only options of one client, as Python passes them
    fn new(
        py: Python<'_>,
        bucket: String,
        region: Option<String>,
        endpoint: Option<String>,
        key_id: Option<String>,
        secret: Option<String>,
        token: Option<String>,
        anonymous: bool,
        retries: usize,
    ) -> Outcome<Self> {
        let config = S3Config {
            bucket,
            region,
            endpoint,
            key_id,
            secret,
            token,
            anonymous,
            retries,
        };
        // Without a region and endpoint, AWS is asked for the bucket's: a request.
        let inner = py.detach(|| guarded(|| Ok(Fetcher::new(&config)?)))?;
        Ok(Self { inner })
    }

    /// Every object under `prefix` (recursively, at `/` boundaries): (key, size, modified
    /// seconds), without the GIL.
    fn list(&self, py: Python<'_>, prefix: &str) -> Outcome<Vec<(String, u64, f64)>> {
        let objects = py.detach(|| guarded(|| Ok(self.inner.list(prefix)?)))?;
        Ok(objects.into_iter().map(row).collect())
    }

    /// The object `key` itself: (key, size, modified seconds); FileNotFoundError if none.
    fn head(&self, py: Python<'_>, key: &str) -> Outcome<(String, u64, f64)> {
        Ok(row(py.detach(|| guarded(|| Ok(self.inner.head(key)?)))?))
    }

    /// Bytes `[start, end)` of object `key` written into file descriptor `fd` at `start` as
    /// they arrive, without the GIL; returns the count written.
    fn get_into(&self, py: Python<'_>, key: &str, start: u64, end: u64, fd: i32) -> Outcome<u64> {
        if fd < 0 {
            return Err(Failure::Value(format!("not a file descriptor: {fd}")));
        }
        py.detach(|| {
            guarded(|| {
                let file = crate::borrowed_file(fd);
                Ok(self.inner.get_into(key, start, end, &file)?)
            })
        })
    }
}

fn row(o: ObjectInfo) -> (String, u64, f64) {
    (o.key, o.size, o.modified)
}
