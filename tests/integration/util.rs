//! Shared helpers: fixtures and manifests, parsing with a deadline, reading
//! extractions, and deterministic damage.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use pparse::offer::tensor::Tensor;
use pparse::{ExtId, Options, Session, Status, Tree};
use serde_json::Value;

/// The fixtures directory.
pub(crate) const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
/// The pparse binary built for these tests.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_pparse");
/// The cache folder (and so the index folder) of the commands tests run.
pub(crate) const CACHE_HOME: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/cache-home");
/// How long one parse of a small fixture may take before it counts as a hang.
pub(crate) const DEADLINE: Duration = Duration::from_secs(20);

/// Plain tar fixtures.
pub(crate) const TARS: &[&str] = &["ustar.tar", "gnu.tar", "pax.tar", "v7.tar", "base256.tar"];
/// Zip fixtures.
pub(crate) const ZIPS: &[&str] = &[
    "plain.zip",
    "dd.zip",
    "dd0.zip",
    "dd_stored.zip",
    "zip64.zip",
    "nested_stored.zip",
];

pub(crate) fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(FIX).join(name)
}

/// The bytes of a file under fixtures/ (an archive, or `src/...`).
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap_or_else(|e| panic!("read fixture {name}: {e}"))
}

fn load_json(rel: &str) -> Value {
    let text = std::fs::read_to_string(fixture_path(rel))
        .unwrap_or_else(|e| panic!("read fixtures/{rel}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse fixtures/{rel}: {e}"))
}

/// fixtures/manifest.json.
pub(crate) fn manifest() -> &'static Value {
    static M: OnceLock<Value> = OnceLock::new();
    M.get_or_init(|| load_json("manifest.json"))
}

/// fixtures/expect/nested_truncation.json.
pub(crate) fn nested_truncation() -> &'static Value {
    static M: OnceLock<Value> = OnceLock::new();
    M.get_or_init(|| load_json("expect/nested_truncation.json"))
}

/// One archive's manifest entry.
pub(crate) fn archive(name: &str) -> &'static Value {
    let a = &manifest()[name];
    assert!(a.is_object(), "manifest has no archive {name}");
    a
}

pub(crate) fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected an integer, got {v}"))
}

pub(crate) fn s(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

pub(crate) fn opt_s(v: &Value) -> Option<&str> {
    v.as_str()
}

/// A regular-file leaf of an archive: PATH, size, source file.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub path: String,
    pub size: u64,
    pub source: String,
}

pub(crate) fn leaves(archive_name: &str) -> Vec<Leaf> {
    archive(archive_name)["leaves"]
        .as_array()
        .expect("leaves")
        .iter()
        .map(|l| Leaf {
            path: s(&l["path"]).to_string(),
            size: u(&l["size"]),
            source: s(&l["source"]).to_string(),
        })
        .collect()
}

/// Whether a PATH lies inside a zip (needs the zip parser to resolve).
pub(crate) fn inside_zip(path: &str) -> bool {
    path.contains(".zip/")
}

/// A tar member as the manifest describes it.
#[derive(Clone, Debug)]
pub(crate) struct TarMember {
    pub name: String,
    pub path: String,
    pub kind: String,
    pub header_offset: u64,
    pub data_offset: u64,
    pub size: u64,
    /// (offset, typeflag) of every header block, extension headers first.
    pub headers: Vec<(u64, String)>,
    pub source: Option<String>,
}

impl TarMember {
    pub(crate) fn is_file(&self) -> bool {
        self.kind == "file"
    }
    /// End of the member's data blocks (where the next header starts).
    pub(crate) fn end(&self) -> u64 {
        let data = if self.is_file() { self.size } else { 0 };
        self.data_offset + data.div_ceil(512) * 512
    }
}

pub(crate) fn tar_members(archive_name: &str) -> Vec<TarMember> {
    archive(archive_name)["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| TarMember {
            name: s(&m["name"]).to_string(),
            path: s(&m["path"]).to_string(),
            kind: s(&m["type"]).to_string(),
            header_offset: u(&m["header_offset"]),
            data_offset: u(&m["data_offset"]),
            size: u(&m["size"]),
            headers: m["headers"]
                .as_array()
                .expect("headers")
                .iter()
                .map(|h| (u(&h["offset"]), s(&h["typeflag"]).to_string()))
                .collect(),
            source: opt_s(&m["source"]).map(str::to_string),
        })
        .collect()
}

