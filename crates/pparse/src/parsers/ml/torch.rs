//! PyTorch checkpoints: the legacy (pre-1.6) stream format, and the tensor
//! table of every torch format.
//!
//! * Zip checkpoints (`torch.save` since 1.6, TorchScript archives) are
//!   parsed by the zip parser; their `data.pkl` and `constants.pkl` by the
//!   pickle parser. `tensors` reads the pickle with the symbolic VM and
//!   resolves each `_rebuild_tensor*` call to the bytes of its storage
//!   record `<prefix>/data/<key>`.
//! * The legacy stream is five pickles (magic number, protocol version,
//!   sys_info, the object, the storage keys) followed by the raw storages,
//!   each an int64 element count and the bytes, in key order. This parser
//!   shows the pickles as nodes and each storage as a child extraction.

use std::collections::HashMap;
use std::sync::Arc;

use crate::data::{Data, Range, SliceSource, read_exact_at};
use crate::extraction::{EntryKind, ExtId, Phase, Tree};
use crate::name::Name;
use crate::node::Node;
use crate::offer::tensor::{self, Dtype, Tensor, TensorJob};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::parsers::ml::pickle::vm::{CallKind, Id, Obj, Vm};
use crate::parsers::ml::pickle::{self, End, VM_LIMIT};
use crate::status::{Damage, Status};

/// Legacy (pre-zip) torch checkpoints; zip ones are read by the zip format.
pub(crate) static FORMAT: Format = Format {
    name: "torch",
    extent: None,
    sniff: |s: &Sniff| pickle::is_legacy_torch(s.head),
    parse: |data, _| Box::new(LegacyParser::new(data.clone())),
    load: crate::parsers::ml::pickle::FORMAT.load,
    offers: Offers {
        tensors: Some(TensorOffer::Prepare(tensor_job)),
        pickles: Some(crate::parsers::ml::pickle::OFFER),
        ..Offers::NONE
    },
};

const PICKLES: [&str; 5] = [
    "magic number",
    "protocol version",
    "sys_info",
    "object",
    "storage keys",
];

struct LegacyParser {
    data: Data,
    pos: u64,
    index: usize,
    /// Storage key → (dtype, element size) from the object pickle's ids.
    storages: HashMap<String, (Option<Dtype>, u64)>,
    keys: Vec<String>,
    next_key: usize,
    done: bool,
}

impl LegacyParser {
    fn new(data: Data) -> LegacyParser {
        LegacyParser {
            data,
            pos: 0,
            index: 0,
            storages: HashMap::new(),
            keys: Vec::new(),
            next_key: 0,
            done: false,
        }
    }

    fn finish(&mut self, cx: &mut StepCx) -> Step {
        self.done = true;
        let a = self.data.available();
        cx.progress(a, Some(a));
        Step::Done
    }
}

