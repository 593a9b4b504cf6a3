//! The fuzz harness: what every target in `fuzz/fuzz_targets/` does with
//! its input, shared with `tests/integration/fuzz_corpus.rs`, which replays
//! the committed corpora and regressions through the same functions.
//!
//! Plain Rust over pparse's public API. One input is parsed to the end as a
//! file of the target's format (the name makes the sniffers pick it), every
//! node of every extraction is loaded to a bounded depth and count, the
//! tree's invariants are checked (the ones `tests/integration/sweep.rs`
//! checks), tensors' first values are decoded, and every JSON writer of the
//! CLI renders into memory and must give valid JSON. A panic anywhere
//! (parse, load, view, writer) or a parse that does not end is a finding.
//!
//! The structure-aware targets (`nested_zip`, `pickle_memo`, `tar_counts`,
//! `tensor_shapes`) read the fuzz bytes with `arbitrary::Unstructured` as
//! the choices of a generator of hostile files: nested stored zips whose
//! central directory entries share one local header, pickles sharing lists
//! through the memo, long runs of one opcode, deep nesting, huge length and
//! count fields, tars of many members, PAX and zip64 sizes near 2^64.

// Included as a module by every fuzz target and by the integration tests,
// each of which uses a different part: `pub` is its interface to them.
#![allow(unreachable_pub)]
#![allow(dead_code)]