/// A zip data descriptor as the manifest describes it.
#[derive(Clone, Debug)]
pub(crate) struct Descriptor {
    pub offset: u64,
    pub length: u64,
    pub signature: bool,
    pub zip64: bool,
}

/// A zip entry as the manifest describes it.
#[derive(Clone, Debug)]
pub(crate) struct ZipMember {
    pub name: String,
    pub kind: String,
    pub header_offset: u64,
    pub data_offset: u64,
    pub size: u64,
    pub compressed_size: u64,
    pub method: u64,
    pub flags: u64,
    pub descriptor: Option<Descriptor>,
    pub source: Option<String>,
}

impl ZipMember {
    pub(crate) fn is_file(&self) -> bool {
        self.kind == "file"
    }
    pub(crate) fn stored(&self) -> bool {
        self.method == 0
    }
    /// End of the entry's compressed data.
    pub(crate) fn data_end(&self) -> u64 {
        self.data_offset + self.compressed_size
    }
    /// End of the entry's record (data plus descriptor).
    pub(crate) fn end(&self) -> u64 {
        match &self.descriptor {
            Some(d) => d.offset + d.length,
            None => self.data_end(),
        }
    }
}

pub(crate) fn zip_members_of(v: &Value) -> Vec<ZipMember> {
    v["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| ZipMember {
            name: s(&m["name"]).to_string(),
            kind: s(&m["type"]).to_string(),
            header_offset: u(&m["header_offset"]),
            data_offset: u(&m["data_offset"]),
            size: u(&m["size"]),
            compressed_size: u(&m["compressed_size"]),
            method: u(&m["method"]),
            flags: u(&m["flags"]),
            descriptor: m["descriptor"].as_object().map(|d| Descriptor {
                offset: u(&d["offset"]),
                length: u(&d["length"]),
                signature: d["signature"].as_bool().expect("signature"),
                zip64: d["zip64"].as_bool().expect("zip64"),
            }),
            source: opt_s(&m["source"]).map(str::to_string),
        })
        .collect()
}

pub(crate) fn zip_members(archive_name: &str) -> Vec<ZipMember> {
    zip_members_of(archive(archive_name))
}

/// Collects failures so one run shows every broken cut, not just the first.
#[derive(Default)]
pub(crate) struct Failures(Vec<String>);

