//! Protobuf fields as nodes: named and typed by a schema when there is
//! one, guessed (and marked as guesses) when there is not.
//!
//! One call builds one level. A nested message becomes a node whose kind is
//! its type's full name (`onnx.GraphProto`, or `message?` for a guess) and
//! whose children are loaded from its range when someone opens it, so a
//! model of several GB is read only where it is looked at. Payloads are
//! never copied: a node shows a short preview and keeps the range.

use prost_reflect::{Cardinality, FieldDescriptor, Kind, MessageDescriptor};

use super::schema;
use super::wire::{Bytes, Field, Scanner, Wire, WireError, looks_like_message, read_range, varint};
use crate::data::Range;
use crate::name::{escape_bytes, escape_str};
use crate::node::{Children, Node, Value};
use crate::status::Damage;

/// Characters of a string shown in a node.
const PREVIEW_CHARS: usize = 120;
/// Bytes of a `bytes` field shown in hex.
const PREVIEW_BYTES: usize = 16;
/// Payloads up to this size are tested as strings and packed numbers.
const GUESS_LIMIT: u64 = 1 << 20;
/// Fields read from a message to summarise it.
const SUMMARY_FIELDS: usize = 32;
/// Elements of a packed field shown in its value.
const PACKED_PREVIEW: usize = 8;
/// Nesting followed when building a whole tree at once.
pub(crate) const MAX_DEPTH: u32 = 64;

/// Node kind of a guessed nested message.
pub(crate) const GUESS_MESSAGE: &str = "message?";
/// Node kind of the damage that ends a message.
pub(crate) const DAMAGE: &str = "damage";

/// How much of the tree one call builds.
#[derive(Clone, Copy)]
pub(crate) struct Depth {
    /// Levels below this one built now (0: nested messages are left to `load`).
    pub levels: u32,
    /// Nodes that may still be made; once spent, messages stay unexpanded.
    pub budget: usize,
}

impl Depth {
    /// One level; nested messages are loaded on demand.
    pub(crate) fn lazy() -> Depth {
        Depth {
            levels: 0,
            budget: usize::MAX,
        }
    }
    /// The whole tree, within the node budget (records of a log).
    pub(crate) fn eager(budget: usize) -> Depth {
        Depth {
            levels: MAX_DEPTH,
            budget,
        }
    }
}

/// The fields of the message whose bytes are `value`, read as `msg` or
/// guessed without one.
pub(crate) fn message_nodes<B: Bytes + ?Sized>(
    b: &B,
    value: Range,
    msg: Option<&MessageDescriptor>,
    depth: &mut Depth,
) -> Vec<Node> {
    let mut out = Vec::new();
    let mut counts = Counter::default();
    let mut scan = Scanner::new(b, value);
    for item in scan.by_ref() {
        if depth.budget == 0 {
            break;
        }
        depth.budget -= 1;
        match item {
            Ok(f) => {
                let fd = msg.and_then(|m| m.get_field(f.number));
                let index = counts.next(f.number);
                out.push(field_node(b, &f, fd.as_ref(), index, depth));
            }
            Err(e) => out.push(damage_node(&e, value.end, msg)),
        }
    }
    out
}

/// Counts the fields of each number seen, for the `[i]` of repeated fields.
#[derive(Default)]
pub(crate) struct Counter(Vec<(u32, usize)>);

impl Counter {
    /// The index of the next field numbered `number`.
    pub(crate) fn next(&mut self, number: u32) -> usize {
        match self.0.iter_mut().find(|(n, _)| *n == number) {
            Some((_, c)) => {
                *c += 1;
                *c - 1
            }
            None => {
                self.0.push((number, 1));
                0
            }
        }
    }
}

/// The node that ends a message at the damage found; `msg` names the
/// field that failed.
pub(crate) fn damage_node(e: &WireError, end: u64, msg: Option<&MessageDescriptor>) -> Node {
    let d = wire_damage(e, end, msg);
    Node::new(DAMAGE, "damage", Range::new(e.offset, end))
        .text(d.reason.clone())
        .damaged(d)
}