use std::io::{Read, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arbitrary::Unstructured;
use pparse::node::{Children, Node};
use pparse::{ExtId, Options, Session, Tree};

/// What a target does with one input.
pub type Target = fn(&[u8]);

/// Every target: its name (the directory of its corpus) and its function.
pub const TARGETS: &[(&str, Target)] = &[
    ("gzip", gzip),
    ("deflate_resync", deflate_resync),
    ("deflate_pieces", deflate_pieces),
    ("tar", tar),
    ("zip", zip),
    ("json", json),
    ("pickle", pickle),
    ("torch", torch),
    ("safetensors", safetensors),
    ("safetensors_index", safetensors_index),
    ("onnx", onnx),
    ("protobuf", protobuf),
    ("wandb", wandb),
    ("cli_json", cli_json),
    ("nested_zip", nested_zip),
    ("pickle_memo", pickle_memo),
    ("tar_counts", tar_counts),
    ("tensor_shapes", tensor_shapes),
    ("pir", pir),
    ("index", index),
    ("index_forged", index_forged),
    ("bzip2", bzip2),
    ("xz", xz),
    ("zstd", zstd),
    ("npy", npy),
    ("msgpack", msgpack),
    ("gguf", gguf),
    ("hdf5", hdf5),
];

/// How long one parse may take before it counts as a hang.
const DEADLINE: Duration = Duration::from_secs(20);
/// Extractions whose nodes are loaded and written.
const MAX_EXTS: usize = 256;
/// Top-level nodes, and children of one node, looked at.
const MAX_NODES: usize = 256;
/// Node loads per input.
const MAX_LOADS: usize = 2048;
/// Levels of nodes loaded below the top level.
const LOAD_DEPTH: usize = 3;
/// Bytes of one extraction read back.
const READ_CAP: u64 = 4 << 20;
/// Tensors decoded per input.
const MAX_TENSORS: usize = 64;
/// Longest file a generator makes.
const GEN_CAP: usize = 4 << 20;

/// The session options of every target: nesting and decoding bounded
/// below the defaults, so one input stays fast.
pub fn options() -> Options {
    Options {
        max_depth: 16,
        step_bytes: 64 << 10,
        decode_ratio: 64,
        decode_floor: 64 << 20,
        ..Options::default()
    }
}

// ---------------------------------------------------------------------------
// Targets.

pub fn gzip(data: &[u8]) {
    check("fuzz.gz", data);
}

pub fn bzip2(data: &[u8]) {
    check("fuzz.tar.bz2", data);
}

pub fn xz(data: &[u8]) {
    check("fuzz.tar.xz", data);
}

pub fn zstd(data: &[u8]) {
    check("fuzz.tar.zst", data);
}

pub fn tar(data: &[u8]) {
    check("fuzz.tar", data);
}

pub fn zip(data: &[u8]) {
    check("fuzz.zip", data);
}

pub fn json(data: &[u8]) {
    check("fuzz.json", data);
    check("fuzz.jsonl", data);
}

pub fn pickle(data: &[u8]) {
    check("fuzz.pkl", data);
}

pub fn torch(data: &[u8]) {
    check("fuzz.pt", data);
}

pub fn safetensors(data: &[u8]) {
    check("fuzz.safetensors", data);
}

pub fn npy(data: &[u8]) {
    check("fuzz.npy", data);
    check("fuzz.npz", data);
}

pub fn msgpack(data: &[u8]) {
    check("fuzz.msgpack", data);
}

pub fn gguf(data: &[u8]) {
    check("fuzz.gguf", data);
}

pub fn hdf5(data: &[u8]) {
    check("fuzz.h5", data);
}

pub fn safetensors_index(data: &[u8]) {
    check("model.safetensors.index.json", data);
}

pub fn onnx(data: &[u8]) {
    check("fuzz.onnx", data);
}

pub fn protobuf(data: &[u8]) {
    check("fuzz.pb", data);
}

pub fn wandb(data: &[u8]) {
    check("fuzz.wandb", data);
}

/// The Paddle program reader on any text: it ends, whole or fed in pieces
/// (sized by the first byte) with the same result, and a tree made from
/// the text keeps its invariants.
pub fn pir(data: &[u8]) {
    use pparse::parsers::ml::paddle::parse::{Builder, Reader, read_all};
    let start = Instant::now();
    let whole = read_all(data);
    let step = 1 + data.first().copied().unwrap_or(0) as usize;
    let mut b = Builder::default();
    let mut r = Reader::new();
    let (mut pos, mut end, mut rounds) = (0usize, 0usize, 0usize);
    loop {
        end = (end + step).min(data.len());
        let eof = end == data.len();
        pos += r.feed(&data[pos..end], pos as u64, eof, &mut b);
        rounds += 1;
        assert!(rounds <= data.len() + 2, "the reader makes no progress");
        if eof {
            break;
        }
    }
    assert_eq!(b.programs, whole.programs, "fed in pieces of {step}");
    assert_eq!(b.diagnostics, whole.diagnostics, "fed in pieces of {step}");
    assert!(
        start.elapsed() < DEADLINE,
        "the PIR reader took {:?}",
        start.elapsed()
    );
    let mut text = b"{\n    (%0) = \"pd_op.data\" () {} : () -> tensor<f32>\n".to_vec();
    text.extend_from_slice(data);
    check("fuzz.txt", &text);
}

/// Names the first byte picks for `cli_json`: one per format, and names
/// that leave the choice to the sniffers' magic bytes.
const NAMES: &[&str] = &[
    "fuzz.bin",
    "fuzz",
    "fuzz.gz",
    "fuzz.tgz",
    "fuzz.tar",
    "fuzz.zip",
    "fuzz.pt",
    "fuzz.pth",
    "fuzz.pkl",
    "fuzz.json",
    "fuzz.jsonl",
    "fuzz.safetensors",
    "model.safetensors.index.json",
    "fuzz.onnx",
    "fuzz.pb",
    "fuzz.wandb",
    "fuzz.txt",
    "model.pdiparams",
];

/// Any format: the first byte picks the name, the rest is the file.
pub fn cli_json(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    check(NAMES[pick as usize % NAMES.len()], rest);
}

/// Nested stored zips whose central directory entries all point at one
/// local header; zip64 and hostile sizes and counts.
pub fn nested_zip(data: &[u8]) {
    let file = gen_nested_zip(&mut Unstructured::new(data));
    check("fuzz.zip", &file);
}

/// Pickles that share objects through the memo, long runs of one opcode,
/// deep nesting, huge length fields; alone and as a torch file's data.pkl.
pub fn pickle_memo(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let torch = u.arbitrary::<bool>().unwrap_or(false);
    let pkl = gen_pickle(&mut u);
    if torch {
        let file = torch_zip(&pkl, &[0u8; 64]);
        check("fuzz.pt", &file);
    } else {
        check_with("fuzz.pkl", &pkl, true);
    }
}

/// Tars of many members (plain or gzipped), with hostile size fields,
/// PAX records and GNU long names.
pub fn tar_counts(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let gz = u.arbitrary::<bool>().unwrap_or(false);
    let tar = gen_tar(&mut u, gz);
    if gz {
        check("fuzz.tar.gz", &gzip_bytes(&tar));
    } else {
        check("fuzz.tar", &tar);
    }
}

/// Tensors whose shapes, offsets and header lengths are near 2^64:
/// safetensors files and torch zips.
pub fn tensor_shapes(data: &[u8]) {
    let mut u = Unstructured::new(data);
    if u.arbitrary::<bool>().unwrap_or(false) {
        let (pkl, storage) = gen_torch_pickle(&mut u);
        check("fuzz.pt", &torch_zip(&pkl, &storage));
    } else {
        check("fuzz.safetensors", &gen_safetensors(&mut u));
    }
}

// ---------------------------------------------------------------------------
// The checks.

/// Parses, loads, checks and writes `bytes` as a file named `name`.
pub fn check(name: &str, bytes: &[u8]) {
    check_with(name, bytes, false);
}

/// [`check`]; `trace` also writes the pickle listing with the VM's state
/// after each opcode (`pparse pickle --trace`).
pub fn check_with(name: &str, bytes: &[u8], trace: bool) {
    let session = parse(name, bytes.to_vec());
    load_all(&session);
    let t = session.tree();
    invariants(&t, name);
    tensors(&t);
    writers(&t, trace);
}

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics of engine threads, so a parse whose engine died fails at
/// once rather than at the deadline (libFuzzer's own hook, called first,
/// aborts the process anyway).
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some("pparse-engine") {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

/// Parses `bytes` to the end; panics if the engine panicked or the parse
/// did not end within [`DEADLINE`].
pub fn parse(name: &str, bytes: Vec<u8>) -> Session {
    install_panic_hook();
    let before = PANICS.load(Ordering::SeqCst);
    let len = bytes.len();
    let session = Session::from_bytes(name, bytes, options());
    let start = Instant::now();
    session.wait_until(|_| PANICS.load(Ordering::SeqCst) != before || start.elapsed() > DEADLINE);
    if PANICS.load(Ordering::SeqCst) != before {
        drop(session);
        panic!("the engine panicked parsing {name} ({len} bytes)");
    }
    if !session.is_finished() {
        let steps = session.steps();
        // Dropping would join a thread that may never stop.
        std::mem::forget(session);
        panic!("{name} ({len} bytes) not parsed within {DEADLINE:?}: a hang ({steps} steps)");
    }
    session
}

/// Loads the nodes of every extraction, [`LOAD_DEPTH`] levels down, at most
/// [`MAX_LOADS`] loads in all.
fn load_all(s: &Session) {
    let mut loads = 0;
    let exts = s.tree().len().min(MAX_EXTS);
    for id in 0..exts {
        let count = s.tree().exts[id].nodes.len().min(MAX_NODES);
        for i in 0..count {
            load_below(s, id, &mut vec![i], LOAD_DEPTH, &mut loads);
        }
    }
}

fn load_below(s: &Session, ext: ExtId, path: &mut Vec<usize>, depth: usize, loads: &mut usize) {
    if depth == 0 || *loads >= MAX_LOADS {
        return;
    }
    *loads += 1;
    s.load(ext, path);
    let n = {
        let t = s.tree();
        let (first, rest) = path.split_first().expect("a path");
        t.exts[ext].nodes[*first]
            .descend(rest)
            .map_or(0, |n| n.loaded_children().len())
    };
    for i in 0..n.min(MAX_NODES) {
        path.push(i);
        load_below(s, ext, path, depth - 1, loads);
        path.pop();
    }
}

/// The tree's invariants: sizes within declared sizes, damage and node
/// ranges within the bytes, parents and children agree, every byte reads.
fn invariants(t: &Tree, name: &str) {
    for id in 0..t.len() {
        let e = &t.exts[id];
        let size = e.size();
        let at = || format!("{name}: extraction {id} {:?}", t.path_of(id));
        if let Some(d) = e.declared_size() {
            assert!(size <= d, "{}: holds {size} bytes of a declared {d}", at());
        }
        for d in &e.damage {
            assert!(
                d.range.start <= d.range.end && d.range.end <= size,
                "{}: ({size} bytes) damage outside its bytes: {d}",
                at()
            );
        }
        for &c in &e.children {
            assert_eq!(t.exts[c].parent(), Some(id), "{}: child {c}", at());
        }
        assert!(t.status_of(id) >= e.status(), "{}: status_of", at());
        if id >= MAX_EXTS {
            continue;
        }
        // Top-level nodes lie inside the bytes (the engine clamps them);
        // loaded ones may reach past a truncated end, but not backwards.
        for n in &e.nodes {
            assert!(
                n.range.start <= n.range.end && n.range.end <= size,
                "{}: node {:?} ({}) has range {:?} outside its {size} bytes",
                at(),
                n.name,
                n.kind,
                n.range
            );
        }
        let mut budget = 100_000usize;
        for n in &e.nodes {
            node_ranges(n, &mut budget, &at);
        }
        let want = size.min(READ_CAP);
        let got = read_up_to(t, id, want);
        assert_eq!(
            got,
            want,
            "{}: reads back {got} bytes, size() says {size}",
            at()
        );
    }
}

fn node_ranges(n: &Node, budget: &mut usize, at: &dyn Fn() -> String) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    assert!(
        n.range.start <= n.range.end,
        "{}: node {:?} ({}) has range {:?} that ends before it starts",
        at(),
        n.name,
        n.kind,
        n.range
    );
    if let Children::Loaded(c) = &n.children {
        for c in c {
            node_ranges(c, budget, at);
        }
    }
}

/// Reads the first `want` bytes of an extraction; returns how many came.
fn read_up_to(t: &Tree, id: ExtId, want: u64) -> u64 {
    let data = &t.exts[id].data();
    let mut buf = vec![0u8; 64 << 10];
    let mut off = 0u64;
    while off < want {
        let n = (want - off).min(buf.len() as u64) as usize;
        match data.read_at(off, &mut buf[..n]) {
            Ok(0) => break,
            Ok(k) => off += k as u64,
            Err(e) => panic!("read_at {off} of extraction {id}: {e}"),
        }
    }
    off
}

/// Decodes the first values of every tensor, and the statistics and `.npy`
/// export of small ones.
fn tensors(t: &Tree) {
    use pparse::view::{tensors, values};
    let mut done = 0;
    for id in 0..t.len().min(MAX_EXTS) {
        if !matches!(
            t.exts[id].parser(),
            Some("safetensors" | "safetensors-index" | "zip" | "torch" | "onnx")
        ) {
            continue;
        }
        for x in tensors::tensors(t, id) {
            if done >= MAX_TENSORS {
                return;
            }
            done += 1;
            let Some(src) = t.get(x.source) else { continue };
            let src_data = src.data();
            let data = &*src_data;
            values::values(&x, data, 0, 16);
            let numel = x.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            if numel.is_some_and(|n| n <= 1 << 16) && x.length <= 1 << 20 {
                let cancel = std::sync::atomic::AtomicBool::new(false);
                let _ = values::stats(&x, data, 64, &cancel, &|_, _| {});
                let _ = values::write_npy(&x, data, &mut std::io::sink());
            }
        }
    }
}

/// Every report the CLI prints, into memory: each must give valid JSON.
fn writers(t: &Tree, trace: bool) {
    use pparse::report;
    let mut out = Vec::new();
    report::tree::tree_json(t, 0, &mut out).expect("tree --json writes");
    valid_json(&out, "tree --json");
    out.clear();
    report::tree::tree_text(t, &mut out).expect("tree writes");
    for id in 0..t.len().min(MAX_EXTS) {
        let e = &t.exts[id];
        out.clear();
        report::tree::nodes_json(t, id, LOAD_DEPTH + 1, &mut out).expect("nodes --json writes");
        valid_json(&out, "nodes --json");
        match e.parser() {
            Some("pickle" | "torch") => {
                out.clear();
                if report::pickle::json_of(t, id, &mut out).expect("pickle --json writes") {
                    valid_json(&out, "pickle --json");
                }
                out.clear();
                report::pickle::text_of(
                    t,
                    id,
                    report::pickle::ListStyle {
                        trace,
                        decimal: trace,
                    },
                    &mut out,
                )
                .expect("pickle writes");
            }
            Some("safetensors" | "safetensors-index" | "zip" | "onnx") => {
                out.clear();
                report::tensors::json_of(t, id, &mut out).expect("tensors --json writes");
                valid_json(&out, "tensors --json");
            }
            Some("wandb") => {
                out.clear();
                report::records::json_of(e, &mut out, &mut |_, _| {})
                    .expect("records --json writes");
                for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                    valid_json(line, "records --json");
                }
            }
            _ => {}
        }
    }
}

