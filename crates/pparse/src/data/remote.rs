//! Objects on a web server or an object store, read with range requests.
//!
//! A [`RemoteSource`] opens an `http://`, `https://` or `s3://bucket/key`
//! URL as a [`Source`]. Nothing is downloaded up front: reads are served
//! from a cache of fixed-size blocks, missing neighbours are fetched in one
//! range request, and a sequential reader gets a growing read-ahead, so
//! listing the tensors of a checkpoint or the members of a tar.gz fetches
//! only the bytes the parsers look at.
//!
//! The network code is async (tokio); each source owns a small runtime and
//! a reader thread waits for its request on a channel, so `read_at` works
//! from any number of threads, including ones inside another runtime.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use parking_lot::{Condvar, Mutex};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_RANGE, RANGE};

use super::source::Source;

/// Bytes per cached block: large enough that a request's latency is paid
/// rarely, small enough that a header read does not pull megabytes.
const BLOCK: u64 = 256 << 10;
/// Bytes of blocks a source keeps (least recently used go first).
const BUDGET: u64 = 32 << 20;
/// Blocks one round of a read asks for, so a huge `read_at` never holds
/// more than this beyond the budget.
const MAX_RUN: u64 = 16;
/// Most blocks read ahead of a sequential reader.
const MAX_AHEAD: u64 = 8;
/// Attempts of an HTTP request that failed in a way worth trying again.
const HTTP_ATTEMPTS: u32 = 3;

/// How long remote reads may take: a server that stalls, trickles or
/// never answers fails the read instead of holding pparse. See
/// [`RemoteLimits::from_env`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteLimits {
    /// One request, from connecting to the last byte of its answer (not
    /// only the gap between two bytes: a server that trickles fails).
    pub request: Duration,
    /// One read: every attempt of its requests and the pauses between.
    pub read: Duration,
}

impl Default for RemoteLimits {
    fn default() -> Self {
        RemoteLimits {
            request: Duration::from_secs(30),
            read: Duration::from_secs(120),
        }
    }
}

impl RemoteLimits {
    /// The defaults (30 s a request, 120 s a read), or the seconds in
    /// `PPARSE_REMOTE_TIMEOUT` (a request) and `PPARSE_REMOTE_DEADLINE` (a
    /// read), which may have decimals (`0.5`). A value that is not a
    /// positive number is ignored.
    pub fn from_env() -> RemoteLimits {
        let secs = |var: &str| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64)
        };
        let d = RemoteLimits::default();
        RemoteLimits {
            request: secs("PPARSE_REMOTE_TIMEOUT").unwrap_or(d.request),
            read: secs("PPARSE_REMOTE_DEADLINE").unwrap_or(d.read),
        }
    }
}

/// Whether `s` names a remote object (`http://`, `https://`, `s3://`)
/// rather than a local path.
pub fn is_remote_url(s: &str) -> bool {
    let scheme = s.split_once("://").map(|(scheme, _)| scheme);
    scheme.is_some_and(|p| {
        ["http", "https", "s3"]
            .iter()
            .any(|s| p.eq_ignore_ascii_case(s))
    })
}

/// What remote reads have cost: requests sent (failed ones included) and
/// bytes of object data received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemoteStats {
    /// Requests sent, the size lookup and failed attempts included.
    pub requests: u64,
    /// Bytes of object data received.
    pub bytes_fetched: u64,
}

static TOTAL_REQUESTS: AtomicU64 = AtomicU64::new(0);
static TOTAL_BYTES: AtomicU64 = AtomicU64::new(0);

/// Parts of an upload ([`put_file`]): S3's smallest part is 5 MiB.
const PART: usize = 8 << 20;