/// The damage a wire error makes, the failed field named by `msg` when the
/// schema knows it: a reader sees `graph (field 7)`, not a bare number.
pub(crate) fn wire_damage(e: &WireError, end: u64, msg: Option<&MessageDescriptor>) -> Damage {
    let field = e.number.and_then(|n| msg.and_then(|m| m.get_field(n)));
    let mut d = e.to_damage(end);
    d.reason = e.reason_named(field.as_ref().map(|f| f.name()));
    d
}

/// How a field is called in messages: `graph (field 7)` when the schema
/// names it, `field 7` when it does not.
fn field_label(number: u32, fd: Option<&FieldDescriptor>) -> String {
    match fd {
        Some(fd) => format!("{} (field {number})", fd.name()),
        None => format!("field {number}"),
    }
}

/// The node of one field.
pub(crate) fn field_node<B: Bytes + ?Sized>(
    b: &B,
    f: &Field,
    fd: Option<&FieldDescriptor>,
    index: usize,
    depth: &mut Depth,
) -> Node {
    let mut node = match fd {
        Some(fd) => typed(b, f, fd, index, depth),
        None => guessed(b, f, format!("#{}", f.number), depth),
    };
    if f.cut {
        node.damage = Some(Box::new(Damage::truncated(
            Range::new(f.value.end, f.value.end),
            format!(
                "{} is cut off: {} of its {} bytes are here",
                field_label(f.number, fd),
                f.value.len(),
                f.int
            ),
        )));
    }
    node
}

/// Integer fields that hold an enum's values without being declared as
/// that enum: (message, field, enum).
const ENUM_HINTS: &[(&str, &str, &str)] = &[
    ("onnx.TensorProto", "data_type", "onnx.TensorProto.DataType"),
    (
        "onnx.TypeProto.Tensor",
        "elem_type",
        "onnx.TensorProto.DataType",
    ),
    (
        "onnx.TypeProto.SparseTensor",
        "elem_type",
        "onnx.TensorProto.DataType",
    ),
];

fn enum_hint(fd: &FieldDescriptor) -> Option<Kind> {
    let m = fd.parent_message();
    let (_, _, e) = ENUM_HINTS
        .iter()
        .find(|(msg, field, _)| *msg == m.full_name() && *field == fd.name())?;
    fd.parent_pool().get_enum_by_name(e).map(Kind::Enum)
}

/// Whether a field of this kind can come as `wire`: its own wire type, or
/// `Len` for a packed repeated number.
fn wire_of(fd: &FieldDescriptor) -> Wire {
    match fd.kind() {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => Wire::I64,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => Wire::I32,
        Kind::String | Kind::Bytes => Wire::Len,
        Kind::Message(_) if fd.is_group() => Wire::Group,
        Kind::Message(_) => Wire::Len,
        _ => Wire::Varint,
    }
}

fn typed<B: Bytes + ?Sized>(
    b: &B,
    f: &Field,
    fd: &FieldDescriptor,
    index: usize,
    depth: &mut Depth,
) -> Node {
    let name = if fd.cardinality() == Cardinality::Repeated {
        format!("{}[{index}]", fd.name())
    } else {
        fd.name().to_string()
    };
    let want = wire_of(fd);
    if f.wire == want {
        return match fd.kind() {
            Kind::Message(m) => message_field(b, f, name, Some(m), depth),
            Kind::String => Node::new("string", name, f.range).value(string_preview(b, f.value)),
            Kind::Bytes => bytes_node(b, f, name, depth),
            k => {
                let k = enum_hint(fd).unwrap_or(k);
                Node::new(scalar_name(&k), name, f.range).value(scalar(&k, f.int))
            }
        };
    }
    if f.wire == Wire::Len && want != Wire::Len {
        // A packed repeated number: one field holding the list.
        let kind = packed_kind(&fd.kind());
        let name = if index == 0 {
            fd.name().to_string()
        } else {
            name
        };
        let mut n = Node::new(kind, name, f.range).text(packed_preview(b, f.value, &fd.kind()));
        if !f.value.is_empty() {
            n = n.lazy();
            if depth.levels > 0 {
                n.children = Children::Loaded(packed_nodes(b, f.value, &fd.kind(), depth).into());
            }
        }
        return n;
    }
    let mut n = guessed(b, f, name, depth);
    n.damage = Some(Box::new(Damage::corrupt(
        f.range,
        format!(
            "{} is declared {} but has wire type {}",
            field_label(f.number, Some(fd)),
            kind_name(&fd.kind()),
            f.wire.name()
        ),
    )));
    n
}