fn valid_json(out: &[u8], what: &str) {
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(out) {
        // serde_json stops at 128 levels; deeper output is not wrong.
        if !e.to_string().contains("recursion limit") {
            let text = String::from_utf8_lossy(&out[..out.len().min(4096)]);
            panic!("{what} wrote invalid JSON ({e}): {text}");
        }
    }
}

// ---------------------------------------------------------------------------
// Generators. Each reads its choices from `u`; an exhausted `u` gives the
// smallest choice, so every input makes a file.

/// Lengths and counts near the edges of their fields.
const EDGES: &[u64] = &[
    0,
    1,
    2,
    7,
    255,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 32,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

fn edge(u: &mut Unstructured) -> u64 {
    if u.ratio(1, 2).unwrap_or(true) {
        *u.choose(EDGES).unwrap_or(&0)
    } else {
        u.arbitrary::<u32>().unwrap_or(0) as u64
    }
}

fn small(u: &mut Unstructured, max: u32) -> u32 {
    u.int_in_range(0..=max).unwrap_or(0)
}

fn crc(b: &[u8]) -> u32 {
    crc32fast::hash(b)
}

fn gzip_bytes(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).expect("to memory");
    e.finish().expect("to memory")
}

fn deflate_bytes(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::read::DeflateEncoder::new(b, flate2::Compression::fast());
    let mut out = Vec::new();
    e.read_to_end(&mut out).expect("from memory");
    out
}