/// Writes the bytes of `file` to the object at `url`, replacing it as a
/// whole (an S3 object is never seen half written): what a shared index
/// kept beside the data is written with. Only `s3://` takes writes; a web
/// server is read only. Files up to one part go up in one request, bigger
/// ones in parts of 8 MiB, so memory stays at a few parts whatever the
/// size.
pub fn put_file(url: &str, file: &std::fs::File) -> io::Result<()> {
    use object_store::{PutPayload, WriteMultipart};
    use std::os::unix::fs::FileExt;
    let fail = |kind, why: String| io::Error::new(kind, format!("{url}: {why}"));
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if !scheme.eq_ignore_ascii_case("s3") {
        return Err(fail(
            io::ErrorKind::Unsupported,
            "only s3:// objects are written (a web server is read only)".into(),
        ));
    }
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let key = ObjectPath::parse(key)
        .ok()
        .filter(|k| !bucket.is_empty() && k.filename().is_some())
        .ok_or_else(|| {
            fail(
                io::ErrorKind::InvalidInput,
                "an S3 URL is s3://BUCKET/KEY".into(),
            )
        })?;
    let limits = RemoteLimits::from_env();
    let store = s3_store(bucket, &limits)
        .map_err(|e| fail(io::ErrorKind::InvalidInput, error_chain(&e)))?;
    let len = file.metadata()?.len();
    let file = file.try_clone()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let url_owned = url.to_string();
    let job = async move {
        let read = |at: u64, n: usize| -> io::Result<Bytes> {
            let mut buf = vec![0u8; n];
            file.read_exact_at(&mut buf, at)?;
            Ok(Bytes::from(buf))
        };
        if len <= PART as u64 {
            let bytes = read(0, len as usize)?;
            store
                .put(&key, PutPayload::from(bytes))
                .await
                .map_err(|e| store_error(&url_owned, e))?;
            return Ok(());
        }
        let upload = store
            .put_multipart(&key)
            .await
            .map_err(|e| store_error(&url_owned, e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(PART as u64) as usize;
            let part = match read(at, n) {
                Ok(p) => p,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(e);
                }
            };
            w.wait_for_capacity(2)
                .await
                .map_err(|e| store_error(&url_owned, e))?;
            w.put(part);
            at += n as u64;
        }
        w.finish().await.map_err(|e| store_error(&url_owned, e))?;
        Ok(())
    };
    wait(&runtime, async move {
        tokio::time::timeout(limits.read.saturating_mul(4), job).await
    })
    .ok_or_else(|| fail(io::ErrorKind::Other, "the network stopped".into()))?
    .map_err(|_| {
        fail(
            io::ErrorKind::TimedOut,
            "the upload did not finish in time".into(),
        )
    })?
}

/// What every [`RemoteSource`] of this process has cost so far, added up
/// (what a command reports with its statistics).
pub fn remote_stats() -> RemoteStats {
    RemoteStats {
        requests: TOTAL_REQUESTS.load(Ordering::Relaxed),
        bytes_fetched: TOTAL_BYTES.load(Ordering::Relaxed),
    }
}

/// An object read over the network. See the module docs.
pub struct RemoteSource {
    name: Vec<u8>,
    size: u64,
    net: Arc<Net>,
    /// Taken in `drop`, which must not block on tasks still running.
    runtime: Option<tokio::runtime::Runtime>,
    cache: Mutex<Cache>,
    /// Signalled whenever blocks leave `Cache::inflight`.
    filled: Condvar,
    /// The first failed read: every later read fails with it, so a server
    /// that broke its protocol is not asked again and again.
    broken: std::sync::OnceLock<String>,
}

/// What the runtime's tasks share with the source.
struct Net {
    url: String,
    backend: Backend,
    limits: RemoteLimits,
    requests: AtomicU64,
    bytes: AtomicU64,
    /// What a web server's first answer named this version of the object
    /// by (`ETag`, else `Last-Modified`).
    version: std::sync::OnceLock<String>,
}

enum Backend {
    Http {
        client: reqwest::Client,
        url: reqwest::Url,
    },
    S3 {
        store: Arc<AmazonS3>,
        key: ObjectPath,
        /// The version read at open: a replaced object fails the next read
        /// instead of mixing two versions' bytes.
        etag: Option<String>,
    },
}

#[derive(Default)]
struct Cache {
    /// Block index -> its bytes and when it was last used.
    blocks: HashMap<u64, (Bytes, u64)>,
    /// Blocks some reader is fetching now.
    inflight: HashSet<u64>,
    held: u64,
    tick: u64,
    /// Where the next read starts if the reader is sequential.
    next: u64,
    /// Blocks to read ahead at the next sequential miss.
    ahead: u64,
}