/// A message field: lazy, or built now within the depth given.
fn message_field<B: Bytes + ?Sized>(
    b: &B,
    f: &Field,
    name: String,
    m: Option<MessageDescriptor>,
    depth: &mut Depth,
) -> Node {
    let kind = m
        .as_ref()
        .map_or(GUESS_MESSAGE, |m| schema::intern(m.full_name()));
    let mut n = Node::new(kind, name, f.range);
    let summary = match m.as_ref().and_then(|m| counted(b, f.value, m, f.cut)) {
        Some(s) => s,
        None => summary(b, f.value, m.as_ref()),
    };
    n = n.text(summary);
    if f.value.is_empty() {
        return n;
    }
    n = n.lazy();
    if depth.levels > 0 && depth.budget > 0 {
        depth.levels -= 1;
        let kids = message_nodes(b, f.value, m.as_ref(), depth);
        depth.levels += 1;
        n.children = Children::Loaded(kids.into());
    }
    n
}

/// A field without a schema: its wire type says what it can be.
fn guessed<B: Bytes + ?Sized>(b: &B, f: &Field, name: String, depth: &mut Depth) -> Node {
    match f.wire {
        Wire::Varint => Node::new("varint", name, f.range).uint(f.int),
        Wire::I64 => Node::new("fixed64", name, f.range).text(format!(
            "{} (as double: {})",
            f.int,
            f64::from_bits(f.int)
        )),
        Wire::I32 => Node::new("fixed32", name, f.range).text(format!(
            "{} (as float: {})",
            f.int,
            f32::from_bits(f.int as u32)
        )),
        Wire::Group => message_field(b, f, name, None, depth),
        Wire::Len => {
            let small = f.value.len() <= GUESS_LIMIT;
            if small && is_text(b, f.value) {
                Node::new("string?", name, f.range).value(string_preview(b, f.value))
            } else if !f.cut && looks_like_message(b, f.value, if small { usize::MAX } else { 64 })
            {
                message_field(b, f, name, None, depth)
            } else if small && !f.cut && packed_varints(b, f.value) {
                let k = Kind::Uint64;
                Node::new("packed varint?", name, f.range)
                    .text(packed_preview(b, f.value, &k))
                    .lazy()
            } else {
                bytes_node(b, f, name, depth)
            }
        }
    }
}

/// Node kind of a bytes field; its child of kind [`DATA`] is the payload.
const BYTES: &str = "bytes";
/// Node kind of a bytes field's payload alone.
pub(crate) const DATA: &str = "data";

/// A bytes field. Its range holds the tag and the length too; the child
/// `data` is the payload alone, so selecting it (in the hex view: the
/// cursor on its first byte) is selecting the bytes themselves, a tensor's
/// `raw_data` first of all.
fn bytes_node<B: Bytes + ?Sized>(b: &B, f: &Field, name: String, depth: &mut Depth) -> Node {
    let n = Node::new(BYTES, name, f.range).text(bytes_preview(b, f.value));
    if f.value.is_empty() {
        return n;
    }
    if depth.levels > 0 && depth.budget > 0 {
        depth.budget -= 1;
        return n.with_children(vec![data_node(f)]);
    }
    n.lazy()
}