fn le16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn le32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn le64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// One zip member as written: a local header and its bytes.
struct ZipMember {
    name: Vec<u8>,
    method: u16,
    crc: u32,
    /// Sizes in the headers (may lie).
    csize: u64,
    usize: u64,
    zip64: bool,
    offset: u64,
}

fn zip_extra(m: &ZipMember, offset: Option<u64>) -> Vec<u8> {
    if !m.zip64 {
        return Vec::new();
    }
    let mut x = Vec::new();
    le16(&mut x, 1);
    le16(&mut x, if offset.is_some() { 24 } else { 16 });
    le64(&mut x, m.usize);
    le64(&mut x, m.csize);
    if let Some(o) = offset {
        le64(&mut x, o);
    }
    x
}

fn size32(m: &ZipMember, v: u64) -> u32 {
    if m.zip64 { 0xffff_ffff } else { v as u32 }
}

fn write_lfh(out: &mut Vec<u8>, m: &ZipMember, body: &[u8]) {
    let extra = zip_extra(m, None);
    out.extend_from_slice(b"PK\x03\x04");
    le16(out, if m.zip64 { 45 } else { 20 });
    le16(out, 0);
    le16(out, m.method);
    le32(out, 0);
    le32(out, m.crc);
    le32(out, size32(m, m.csize));
    le32(out, size32(m, m.usize));
    le16(out, m.name.len() as u16);
    le16(out, extra.len() as u16);
    out.extend_from_slice(&m.name);
    out.extend_from_slice(&extra);
    out.extend_from_slice(body);
}

fn write_cd(out: &mut Vec<u8>, m: &ZipMember, name: &[u8]) {
    let extra = zip_extra(m, m.zip64.then_some(m.offset));
    out.extend_from_slice(b"PK\x01\x02");
    le16(out, 45);
    le16(out, if m.zip64 { 45 } else { 20 });
    le16(out, 0);
    le16(out, m.method);
    le32(out, 0);
    le32(out, m.crc);
    le32(out, size32(m, m.csize));
    le32(out, size32(m, m.usize));
    le16(out, name.len() as u16);
    le16(out, extra.len() as u16);
    le16(out, 0);
    le16(out, 0);
    le16(out, 0);
    le32(out, 0);
    le32(
        out,
        if m.zip64 {
            0xffff_ffff
        } else {
            m.offset as u32
        },
    );
    out.extend_from_slice(name);
    out.extend_from_slice(&extra);
}

/// The end records: zip64 ones when `zip64`, with `count` entries.
fn write_end(out: &mut Vec<u8>, count: u64, cd_start: u64, zip64: bool) {
    let cd_size = out.len() as u64 - cd_start;
    if zip64 {
        let at = out.len() as u64;
        out.extend_from_slice(b"PK\x06\x06");
        le64(out, 44);
        le16(out, 45);
        le16(out, 45);
        le32(out, 0);
        le32(out, 0);
        le64(out, count);
        le64(out, count);
        le64(out, cd_size);
        le64(out, cd_start);
        out.extend_from_slice(b"PK\x06\x07");
        le32(out, 0);
        le64(out, at);
        le32(out, 1);
    }
    out.extend_from_slice(b"PK\x05\x06");
    le16(out, 0);
    le16(out, 0);
    let c16 = if zip64 {
        0xffff
    } else {
        count.min(0xffff) as u16
    };
    le16(out, c16);
    le16(out, c16);
    le32(out, if zip64 { 0xffff_ffff } else { cd_size as u32 });
    le32(out, if zip64 { 0xffff_ffff } else { cd_start as u32 });
    le16(out, 0);
}

const ZIP_NAMES: &[&[u8]] = &[
    b"a.zip",
    b"inner.zip",
    b"x",
    b"archive/data.pkl",
    b"dir/",
    b"../up.zip",
    b"",
    b"data.tar.gz",
];

