//! Python pickles, every protocol (0–5), read by a VM that never runs code.
//!
//! The scan decodes opcodes one by one (no recursion, bounded lines, payloads
//! left in place) and feeds the symbolic [`vm::Vm`]. Each pickle in the
//! bytes becomes a top-level node (stacked pickles, as in legacy torch
//! files, follow each other); its children — the opcodes, the rebuilt object
//! and the globals it imports with their [`safety`] verdicts — are loaded
//! from the pickle's range on demand. A truncated or malformed pickle keeps
//! every opcode before the damage, says where and why, and the scan looks for
//! a following pickle (`PROTO` 2–5) to go on with.
//!
//! What pickles offer the views, the reports and the Python package
//! ([`crate::offer::pickle::PickleOffer`]: listings, opcodes, imports, the
//! stepper's replay) is in `listing.rs` and `step.rs`; `read.rs` scans and
//! runs one pickle, `text.rs` renders an argument as pickletools does.

pub mod dis;
mod listing;
pub mod ops;
mod read;
pub mod safety;
mod step;
mod text;
pub mod vm;

pub(crate) use listing::OFFER;
pub use read::{End, VM_LIMIT, globals, run, scan};
use text::arg_repr;

use memchr::memmem;

use crate::data::{Data, Range, Source};
use crate::node::{Children, Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{Format, Parser, Sniff, Step, StepCx};
use crate::status::Damage;
use ops::{Op, OpError};
use safety::Verdict;
use vm::{Id, Obj, Vm};

/// Python pickles (protocols 0–5), rebuilt symbolically, never executed.
pub static FORMAT: Format = Format {
    name: "pickle",
    extent: Some(found_extent),
    sniff,
    parse: |data, _| Box::new(PickleParser::new(data.clone())),
    load,
    offers: Offers {
        pickles: Some(OFFER),
        // The table reads the pickle's bytes, not its parse.
        settled: Some(|_, _| true),
        ..Offers::NONE
    },
};

/// Opcodes a pickle found by carving must decode before it counts as one.
const FOUND_OPS: u64 = 8;
/// Most opcodes decoded to find where a found pickle stops.
const FOUND_SCAN_OPS: u64 = 1 << 16;

/// Where a pickle found by carving ends: after its STOP; at the end of its
/// span when it is cut, or breaks after [`FOUND_OPS`] good opcodes (the
/// parse says where), or is longer than the scan looks; `None` when it
/// breaks sooner, as the few bytes that look like a protocol 4 frame in a
/// library's machine code do.
fn found_extent(data: &Data) -> Option<u64> {
    let avail = data.available();
    let mut n = 0u64;
    match scan(&**data, 0, avail, |_| {
        n += 1;
        n < FOUND_SCAN_OPS
    }) {
        End::Stop(at) => Some(at),
        End::Halted(_) => Some(avail),
        End::Short { .. } | End::Invalid { .. } if n >= FOUND_OPS => Some(avail),
        End::Short { .. } | End::Invalid { .. } => None,
    }
}

/// The legacy torch magic number 0x1950a86a20f9469cfc6c as a LONG1 argument.
const TORCH_MAGIC: &[u8] = b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

/// Whether bytes start with the pickled magic number of a legacy (pre-zip)
/// torch checkpoint: a sequence of pickles the torch format reads, not one.
pub fn is_legacy_torch(head: &[u8]) -> bool {
    head.len() > TORCH_MAGIC.len() + 2
        && head[0] == 0x80
        && memchr::memmem::find(&head[..head.len().min(32)], TORCH_MAGIC).is_some()
}

fn sniff(s: &Sniff) -> bool {
    let named = [".pkl", ".pickle", ".debug_pkl"]
        .iter()
        .any(|e| s.name.ends_with(e));
    let proto = s.head.len() >= 2 && s.head[0] == 0x80 && (2..=5).contains(&s.head[1]);
    (proto || (named && s.head.first().is_some_and(|&c| ops::info(c).is_some())))
        && !is_legacy_torch(s.head)
}

/// Finds where the next pickle may start at or after `from`: `PROTO 2..5`.
fn next_proto(data: &dyn Source, from: u64, end: u64) -> Option<u64> {
    let mut buf = Vec::new();
    let mut pos = from;
    while pos + 2 <= end {
        let w = crate::data::view(data, pos, 1 << 20, &mut buf).ok()?;
        if w.len() < 2 {
            return None;
        }
        for i in memmem::find_iter(w, b"\x80") {
            if let Some(&p) = w.get(i + 1)
                && (2..=5).contains(&p)
            {
                return Some(pos + i as u64);
            }
        }
        pos += (w.len() as u64 - 1).max(1);
    }
    None
}

struct Current {
    start: u64,
    node: usize,
    vm: Vm,
    ops: u64,
}

struct PickleParser {
    data: Data,
    pos: u64,
    count: usize,
    cur: Option<Current>,
    done: bool,
    scratch: Vec<u8>,
}

impl PickleParser {
    fn new(data: Data) -> PickleParser {
        PickleParser {
            data,
            pos: 0,
            count: 0,
            cur: None,
            done: false,
            scratch: Vec::new(),
        }
    }

    fn finish_pickle(&mut self, cx: &mut StepCx, end: u64, damage: Option<Damage>) {
        let Some(cur) = self.cur.take() else { return };
        let g = globals(&cur.vm);
        let worst = g.values().copied().max();
        let mut text = format!("protocol {}, {} opcodes", cur.vm.proto, cur.ops);
        if let Some(r) = cur.vm.result {
            text.push_str(&format!(" → {}", cur.vm.repr(r, 100)));
        }
        if let Some(at) = cur.vm.exhausted {
            text.push_str(&format!(
                "; objects rebuilt up to {at:#x} (more than {VM_LIMIT} objects)"
            ));
        }
        match worst {
            Some(Verdict::Dangerous) => {
                let bad: Vec<&str> = g
                    .iter()
                    .filter(|(_, v)| **v == Verdict::Dangerous)
                    .map(|(k, _)| k.as_str())
                    .take(3)
                    .collect();
                text.push_str(&format!("; DANGEROUS imports: {}", bad.join(", ")));
            }
            Some(Verdict::Unknown) => text.push_str("; imports outside the weights-only allowlist"),
            _ => {}
        }
        for p in cur.vm.problems.iter().take(20) {
            cx.damage(Damage::corrupt(
                Range::new(p.pos, p.pos + 1),
                format!("pickle #{}: {} (at {:#x})", self.count, p.message, p.pos),
            ));
        }
        let node_damage = damage.clone().or_else(|| {
            cur.vm
                .problems
                .first()
                .map(|p| Damage::corrupt(Range::new(p.pos, p.pos + 1), p.message.clone()))
        });
        if let Some(d) = damage {
            cx.damage(d);
        }
        let start = cur.start;
        cx.edit_node(cur.node, move |n| {
            n.range = Range::new(start, end);
            n.value = Some(Value::Str(text.into()));
            n.damage = node_damage.map(Box::new);
        });
    }
}

impl Parser for PickleParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if self.done {
            return Step::Done;
        }
        let (avail, fin) = self.data.extent();
        let data = self.data.clone();
        let mut used = 0u64;
        while used < cx.budget {
            if self.cur.is_none() {
                if self.pos >= avail {
                    if fin {
                        self.done = true;
                        cx.progress(avail, Some(avail));
                        return Step::Done;
                    }
                    return Step::Blocked;
                }
                let mut b = [0u8; 1];
                let _ = data.read_at(self.pos, &mut b);
                if self.count > 0 && ops::info(b[0]).is_none() {
                    let r = Range::new(self.pos, avail);
                    cx.push_node(
                        Node::new("trailing", "bytes after the last pickle", r).uint(r.len()),
                    );
                    self.done = true;
                    return Step::Done;
                }
                let node = cx.push_node(
                    Node::new(
                        "pickle",
                        format!("pickle #{}", self.count),
                        Range::new(self.pos, self.pos),
                    )
                    .lazy(),
                );
                self.cur = Some(Current {
                    start: self.pos,
                    node,
                    vm: Vm::new(VM_LIMIT),
                    ops: 0,
                });
            }
            let cur = self.cur.as_mut().expect("set above");
            match ops::decode(&*data, self.pos, avail, &mut self.scratch) {
                Ok(op) => {
                    self.pos += op.len;
                    used += op.len.max(16);
                    cur.ops += 1;
                    if !cur.vm.step(&op, &*data) {
                        let end = self.pos;
                        self.finish_pickle(cx, end, None);
                        self.count += 1;
                    }
                }
                Err(OpError::Short(_)) if !fin => return Step::Blocked,
                Err(OpError::Short(why)) => {
                    let at = self.pos;
                    let d = Damage::truncated(
                        Range::new(at, avail),
                        format!("pickle #{} is cut off at {at:#x}: {why}", self.count),
                    );
                    self.finish_pickle(cx, avail, Some(d));
                    self.done = true;
                    cx.progress(avail, Some(avail));
                    return Step::Done;
                }
                Err(OpError::Invalid(why)) => {
                    let at = self.pos;
                    let next = next_proto(&*data, at + 1, avail)
                        .filter(|&n| matches!(scan(&*data, n, avail, |_| true), End::Stop(_)));
                    let stop = next.unwrap_or(avail);
                    let d = Damage::corrupt(
                        Range::new(at, stop),
                        match next {
                            Some(n) => format!(
                                "pickle #{}: {why} at {at:#x}; skipped to the next pickle at {n:#x}",
                                self.count
                            ),
                            None => format!(
                                "pickle #{}: {why} at {at:#x}; nothing readable after it",
                                self.count
                            ),
                        },
                    );
                    self.finish_pickle(cx, at, Some(d));
                    self.count += 1;
                    if next.is_some() && stop > at {
                        let r = Range::new(at, stop);
                        cx.push_node(
                            Node::new("skipped", "unreadable bytes", r)
                                .uint(r.len())
                                .damaged(Damage::corrupt(r, "not a pickle")),
                        );
                    }
                    match next {
                        Some(n) => self.pos = n,
                        None => {
                            self.done = true;
                            return Step::Done;
                        }
                    }
                }
            }
        }
        cx.progress(self.pos, fin.then_some(avail));
        Step::Yield
    }
}