fn data_node(f: &Field) -> Node {
    let n = Node::new(DATA, DATA, f.value);
    if f.cut {
        let here = f.value.len();
        return n
            .text(format!("{here} of {} bytes", f.int))
            .damaged(Damage::truncated(
                Range::new(f.value.end, f.value.end),
                format!(
                    "the data is cut off: {here} of its {} bytes are here",
                    f.int
                ),
            ));
    }
    n.text(format!("{} bytes", crate::util::thousands(f.value.len())))
}

/// Printable UTF-8 (tabs and newlines allowed), and not empty.
fn is_text<B: Bytes + ?Sized>(b: &B, r: Range) -> bool {
    if r.is_empty() {
        return false;
    }
    let v = read_range(b, r, GUESS_LIMIT as usize);
    match std::str::from_utf8(&v) {
        Ok(s) => s
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t')),
        Err(_) => false,
    }
}

/// Whether every byte belongs to a varint (and there are at least two).
fn packed_varints<B: Bytes + ?Sized>(b: &B, r: Range) -> bool {
    let v = read_range(b, r, GUESS_LIMIT as usize);
    let mut p = 0;
    let mut n = 0;
    while p < v.len() {
        match varint(&v[p..]) {
            Some((_, l)) if l > 0 => p += l,
            _ => return false,
        }
        n += 1;
    }
    n >= 2
}

/// A string field's value: its first characters, control characters and
/// bytes that are not UTF-8 escaped, `…` when there is more.
fn string_preview<B: Bytes + ?Sized>(b: &B, r: Range) -> Value {
    let v = read_range(b, r, PREVIEW_CHARS * 4);
    let mut out = String::new();
    let mut chars = 0;
    let mut full = (v.len() as u64) == r.len();
    'all: for chunk in v.utf8_chunks() {
        for c in chunk.valid().chars() {
            if chars == PREVIEW_CHARS {
                full = false;
                break 'all;
            }
            crate::name::escape_str_into(c.encode_utf8(&mut [0; 4]), &mut out);
            chars += 1;
        }
        for x in chunk.invalid() {
            if chars == PREVIEW_CHARS {
                full = false;
                break 'all;
            }
            out.push_str(&format!("\\x{x:02x}"));
            chars += 1;
        }
    }
    if !full {
        out.push('…');
    }
    Value::Quoted(out.into())
}

fn bytes_preview<B: Bytes + ?Sized>(b: &B, r: Range) -> String {
    let v = read_range(b, r, PREVIEW_BYTES);
    let mut s = format!("{} bytes", crate::util::thousands(r.len()));
    if !v.is_empty() {
        s.push(':');
        for x in &v {
            s.push_str(&format!(" {x:02x}"));
        }
        if r.len() > v.len() as u64 {
            s.push_str(" …");
        }
    }
    s
}

/// The type name shown for a scalar kind.
fn scalar_name(k: &Kind) -> &'static str {
    match k {
        Kind::Double => "double",
        Kind::Float => "float",
        Kind::Int32 => "int32",
        Kind::Int64 => "int64",
        Kind::Uint32 => "uint32",
        Kind::Uint64 => "uint64",
        Kind::Sint32 => "sint32",
        Kind::Sint64 => "sint64",
        Kind::Fixed32 => "fixed32",
        Kind::Fixed64 => "fixed64",
        Kind::Sfixed32 => "sfixed32",
        Kind::Sfixed64 => "sfixed64",
        Kind::Bool => "bool",
        Kind::String => "string",
        Kind::Bytes => "bytes",
        Kind::Enum(_) => "enum",
        Kind::Message(_) => "message",
    }
}

fn kind_name(k: &Kind) -> String {
    match k {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::Enum(e) => e.full_name().to_string(),
        k => scalar_name(k).to_string(),
    }
}