impl Parser for LegacyParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if self.done {
            return Step::Done;
        }
        let (avail, fin) = self.data.extent();
        let data = self.data.clone();
        while self.index < PICKLES.len() {
            let start = self.pos;
            let (vm, end, n) = pickle::run(&*data, start, avail, VM_LIMIT);
            let what = PICKLES[self.index];
            let stop = match end {
                End::Stop(e) => e,
                End::Short { .. } if !fin => return Step::Blocked,
                End::Short { at, why } | End::Invalid { at, why } => {
                    let r = Range::new(start, avail);
                    cx.push_node(
                        Node::new("pickle", format!("pickle #{} ({what})", self.index), r)
                            .lazy()
                            .damaged(Damage::corrupt(Range::new(at, at), why.clone())),
                    );
                    let d = if at >= avail {
                        Damage::truncated(
                            Range::new(at, avail),
                            format!("the {what} pickle is cut off: {why}"),
                        )
                    } else {
                        Damage::corrupt(
                            Range::new(at, avail),
                            format!("the {what} pickle is damaged at {at:#x}: {why}"),
                        )
                    };
                    cx.damage(d);
                    return self.finish(cx);
                }
                End::Halted(e) => e,
            };
            let summary = vm.result.map(|r| vm.repr(r, 100)).unwrap_or_default();
            cx.push_node(
                Node::new(
                    "pickle",
                    format!("pickle #{} ({what})", self.index),
                    Range::new(start, stop),
                )
                .text(format!("{n} opcodes → {summary}"))
                .lazy(),
            );
            match self.index {
                0 if !summary.contains("119547037146038801333356") => {
                    cx.damage(Damage::corrupt(
                        Range::new(start, stop),
                        "not the torch magic number",
                    ));
                }
                3 => self.storages = storage_ids(&vm),
                4 => {
                    if let Some(Obj::List(items)) = vm.result.map(|r| vm.get(r)) {
                        self.keys = items.iter().filter_map(|&k| text(&vm, k)).collect();
                    }
                }
                _ => {}
            }
            self.pos = stop;
            self.index += 1;
        }
        // The raw storages: int64 numel, then the bytes, in key order.
        while self.next_key < self.keys.len() {
            let key = self.keys[self.next_key].clone();
            let at = self.pos;
            let mut n = [0u8; 8];
            if !matches!(read_exact_at(&*data, at, &mut n), Ok(true)) {
                if !fin {
                    return Step::Blocked;
                }
                let missing = self.keys.len() - self.next_key;
                cx.damage(Damage::truncated(
                    Range::new(at, avail),
                    format!("file ends before storage {key} ({missing} storages missing)"),
                ));
                return self.finish(cx);
            }
            let numel = u64::from_le_bytes(n);
            let Some(&(dtype, size)) = self.storages.get(&key) else {
                cx.damage(Damage::corrupt(
                    Range::new(at, at + 8),
                    format!("storage key {key} is not used by the object pickle: its element size is unknown"),
                ));
                return self.finish(cx);
            };
            let Some(bytes) = numel.checked_mul(size).filter(|&b| b <= u64::MAX / 2) else {
                cx.damage(Damage::corrupt(
                    Range::new(at, at + 8),
                    format!("storage {key}: bad element count {numel}"),
                ));
                return self.finish(cx);
            };
            // `at` is within the file and `bytes` at most 2^63: no overflow.
            let body = Range::new(at + 8, (at + 8).saturating_add(bytes));
            let label = dtype.map_or("?".into(), |d| d.name());
            cx.push_node(
                Node::new(
                    "storage",
                    format!("storage {key}"),
                    Range::new(at, body.end),
                )
                .text(format!("{label} × {numel} ({bytes} bytes)")),
            );
            let mut spec = ChildSpec::new(
                Name::new(format!("storage/{key}")),
                EntryKind::File,
                Arc::new(SliceSource::new(data.clone(), body)) as Data,
            );
            spec.origin = Some(body);
            spec.declared_size = Some(bytes);
            let child = cx.add_child(spec);
            if body.end > avail && fin {
                let have = avail.saturating_sub(body.start);
                cx.child_damage(
                    child,
                    Damage::truncated(
                        Range::new(have, have),
                        format!("storage cut off: {have} of {bytes} bytes"),
                    ),
                );
                cx.damage(Damage::truncated(
                    Range::new(avail, avail),
                    format!("storage {key} is cut off ({have} of {bytes} bytes)"),
                ));
            }
            self.pos = body.end;
            self.next_key += 1;
            if body.end > avail {
                return if fin { self.finish(cx) } else { Step::Blocked };
            }
        }
        if self.pos < avail {
            let r = Range::new(self.pos, avail);
            cx.push_node(Node::new("trailing", "bytes after the storages", r).uint(r.len()));
        } else if !fin {
            return Step::Blocked;
        }
        self.finish(cx)
    }
}

fn text(vm: &Vm, id: Id) -> Option<String> {
    match vm.get(id) {
        Obj::Str(t) => Some(t.text.to_string()),
        Obj::Int(v) => Some(v.to_string()),
        _ => None,
    }
}