/// Most nodes an object tree gets when loaded (the rest is summarised).
const TREE_NODES: usize = 200_000;
/// Opcodes per chunk node.
const CHUNK: usize = 1000;

fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    let r = node.range;
    match node.kind {
        "pickle" => {
            let (vm, _, n) = run(data, r.start, r.end, VM_LIMIT);
            let mut out = vec![Node::new("opcodes", "opcodes", r).uint(n).lazy()];
            if let Some(res) = vm.result {
                out.push(object_tree(&vm, res, "result".into()));
            } else if let Some(&top) = vm.stack.last() {
                out.push(object_tree(&vm, top, "top of stack (no STOP)".into()));
            }
            let g = globals(&vm);
            let kids: Vec<Node> = g
                .iter()
                .map(|(name, v)| {
                    Node::new("global", name.clone(), r).text(format!(
                        "{}: {}",
                        v.as_str(),
                        v.explain()
                    ))
                })
                .collect();
            out.push(
                Node::new("globals", "globals", r)
                    .uint(kids.len() as u64)
                    .with_children(kids),
            );
            if !vm.problems.is_empty() {
                let probs = vm
                    .problems
                    .iter()
                    .map(|p| {
                        let pr = Range::new(p.pos, p.pos + 1);
                        Node::new("problem", format!("at {:#x}", p.pos), pr)
                            .text(p.message.clone())
                            .damaged(Damage::corrupt(pr, p.message.clone()))
                    })
                    .collect();
                out.push(Node::new("problems", "problems", r).with_children(probs));
            }
            out
        }
        "opcodes" if matches!(node.value, Some(Value::UInt(n)) if n as usize > 2 * CHUNK) => {
            // Chunks of CHUNK opcodes, found by one decoding pass.
            let mut chunks: Vec<(usize, Range)> = Vec::new();
            let mut count = 0usize;
            let mut first = 0usize;
            let mut chunk_start = r.start;
            let mut last_end = r.start;
            scan(data, r.start, r.end, |op| {
                if count > first && count - first == CHUNK {
                    chunks.push((first, Range::new(chunk_start, op.pos)));
                    first = count;
                    chunk_start = op.pos;
                }
                count += 1;
                last_end = op.pos + op.len;
                true
            });
            chunks.push((first, Range::new(chunk_start, last_end)));
            chunks
                .into_iter()
                .map(|(first, cr)| {
                    Node::new("op chunk", format!("opcodes {first}…"), cr)
                        .uint(cr.len())
                        .lazy()
                })
                .collect()
        }
        "opcodes" | "op chunk" => {
            let mut ops = Vec::new();
            scan(data, r.start, r.end, |op| {
                if op.pos >= r.end {
                    return false;
                }
                ops.push(op_node(op, data));
                true
            });
            ops
        }
        _ => Vec::new(),
    }
}