fn packed_kind(k: &Kind) -> &'static str {
    match k {
        Kind::Double => "packed double",
        Kind::Float => "packed float",
        Kind::Int32 => "packed int32",
        Kind::Int64 => "packed int64",
        Kind::Uint32 => "packed uint32",
        Kind::Uint64 => "packed uint64",
        Kind::Sint32 => "packed sint32",
        Kind::Sint64 => "packed sint64",
        Kind::Fixed32 => "packed fixed32",
        Kind::Fixed64 => "packed fixed64",
        Kind::Sfixed32 => "packed sfixed32",
        Kind::Sfixed64 => "packed sfixed64",
        Kind::Bool => "packed bool",
        _ => "packed enum",
    }
}

/// The scalar kind of a packed node kind (`packed int64`), for `load`.
fn packed_scalar(kind: &str) -> Option<Kind> {
    Some(match kind.strip_prefix("packed ")? {
        "double" => Kind::Double,
        "float" => Kind::Float,
        "int32" | "enum" => Kind::Int32,
        "int64" => Kind::Int64,
        "uint32" => Kind::Uint32,
        "uint64" | "varint?" => Kind::Uint64,
        "sint32" => Kind::Sint32,
        "sint64" => Kind::Sint64,
        "fixed32" => Kind::Fixed32,
        "fixed64" => Kind::Fixed64,
        "sfixed32" => Kind::Sfixed32,
        "sfixed64" => Kind::Sfixed64,
        "bool" => Kind::Bool,
        _ => return None,
    })
}

/// A decoded scalar (`raw` is the varint or the fixed-width bits).
fn scalar(k: &Kind, raw: u64) -> Value {
    match k {
        Kind::Double => Value::Str(fmt_f64(f64::from_bits(raw)).into()),
        Kind::Float => Value::Str(fmt_f64(f64::from(f32::from_bits(raw as u32))).into()),
        Kind::Int32 => Value::Int(i64::from(raw as i32)),
        Kind::Int64 | Kind::Sfixed64 => Value::Int(raw as i64),
        Kind::Sfixed32 => Value::Int(i64::from(raw as u32 as i32)),
        Kind::Uint32 | Kind::Fixed32 => Value::UInt(raw & 0xffff_ffff),
        Kind::Uint64 | Kind::Fixed64 => Value::UInt(raw),
        Kind::Sint32 | Kind::Sint64 => Value::Int(((raw >> 1) as i64) ^ -((raw & 1) as i64)),
        Kind::Bool => Value::Bool(raw != 0),
        Kind::Enum(e) => {
            let v = raw as i32;
            match e.get_value(v) {
                Some(ev) => Value::Str(format!("{} ({v})", ev.name()).into()),
                None => Value::Str(format!("{v} (not in {})", e.name()).into()),
            }
        }
        _ => Value::UInt(raw),
    }
}