impl Cache {
    fn get(&mut self, block: u64) -> Option<Bytes> {
        self.tick += 1;
        let tick = self.tick;
        self.blocks.get_mut(&block).map(|(bytes, used)| {
            *used = tick;
            bytes.clone()
        })
    }

    fn insert(&mut self, block: u64, bytes: Bytes) {
        self.tick += 1;
        self.held += bytes.len() as u64;
        if let Some((old, _)) = self.blocks.insert(block, (bytes, self.tick)) {
            self.held -= old.len() as u64;
        }
        while self.held > BUDGET {
            let Some(oldest) = self.blocks.iter().min_by_key(|(_, (_, used))| *used) else {
                break;
            };
            let oldest = *oldest.0;
            if let Some((old, _)) = self.blocks.remove(&oldest) {
                self.held -= old.len() as u64;
            }
        }
    }
}

impl RemoteSource {
    /// Opens `url` (`http://`, `https://` or `s3://bucket/key`) and learns
    /// its size. S3 reads the usual `AWS_*` variables (keys, region,
    /// `AWS_ENDPOINT_URL` for another endpoint, which may be plain http).
    /// Errors name the URL and the reason.
    pub fn open(url: &str) -> io::Result<RemoteSource> {
        RemoteSource::open_with(url, RemoteLimits::from_env())
    }