/// A zip of `levels` stored zips each inside the next, the central
/// directory of each level listing its one member `fan` times.
pub fn gen_nested_zip(u: &mut Unstructured) -> Vec<u8> {
    let levels = small(u, 12);
    let len = small(u, 64) as usize;
    let mut inner = u.bytes(len).unwrap_or_default().to_vec();
    for _ in 0..=levels {
        let fan = 1 + small(u, 4) as u64;
        let zip64 = u.ratio(1, 4).unwrap_or(false);
        let deflate = u.ratio(1, 6).unwrap_or(false);
        let body = if deflate {
            deflate_bytes(&inner)
        } else {
            inner.clone()
        };
        let lie = u.ratio(1, 5).unwrap_or(false);
        let m = ZipMember {
            name: u.choose(ZIP_NAMES).unwrap_or(&ZIP_NAMES[0]).to_vec(),
            method: if deflate { 8 } else { 0 },
            crc: crc(&inner),
            csize: if lie { edge(u) } else { body.len() as u64 },
            usize: if lie { edge(u) } else { inner.len() as u64 },
            zip64,
            offset: 0,
        };
        let mut out = Vec::with_capacity(body.len() + 256);
        write_lfh(&mut out, &m, &body);
        let cd_start = out.len() as u64;
        let count = if u.ratio(1, 8).unwrap_or(false) {
            edge(u)
        } else {
            fan
        };
        for i in 0..fan {
            let mut name = m.name.clone();
            if i > 0 {
                name.extend_from_slice(format!(".{i}").as_bytes());
            }
            write_cd(&mut out, &m, &name);
        }
        write_end(&mut out, count, cd_start, zip64 || count > 0xfffe);
        if out.len() > GEN_CAP {
            break;
        }
        inner = out;
    }
    inner
}

/// A pickle program: protocol header, then steps the input chooses.
pub fn gen_pickle(u: &mut Unstructured) -> Vec<u8> {
    let proto = 2 + small(u, 3) as u8;
    let mut p = vec![0x80, proto];
    let steps = small(u, 24);
    // The memo index the next MEMOIZE would take.
    let mut memo = 0u32;
    for _ in 0..steps {
        if p.len() > GEN_CAP {
            break;
        }
        match small(u, 11) {
            // L[i] = [L[i-1], L[i-1]], `n` times, through the memo.
            0 => {
                let n = small(u, 64);
                p.push(b']');
                put_memo(&mut p, &mut memo, proto);
                for _ in 0..n {
                    p.push(b'(');
                    get_memo(&mut p, memo - 1);
                    get_memo(&mut p, memo - 1);
                    p.push(if u.ratio(1, 3).unwrap_or(false) {
                        b't'
                    } else {
                        b'l'
                    });
                    put_memo(&mut p, &mut memo, proto);
                }
            }
            // The same through dicts: D[i] = {0: D[i-1], 1: D[i-1]}.
            1 => {
                let n = small(u, 64);
                p.push(b'}');
                put_memo(&mut p, &mut memo, proto);
                for _ in 0..n {
                    p.extend_from_slice(b"}(K\x00");
                    get_memo(&mut p, memo - 1);
                    p.extend_from_slice(b"K\x01");
                    get_memo(&mut p, memo - 1);
                    p.push(b'u');
                    put_memo(&mut p, &mut memo, proto);
                }
            }
            // A long run of one short opcode.
            2 => {
                let op = *u.choose(b"N)]}(0\x88\x89.").unwrap_or(&b'N');
                let n = (edge(u) as usize).min(1 << 20);
                p.extend(std::iter::repeat_n(op, n));
            }
            // Deep nesting: MARKs closed by LIST or TUPLE, or nested appends.
            3 => {
                let n = (edge(u) as usize).min(1 << 18);
                if u.arbitrary::<bool>().unwrap_or(false) {
                    p.extend(std::iter::repeat_n(b'(', n));
                    p.extend(std::iter::repeat_n(b'l', n));
                } else {
                    p.extend(std::iter::repeat_n(b']', n));
                    p.extend(std::iter::repeat_n(b'a', n.saturating_sub(1)));
                }
            }
            // An opcode with a length or index field near its edge.
            4 => {
                let op = *u
                    .choose(b"XBCTUVjhqrgp\x8a\x8b\x8d\x8e\x8c\x95\x96\x82\x83\x84")
                    .unwrap_or(&b'X');
                p.push(op);
                let v = edge(u);
                match op {
                    b'C' | b'U' | b'h' | b'q' | b'\x8a' | b'\x8c' | b'\x82' => p.push(v as u8),
                    b'\x83' => le16(&mut p, v as u16),
                    b'\x8d' | b'\x8e' | b'\x95' | b'\x96' => le64(&mut p, v),
                    b'V' | b'g' | b'p' => p.extend_from_slice(format!("{v}\n").as_bytes()),
                    _ => le32(&mut p, v as u32),
                }
                let n = small(u, 32) as usize;
                p.extend_from_slice(u.bytes(n).unwrap_or_default());
            }
            // A memo get or put at any index.
            5 => {
                let i = edge(u) as u32;
                if u.arbitrary::<bool>().unwrap_or(false) {
                    get_memo(&mut p, i);
                } else {
                    p.push(b'r');
                    le32(&mut p, i);
                }
            }
            // A global and a call: what torch files do.
            6 => {
                let g: &[u8] = u
                    .choose(&[
                        b"ctorch._utils\n_rebuild_tensor_v2\n".as_slice(),
                        b"ccollections\nOrderedDict\n",
                        b"ctorch\nFloatStorage\n",
                        b"cos\nsystem\n",
                        b"c__builtin__\nset\n",
                    ])
                    .unwrap_or(&b"cos\nsystem\n".as_slice());
                p.extend_from_slice(g);
                p.extend_from_slice(b")R");
                put_memo(&mut p, &mut memo, proto);
            }
            // Builds and appends on whatever is there.
            7 => {
                let op = *u
                    .choose(b"abesuRQ\x81\x92\x93\x90\x91\x85\x86\x87")
                    .unwrap_or(&b'a');
                p.push(op);
            }
            // A frame around what follows, with a length that may lie.
            8 => {
                p.push(0x95);
                le64(&mut p, edge(u));
            }
            // Raw bytes.
            9 => {
                let n = small(u, 64) as usize;
                p.extend_from_slice(u.bytes(n).unwrap_or_default());
            }
            // A short string, memoised.
            10 => {
                p.extend_from_slice(b"\x8c\x01s");
                put_memo(&mut p, &mut memo, proto);
            }
            _ => p.push(b'.'),
        }
    }
    if u.ratio(3, 4).unwrap_or(true) {
        p.push(b'.');
    }
    p
}