fn fmt_f64(x: f64) -> String {
    if x.is_finite() && x == x.trunc() && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// Reads the elements of a packed field: (range, raw value) each, at most
/// `max` of them.
fn packed_elements<B: Bytes + ?Sized>(
    b: &B,
    r: Range,
    k: &Kind,
    max: usize,
) -> (Vec<(Range, u64)>, Option<Damage>) {
    let width = match k {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => 8,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => 4,
        _ => 0,
    };
    let mut out = Vec::new();
    let mut pos = r.start;
    let mut buf = [0u8; 10];
    while pos < r.end && out.len() < max {
        let n = b.read(pos, &mut buf[..((r.end - pos) as usize).min(10)]);
        if width > 0 {
            if n < width {
                return (
                    out,
                    Some(Damage::corrupt(
                        Range::new(pos, r.end),
                        format!("packed field ends inside a {width}-byte element"),
                    )),
                );
            }
            let mut w = [0u8; 8];
            w[..width].copy_from_slice(&buf[..width]);
            out.push((Range::new(pos, pos + width as u64), u64::from_le_bytes(w)));
            pos += width as u64;
        } else {
            match varint(&buf[..n]) {
                Some((v, l)) if l > 0 => {
                    out.push((Range::new(pos, pos + l as u64), v));
                    pos += l as u64;
                }
                _ => {
                    return (
                        out,
                        Some(Damage::corrupt(
                            Range::new(pos, r.end),
                            "packed field ends inside a varint",
                        )),
                    );
                }
            }
        }
    }
    (out, None)
}

fn packed_preview<B: Bytes + ?Sized>(b: &B, r: Range, k: &Kind) -> String {
    let (els, bad) = packed_elements(b, r, k, PACKED_PREVIEW + 1);
    let shown: Vec<String> = els
        .iter()
        .take(PACKED_PREVIEW)
        .map(|&(_, v)| scalar(k, v).to_string())
        .collect();
    let more = els.len() > PACKED_PREVIEW || (pos_end(&els) < r.end && bad.is_none());
    let mut s = format!("[{}{}]", shown.join(", "), if more { ", …" } else { "" });
    s.push_str(&format!(" ({} bytes)", r.len()));
    s
}

fn pos_end(els: &[(Range, u64)]) -> u64 {
    els.last().map_or(0, |(r, _)| r.end)
}

/// Most elements of a packed field made into nodes.
const MAX_PACKED_NODES: usize = 100_000;

fn packed_nodes<B: Bytes + ?Sized>(b: &B, r: Range, k: &Kind, depth: &mut Depth) -> Vec<Node> {
    let max = MAX_PACKED_NODES.min(depth.budget);
    let (els, bad) = packed_elements(b, r, k, max);
    depth.budget -= els.len().min(depth.budget);
    let kind = scalar_name(k);
    let mut out: Vec<Node> = els
        .iter()
        .enumerate()
        .map(|(i, &(er, v))| Node::new(kind, format!("[{i}]"), er).value(scalar(k, v)))
        .collect();
    if let Some(d) = bad {
        out.push(
            Node::new(DAMAGE, "damage", d.range)
                .text(d.reason.clone())
                .damaged(d),
        );
    } else if pos_end(&els) < r.end && !els.is_empty() {
        out.push(
            Node::new("more", "…", Range::new(pos_end(&els), r.end))
                .text("more elements not listed"),
        );
    }
    out
}

/// Messages known by their size rather than by their first fields: their
/// type, and the repeated fields counted (field name, what one is called).
/// A graph's doc string says little; "11 nodes, 2 initializers" says what
/// it is.
const COUNTED: &[(&str, &[Counted])] = &[(
    "onnx.GraphProto",
    &[
        ("node", "node", "nodes"),
        ("initializer", "initializer", "initializers"),
        ("input", "input", "inputs"),
        ("output", "output", "outputs"),
    ],
)];

/// A repeated field counted: its name, and what one and several are called.
type Counted = (&'static str, &'static str, &'static str);

/// Top-level fields of a message read to count them: a graph of more holds
/// at least the counts shown (only tags and lengths are read, never a
/// payload, so this stays cheap on models of any size).
const COUNT_FIELDS: usize = 1 << 16;

/// `"name": 11 nodes, 2 initializers, 3 inputs, 5 outputs` for a message
/// of a type in [`COUNTED`]; counts are `≥N` when the message is cut
/// (`cut`), damaged or longer than [`COUNT_FIELDS`] fields.
fn counted<B: Bytes + ?Sized>(
    b: &B,
    value: Range,
    m: &MessageDescriptor,
    cut: bool,
) -> Option<String> {
    let (_, fields) = COUNTED.iter().find(|(t, _)| *t == m.full_name())?;
    let numbers: Vec<Option<u32>> = fields
        .iter()
        .map(|(f, _, _)| m.get_field_by_name(f).map(|fd| fd.number()))
        .collect();
    let name_field = m.get_field_by_name("name").map(|fd| fd.number());
    let mut counts = vec![0u64; fields.len()];
    let mut name = None;
    let mut partial = cut;
    let mut scan = Scanner::new(b, value);
    let mut seen = 0;
    for item in scan.by_ref() {
        let Ok(f) = item else {
            partial = true;
            break;
        };
        partial |= f.cut;
        if let Some(i) = numbers.iter().position(|n| *n == Some(f.number)) {
            counts[i] += 1;
        } else if Some(f.number) == name_field && f.wire == Wire::Len && name.is_none() {
            let mut n = escape_bytes(&read_range(b, f.value, 64));
            if f.value.len() > 64 {
                n.push('…');
            }
            name = Some(n);
        }
        seen += 1;
        if seen == COUNT_FIELDS {
            partial |= scan.pos() < value.end;
            break;
        }
    }
    let at_least = if partial { "≥" } else { "" };
    let list: Vec<String> = fields
        .iter()
        .zip(&counts)
        .map(|((_, one, many), &n)| {
            let what = if n == 1 { one } else { many };
            format!("{at_least}{n} {what}")
        })
        .collect();
    Some(match name {
        Some(n) if !n.is_empty() => format!("\"{n}\": {}", list.join(", ")),
        _ => list.join(", "),
    })
}

/// A one-line summary of a message: its `name` first, then the first
/// short scalar and string fields.
pub(crate) fn summary<B: Bytes + ?Sized>(
    b: &B,
    value: Range,
    m: Option<&MessageDescriptor>,
) -> String {
    summary_within(b, value, m, 2)
}

/// [`summary`], looking at most `depth` sub-messages down.
fn summary_within<B: Bytes + ?Sized>(
    b: &B,
    value: Range,
    m: Option<&MessageDescriptor>,
    depth: u32,
) -> String {
    let Some(m) = m else {
        return format!("{} bytes", crate::util::thousands(value.len()));
    };
    let mut parts: Vec<(bool, String, String)> = Vec::new();
    // The first sub-message, summarised when the message has no scalars.
    let mut inner: Option<(String, Range, MessageDescriptor)> = None;
    for f in Scanner::new(b, value).take(SUMMARY_FIELDS).flatten() {
        let Some(fd) = m.get_field(f.number) else {
            continue;
        };
        let text = match fd.kind() {
            Kind::Message(sub) => {
                if inner.is_none() && f.wire == Wire::Len && sub.full_name() != m.full_name() {
                    inner = Some((fd.name().to_string(), f.value, sub));
                }
                continue;
            }
            Kind::Bytes => continue,
            Kind::String => {
                if f.value.len() > 64 {
                    continue;
                }
                format!(
                    "\"{}\"",
                    escape_str(&String::from_utf8_lossy(&read_range(b, f.value, 64)))
                )
            }
            k if f.wire == wire_of(&fd) => match scalar(&enum_hint(&fd).unwrap_or(k), f.int) {
                Value::Str(s) => s.split(" (").next().unwrap_or_default().to_string(),
                v => v.to_string(),
            },
            k if f.wire == Wire::Len && f.value.len() <= 256 => {
                let (els, _) = packed_elements(b, f.value, &k, PACKED_PREVIEW);
                let v: Vec<String> = els
                    .iter()
                    .map(|&(_, x)| scalar(&k, x).to_string())
                    .collect();
                format!("[{}]", v.join(","))
            }
            _ => continue,
        };
        let repeated = fd.cardinality() == Cardinality::Repeated;
        if let Some(p) = parts.iter_mut().find(|p| p.1 == fd.name()) {
            // Unpacked repeated numbers: gather them into one list.
            if repeated && p.0 && !text.starts_with('[') {
                let inner = p.2.trim_start_matches('[').trim_end_matches(']');
                p.2 = format!("[{inner},{text}]");
            }
            continue;
        }
        let text = if repeated && !text.starts_with('[') {
            format!("[{text}]")
        } else {
            text
        };
        parts.push((repeated, fd.name().to_string(), text));
        if parts.len() >= 6 {
            break;
        }
    }
    if let Some(i) = parts.iter().position(|p| p.1 == "name") {
        let p = parts.remove(i);
        parts.insert(0, p);
    }
    let mut s = String::new();
    for (_, k, v) in parts {
        if s.len() > 100 {
            s.push_str(" …");
            break;
        }
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(&format!("{k}={v}"));
    }
    if s.is_empty()
        && depth > 0
        && let Some((name, r, sub)) = inner
    {
        let t = summary_within(b, r, Some(&sub), depth - 1);
        if !t.ends_with(" bytes") {
            s = format!("{name}: {t}");
        }
    }
    if s.is_empty() {
        s = format!("{} bytes", crate::util::thousands(value.len()));
    }
    s
}

/// Re-reads the children of a node built here, from its range (which covers
/// the whole field: tag, length and payload). Nodes of other kinds have none.
pub(crate) fn load<B: Bytes + ?Sized>(b: &B, node: &Node, schemas: &schema::Schemas) -> Vec<Node> {
    let Some(Ok(f)) = Scanner::new(b, node.range).next() else {
        return Vec::new();
    };
    let mut depth = Depth::lazy();
    if node.kind == BYTES {
        return if f.value.is_empty() {
            Vec::new()
        } else {
            vec![data_node(&f)]
        };
    }
    if node.kind == GUESS_MESSAGE {
        return message_nodes(b, f.value, None, &mut depth);
    }
    if let Some(k) = packed_scalar(node.kind) {
        return packed_nodes(b, f.value, &k, &mut depth);
    }
    match schemas.message(node.kind) {
        Some(m) => message_nodes(b, f.value, Some(&m), &mut depth),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses_are_marked() {
        // 1: "hello"; 2: {1: 150}; 3: packed varints 1,2,300; 4: bytes
        let b = [
            0x0a, 5, b'h', b'e', b'l', b'l', b'o', 0x12, 3, 0x08, 0x96, 0x01, 0x1a, 4, 1, 2, 0xac,
            0x02, 0x22, 2, 0xff, 0xff,
        ];
        let n = message_nodes(
            &b[..],
            Range::new(0, b.len() as u64),
            None,
            &mut Depth::lazy(),
        );
        let kinds: Vec<&str> = n.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, ["string?", "message?", "packed varint?", "bytes"]);
        assert_eq!(n[0].value, Some(Value::Quoted("hello".into())));
        let inner = load(&b[..], &n[1], &Default::default());
        assert_eq!(inner[0].value, Some(Value::UInt(150)));
        assert_eq!(inner[0].range, Range::new(9, 12));
        let els = load(&b[..], &n[2], &Default::default());
        assert_eq!(
            els.iter()
                .map(|e| e.value.clone().unwrap())
                .collect::<Vec<_>>(),
            [Value::UInt(1), Value::UInt(2), Value::UInt(300)]
        );
    }

    #[test]
    fn schema_names_fields() {
        let m = schema::builtin("onnx.TensorProto").unwrap();
        // dims 2, dims 3 (unpacked), data_type FLOAT, name "w", raw_data 24 bytes
        let mut b = vec![0x08, 2, 0x08, 3, 0x10, 1, 0x42, 1, b'w', 0x4a, 24];
        b.extend([0u8; 24]);
        let n = message_nodes(
            &b[..],
            Range::new(0, b.len() as u64),
            Some(&m),
            &mut Depth::lazy(),
        );
        let names: Vec<&str> = n.iter().map(|n| &*n.name).collect();
        assert_eq!(
            names,
            ["dims[0]", "dims[1]", "data_type", "name", "raw_data"]
        );
        assert_eq!(n[2].value, Some(Value::Str("FLOAT (1)".into())));
        assert_eq!(n[4].range, Range::new(9, 35));
        assert_eq!(
            summary(&b[..], Range::new(0, b.len() as u64), Some(&m)),
            "name=\"w\" dims=[2,3] data_type=FLOAT"
        );
    }
}