/// A node for one opcode: its name, range and argument.
pub fn op_node(op: &Op, data: &dyn Source) -> Node {
    let mut n = Node::new("op", op.name(), op.range());
    if let Some(a) = arg_repr(op, data, 200) {
        n = n.text(a);
    }
    n
}

/// The object tree of a VM under `id` as nodes: at most `TREE_NODES`
/// nodes, 64 levels deep. An object reached a second time (shared through
/// the memo, or a cycle) is a leaf that says so, so a pickle that shares one
/// list 60 times over gives a node per reference, not 2^60.
pub fn object_tree(vm: &Vm, id: Id, name: String) -> Node {
    let mut budget = TREE_NODES;
    let mut seen = vec![false; vm.objs.len()];
    object_node(vm, id, name, 0, &mut budget, &mut seen)
}

fn object_node(
    vm: &Vm,
    id: Id,
    name: String,
    depth: usize,
    budget: &mut usize,
    seen: &mut [bool],
) -> Node {
    let (a, b) = vm.spans.get(id as usize).copied().unwrap_or((0, 0));
    let range = Range::new(a, b + 1);
    let obj = vm.get(id);
    let kind = match obj {
        Obj::None => "None",
        Obj::Bool(_) => "bool",
        Obj::Int(_) | Obj::Big(_) => "int",
        Obj::Float(_) => "float",
        Obj::Str(_) => "str",
        Obj::Bytes { .. } => "bytes",
        Obj::Tuple(_) => "tuple",
        Obj::List(_) => "list",
        Obj::Dict(_) => "dict",
        Obj::Set(_) => "set",
        Obj::FrozenSet(_) => "frozenset",
        Obj::Global { .. } => "global",
        Obj::Call(_) => "call",
        Obj::Persistent(_) => "persistent",
        Obj::Ext(_) => "extension",
        Obj::Buffer { .. } => "buffer",
        Obj::Unknown => "unknown",
    };
    *budget = budget.saturating_sub(1);
    let container = matches!(
        obj,
        Obj::Tuple(_)
            | Obj::List(_)
            | Obj::Set(_)
            | Obj::FrozenSet(_)
            | Obj::Dict(_)
            | Obj::Call(_)
            | Obj::Persistent(_)
    );
    // Scalars may repeat freely; a container is expanded once.
    if container && seen.get(id as usize).is_none_or(|&s| s) {
        let text = format!("(shared: shown above) {}", vm.repr(id, 160));
        return Node::new(kind, name, range).text(text);
    }
    if let Some(s) = seen.get_mut(id as usize) {
        *s = true;
    }
    let mut n = Node::new(kind, name, range).text(vm.repr(id, 160));
    if depth >= 64 || *budget == 0 {
        return n;
    }
    let mut kids = Vec::new();
    let mut add = |name: String, id: Id, kids: &mut Vec<Node>, budget: &mut usize| {
        if *budget > 0 {
            kids.push(object_node(vm, id, name, depth + 1, budget, seen));
        }
    };
    match obj {
        Obj::Tuple(v) | Obj::List(v) | Obj::Set(v) | Obj::FrozenSet(v) => {
            for (i, &x) in v.iter().enumerate() {
                add(format!("[{i}]"), x, &mut kids, budget);
            }
        }
        Obj::Dict(v) => {
            for &(k, x) in v {
                add(vm.repr(k, 80), x, &mut kids, budget);
            }
        }
        Obj::Call(c) => {
            add("callable".into(), c.func, &mut kids, budget);
            for (i, &x) in c.args.iter().enumerate() {
                add(format!("arg {i}"), x, &mut kids, budget);
            }
            if let Some(k) = c.kwargs {
                add("kwargs".into(), k, &mut kids, budget);
            }
            for &(k, x) in &c.items {
                add(vm.repr(k, 80), x, &mut kids, budget);
            }
            for (i, &x) in c.appended.iter().enumerate() {
                add(format!("[{i}]"), x, &mut kids, budget);
            }
            if let Some(s) = c.state {
                add("state".into(), s, &mut kids, budget);
            }
        }
        Obj::Persistent(p) => add("pid".into(), *p, &mut kids, budget),
        _ => {}
    }
    if !kids.is_empty() {
        n.children = Children::Loaded(kids.into());
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn vm_of(bytes: &[u8]) -> (Vm, End) {
        let m = MemSource::new(bytes.to_vec());
        let (vm, e, _) = run(&m, 0, bytes.len() as u64, 1000);
        (vm, e)
    }

    /// Payloads larger than a piece stream out exactly as if whole, with
    /// multi-byte characters cut at piece boundaries.
    #[test]
    fn big_payload_json_streams_exactly() {
        let text: String = "añ€😀x".repeat(300_000); // 3.3 MB, every width of UTF-8
        let bin: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7) as u8).collect();
        for (code, payload, want) in [
            (
                0x8d,
                text.as_bytes().to_vec(),
                serde_json::to_string(&text).unwrap(),
            ),
            (0x8e, bin.clone(), {
                let hex: String = bin.iter().map(|b| format!("{b:02x}")).collect();
                format!("{{\"hex\":\"{hex}\"}}")
            }),
        ] {
            let mut bytes = vec![code];
            bytes.extend((payload.len() as u64).to_le_bytes());
            bytes.extend(&payload);
            bytes.push(b'.');
            let m = MemSource::new(bytes.clone());
            let op = ops::decode(&m, 0, bytes.len() as u64, &mut Vec::new()).unwrap();
            let mut out = Vec::new();
            text::write_arg_json(&op, &m, &mut out).unwrap();
            assert!(out == want.as_bytes(), "opcode {code:#x}");
        }
    }

    #[test]
    fn rebuilds_symbolically() {
        // pickle.dumps({'a': [1, (2, 'x')]}, protocol=2)
        let p = b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02X\x01\x00\x00\x00xq\x03\x86q\x04es.";
        let (vm, e) = vm_of(p);
        assert_eq!(e, End::Stop(p.len() as u64));
        assert_eq!(vm.repr(vm.result.unwrap(), 100), "{'a': [1, (2, 'x')]}");
        assert!(vm.problems.is_empty());
    }

    #[test]
    fn never_calls_anything() {
        // cos\nsystem\n(S'echo hi'\ntR.
        let p = b"cos\nsystem\n(S'echo hi'\ntR.";
        let (vm, _) = vm_of(p);
        assert_eq!(vm.repr(vm.result.unwrap(), 100), "os.system('echo hi')");
        assert_eq!(globals(&vm)["os.system"], Verdict::Dangerous);
    }

    #[test]
    fn errors_are_recorded_not_fatal() {
        let (vm, _) = vm_of(b"\x80\x02h\x05R.");
        assert!(vm.problems.iter().any(|p| p.message.contains("memo key 5")));
        assert!(vm.problems.iter().any(|p| p.message.contains("underflow")));
        let (_, e) = vm_of(b"\x80\x02]q\x00(K\x01K");
        assert!(matches!(e, End::Short { .. }));
    }

    #[test]
    fn legacy_torch_magic() {
        let head = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.";
        assert!(is_legacy_torch(head));
        assert!(!is_legacy_torch(b"\x80\x02}q\x00."));
    }
}