fn int(vm: &Vm, id: Id) -> Option<i64> {
    match vm.get(id) {
        Obj::Int(v) => Some(*v),
        Obj::Bool(b) => Some(*b as i64),
        _ => None,
    }
}

fn ints(vm: &Vm, id: Id) -> Option<Vec<u64>> {
    let mut id = id;
    // torch.Size((...)) pickles as a call; a chain of such calls is followed
    // a few levels, not as deep as a hostile pickle nests them.
    for _ in 0..4 {
        match vm.get(id) {
            Obj::Tuple(v) | Obj::List(v) => {
                return v
                    .iter()
                    .map(|&x| int(vm, x).and_then(|i| u64::try_from(i).ok()))
                    .collect();
            }
            Obj::Call(c) if c.args.len() == 1 => id = c.args[0],
            _ => return None,
        }
    }
    None
}

/// The dtype a storage class holds, and its element size in bytes
/// (UntypedStorage counts bytes).
fn storage_dtype(name: &str) -> (Option<Dtype>, u64) {
    let d = match name {
        "DoubleStorage" => Dtype::F64,
        "FloatStorage" => Dtype::F32,
        "HalfStorage" => Dtype::F16,
        "BFloat16Storage" => Dtype::BF16,
        "LongStorage" => Dtype::I64,
        "IntStorage" => Dtype::I32,
        "ShortStorage" => Dtype::I16,
        "CharStorage" => Dtype::I8,
        "ByteStorage" => Dtype::U8,
        "BoolStorage" => Dtype::BOOL,
        "ComplexFloatStorage" => Dtype::C64,
        "ComplexDoubleStorage" => Dtype::C128,
        "QInt8Storage" => Dtype::QI8,
        "QUInt8Storage" => Dtype::QU8,
        "QInt32Storage" => Dtype::QI32,
        "QUInt4x2Storage" => Dtype::QU4X2,
        "QUInt2x4Storage" => Dtype::QU2X4,
        _ => return (None, 1),
    };
    (Some(d), d.bits() / 8)
}

/// A `torch.<dtype>` global as a Dtype.
pub(crate) fn torch_dtype(name: &str) -> Option<Dtype> {
    Some(match name {
        "float32" | "float" => Dtype::F32,
        "float64" | "double" => Dtype::F64,
        "float16" | "half" => Dtype::F16,
        "bfloat16" => Dtype::BF16,
        "int64" | "long" => Dtype::I64,
        "int32" | "int" => Dtype::I32,
        "int16" | "short" => Dtype::I16,
        "int8" => Dtype::I8,
        "uint8" => Dtype::U8,
        "uint16" => Dtype::U16,
        "uint32" => Dtype::U32,
        "uint64" => Dtype::U64,
        "bool" => Dtype::BOOL,
        "complex64" | "cfloat" => Dtype::C64,
        "complex128" | "cdouble" => Dtype::C128,
        "complex32" | "chalf" => Dtype::C32,
        "float8_e4m3fn" => Dtype::F8_E4M3,
        "float8_e5m2" => Dtype::F8_E5M2,
        "float8_e4m3fnuz" => Dtype::F8_E4M3FNUZ,
        "float8_e5m2fnuz" => Dtype::F8_E5M2FNUZ,
        "float8_e8m0fnu" => Dtype::F8_E8M0,
        "qint8" => Dtype::QI8,
        "quint8" => Dtype::QU8,
        "qint32" => Dtype::QI32,
        "quint4x2" => Dtype::QU4X2,
        "quint2x4" => Dtype::QU2X4,
        // Packed and bit types: one byte per element as torch counts them.
        "float4_e2m1fn_x2" | "bits8" | "bits1x8" | "bits2x4" | "bits4x2" => Dtype::U8,
        "bits16" => Dtype::U16,
        _ => return None,
    })
}

