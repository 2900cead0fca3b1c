//! Listings of and ranged GETs from S3 (and S3-compatible servers) into local files: the
//! native transport of tbscope's remote mirror (`python/tbscope/_mirror.py`).
//!
//! A crate of its own so that tokio, HTTP and TLS stay out of `tbscope-core`, which parses
//! bytes already on disk and is used without them (the fuzz targets, the benches). Python
//! keeps the plan (which byte ranges of which files, in what order, retries per piece, rolling
//! a failed file back); this crate moves one range of one object into a file at its offset,
//! streaming the response body (a piece is never held whole in memory), with the GIL released
//! by the caller. Calls from many threads share one client (one connection pool) and one
//! small tokio runtime, made on first use.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, RetryConfig,
};

/// Worker threads of the shared runtime: the work is waiting on sockets and copying bytes to
/// the page cache, and the parse of the files already fetched wants the other CPUs.
const RUNTIME_THREADS: usize = 2;

/// Where to fetch from and as whom (credentials resolved by the caller: Python has the
/// credential chain of botocore, which s3fs already uses).
#[derive(Debug, Clone, Default)]
pub struct S3Config {
    pub bucket: String,
    pub region: Option<String>,
    /// `http://127.0.0.1:9000`: path-style requests to an S3-compatible server.
    pub endpoint: Option<String>,
    pub key_id: Option<String>,
    pub secret: Option<String>,
    pub token: Option<String>,
    /// Unsigned requests (a public bucket).
    pub anonymous: bool,
    /// Tries of a request inside the client (after the first), with backoff from 100 ms.
    pub retries: usize,
}

/// One object of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectInfo {
    /// The key, as the store spells it (object_store's encoding for characters it refuses).
    pub key: String,
    pub size: u64,
    /// Last modified, seconds since the epoch.
    pub modified: f64,
}

impl From<object_store::ObjectMeta> for ObjectInfo {
    fn from(m: object_store::ObjectMeta) -> Self {
        ObjectInfo {
            key: m.location.to_string(),
            size: m.size,
            modified: m.last_modified.timestamp_micros() as f64 / 1e6,
        }
    }
}