    /// [`RemoteSource::open`] with the given time limits.
    pub fn open_with(url: &str, limits: RemoteLimits) -> io::Result<RemoteSource> {
        let fail = |kind, why: String| io::Error::new(kind, format!("{url}: {why}"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pparse-remote")
            .enable_all()
            .build()
            .map_err(|e| {
                fail(
                    io::ErrorKind::Other,
                    format!("cannot start the network: {e}"),
                )
            })?;
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let (backend, name) = if scheme.eq_ignore_ascii_case("s3") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() || key.is_empty() {
                return Err(fail(
                    io::ErrorKind::InvalidInput,
                    "an S3 URL is s3://BUCKET/KEY".into(),
                ));
            }
            let key = ObjectPath::parse(key)
                .map_err(|e| fail(io::ErrorKind::InvalidInput, format!("bad key: {e}")))?;
            let store = s3_store(bucket, &limits)
                .map_err(|e| fail(io::ErrorKind::InvalidInput, error_chain(&e)))?;
            let name = key.filename().unwrap_or(bucket).as_bytes().to_vec();
            let backend = Backend::S3 {
                store: Arc::new(store),
                key,
                etag: None,
            };
            (backend, name)
        } else if is_remote_url(url) {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| fail(io::ErrorKind::InvalidInput, format!("bad URL: {e}")))?;
            let name = url_name(&parsed);
            tls_provider();
            let client = reqwest::Client::builder()
                .user_agent(concat!("pparse/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(limits.request.min(Duration::from_secs(20)))
                .read_timeout(limits.request)
                .timeout(limits.request)
                .build()
                .map_err(|e| fail(io::ErrorKind::Other, error_chain(&e)))?;
            let backend = Backend::Http {
                client,
                url: parsed,
            };
            (backend, name)
        } else {
            return Err(fail(
                io::ErrorKind::InvalidInput,
                "not an http://, https:// or s3:// URL".into(),
            ));
        };
        let mut net = Net {
            url: url.to_string(),
            backend,
            limits,
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            version: std::sync::OnceLock::new(),
        };
        // The size: S3 says it in the object's metadata; a web server says
        // it in the answer to a first range request, whose bytes are kept
        // (no HEAD, which some signed URLs do not allow).
        if let Backend::S3 { store, key, etag } = &mut net.backend {
            let (store, key) = (store.clone(), key.clone());
            net.requests.fetch_add(1, Ordering::Relaxed);
            TOTAL_REQUESTS.fetch_add(1, Ordering::Relaxed);
            let limit = limits.read;
            let meta = wait(&runtime, async move {
                tokio::time::timeout(limit, store.head(&key)).await
            })
            .ok_or_else(|| fail(io::ErrorKind::Other, "the network stopped".into()))?
            .map_err(|_| {
                fail(
                    io::ErrorKind::TimedOut,
                    format!("no answer to the size lookup (HEAD) within {limit:?}"),
                )
            })?
            .map_err(|e| store_error(url, e))?;
            *etag = meta.e_tag;
            return Ok(RemoteSource::new(name, meta.size, net, runtime));
        }
        let mut src = RemoteSource::new(name, 0, net, runtime);
        let net = src.net.clone();
        let (first, size) = src
            .spawn(http_get(net, 0, BLOCK, None))
            .recv()
            .unwrap_or_else(|_| Err(fail(io::ErrorKind::Other, "the network stopped".into())))?;
        src.size = size;
        if !first.is_empty() {
            src.cache.get_mut().insert(0, first);
        }
        Ok(src)
    }

    fn new(name: Vec<u8>, size: u64, net: Net, runtime: tokio::runtime::Runtime) -> RemoteSource {
        RemoteSource {
            name,
            size,
            net: Arc::new(net),
            runtime: Some(runtime),
            cache: Mutex::new(Cache::default()),
            filled: Condvar::new(),
            broken: std::sync::OnceLock::new(),
        }
    }

    /// The object's name: the URL's last path segment (percent-decoded),
    /// or the host or bucket when the path is empty.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The URL it was opened from.
    pub fn url(&self) -> &str {
        &self.net.url
    }

    /// The server's name for this version of the object: S3's `ETag`, a
    /// web server's `ETag` or else `Last-Modified`; `None` when it gives
    /// neither.
    pub fn version(&self) -> Option<&str> {
        match &self.net.backend {
            Backend::S3 { etag, .. } => etag.as_deref(),
            Backend::Http { .. } => self.net.version.get().map(String::as_str),
        }
    }

    /// What this source's reads have cost so far.
    pub fn stats(&self) -> RemoteStats {
        RemoteStats {
            requests: self.net.requests.load(Ordering::Relaxed),
            bytes_fetched: self.net.bytes.load(Ordering::Relaxed),
        }
    }

    /// Runs `fut` on the source's runtime; the caller waits on a channel,
    /// not inside the runtime, so any thread may call it.
    fn spawn<T: Send + 'static>(
        &self,
        fut: impl Future<Output = io::Result<T>> + Send + 'static,
    ) -> mpsc::Receiver<io::Result<T>> {
        let (tx, rx) = mpsc::sync_channel(1);
        if let Some(rt) = &self.runtime {
            rt.spawn(async move {
                let _ = tx.send(fut.await);
            });
        }
        rx
    }

    /// Fetches the sorted blocks `wanted`, one request per run of
    /// neighbours, the runs at once.
    fn fetch(&self, wanted: &[u64]) -> io::Result<Vec<(u64, Bytes)>> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &b in wanted {
            match runs.last_mut() {
                Some((_, end)) if *end == b => *end = b + 1,
                _ => runs.push((b, b + 1)),
            }
        }
        let pending: Vec<_> = runs
            .iter()
            .map(|&(first, end)| {
                let (start, stop) = (first * BLOCK, (end * BLOCK).min(self.size));
                let net = self.net.clone();
                let size = self.size;
                let rx = self.spawn(async move {
                    let (bytes, total) = match &net.backend {
                        Backend::Http { .. } => {
                            http_get(net.clone(), start, stop, Some(size)).await?
                        }
                        Backend::S3 { .. } => s3_get(&net, start, stop).await?,
                    };
                    if total != size {
                        return Err(io::Error::other(format!(
                            "{}: the object changed size while being read ({size} bytes, now {total})",
                            net.url
                        )));
                    }
                    Ok(bytes)
                });
                (first, rx)
            })
            .collect();
        let mut out = Vec::with_capacity(wanted.len());
        let mut failure = None;
        for (first, rx) in pending {
            let got = rx.recv().unwrap_or_else(|_| {
                Err(io::Error::other(format!(
                    "{}: the network runtime stopped",
                    self.net.url
                )))
            });
            match got {
                Ok(bytes) => {
                    let mut at = 0;
                    let mut b = first;
                    while at < bytes.len() {
                        let end = (at + BLOCK as usize).min(bytes.len());
                        out.push((b, bytes.slice(at..end)));
                        at = end;
                        b += 1;
                    }
                }
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The blocks `first..=last`, from the cache or fetched. The cache's
    /// lock is never held while fetching; a block another reader is
    /// fetching is waited for, not fetched twice.
    fn blocks(&self, first: u64, last: u64, sequential: bool) -> io::Result<Vec<Bytes>> {
        let mut got: Vec<Option<Bytes>> = vec![None; (last - first + 1) as usize];
        loop {
            let mut claimed = Vec::new();
            {
                let mut c = self.cache.lock();
                let mut waiting = false;
                for (slot, b) in got.iter_mut().zip(first..=last) {
                    if slot.is_some() {
                        continue;
                    }
                    if let Some(bytes) = c.get(b) {
                        *slot = Some(bytes);
                    } else if c.inflight.contains(&b) {
                        waiting = true;
                    } else {
                        claimed.push(b);
                    }
                }
                if claimed.is_empty() {
                    if !waiting {
                        return Ok(got.into_iter().flatten().collect());
                    }
                    self.filled.wait(&mut c);
                    continue;
                }
                c.ahead = if sequential {
                    (c.ahead * 2).clamp(1, MAX_AHEAD)
                } else {
                    0
                };
                if claimed.last() == Some(&last) {
                    let blocks = self.size.div_ceil(BLOCK);
                    let mut b = last + 1;
                    while b <= last + c.ahead
                        && b < blocks
                        && !c.blocks.contains_key(&b)
                        && !c.inflight.contains(&b)
                    {
                        claimed.push(b);
                        b += 1;
                    }
                }
                c.inflight.extend(claimed.iter().copied());
            }
            let fetched = self.fetch(&claimed);
            let mut c = self.cache.lock();
            for b in &claimed {
                c.inflight.remove(b);
            }
            let fetched = fetched.and_then(|blocks| {
                for (b, bytes) in blocks {
                    if let Some(slot) = b.checked_sub(first).and_then(|i| got.get_mut(i as usize)) {
                        *slot = Some(bytes.clone());
                    }
                    c.insert(b, bytes);
                }
                // A block asked for and not given would be asked for again
                // forever: it is an error instead.
                match claimed
                    .iter()
                    .find(|&&b| b >= first && b <= last && got[(b - first) as usize].is_none())
                {
                    Some(b) => Err(io::Error::other(format!(
                        "{}: no bytes came for offset {}",
                        self.net.url,
                        b * BLOCK
                    ))),
                    None => Ok(()),
                }
            });
            self.filled.notify_all();
            drop(c);
            fetched?;
        }
    }
}

impl Drop for RemoteSource {
    fn drop(&mut self) {
        // A plain drop would wait for tasks, and panics inside another
        // runtime (a library user's async code).
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Source for RemoteSource {
    fn available(&self) -> u64 {
        self.size
    }

    /// An object is its session's file: an index names it by its key.
    fn recipe(&self) -> super::source::Recipe<'_> {
        super::source::Recipe::File
    }

    fn is_final(&self) -> bool {
        true
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if offset >= self.size || buf.is_empty() {
            return Ok(0);
        }
        if let Some(why) = self.broken.get() {
            return Err(io::Error::other(why.clone()));
        }
        let len = (buf.len() as u64).min(self.size - offset) as usize;
        let sequential = {
            let mut c = self.cache.lock();
            // A first read at 0 (a format's sniff) is not yet a sequence.
            let sequential = offset != 0 && c.next == offset;
            c.next = offset + len as u64;
            sequential
        };
        let end = offset + len as u64;
        let mut done = 0;
        while done < len {
            let at = offset + done as u64;
            let first = at / BLOCK;
            let last = ((end - 1) / BLOCK).min(first + MAX_RUN - 1);
            let blocks = self
                .blocks(first, last, sequential || done > 0)
                .inspect_err(|e| {
                    let _ = self.broken.set(e.to_string());
                })?;
            for (block, b) in blocks.into_iter().zip(first..) {
                let within = (offset + done as u64 - b * BLOCK) as usize;
                let n = block.len().saturating_sub(within).min(len - done);
                let Some(from) = block.get(within..within + n).filter(|_| n > 0) else {
                    return Err(io::Error::other(format!(
                        "{}: block {b} is shorter than expected",
                        self.net.url
                    )));
                };
                buf[done..done + n].copy_from_slice(from);
                done += n;
            }
        }
        Ok(len)
    }

    fn describe(&self) -> &'static str {
        "remote object"
    }
}

/// Runs `fut` on `rt` and waits for it from outside the runtime; `None`
/// if the runtime dropped it.
fn wait<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    fut: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().ok()
}

/// Makes ring the process's TLS crypto provider, once, before the first
/// client: reqwest and object_store are built on rustls without one of
/// their own (Cargo.toml says why). A provider someone else installed
/// first (a program using this library) is kept.
fn tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An S3 client for `bucket` from the environment; an `http://` endpoint
/// (a local S3-compatible server) is allowed as given.
fn s3_store(bucket: &str, limits: &RemoteLimits) -> object_store::Result<AmazonS3> {
    tls_provider();
    let endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(object_store::RetryConfig {
            max_retries: 3,
            retry_timeout: limits.read,
            ..Default::default()
        })
        .with_client_options(
            object_store::ClientOptions::new()
                .with_timeout(limits.request)
                .with_connect_timeout(limits.request.min(Duration::from_secs(20))),
        );
    if let Some(endpoint) = endpoint {
        let http = endpoint
            .get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("http://"));
        builder = builder.with_endpoint(endpoint).with_allow_http(http);
    }
    builder.build()
}

fn store_error(url: &str, e: object_store::Error) -> io::Error {
    let kind = match e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        _ => io::ErrorKind::Other,
    };
    let why = match e {
        object_store::Error::NotFound { .. } => "not found".to_string(),
        e => error_chain(&e),
    };
    io::Error::new(kind, format!("{url}: {why}"))
}