fn put_memo(p: &mut Vec<u8>, memo: &mut u32, proto: u8) {
    if proto >= 4 {
        p.push(0x94);
    } else if *memo < 256 {
        p.push(b'q');
        p.push(*memo as u8);
    } else {
        p.push(b'r');
        le32(p, *memo);
    }
    *memo += 1;
}

fn get_memo(p: &mut Vec<u8>, i: u32) {
    if i < 256 {
        p.push(b'h');
        p.push(i as u8);
    } else {
        p.push(b'j');
        le32(p, i);
    }
}

/// A stored zip in the layout of `torch.save`: the pickle and one storage.
fn torch_zip(pkl: &[u8], storage: &[u8]) -> Vec<u8> {
    let files: [(&[u8], &[u8]); 3] = [
        (b"archive/data.pkl", pkl),
        (b"archive/data/0", storage),
        (b"archive/version", b"3\n"),
    ];
    let mut out = Vec::new();
    let mut members = Vec::new();
    for (name, body) in files {
        let m = ZipMember {
            name: name.to_vec(),
            method: 0,
            crc: crc(body),
            csize: body.len() as u64,
            usize: body.len() as u64,
            zip64: false,
            offset: out.len() as u64,
        };
        write_lfh(&mut out, &m, body);
        members.push(m);
    }
    let cd_start = out.len() as u64;
    for m in &members {
        write_cd(&mut out, m, &m.name);
    }
    write_end(&mut out, members.len() as u64, cd_start, false);
    out
}

/// A pickle int of any size (BININT1, BININT or LONG1).
fn pickle_int(p: &mut Vec<u8>, v: u64) {
    if v < 256 {
        p.push(b'K');
        p.push(v as u8);
    } else if v < 1 << 31 {
        p.push(b'J');
        le32(p, v as u32);
    } else {
        p.extend_from_slice(b"\x8a\x09");
        le64(p, v);
        p.push(0);
    }
}

const DTYPES: &[&str] = &[
    "F32", "F16", "BF16", "F64", "I8", "U8", "I64", "BOOL", "C64", "F8_E4M3", "F4", "F6_E2M3",
    "U64", "X",
];

/// A torch pickle of up to 4 tensors over storage "0", their shapes,
/// strides and offsets near 2^64; and the storage's bytes.
fn gen_torch_pickle(u: &mut Unstructured) -> (Vec<u8>, Vec<u8>) {
    let storages: &[&[u8]] = &[
        b"FloatStorage",
        b"HalfStorage",
        b"LongStorage",
        b"BoolStorage",
        b"ByteStorage",
        b"ComplexFloatStorage",
    ];
    let mut p = b"\x80\x02}q\x00(".to_vec();
    for t in 0..=small(u, 3) {
        p.extend_from_slice(format!("X\x02\x00\x00\x00t{t}").as_bytes());
        p.extend_from_slice(
            b"ctorch._utils\n_rebuild_tensor_v2\n(X\x07\x00\x00\x00storagectorch\n",
        );
        p.extend_from_slice(u.choose(storages).unwrap_or(&storages[0]));
        p.extend_from_slice(b"\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpu");
        pickle_int(&mut p, edge(u));
        p.extend_from_slice(b"tQ");
        pickle_int(&mut p, edge(u));
        let dims = small(u, 4);
        for _ in 0..2 {
            p.push(b'(');
            for _ in 0..dims {
                pickle_int(&mut p, edge(u));
            }
            p.push(b't');
        }
        p.extend_from_slice(b"\x89ccollections\nOrderedDict\n)RtR");
    }
    p.extend_from_slice(b"u.");
    let n = small(u, 256) as usize;
    (p, u.bytes(n).unwrap_or_default().to_vec())
}

/// A safetensors file: tensors with shapes and offsets near 2^64, a header
/// length that may lie, and a few data bytes.
fn gen_safetensors(u: &mut Unstructured) -> Vec<u8> {
    let mut header = String::from("{");
    let mut offset = 0u64;
    for t in 0..=small(u, 4) {
        let dtype = u.choose(DTYPES).unwrap_or(&"F32");
        let dims: Vec<String> = (0..small(u, 4)).map(|_| edge(u).to_string()).collect();
        let (start, end) = if u.ratio(1, 2).unwrap_or(true) {
            (edge(u), edge(u))
        } else {
            let len = small(u, 64) as u64;
            (offset, offset.saturating_add(len))
        };
        offset = end.max(offset);
        header.push_str(&format!(
            "\"t{t}\":{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[{start},{end}]}},",
            dims.join(",")
        ));
    }
    header.push_str("\"__metadata__\":{\"format\":\"pt\"}}");
    let len = if u.ratio(1, 4).unwrap_or(false) {
        edge(u)
    } else {
        header.len() as u64
    };
    let mut out = Vec::new();
    le64(&mut out, len);
    out.extend_from_slice(header.as_bytes());
    let n = small(u, 512) as usize;
    out.extend_from_slice(u.bytes(n).unwrap_or_default());
    out
}