/// Why a range could not be fetched.
#[derive(Debug)]
pub enum FetchError {
    /// The object is not there (removed since it was listed).
    NotFound(String),
    /// The key cannot be named in a request here (characters object_store refuses).
    BadKey(String),
    /// Anything else: the store's answer, the network, the local file.
    Other(String),
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::NotFound(m) | FetchError::BadKey(m) | FetchError::Other(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for FetchError {}

/// The process's runtime, made on first use. A child forked after it was made has none of its
/// threads (a `block_on` there would wait forever for an I/O driver nobody runs), so a new
/// process gets a runtime of its own; the parent's copy is leaked, never dropped (dropping
/// waits for threads that are not there).
fn runtime() -> Arc<tokio::runtime::Runtime> {
    static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((made_in, rt)) = slot.as_ref() {
        if *made_in == pid {
            return Arc::clone(rt);
        }
    }
    if let Some((_, inherited)) = slot.take() {
        std::mem::forget(inherited);
    }
    // reqwest is built without a crypto provider of its own (see Cargo.toml); an error here
    // means the process already has one, which serves as well.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("tbscope-s3")
            .enable_all()
            .build()
            .expect("tokio runtime: the system refused threads or an epoll instance"),
    );
    *slot = Some((pid, Arc::clone(&rt)));
    rt
}

/// A client of one bucket. Its connections belong to the process that made it: a forked
/// child makes its own client (`get_into` refuses, saying so).
pub struct S3Fetcher {
    store: Arc<dyn ObjectStore>,
    pid: u32,
}

impl S3Fetcher {
    pub fn new(config: &S3Config) -> Result<Self, FetchError> {
        let rt = runtime();
        let mut options = ClientOptions::new()
            .with_connect_timeout(Duration::from_secs(10))
            .with_timeout(Duration::from_secs(120));
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&config.bucket)
            .with_skip_signature(config.anonymous)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(2),
                    base: 2.0,
                },
                max_retries: config.retries,
                retry_timeout: Duration::from_secs(60),
            });
        if let Some(endpoint) = &config.endpoint {
            options = options.with_allow_http(endpoint.starts_with("http://"));
            builder = builder
                .with_endpoint(endpoint.trim_end_matches('/'))
                .with_virtual_hosted_style_request(false);
        }
        let region = match &config.region {
            Some(r) => r.clone(),
            // AWS itself answers a bucket's region to a HEAD; elsewhere any name signs.
            None if config.endpoint.is_none() => rt
                .block_on(object_store::aws::resolve_bucket_region(
                    &config.bucket,
                    &options,
                ))
                .map_err(|e| {
                    FetchError::Other(format!(
                        "finding the region of bucket {}: {e}",
                        config.bucket
                    ))
                })?,
            None => "us-east-1".to_string(),
        };
        builder = builder.with_region(region).with_client_options(options);
        if !config.anonymous {
            if let (Some(k), Some(s)) = (&config.key_id, &config.secret) {
                builder = builder.with_access_key_id(k).with_secret_access_key(s);
                if let Some(t) = &config.token {
                    builder = builder.with_token(t);
                }
            }
        }
        let store = builder
            .build()
            .map_err(|e| FetchError::Other(e.to_string()))?;
        Ok(Self {
            store: Arc::new(store),
            pid: std::process::id(),
        })
    }

    /// Every object under `prefix` (a key prefix ending at a `/` boundary: `logs/run1` lists
    /// `logs/run1/...`, not `logs/run10/...`; empty: the whole bucket), recursively, the
    /// store's pages fetched one after another.
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, FetchError> {
        self.same_process()?;
        let prefix = prefix.trim_matches('/');
        let prefix = (!prefix.is_empty())
            .then(|| Path::parse(prefix))
            .transpose()
            .map_err(|e| FetchError::BadKey(e.to_string()))?;
        let store = Arc::clone(&self.store);
        runtime().block_on(async move {
            store
                .list(prefix.as_ref())
                .map_ok(ObjectInfo::from)
                .try_collect()
                .await
                .map_err(store_error)
        })
    }

    /// The object `key` itself: its size and time (NotFound when there is none).
    pub fn head(&self, key: &str) -> Result<ObjectInfo, FetchError> {
        self.same_process()?;
        let path = Path::parse(key).map_err(|e| FetchError::BadKey(e.to_string()))?;
        let store = Arc::clone(&self.store);
        runtime().block_on(async move {
            store
                .head(&path)
                .await
                .map(ObjectInfo::from)
                .map_err(store_error)
        })
    }

    fn same_process(&self) -> Result<(), FetchError> {
        if std::process::id() != self.pid {
            return Err(FetchError::Other(
                "this S3 client was made by the parent of this forked process: make a new one"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Bytes `[start, end)` of object `key` into `file` at offset `start`, written as they
    /// arrive; returns how many were written (fewer than asked when the object is shorter).
    pub fn get_into(
        &self,
        key: &str,
        start: u64,
        end: u64,
        file: &File,
    ) -> Result<u64, FetchError> {
        self.same_process()?;
        let path = Path::parse(key).map_err(|e| FetchError::BadKey(e.to_string()))?;
        if end <= start {
            return Ok(0);
        }
        let store = Arc::clone(&self.store);
        runtime().block_on(async move {
            let options = GetOptions {
                range: Some(GetRange::Bounded(start..end)),
                ..Default::default()
            };
            let got = store.get_opts(&path, options).await.map_err(store_error)?;
            let mut body = got.into_stream();
            let mut at = start;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| FetchError::Other(e.to_string()))?;
                // A page-cache copy: short enough to do on the runtime's thread.
                file.write_all_at(&chunk, at)
                    .map_err(|e| FetchError::Other(format!("writing the mirror file: {e}")))?;
                at += chunk.len() as u64;
            }
            Ok(at - start)
        })
    }
}

/// A store's error as the caller tells them apart: a missing object, or anything else.
fn store_error(e: object_store::Error) -> FetchError {
    match e {
        object_store::Error::NotFound { .. } => FetchError::NotFound(e.to_string()),
        e => FetchError::Other(e.to_string()),
    }
}