/// An error and its causes on one line ("error sending request: connection
/// refused"), since the outer message alone rarely says what happened.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// Bytes `start..end` of an S3 object and the size the store gives it,
/// within the read's deadline (the store's own retries included).
async fn s3_get(net: &Net, start: u64, end: u64) -> io::Result<(Bytes, u64)> {
    let limit = net.limits.read;
    match tokio::time::timeout(limit, s3_get_once(net, start, end)).await {
        Ok(got) => got,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "{}: no complete answer for bytes {start}-{} within {limit:?}",
                net.url,
                end - 1
            ),
        )),
    }
}

async fn s3_get_once(net: &Net, start: u64, end: u64) -> io::Result<(Bytes, u64)> {
    let Backend::S3 { store, key, etag } = &net.backend else {
        return Err(io::Error::other("not an S3 source"));
    };
    TOTAL_REQUESTS.fetch_add(1, Ordering::Relaxed);
    net.requests.fetch_add(1, Ordering::Relaxed);
    let options = GetOptions {
        range: Some(GetRange::Bounded(start..end)),
        if_match: etag.clone(),
        ..Default::default()
    };
    let got = store
        .get_opts(key, options)
        .await
        .map_err(|e| store_error(&net.url, e))?;
    if got.range != (start..end) {
        return Err(io::Error::other(format!(
            "{}: asked for bytes {start}..{end}, the store sent {:?}",
            net.url, got.range
        )));
    }
    let total = got.meta.size;
    let bytes = got.bytes().await.map_err(|e| store_error(&net.url, e))?;
    TOTAL_BYTES.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    net.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    if bytes.len() as u64 != end - start {
        return Err(io::Error::other(format!(
            "{}: asked for {} bytes at {start}, the store sent {}",
            net.url,
            end - start,
            bytes.len()
        )));
    }
    Ok((bytes, total))
}