/// One 512-byte tar header with a valid checksum.
fn tar_header(name: &[u8], size_field: &[u8; 12], flag: u8) -> [u8; 512] {
    let mut h = [0u8; 512];
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(size_field);
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = flag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

fn octal12(v: u64) -> [u8; 12] {
    let mut f = [0u8; 12];
    let s = format!("{:011o}", v.min(0o77777777777));
    f[..11].copy_from_slice(&s.as_bytes()[..11]);
    f
}

/// The size field: octal, base-256 (any u64 and beyond), or garbage.
fn size_field(u: &mut Unstructured, size: u64) -> [u8; 12] {
    match small(u, 5) {
        0 => {
            let mut f = [0u8; 12];
            f[0] = 0x80;
            f[4..].copy_from_slice(&edge(u).to_be_bytes());
            f
        }
        1 => [0xff; 12],
        2 => *b"77777777777\0",
        3 => *b"-1         \0",
        _ => octal12(size),
    }
}

/// A member: maybe PAX or GNU long-name records first, then the header and
/// its content blocks.
fn tar_member(u: &mut Unstructured, i: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let name = format!("m{i}");
    match small(u, 5) {
        0 => {
            let v = match small(u, 4) {
                0 => "18446744073709551615".to_string(),
                1 => "18446744073709551616".to_string(),
                2 => "-1".to_string(),
                3 => "1".repeat(40),
                _ => edge(u).to_string(),
            };
            let key = u
                .choose(&["size", "path", "linkpath", "GNU.sparse.size", "uid"])
                .unwrap_or(&"size");
            let rec = format!("{key}={v}\n");
            let declared = if u.ratio(1, 3).unwrap_or(false) {
                edge(u).to_string()
            } else {
                (rec.len() + rec.len().to_string().len() + 1).to_string()
            };
            let body = format!("{declared} {rec}");
            let flag = if u.arbitrary::<bool>().unwrap_or(false) {
                b'x'
            } else {
                b'g'
            };
            out.extend_from_slice(&tar_header(b"pax", &octal12(body.len() as u64), flag));
            pad_block(&mut out, body.as_bytes());
        }
        1 => {
            let long = vec![b'L'; small(u, 600) as usize];
            let f = size_field(u, long.len() as u64);
            out.extend_from_slice(&tar_header(b"././@LongLink", &f, b'L'));
            pad_block(&mut out, &long);
        }
        _ => {}
    }
    let content = vec![b'x'; small(u, 3) as usize * 200];
    let flag = *u.choose(b"0052x7S").unwrap_or(&b'0');
    let f = size_field(u, content.len() as u64);
    out.extend_from_slice(&tar_header(name.as_bytes(), &f, flag));
    pad_block(&mut out, &content);
    out
}

fn pad_block(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
    let pad = (512 - b.len() % 512) % 512;
    out.extend(std::iter::repeat_n(0, pad));
}

/// A tar of a few members, then one of them repeated many times (up to
/// 65,536 when the tar is gzipped, 2,048 when plain).
fn gen_tar(u: &mut Unstructured, gz: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..small(u, 3) {
        out.extend_from_slice(&tar_member(u, i as u64));
    }
    let repeat = tar_member(u, 9);
    let max = if gz { 1 << 16 } else { 1 << 11 };
    let n = (edge(u) as usize).min(max);
    for _ in 0..n {
        if out.len() + repeat.len() > 32 << 20 {
            break;
        }
        out.extend_from_slice(&repeat);
    }
    if u.ratio(3, 4).unwrap_or(true) {
        out.extend(std::iter::repeat_n(0, 1024));
    }
    out
}

/// An index body (inflated), read back into a tree whose bytes are read.
pub fn index(data: &[u8]) {
    pparse::index::fuzz_body(data);
}

/// The file the forged indexes of [`index_forged`] claim to describe:
/// a tar.gz made by GNU tar and gzip, with a zip inside.
const FORGED_FILE: &[u8] = include_bytes!("../fixtures/nested.tar.gz");

/// Every extraction of [`FORGED_FILE`] as a fresh parse finds it, by id:
/// its PATH and its bytes (none for one without content).
fn forged_reference() -> &'static Vec<(String, Option<Vec<u8>>)> {
    static REF: std::sync::OnceLock<Vec<(String, Option<Vec<u8>>)>> = std::sync::OnceLock::new();
    REF.get_or_init(|| {
        let s = Session::from_bytes("nested.tar.gz", FORGED_FILE.to_vec(), Options::default());
        s.wait();
        let t = s.tree();
        (0..t.len())
            .map(|id| {
                let e = &t.exts[id];
                let bytes = e.kind.has_content().then(|| {
                    let d = e.data();
                    let mut b = vec![0u8; d.available() as usize];
                    let n = pparse::data::read_exact_at(&*d, 0, &mut b).map_or(0, |_| b.len());
                    b.truncate(n);
                    b
                });
                (t.path_of(id), bytes)
            })
            .collect()
    })
}