/// Why a torch type with no safetensors name is shown as bytes.
fn packed_note(name: &str) -> Option<&'static str> {
    Some(match name {
        "float4_e2m1fn_x2" => "torch.float4_e2m1fn_x2: two F4 values per byte, shown as bytes",
        "bits8" | "bits1x8" | "bits2x4" | "bits4x2" | "bits16" => {
            "torch bits type: raw bits, shown as unsigned integers"
        }
        _ => return None,
    })
}

/// A persistent id `('storage', cls, key, location, numel[, view])`.
struct Pid {
    dtype: Option<Dtype>,
    elsize: u64,
    key: String,
    numel: u64,
    location: String,
    /// Legacy views: (root key, offset in elements, size).
    view: Option<(String, u64, u64)>,
}

fn pid(vm: &Vm, id: Id) -> Option<Pid> {
    let Obj::Persistent(p) = vm.get(id) else {
        return None;
    };
    let Obj::Tuple(t) = vm.get(*p) else {
        return None;
    };
    if t.len() < 5 || text(vm, t[0]).as_deref() != Some("storage") {
        return None;
    }
    let (_, name) = vm.global(t[1])?;
    let (dtype, elsize) = storage_dtype(name);
    let view = t.get(5).and_then(|&v| match vm.get(v) {
        Obj::Tuple(x) if x.len() == 3 => Some((
            text(vm, x[0])?,
            int(vm, x[1])?.max(0) as u64,
            int(vm, x[2])?.max(0) as u64,
        )),
        _ => None,
    });
    Some(Pid {
        dtype,
        elsize,
        key: text(vm, t[2])?,
        location: text(vm, t[3]).unwrap_or_default(),
        numel: int(vm, t[4])?.max(0) as u64,
        view,
    })
}

/// Storage key → (dtype, element size) for every persistent id.
fn storage_ids(vm: &Vm) -> HashMap<String, (Option<Dtype>, u64)> {
    let mut out = HashMap::new();
    for i in 0..vm.objs.len() {
        if let Some(p) = pid(vm, i as Id) {
            out.insert(p.key.clone(), (p.dtype, p.elsize));
            if let Some((root, _, _)) = p.view {
                out.entry(root).or_insert((p.dtype, p.elsize));
            }
        }
    }
    out
}

/// What a `_rebuild_*` call says about a tensor.
struct Found {
    pid: Option<Pid>,
    dtype: Option<Dtype>,
    offset: u64,
    shape: Vec<u64>,
    stride: Vec<u64>,
    note: Option<&'static str>,
    /// Why the arguments cannot describe a tensor.
    bad: Option<String>,
    /// Offset in the pickle of the call that rebuilds it.
    at: u64,
}

/// A rebuild call's storage offset, size and stride: what is not a
/// (tuple of) non-negative int64 is said, not read as 0 or left out.
fn layout(
    vm: &Vm,
    offset: Option<Id>,
    size: Id,
    stride: Id,
) -> (u64, Vec<u64>, Vec<u64>, Option<String>) {
    let off = offset.map_or(Some(0), |o| int(vm, o).and_then(|i| u64::try_from(i).ok()));
    let (shape, strides) = (ints(vm, size), ints(vm, stride));
    let bad = match (off, &shape, &strides) {
        (None, _, _) => Some(format!(
            "storage offset {} is not a non-negative integer",
            vm.repr(offset.unwrap_or(size), 60)
        )),
        (_, None, _) => Some(format!(
            "size {} is not a tuple of non-negative integers",
            vm.repr(size, 60)
        )),
        (_, _, None) => Some(format!(
            "stride {} is not a tuple of non-negative integers",
            vm.repr(stride, 60)
        )),
        _ => None,
    };
    (
        off.unwrap_or(0),
        shape.unwrap_or_default(),
        strides.unwrap_or_default(),
        bad,
    )
}

fn rebuild(vm: &Vm, id: Id, depth: usize) -> Option<Found> {
    let Obj::Call(c) = vm.get(id) else {
        return None;
    };
    if c.kind != CallKind::Reduce {
        return None;
    }
    let (module, name) = vm.global(c.func)?;
    rebuild_call(vm, module, name, &c.args, depth)
}