/// Why an HTTP request failed, and whether trying again may help.
struct HttpFailure {
    why: String,
    again: bool,
    not_found: bool,
}

/// Bytes `start..end` of the object at an HTTP URL and the object's size,
/// with a few tries when the failure looks passing (a reset connection,
/// a 5xx, a request past its time), all within the read's deadline.
/// `announced` is the size the server gave at open; `None` marks the
/// request that learns it: it accepts bytes past the end being cut off
/// and, for a small object, a server that ignores the range and sends it
/// all.
async fn http_get(
    net: Arc<Net>,
    start: u64,
    end: u64,
    announced: Option<u64>,
) -> io::Result<(Bytes, u64)> {
    let mut wait = Duration::from_millis(200);
    let mut attempt = 1;
    let limits = net.limits;
    let deadline = Instant::now() + limits.read;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let once = http_get_once(&net, start, end, announced);
        let result = match tokio::time::timeout(limits.request.min(left), once).await {
            Ok(r) => r,
            Err(_) => Err(HttpFailure {
                why: format!(
                    "no complete answer for bytes {start}-{} within {:?}",
                    end - 1,
                    limits.request.min(left)
                ),
                again: true,
                not_found: false,
            }),
        };
        match result {
            Ok(got) => return Ok(got),
            Err(f) if f.again && attempt < HTTP_ATTEMPTS && Instant::now() + wait < deadline => {
                tokio::time::sleep(wait).await;
                wait *= 4;
                attempt += 1;
            }
            Err(f) => {
                let kind = if f.not_found {
                    io::ErrorKind::NotFound
                } else {
                    io::ErrorKind::Other
                };
                let tries = if attempt > 1 {
                    format!(" ({attempt} attempts)")
                } else {
                    String::new()
                };
                return Err(io::Error::new(
                    kind,
                    format!("{}: {}{tries}", net.url, f.why),
                ));
            }
        }
    }
}