impl Failures {
    pub(crate) fn push(&mut self, s: String) {
        self.0.push(s);
    }
    pub(crate) fn check(self, what: &str) {
        if self.0.is_empty() {
            return;
        }
        let n = self.0.len();
        // PPARSE_TEST_ALL_FAILURES=1 lists every failure.
        let limit = if std::env::var_os("PPARSE_TEST_ALL_FAILURES").is_some() {
            usize::MAX
        } else {
            40
        };
        let shown: Vec<&String> = self.0.iter().take(limit).collect();
        panic!(
            "{what}: {n} failures (first {}):\n{}",
            shown.len(),
            shown
                .iter()
                .map(|s| format!("  - {s}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

// ---------------------------------------------------------------------------
// parsing with a deadline
// ---------------------------------------------------------------------------

static PANICS: AtomicUsize = AtomicUsize::new(0);
static PANIC_MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Counts panics of pparse's engine threads, so a parse whose engine died is
/// reported at once instead of after the deadline.
fn install_panic_hook() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some("pparse-engine") {
                let msg = format!("{info}");
                PANIC_MESSAGES.lock().unwrap().push(msg);
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

/// Parses `bytes` (named `name`) to the end; fails the test if the engine
/// panics or the parse is not over within [`DEADLINE`]. `what` describes the
/// input (fixture and damage) for the failure message.
pub(crate) fn parse_named(name: &str, bytes: Vec<u8>, what: &str) -> Session {
    parse_with(name, bytes, Options::default(), what)
}

/// [`parse_named`] with other options (a small `step_bytes`, so that nested
/// layers are parsed while their bytes are still arriving).
pub(crate) fn parse_with(name: &str, bytes: Vec<u8>, opts: Options, what: &str) -> Session {
    install_panic_hook();
    let before = PANICS.load(Ordering::SeqCst);
    let session = Session::from_bytes(name, bytes, opts);
    let start = Instant::now();
    // Woken when the parse ends, else every 20 ms to look for a panic or
    // the deadline.
    session.wait_until(|_| PANICS.load(Ordering::SeqCst) != before || start.elapsed() > DEADLINE);
    if let Some(why) = session.failure() {
        panic!("pparse engine panicked while parsing {what}: {why}");
    }
    if !session.is_finished() {
        if PANICS.load(Ordering::SeqCst) != before {
            let msgs = PANIC_MESSAGES.lock().unwrap().clone();
            // The engine thread is gone; dropping the session just joins it.
            drop(session);
            panic!("pparse engine panicked while parsing {what} (panics so far: {msgs:#?})");
        }
        let steps = session.steps();
        // Dropping would join a thread that may never stop: leak it.
        std::mem::forget(session);
        panic!("parse of {what} did not finish within {DEADLINE:?} (hang; {steps} steps)");
    }
    session
}

/// [`parse_named`] with the name used as the description.
pub(crate) fn parse(name: &str, bytes: Vec<u8>) -> Session {
    let what = format!("{name} ({} bytes)", bytes.len());
    parse_named(name, bytes, &what)
}

/// Every available byte of an extraction.
pub(crate) fn read_all(tree: &Tree, id: ExtId) -> Vec<u8> {
    let data = &tree.exts[id].data();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = data
            .read_at(out.len() as u64, &mut buf)
            .unwrap_or_else(|e| panic!("read_at {} of {}: {e}", out.len(), tree.path_of(id)));
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(
        out.len() as u64,
        tree.exts[id].size(),
        "bytes read from {} differ from its size()",
        tree.path_of(id)
    );
    out
}

/// The PATHs of an extraction's children, in order.
pub(crate) fn child_names(tree: &Tree, id: ExtId) -> Vec<String> {
    tree.exts[id]
        .children
        .iter()
        .map(|&c| tree.exts[c].display_name())
        .collect()
}

/// A readable summary of an extraction's damage (for failure messages).
pub(crate) fn damage_text(tree: &Tree, id: ExtId) -> String {
    let e = &tree.exts[id];
    if e.damage.is_empty() {
        return "no damage".into();
    }
    e.damage
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A summary of the whole tree (for failure messages).
pub(crate) fn tree_text(tree: &Tree) -> String {
    let mut out = String::new();
    for id in tree.subtree(0) {
        let e = &tree.exts[id];
        out.push_str(&format!(
            "  [{id}] {:?} kind={} parser={:?} size={} declared={:?} status={:?} damage=[{}]\n",
            tree.path_of(id),
            e.kind.as_str(),
            e.parser(),
            e.size(),
            e.declared_size(),
            tree.status_of(id),
            damage_text(tree, id)
        ));
    }
    out
}

/// Whether any damage of extraction `id` with one of `statuses` covers
/// `[start, end)` (for an empty span: contains `start`, or is empty at it).
pub(crate) fn damage_covers(
    tree: &Tree,
    id: ExtId,
    start: u64,
    end: u64,
    statuses: &[Status],
) -> bool {
    tree.exts[id].damage.iter().any(|d| {
        statuses.contains(&d.status)
            && if end > start {
                d.range.start <= start && end <= d.range.end
            } else {
                d.range.contains(start) || (d.range.start == start && d.range.end == start)
            }
    })
}

// ---------------------------------------------------------------------------
// deterministic damage
// ---------------------------------------------------------------------------

/// xorshift64* — small, seeded, reproducible.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        // Never zero; mix the seed so nearby seeds diverge.
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03 | 1)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform-ish in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }
    /// In `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub(crate) fn byte(&mut self) -> u8 {
        (self.next_u64() >> 56) as u8
    }
    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.byte();
        }
    }
}

/// The counts of the `--io-stats` line that ends `err` (JSON with
/// `--json`, else the text form, whose counts are read by their words):
/// `file_read`, `decoded`, `from_cache`.
pub(crate) fn io_counts(err: &str) -> serde_json::Value {
    let line = err.lines().last().unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
        return v["io"].clone();
    }
    let count = |after: &str| -> u64 {
        let rest = line
            .split(after)
            .nth(1)
            .unwrap_or_else(|| panic!("no {after:?} in {err}"));
        rest.split(" B")
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    let from_cache = line
        .split(" B from the cache")
        .next()
        .and_then(|h| h.rsplit("; ").next())
        .map(|n| n.replace(',', "").parse::<u64>().unwrap())
        .unwrap();
    serde_json::json!({
        "file_read": count("io: read "),
        "decoded": count("; decoded "),
        "redecoded": count(", re-decoded "),
        "from_cache": from_cache,
    })
}

/// What `program` run with `args` writes to stdout; the test fails with
/// its stderr when it fails.
pub(crate) fn output_of(program: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    assert!(
        out.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// What a Python script run by `python3 -c` writes to stdout; the test
/// fails with its stderr when it fails.
pub(crate) fn python(script: &str) -> Vec<u8> {
    output_of("python3", &["-c".as_ref(), script.as_ref()])
}

pub(crate) fn truncated(data: &[u8], cut: u64) -> Vec<u8> {
    data[..(cut as usize).min(data.len())].to_vec()
}

/// XORs the byte at `at` with `mask` (non-zero, so the byte always changes).
pub(crate) fn flip(data: &mut [u8], at: u64, mask: u8) {
    assert!(mask != 0);
    data[at as usize] ^= mask;
}

/// Overwrites `[start, start+len)` with seeded random bytes, making sure at
/// least the first byte really changes.
pub(crate) fn overwrite(data: &mut [u8], start: u64, len: u64, rng: &mut Rng) {
    let (s, e) = (start as usize, (start + len) as usize);
    let old0 = data[s];
    rng.fill(&mut data[s..e]);
    if data[s] == old0 {
        data[s] ^= 0x5a;
    }
}

pub(crate) fn insert(data: &[u8], at: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = data[..at as usize].to_vec();
    out.extend_from_slice(bytes);
    out.extend_from_slice(&data[at as usize..]);
    out
}

/// Copies `[start, start+len)` and inserts the copy at `at`.
pub(crate) fn duplicate_span(data: &[u8], start: u64, len: u64, at: u64) -> Vec<u8> {
    let span = data[start as usize..(start + len) as usize].to_vec();
    insert(data, at, &span)
}

/// Raw-inflates `compressed` the way Python's
/// `zlib.decompressobj(-15).decompress(compressed)` does: everything that
/// decodes from the bytes given, stopping quietly at their end, at the end of
/// the deflate stream, or at the first invalid code.
pub(crate) fn inflate_prefix(compressed: &[u8]) -> Vec<u8> {
    inflate_with(flate2::Decompress::new(false), compressed).0
}

/// Like [`inflate_prefix`] for a gzip stream's deflate data, also returning
/// how many input bytes were consumed.
pub(crate) fn inflate_with(mut z: flate2::Decompress, compressed: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(compressed.len() * 4 + 64);
    loop {
        let consumed = z.total_in() as usize;
        if out.len() == out.capacity() {
            out.reserve(64 * 1024);
        }
        let before_out = z.total_out();
        match z.decompress_vec(
            &compressed[consumed..],
            &mut out,
            flate2::FlushDecompress::None,
        ) {
            Ok(flate2::Status::StreamEnd) => break,
            Ok(_) => {
                let progressed = z.total_in() as usize != consumed || z.total_out() != before_out;
                if !progressed && out.len() < out.capacity() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let used = z.total_in() as usize;
    (out, used)
}

/// Decodes a single-member gzip file's deflate data to its end, whatever
/// its trailer says: the bytes and how many input bytes they took; `None`
/// when the data is invalid or cut off.
pub(crate) fn inflate_whole(file: &[u8], data_offset: usize) -> Option<(Vec<u8>, usize)> {
    let mut z = flate2::Decompress::new(false);
    let mut out = Vec::with_capacity(256 * 1024);
    loop {
        let used = z.total_in() as usize;
        if out.len() == out.capacity() {
            out.reserve(256 * 1024);
        }
        match z.decompress_vec(
            &file[data_offset + used..],
            &mut out,
            flate2::FlushDecompress::None,
        ) {
            Ok(flate2::Status::StreamEnd) => return Some((out, z.total_in() as usize)),
            Ok(_) if z.total_in() as usize == used && out.len() < out.capacity() => return None,
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

/// Decoded length produced by a raw inflater from `compressed[..n]`.
pub(crate) fn inflated_len_from(compressed: &[u8], n: usize) -> usize {
    inflate_prefix(&compressed[..n]).len()
}

/// The source file named by a manifest `source` (relative to fixtures/).
pub(crate) fn source_bytes(source: &str) -> Vec<u8> {
    fixture(source)
}

/// Asserts that extraction `path` holds exactly `expected`, with status Complete.
pub(crate) fn assert_exact(tree: &Tree, path: &str, expected: &[u8], what: &str) {
    let Some(id) = tree.resolve(path) else {
        panic!(
            "{what}: {path:?} does not resolve\ntree:\n{}",
            tree_text(tree)
        )
    };
    let got = read_all(tree, id);
    if got != expected {
        let first = got
            .iter()
            .zip(expected)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(expected.len()));
        panic!(
            "{what}: {path:?} has {} bytes, expected {} (first difference at {first}); damage: {}",
            got.len(),
            expected.len(),
            damage_text(tree, id)
        );
    }
    assert_eq!(
        tree.status_of(id),
        Status::Complete,
        "{what}: {path:?} is byte-exact but its status is not Complete: {}",
        damage_text(tree, id)
    );
}

// ---------------------------------------------------------------------------
// running the binary
// ---------------------------------------------------------------------------

/// What one run of the pparse binary gave.
pub(crate) struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Run {
    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    pub(crate) fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Runs `pparse ARGS...`; fails the test if it does not exit within 60 s or
/// is killed by a signal.
pub(crate) fn pparse<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    pparse_env(args, &[])
}

/// [`pparse`] with extra environment variables.
pub(crate) fn pparse_env<I, S>(args: I, env: &[(&str, &str)]) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use std::io::Read;
    use std::process::{Command, Stdio};
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().into()).collect();
    let mut child = Command::new(BIN)
        .args(&args)
        // Indexes go to the build's scratch folder, not the user's cache.
        .env("XDG_CACHE_HOME", CACHE_HOME)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pparse");
    // Drain both pipes on threads so a chatty child cannot block.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for pparse") {
            break st;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pparse {args:?} did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = t_out.join().expect("stdout reader");
    let stderr = t_err.join().expect("stderr reader");
    let Some(code) = status.code() else {
        panic!(
            "pparse {args:?} was killed by a signal ({status}); stderr:\n{}",
            String::from_utf8_lossy(&stderr)
        );
    };
    Run {
        code,
        stdout,
        stderr,
    }
}

// ---------------------------------------------------------------------------
// protobuf bytes, written by hand
// ---------------------------------------------------------------------------

/// A protobuf varint.
pub(crate) fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// A length-delimited protobuf field: tag, length, payload.
pub(crate) fn len_field(n: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = varint(u64::from(n) << 3 | 2);
    out.extend(varint(payload.len() as u64));
    out.extend(payload);
    out
}

pub(crate) fn sha_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bytes of a tensor, read through pparse from its source extraction.
pub(crate) fn tensor_bytes(tree: &Tree, t: &Tensor) -> Vec<u8> {
    let mut buf = vec![0u8; t.length as usize];
    let data = &tree.exts[t.source].data();
    assert!(
        pparse::data::read_exact_at(&**data, t.offset, &mut buf).unwrap(),
        "{}: bytes {}+{} not readable",
        t.name,
        t.offset,
        t.length
    );
    buf
}

// ---------------------------------------------------------------------------
// archives made at test time
// ---------------------------------------------------------------------------

/// What [`dot_tar`] holds: each file's name and bytes.
pub(crate) const DOT_TAR_FILES: &[(&str, &[u8])] =
    &[("a/x", b"x in a\n"), ("b/y", b"y in b, a little longer\n")];

/// A tar made by GNU tar as backups are made, `tar -C DIR -cf backup.tar .`
/// (sorted by name): its members are named `./`, `./a/`, `./a/x`, `./a/z` (a
/// hard link to `./a/x`), `./b/`, `./b/y`. The folder is removed
/// when the first value is dropped.
pub(crate) fn dot_tar() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("d");
    for (name, bytes) in DOT_TAR_FILES {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
    }
    std::fs::hard_link(root.join("a/x"), root.join("a/z")).unwrap();
    let tar = tmp.path().join("backup.tar");
    let ok = std::process::Command::new("tar")
        .arg("--sort=name")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .expect("GNU tar runs");
    assert!(ok.success());
    let listed = std::process::Command::new("tar")
        .arg("-tf")
        .arg(&tar)
        .output()
        .expect("GNU tar runs");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout),
        "./\n./a/\n./a/x\n./a/z\n./b/\n./b/y\n",
        "what GNU tar wrote"
    );
    (tmp, tar)
}

/// [`dot_tar`] gzipped by GNU gzip: `backup.tar.gz`, whose members are
/// `backup.tar/a/x` and so on.
pub(crate) fn dot_tar_gz() -> (tempfile::TempDir, PathBuf) {
    let (tmp, tar) = dot_tar();
    let ok = std::process::Command::new("gzip")
        .arg("-n")
        .arg(&tar)
        .status()
        .expect("GNU gzip runs");
    assert!(ok.success());
    (tmp, tar.with_extension("tar.gz"))
}

/// The bytes of the regular `lnk2` of [`link_tars`]' `dup.tar`.
pub(crate) const DUP_FILE: &[u8] = b"the archive's own lnk2, not /etc/shadow\n";
/// The bytes of `link/x` and `lnk2/y` of [`link_tars`].
pub(crate) const UNDER_X: &[u8] = b"x, stored under the name of a symlink\n";

/// Two hostile tars written by Python's tarfile, in a folder removed when
/// the first value is dropped:
/// * `dup.tar`: a symlink `lnk2 -> /etc/shadow`, then a regular file
///   `lnk2` ([`DUP_FILE`]), then a directory `lnk2/` holding `lnk2/y`
///   ([`UNDER_X`]): three members of one name, of three kinds;
/// * `under.tar`: a symlink `link -> /etc`, then a member `link/x`
///   ([`UNDER_X`]) under the symlink's name.
pub(crate) fn link_tars() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (dup, under) = (tmp.path().join("dup.tar"), tmp.path().join("under.tar"));
    python(&format!(
        r#"
import io, tarfile
def member(t, name, kind, data=b"", target=""):
    i = tarfile.TarInfo(name)
    i.mtime = 1700000000
    if kind == "sym":
        i.type, i.linkname = tarfile.SYMTYPE, target
        t.addfile(i)
    elif kind == "dir":
        i.type, i.mode = tarfile.DIRTYPE, 0o755
        t.addfile(i)
    else:
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
with tarfile.open({dup:?}, "w", format=tarfile.GNU_FORMAT) as t:
    member(t, "lnk2", "sym", target="/etc/shadow")
    member(t, "lnk2", "file", {file:?}.encode())
    member(t, "lnk2/", "dir")
    member(t, "lnk2/y", "file", {x:?}.encode())
with tarfile.open({under:?}, "w", format=tarfile.GNU_FORMAT) as t:
    member(t, "link", "sym", target="/etc")
    member(t, "link/x", "file", {x:?}.encode())
"#,
        dup = dup.to_str().unwrap(),
        under = under.to_str().unwrap(),
        file = std::str::from_utf8(DUP_FILE).unwrap(),
        x = std::str::from_utf8(UNDER_X).unwrap(),
    ));
    (tmp, dup, under)
}

/// The last stderr line of a `--io-stats --json` run, parsed: its counts.
pub(crate) fn io_json(run: &Run) -> serde_json::Value {
    let err = run.stderr_text();
    let line = err.lines().last().unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?} in {err}"));
    v["io"].clone()
}

/// The `decoded N B` figure of a run's `--io-stats` line: 0 when the tree
/// came from an index.
pub(crate) fn io_decoded(run: &Run) -> u64 {
    let err = run.stderr_text();
    let at = err.find("decoded ").expect("an --io-stats line") + "decoded ".len();
    let digits: String = err[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().expect("a figure")
}