/// Arbitrary bytes as an index body (inflated) for [`FORGED_FILE`], read
/// with every check an index gets, then served through `pparse::fs` as
/// `cat` and `extract` serve them. No panic, and no bytes but the file's:
/// what a member serves through the index must be what a fresh parse gives
/// for it, as far as docs/contract.md says an index is checked: the first
/// KiB of every member the parse sniffed, and the whole of an intact tar
/// member. (A name the index changed makes another PATH; only extractions
/// whose PATH and place in the tree are the fresh parse's are compared.)
pub fn index_forged(data: &[u8]) {
    let reference = forged_reference();
    let root: pparse::data::Data =
        std::sync::Arc::new(pparse::data::MemSource::new(FORGED_FILE.to_vec()));
    let guard = std::sync::Arc::new(pparse::data::ReadGuard::new(root.clone()));
    let Some(cat) =
        pparse::index::fuzz_catalog(data, root, pparse::name::Name::from("nested.tar.gz"))
    else {
        return;
    };
    // Members are served from the catalog alone (as a worker that opens
    // members through an index serves them); the tree is built for the
    // list of PATHs to try.
    let session = Session::from_catalog(std::sync::Arc::new(cat), guard);
    let tree = session.tree();
    let mut check = Vec::new();
    for id in 0..tree.len().min(MAX_EXTS) {
        let e = &tree.exts[id];
        let path = tree.path_of(id);
        if !e.kind.has_content() || id == 0 || tree.resolve(&path) != Some(id) {
            continue;
        }
        let whole = e
            .parent()
            .is_some_and(|p| tree.exts[p].parser() == Some("tar"))
            && e.status() == pparse::Status::Complete;
        let sniffed = tree.head_crc(id).is_some();
        check.push((id, path, whole, sniffed));
    }
    drop(tree);
    let fs = pparse::fs::Fs::from_session(std::sync::Arc::new(session));
    for (id, path, whole, sniffed) in check {
        let Ok(f) = fs.open(&path) else {
            continue;
        };
        let Ok(got) = f.read_range(pparse::data::Range::new(0, READ_CAP)) else {
            continue;
        };
        let Some((ref_path, Some(want))) = reference.get(id) else {
            continue;
        };
        if *ref_path != path {
            continue;
        }
        if whole {
            assert!(
                got == *want,
                "{path}: an index served {} bytes that are not the member's {}",
                got.len(),
                want.len()
            );
        } else if sniffed {
            let n = got.len().min(pparse::parsers::SNIFF_LEN);
            assert!(
                want.len() >= n && got[..n] == want[..n],
                "{path}: an index served a first KiB that is not the member's"
            );
        }
    }
}

/// Raw deflate bytes through the resync machinery: the block finder on a
/// small budget, and the unknown-window decoder from each of the first
/// eight bits beside zlib given a window of zeros: the bytes they give must
/// agree, and where the decoder says the stream ends zlib must too.
pub fn deflate_resync(data: &[u8]) {
    use pparse::data::inflate::resync::{self, Event, Recover};
    use pparse::data::inflate::zlib::{Code, RawInflate};
    let src: pparse::data::Data = std::sync::Arc::new(pparse::data::MemSource::new(data.to_vec()));
    let n = data.len() as u64;
    let _ = resync::find_block(&src, 0, n, 1 << 16, &|e| e == n);
    for bit in 0..8u64.min(n * 8) {
        let mut d = Recover::new(src.clone(), bit);
        let mut out = Vec::new();
        let end = loop {
            match d.run(&mut out, 1 << 20) {
                Ok(Event::Progress | Event::Block) if out.len() < 16 << 20 => {}
                Ok(Event::End(_)) => break true,
                _ => break false,
            }
        };
        let mut z = RawInflate::new();
        let mut from = (bit / 8) as usize;
        if bit % 8 > 0 {
            z.prime(8 - (bit % 8) as u8, data[from] >> (bit % 8));
            from += 1;
        }
        assert!(z.set_dictionary(&[0u8; resync::WINDOW]));
        let mut zout = vec![0u8; out.len() + 1];
        let s = z.inflate(&data[from.min(data.len())..], &mut zout, false);
        let k = s.produced.min(out.len());
        assert_eq!(&zout[..k], &out[..k], "decoders disagree from bit {bit}");
        if end {
            assert_eq!(
                s.code,
                Code::StreamEnd,
                "zlib does not end where the decoder does (bit {bit})"
            );
            assert_eq!(s.produced, out.len(), "lengths differ from bit {bit}");
        }
    }
}

/// Raw deflate decoded on one thread and in pieces on worker threads: the
/// same event, bytes, CRC and checkpoints, whatever the bits. The first
/// byte sets the piece size, from 1/64 to 1/4 of the input. Pieces start
/// where a block may start and decode without the window; the decoding in
/// order takes one only at a block end at its first bit.
pub fn deflate_pieces(data: &[u8]) {
    use pparse::data::inflate::parallel::Plan;
    use pparse::data::inflate::{InflateEvent, InflateSource, Inflater};
    let Some((&k, raw)) = data.split_first() else {
        return;
    };
    let piece = 16 + raw.len() as u64 * (k as u64 % 16 + 1) / 64;
    let run = |threads: usize| {
        let src: pparse::data::Data =
            std::sync::Arc::new(pparse::data::MemSource::new(raw.to_vec()));
        let out = InflateSource::with_span(src, "fuzz", 4096);
        let mut inf = Inflater::new(out.clone(), 0);
        inf.set_plan(Plan { threads, piece });
        let event = loop {
            match inf.run(1 << 20) {
                InflateEvent::Progress => {}
                e => break e,
            }
        };
        out.finish();
        let layout = out.layout().expect("finished");
        let points: Vec<_> = layout
            .segments
            .iter()
            .flat_map(|s| s.points.iter().map(|p| (p.out, p.input, p.bits)))
            .collect();
        (event, inf.produced(), inf.crc(), layout.chunk_crcs, points)
    };
    assert_eq!(run(2), run(1), "pieces and one thread disagree");
}