async fn http_get_once(
    net: &Net,
    start: u64,
    end: u64,
    announced: Option<u64>,
) -> Result<(Bytes, u64), HttpFailure> {
    let first = announced.is_none();
    let Backend::Http { client, url } = &net.backend else {
        return Err(HttpFailure {
            why: "not an HTTP source".into(),
            again: false,
            not_found: false,
        });
    };
    let fail = |why: String, again: bool| HttpFailure {
        why,
        again,
        not_found: false,
    };
    TOTAL_REQUESTS.fetch_add(1, Ordering::Relaxed);
    net.requests.fetch_add(1, Ordering::Relaxed);
    let response = client
        .get(url.clone())
        .header(RANGE, format!("bytes={start}-{}", end - 1))
        // Offsets count the object's own bytes, never a compressed transfer.
        .header(ACCEPT_ENCODING, "identity")
        .send()
        .await
        .map_err(|e| fail(why_failed(e, net, start, end), true))?;
    let status = response.status();
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    if let Some(enc) = header(CONTENT_ENCODING).filter(|e| !e.eq_ignore_ascii_case("identity")) {
        return Err(fail(
            format!("the server sent the bytes encoded ({enc}) though asked not to"),
            false,
        ));
    }
    if first
        && status.is_success()
        && let Some(v) =
            header(reqwest::header::ETAG).or_else(|| header(reqwest::header::LAST_MODIFIED))
    {
        let _ = net.version.set(v);
    }
    let (total, expect) = match status {
        StatusCode::PARTIAL_CONTENT => {
            let Some((from, to, total)) = header(CONTENT_RANGE).as_deref().and_then(content_range)
            else {
                return Err(fail(
                    format!(
                        "206 without a usable Content-Range ({:?})",
                        header(CONTENT_RANGE).unwrap_or_default()
                    ),
                    false,
                ));
            };
            let Some(total) = total else {
                return Err(fail(
                    "the server does not say the object's size".into(),
                    false,
                ));
            };
            let want_end = if first { end.min(total) } else { end };
            if from != start || to + 1 != want_end || to >= total {
                return Err(fail(
                    format!(
                        "asked for bytes {start}-{}, the server sent {from}-{to}/{total}",
                        end - 1
                    ),
                    false,
                ));
            }
            (total, want_end - start)
        }
        // A server that ignores ranges sends the whole object: fine for a
        // small one read from the start, never for more than asked.
        StatusCode::OK if first => match response.content_length() {
            Some(len) if len <= end - start => (len, len),
            _ => {
                return Err(fail(
                    "the server does not serve byte ranges (200 to a Range request)".into(),
                    false,
                ));
            }
        },
        StatusCode::OK => {
            return Err(fail(
                "the server stopped serving byte ranges (200 to a Range request)".into(),
                false,
            ));
        }
        StatusCode::RANGE_NOT_SATISFIABLE if first => {
            match header(CONTENT_RANGE).as_deref().and_then(unsatisfied_range) {
                Some(0) => return Ok((Bytes::new(), 0)),
                _ => return Err(fail(format!("HTTP {status}"), false)),
            }
        }
        // Bytes inside the size it gave are not past the end: the server
        // contradicts itself, and asking again would be answered the same.
        StatusCode::RANGE_NOT_SATISFIABLE => {
            let size = announced.unwrap_or(0);
            let now = header(CONTENT_RANGE)
                .as_deref()
                .and_then(unsatisfied_range)
                .filter(|&t| t != size)
                .map(|t| format!(", and now gives the object {t} bytes"))
                .unwrap_or_default();
            return Err(fail(
                format!(
                    "the server answered HTTP {status} to bytes {start}-{} of the {size} bytes it announced{now}",
                    end - 1
                ),
                false,
            ));
        }
        _ => {
            return Err(HttpFailure {
                why: format!("HTTP {status}"),
                again: status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS,
                not_found: status == StatusCode::NOT_FOUND || status == StatusCode::GONE,
            });
        }
    };
    let mut response = response;
    let mut body = BytesMut::with_capacity(expect as usize);
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| fail(why_failed(e, net, start, end), true))?;
        let Some(chunk) = chunk else { break };
        TOTAL_BYTES.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        net.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        if body.len() as u64 + chunk.len() as u64 > expect {
            return Err(fail(
                format!("the server sent more than the {expect} bytes it announced"),
                false,
            ));
        }
        body.extend_from_slice(&chunk);
    }
    if (body.len() as u64) < expect {
        return Err(fail(
            format!(
                "the connection ended after {} of {expect} bytes at {start}",
                body.len()
            ),
            true,
        ));
    }
    Ok((body.freeze(), total))
}