/// `module.name(*a)` if it rebuilds a tensor.
fn rebuild_call(vm: &Vm, module: &str, name: &str, a: &[Id], depth: usize) -> Option<Found> {
    if depth > 8 {
        return None;
    }
    match (module, name) {
        (
            "torch._utils",
            "_rebuild_tensor" | "_rebuild_tensor_v2" | "_rebuild_tensor_v3" | "_rebuild_qtensor",
        ) if a.len() >= 4 => {
            let p = pid(vm, a[0]);
            let mut dtype = p.as_ref().and_then(|p| p.dtype);
            let mut note = (name == "_rebuild_qtensor").then_some("quantized");
            if name == "_rebuild_tensor_v3"
                && let Some(n) = a.get(6).and_then(|&d| vm.global(d)).map(|(_, n)| n)
                && let Some(t) = torch_dtype(n)
            {
                dtype = Some(t);
                note = note.or(packed_note(n));
            }
            let (offset, shape, stride, bad) = layout(vm, Some(a[1]), a[2], a[3]);
            Some(Found {
                pid: p,
                dtype,
                offset,
                shape,
                stride,
                note,
                bad,
                at: 0,
            })
        }
        (
            "torch._utils",
            "_rebuild_parameter"
            | "_rebuild_parameter_with_state"
            | "_rebuild_device_tensor_from_cpu_tensor",
        ) if !a.is_empty() => rebuild(vm, a[0], depth + 1),
        ("torch._utils", "_rebuild_meta_tensor_no_storage") if a.len() >= 3 => {
            let (offset, shape, stride, bad) = layout(vm, None, a[1], a[2]);
            Some(Found {
                pid: None,
                dtype: vm.global(a[0]).and_then(|(_, n)| torch_dtype(n)),
                offset,
                shape,
                stride,
                note: Some("meta tensor: no data"),
                bad,
                at: 0,
            })
        }
        ("torch._tensor", "_rebuild_from_type_v2") if a.len() >= 3 => {
            // (func, new_type, args, state): the inner call is func(*args).
            let (m, n) = vm.global(a[0])?;
            match vm.get(a[2]) {
                Obj::Tuple(inner) => rebuild_call(vm, m, n, inner, depth + 1),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Longest tensor name made from the keys of a pickle (a memoized 4 KiB key
/// reused at every level must not make names of 256 KiB).
const MAX_PATH: usize = 1024;

/// Tensors found under `id`, with their paths. Each container is walked
/// once (`seen`): a pickle that shares one list 60 times over through the
/// memo is walked in 60 steps, not 2^60, and a cycle ends. A tensor reached
/// by several paths (tied weights) is listed under each, since every path is
/// an edge the pickle spells out.
fn walk(
    vm: &Vm,
    id: Id,
    path: &str,
    out: &mut Vec<(String, Found)>,
    depth: usize,
    seen: &mut [bool],
) {
    if depth > 64 || out.len() > 1_000_000 {
        return;
    }
    if let Some(mut f) = rebuild(vm, id, 0) {
        f.at = vm.spans.get(id as usize).map_or(0, |s| s.0);
        out.push((path.to_string(), f));
        return;
    }
    match seen.get_mut(id as usize) {
        Some(s) if !*s => *s = true,
        _ => return,
    }
    let join = |k: &str| {
        let mut p = String::with_capacity(path.len() + k.len() + 1);
        p.push_str(path);
        if !path.is_empty() {
            p.push('.');
        }
        p.push_str(k);
        if p.len() > MAX_PATH {
            let mut cut = MAX_PATH;
            while !p.is_char_boundary(cut) {
                cut -= 1;
            }
            p.truncate(cut);
            p.push('…');
        }
        p
    };
    let key = |k: Id| text(vm, k).unwrap_or_else(|| vm.repr(k, 60));
    match vm.get(id) {
        Obj::Dict(pairs) => {
            for &(k, v) in pairs {
                walk(vm, v, &join(&key(k)), out, depth + 1, seen);
            }
        }
        Obj::List(items) | Obj::Tuple(items) => {
            for (i, &v) in items.iter().enumerate() {
                walk(vm, v, &join(&i.to_string()), out, depth + 1, seen);
            }
        }
        Obj::Call(c) => {
            for &(k, v) in &c.items {
                walk(vm, v, &join(&key(k)), out, depth + 1, seen);
            }
            for (i, &v) in c.appended.iter().enumerate() {
                walk(vm, v, &join(&i.to_string()), out, depth + 1, seen);
            }
            // OrderedDict([[k, v], ...]) in old files.
            if vm
                .global(c.func)
                .is_some_and(|(m, n)| m == "collections" && n == "OrderedDict")
                && let Some(&list) = c.args.first()
                && let Obj::List(pairs) = vm.get(list)
                && seen.get(list as usize) == Some(&false)
            {
                seen[list as usize] = true;
                for &p in pairs {
                    if let Obj::List(kv) | Obj::Tuple(kv) = vm.get(p)
                        && kv.len() == 2
                    {
                        walk(vm, kv[1], &join(&key(kv[0])), out, depth + 1, seen);
                    }
                }
            }
            if let Some(s) = c.state {
                walk(vm, s, path, out, depth + 1, seen);
            }
            match vm.global(c.func) {
                // TorchScript wraps values in a type tag: look through it.
                Some(("torch.jit._pickle", "restore_type_tag")) => {
                    if let Some(&a) = c.args.first() {
                        walk(vm, a, path, out, depth + 1, seen);
                    }
                }
                Some(("collections", "OrderedDict")) => {}
                // Tensors passed to other calls are still tensors of the file.
                _ if c.items.is_empty() && c.appended.is_empty() && c.state.is_none() => {
                    for (i, &a) in c.args.iter().enumerate() {
                        walk(vm, a, &join(&format!("arg{i}")), out, depth + 1, seen);
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// What a storage record is when the table is made.
struct StorageInfo {
    ext: ExtId,
    available: u64,
    is_final: bool,
    corrupt: Option<String>,
}

/// What [`Prepared::compute`] needs, taken from the tree under its lock so
/// that the (possibly long) pickle run happens without it.
pub(crate) struct Prepared {
    /// (bytes, range of the pickle, name prefix, storage directory).
    pickles: Vec<(Data, Range, &'static str, String)>,
    storages: HashMap<String, StorageInfo>,
    big_endian: bool,
}

/// The archive prefix of a torch zip: the part of `data.pkl`'s name before it.
fn zip_prefix(tree: &Tree, ext: ExtId) -> Option<String> {
    tree.exts[ext].children.iter().find_map(|&c| {
        let n = tree.exts[c].display_name();
        n.strip_suffix("data.pkl")
            .filter(|p| p.is_empty() || p.ends_with('/'))
            .map(str::to_string)
    })
}

/// Collects what the tensor table of `ext` needs, if it is a torch file.
pub(crate) fn prepare(tree: &Tree, ext: ExtId) -> Option<Prepared> {
    let e = &tree.exts[ext];
    let mut p = Prepared {
        pickles: Vec::new(),
        storages: HashMap::new(),
        big_endian: false,
    };
    let by_name: HashMap<String, ExtId> = e
        .children
        .iter()
        .map(|&c| (tree.exts[c].display_name(), c))
        .collect();
    let info = |c: ExtId| StorageInfo {
        ext: c,
        available: tree.exts[c].available(),
        is_final: tree.exts[c].is_final(),
        corrupt: (tree.status_of(c) == Status::Corrupt)
            .then(|| tree.exts[c].detail().unwrap_or_default()),
    };
    match e.parser() {
        Some("zip") => {
            let prefix = zip_prefix(tree, ext)?;
            if let Some(&b) = by_name.get(&format!("{prefix}byteorder")) {
                let mut buf = [0u8; 3];
                p.big_endian =
                    matches!(read_exact_at(&*tree.exts[b].data(), 0, &mut buf), Ok(true))
                        && &buf == b"big";
            }
            // TorchScript archives keep constants and traced inputs in pickles
            // of their own, each with its folder of storages.
            const PICKLES: [(&str, &str); 3] = [
                ("data", ""),
                ("constants", "constants."),
                ("traced_inputs", "traced_inputs."),
            ];
            for (dir, label) in PICKLES {
                if let Some(&c) = by_name.get(&format!("{prefix}{dir}.pkl")) {
                    let d = tree.exts[c].data();
                    let r = Range::new(0, d.available());
                    p.pickles.push((d, r, label, format!("{prefix}{dir}/")));
                }
            }
            for (name, &c) in &by_name {
                let rest = name.strip_prefix(prefix.as_str()).unwrap_or_default();
                if PICKLES
                    .iter()
                    .any(|(dir, _)| rest.strip_prefix(dir).is_some_and(|r| r.starts_with('/')))
                {
                    p.storages.insert(name.clone(), info(c));
                }
            }
        }
        Some("torch") => {
            let obj = e
                .nodes
                .iter()
                .find(|n| n.kind == "pickle" && n.name.contains("(object)"))?;
            p.pickles.push((e.data(), obj.range, "", "storage/".into()));
            for (name, &c) in &by_name {
                p.storages.insert(name.clone(), info(c));
            }
        }
        _ => return None,
    }
    Some(p)
}

/// The tensor table's work for a torch checkpoint (zip or legacy): see
/// [`crate::offer::TensorOffer::Prepare`].
pub(crate) fn tensor_job(tree: &Tree, ext: ExtId) -> Option<TensorJob> {
    let p = prepare(tree, ext)?;
    Some(Box::new(move || p.compute()))
}

/// Whether a zip is far enough for the tensor table while its parse goes
/// on: its entries are listed (the central directory node comes after them)
/// and the bytes of its pickles are all there; CRC checks may still run.
pub(crate) fn zip_settled(t: &Tree, id: ExtId) -> bool {
    let e = &t.exts[id];
    !matches!(e.phase, Phase::Parsing | Phase::Waiting)
        || (e.nodes.iter().any(|n| n.kind == "central directory")
            && e.children
                .iter()
                .all(|&c| !t.exts[c].display_name().ends_with(".pkl") || t.exts[c].is_final()))
}

impl Prepared {
    /// Runs the pickles and resolves every tensor to its storage bytes.
    pub(crate) fn compute(&self) -> Vec<Tensor> {
        let mut out = Vec::new();
        for (data, range, label, dir) in &self.pickles {
            let (vm, _, _) = pickle::run(&**data, range.start, range.end, VM_LIMIT);
            out.extend(self.resolve(&vm, label, dir));
        }
        out
    }

    fn resolve(&self, vm: &Vm, label: &str, dir: &str) -> Vec<Tensor> {
        let Some(root) = vm.result else {
            return Vec::new();
        };
        let mut found = Vec::new();
        walk(vm, root, "", &mut found, 0, &mut vec![false; vm.objs.len()]);
        found
            .into_iter()
            .map(|(path, f)| {
                let dtype = f.dtype.unwrap_or(Dtype::U8);
                let itemsize = (dtype.bits() / 8).max(1);
                // Bytes from the first element to past the last one, in
                // checked arithmetic: shapes and strides are file values.
                let length = tensor::numel(&f.shape).and_then(|numel| {
                    if numel == 0 {
                        return Some(0);
                    }
                    f.shape
                        .iter()
                        .zip(&f.stride)
                        .try_fold(1u64, |a, (s, st)| a.checked_add((s - 1).checked_mul(*st)?))?
                        .checked_mul(itemsize)
                });
                let mut t = Tensor {
                    name: format!("{label}{path}"),
                    dtype,
                    shape: f.shape.clone(),
                    stride: Some(f.stride.clone()),
                    storage_offset: Some(f.offset),
                    source: 0,
                    offset: 0,
                    length: length.unwrap_or(0),
                    status: Status::Complete,
                    detail: f.note.map(str::to_string),
                    big_endian: self.big_endian,
                    encoding: crate::offer::tensor::Encoding::Raw,
                };
                let offset = match &f.pid {
                    // A legacy view reads from its root storage.
                    Some(Pid {
                        view: Some((_, off, _)),
                        elsize,
                        ..
                    }) => off.checked_mul(*elsize),
                    _ => Some(0),
                }
                .and_then(|base| base.checked_add(f.offset.checked_mul(itemsize)?));
                if f.dtype.is_none() {
                    t.status = Status::Corrupt;
                    t.detail = Some("unknown dtype".into());
                }
                let bad = if let Some(why) = &f.bad {
                    Some(why.clone())
                } else if f.shape.len() != f.stride.len() {
                    Some(format!(
                        "shape {} and stride {} differ in length",
                        tensor::shape_text(&f.shape),
                        tensor::shape_text(&f.stride)
                    ))
                } else if tensor::numel(&f.shape).is_none() {
                    Some(tensor::overflow_text(&f.shape))
                } else if length.is_none() {
                    Some(format!(
                        "the byte span of shape {} with stride {} overflows",
                        tensor::shape_text(&f.shape),
                        tensor::shape_text(&f.stride)
                    ))
                } else if offset.is_none_or(|o| o.checked_add(t.length).is_none()) {
                    Some(format!("storage offset {} overflows", f.offset))
                } else {
                    None
                };
                let key = f
                    .pid
                    .as_ref()
                    .map(|p| p.view.as_ref().map_or(&p.key, |v| &v.0).clone());
                if let Some(why) = bad {
                    // Where the bytes would be cannot be said.
                    t.status = Status::Corrupt;
                    t.detail = Some(format!(
                        "{why}; the rebuild call is at {:#x} of the pickle",
                        f.at
                    ));
                    t.length = 0;
                    if let Some(s) = key.and_then(|k| self.storages.get(&format!("{dir}{k}"))) {
                        t.source = s.ext;
                    }
                    return t;
                }
                let Some(p) = f.pid else {
                    if t.detail.is_none() {
                        t.detail = Some("no storage".into());
                    }
                    t.length = 0;
                    return t;
                };
                let key = key.unwrap_or_default();
                t.offset = offset.unwrap_or(0);
                match self.storages.get(&format!("{dir}{key}")) {
                    None => {
                        t.status = Status::Truncated;
                        t.detail = Some(format!("storage {key} is missing"));
                    }
                    Some(s) => {
                        t.source = s.ext;
                        let declared = p.numel.saturating_mul(p.elsize);
                        // Both checked above: offset + length fits in u64.
                        if t.offset + t.length > s.available {
                            t.status = Status::Truncated;
                            t.detail = Some(if s.available <= t.offset {
                                format!(
                                    "storage {key} holds {} bytes: this tensor's data is missing",
                                    s.available
                                )
                            } else {
                                format!(
                                    "partial: {} of {} bytes present",
                                    s.available - t.offset,
                                    t.length
                                )
                            });
                        } else if let Some(why) = &s.corrupt {
                            t.status = Status::Corrupt;
                            t.detail = Some(why.clone());
                        } else if declared > s.available && s.is_final {
                            t.detail = Some(format!(
                                "storage {key} is cut off but this tensor's bytes are there"
                            ));
                        }
                        if !p.location.is_empty() && p.location != "cpu" && t.detail.is_none() {
                            t.detail = Some(format!("saved on {}", p.location));
                        }
                    }
                }
                t
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes_by_name() {
        assert_eq!(torch_dtype("float8_e4m3fn"), Some(Dtype::F8_E4M3));
        assert_eq!(storage_dtype("BFloat16Storage"), (Some(Dtype::BF16), 2));
    }
}