/// Why a request for bytes `start..end` failed: a timeout says which
/// limit it passed, anything else its chain of causes.
fn why_failed(e: reqwest::Error, net: &Net, start: u64, end: u64) -> String {
    if e.is_timeout() {
        format!(
            "no complete answer for bytes {start}-{} within {:?}",
            end - 1,
            net.limits.request
        )
    } else {
        error_chain(&e.without_url())
    }
}

/// `bytes FROM-TO/TOTAL` (TOTAL may be `*`: unknown).
fn content_range(v: &str) -> Option<(u64, u64, Option<u64>)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (from, to) = range.split_once('-')?;
    let (from, to) = (from.trim().parse().ok()?, to.trim().parse().ok()?);
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    (from <= to).then_some((from, to, total))
}

/// The size in a 416's `bytes */TOTAL`.
fn unsatisfied_range(v: &str) -> Option<u64> {
    v.trim().strip_prefix("bytes */")?.trim().parse().ok()
}

/// The last non-empty path segment, percent-decoded; the host for a bare
/// server URL.
fn url_name(url: &reqwest::Url) -> Vec<u8> {
    let last = url
        .path_segments()
        .and_then(|mut s| s.rfind(|s| !s.is_empty()))
        .map(|s| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>());
    last.unwrap_or_else(|| url.host_str().unwrap_or("remote").as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_names() {
        assert_eq!(content_range("bytes 0-9/100"), Some((0, 9, Some(100))));
        assert_eq!(content_range("bytes 5-9/*"), Some((5, 9, None)));
        assert_eq!(content_range("bytes 9-5/100"), None);
        assert_eq!(content_range("items 0-9/100"), None);
        assert_eq!(unsatisfied_range("bytes */0"), Some(0));
        assert!(is_remote_url("HTTPS://example.com/x"));
        assert!(is_remote_url("s3://b/k"));
        assert!(!is_remote_url("./http://x"));
        assert!(!is_remote_url("file.tar"));
        let url = reqwest::Url::parse("http://h:1/a/my%20file.tar.gz?sig=1").unwrap();
        assert_eq!(url_name(&url), b"my file.tar.gz");
        let url = reqwest::Url::parse("http://h:1/").unwrap();
        assert_eq!(url_name(&url), b"h");
    }
}
