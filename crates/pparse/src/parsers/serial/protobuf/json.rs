//! Protobuf bytes to JSON, straight from the wire.
//!
//! The proto3 JSON mapping that protobuf's own tools print (`MessageToDict`
//! with field names as in the .proto): int64 and uint64 as strings, enums
//! by name, bytes as base64, `Timestamp` as RFC 3339, default scalars left
//! out, unknown fields dropped. It walks the bytes with the wire scanner and
//! a [`Table`] of the schema and writes text as it goes — no decoded
//! message is built — which makes a log of half a million records a matter
//! of a second. It checks what a decoder checks (wire types against the
//! schema, UTF-8 of strings, packed values that end where their field
//! does): a message it writes or [`check`]s is one a protobuf library would
//! accept.
//!
//! Lists of `{key, nested_key, value_json}` items (how W&B stores logged
//! values) can be written as objects of decoded values instead; see
//! [`Options::items`].

use prost_reflect::{DynamicMessage, SerializeOptions};

use super::table::{Card, FieldT, Msg, MsgId, QuickWhat, Special, Table, Ty};
use super::wire::{Field, Scanner, Wire, WireError, varint, varint_in};
use crate::data::Range;

/// Deepest nesting written or checked.
const MAX_DEPTH: u32 = 100;

/// How to write.
#[derive(Clone, Copy, Default)]
pub struct Options {
    /// (message type, field) pairs whose repeated `{key, nested_key,
    /// value_json}` items are written as one object `{name: value}`, the
    /// name being the nested keys joined by `/` (or the key), the value the
    /// parsed `value_json` (or null).
    pub items: &'static [(&'static str, &'static str)],
}

impl Options {
    /// The table of `root` for these options.
    pub fn table(&self, root: &prost_reflect::MessageDescriptor) -> Table {
        Table::build(root, self.items)
    }
}

/// Writes JSON; keeps a scratch list of fields between calls so a message
/// costs no allocation.
pub(crate) struct Writer<'t> {
    t: &'t Table,
    scratch: Vec<Field>,
}

impl<'t> Writer<'t> {
    /// A writer for messages of the schemas in `t`.
    pub(crate) fn new(t: &'t Table) -> Self {
        Writer {
            t,
            // Enough for a typical record's fields at every depth at once.
            scratch: Vec::with_capacity(64),
        }
    }

    /// Appends the JSON of the message `bytes` of type `m` to `out`; `Err`
    /// says why the bytes are not a valid message of that type (what is
    /// appended by then is unspecified).
    pub(crate) fn write(&mut self, out: &mut String, bytes: &[u8], m: MsgId) -> Result<(), String> {
        self.scratch.clear();
        self.message(out, bytes, m, 0)
    }

    fn message(&mut self, out: &mut String, b: &[u8], m: MsgId, depth: u32) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("messages nested deeper than {MAX_DEPTH}"));
        }
        let t = self.t;
        let msg = t.msg(m);
        match msg.special {
            Special::Timestamp => {
                check_message(t, b, m, depth, 0)?;
                return timestamp(out, b);
            }
            Special::Empty => {
                check_message(t, b, m, depth, 0)?;
                out.push_str("{}");
                return Ok(());
            }
            Special::WellKnown => return well_known(out, b, &msg.desc),
            Special::None => {}
        }
        let base = self.scratch.len();
        for f in Scanner::new(b, Range::new(0, b.len() as u64)) {
            self.scratch.push(whole(f)?);
        }
        let fields = &mut self.scratch[base..];
        if !fields.windows(2).all(|w| w[0].number <= w[1].number) {
            // Repeated fields are written together, in the order they came.
            fields.sort_unstable_by_key(|f| (f.number, f.range.start));
        }
        out.push('{');
        let mut first = true;
        let mut i = base;
        while i < self.scratch.len() {
            let n = self.scratch[i].number;
            let mut j = i + 1;
            while j < self.scratch.len() && self.scratch[j].number == n {
                j += 1;
            }
            let (from, to) = (i, j);
            i = j;
            let Some(fd) = msg.field(n) else {
                continue;
            };
            let mark = out.len();
            if !first {
                out.push(',');
            }
            // Field names are identifiers: nothing to escape.
            out.push('"');
            out.push_str(&fd.name);
            out.push_str("\":");
            let wrote = match fd.card {
                Card::Map { key, value } => {
                    self.map(out, b, fd, from, to, key, value, depth)?;
                    true
                }
                Card::List if fd.items => {
                    self.items(out, b, fd, from, to)?;
                    true
                }
                Card::List => {
                    self.list(out, b, fd.ty, from, to, depth)?;
                    true
                }
                Card::One { presence } => {
                    // The last occurrence wins; the others must still decode.
                    for k in from..to - 1 {
                        let f = self.scratch[k];
                        check_value(t, b, fd.ty, &f, &fd.name, depth)?;
                    }
                    let f = self.scratch[to - 1];
                    self.value(out, b, fd, &f, depth, !presence)?
                }
            };
            if wrote {
                first = false;
            } else {
                out.truncate(mark);
            }
        }
        self.scratch.truncate(base);
        out.push('}');
        Ok(())
    }

    /// Writes one value; returns false (writing nothing useful) for a
    /// default scalar when `skip_default` is set.
    fn value(
        &mut self,
        out: &mut String,
        b: &[u8],
        fd: &FieldT,
        f: &Field,
        depth: u32,
        skip_default: bool,
    ) -> Result<bool, String> {
        wire_matches(fd.ty, f, &fd.name)?;
        if skip_default && !matches!(fd.ty, Ty::Message(_) | Ty::Group(_)) {
            let empty = match f.wire {
                Wire::Len => f.value.is_empty(),
                _ => f.int == 0,
            };
            if empty {
                return Ok(false);
            }
        }
        self.scalar_or_message(out, b, fd.ty, f, depth)?;
        Ok(true)
    }

    fn scalar_or_message(
        &mut self,
        out: &mut String,
        b: &[u8],
        ty: Ty,
        f: &Field,
        depth: u32,
    ) -> Result<(), String> {
        let v = f.int;
        let mut ints = itoa::Buffer::new();
        match ty {
            Ty::Int32 => out.push_str(ints.format(v as i32)),
            Ty::Sfixed32 => out.push_str(ints.format(v as u32 as i32)),
            Ty::Uint32 | Ty::Fixed32 => out.push_str(ints.format(v as u32)),
            Ty::Int64 | Ty::Sfixed64 => quoted(out, ints.format(v as i64)),
            Ty::Uint64 | Ty::Fixed64 => quoted(out, ints.format(v)),
            Ty::Sint32 => out.push_str(ints.format(zigzag(v) as i32)),
            Ty::Sint64 => quoted(out, ints.format(zigzag(v))),
            Ty::Bool => out.push_str(if v != 0 { "true" } else { "false" }),
            Ty::Double => float(out, f64::from_bits(v)),
            Ty::Float => {
                let x = f32::from_bits(v as u32);
                if x.is_finite() {
                    out.push_str(ryu::Buffer::new().format_finite(x));
                } else {
                    float(out, f64::from(x));
                }
            }
            Ty::Enum(e) => {
                let e = &self.t.enums[e as usize];
                if e.name == "google.protobuf.NullValue" {
                    // The NullValue of struct.proto is JSON null.
                    out.push_str("null");
                } else {
                    match e.value_name(v as i32) {
                        Some(name) => quoted(out, name),
                        None => out.push_str(ints.format(v as i32)),
                    }
                }
            }
            Ty::String => string_lit(out, utf8(b, f)?),
            Ty::Bytes => {
                out.push('"');
                base64(out, bytes_of(b, f.value));
                out.push('"');
            }
            Ty::Message(m) | Ty::Group(m) => {
                return self.message(out, bytes_of(b, f.value), m, depth + 1);
            }
        }
        Ok(())
    }

    fn list(
        &mut self,
        out: &mut String,
        b: &[u8],
        ty: Ty,
        from: usize,
        to: usize,
        depth: u32,
    ) -> Result<(), String> {
        out.push('[');
        let mut first = true;
        for k in from..to {
            let f = self.scratch[k];
            if ty.packable() && f.wire == Wire::Len {
                let mut p = Packed::new(b, &f, ty);
                while let Some(e) = p.next() {
                    let e = e?;
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    self.scalar_or_message(out, b, ty, &e, depth)?;
                }
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            wire_matches(ty, &f, "repeated")?;
            self.scalar_or_message(out, b, ty, &f, depth)?;
        }
        out.push(']');
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn map(
        &mut self,
        out: &mut String,
        b: &[u8],
        fd: &FieldT,
        from: usize,
        to: usize,
        key_ty: Ty,
        value_ty: Ty,
        depth: u32,
    ) -> Result<(), String> {
        out.push('{');
        let mut key = String::new();
        for k in from..to {
            let e = self.entry(b, k, &fd.name)?;
            key.clear();
            let mut val: Option<Field> = None;
            for x in Scanner::new(e, Range::new(0, e.len() as u64)) {
                let x = x.map_err(|e| e.reason)?;
                match x.number {
                    1 => {
                        wire_matches(key_ty, &x, "map key")?;
                        key.clear();
                        self.scalar_or_message(&mut key, e, key_ty, &x, depth)?;
                    }
                    2 => {
                        wire_matches(value_ty, &x, "map value")?;
                        val = Some(x);
                    }
                    _ => {}
                }
            }
            if k > from {
                out.push(',');
            }
            if key.starts_with('"') {
                out.push_str(&key);
            } else if key.is_empty() {
                out.push_str(match key_ty {
                    Ty::String => "\"\"",
                    Ty::Bool => "\"false\"",
                    _ => "\"0\"",
                });
            } else {
                quoted(out, &key);
            }
            out.push(':');
            match val {
                Some(x) => self.scalar_or_message(out, e, value_ty, &x, depth)?,
                None => out.push_str(match value_ty {
                    Ty::Message(_) | Ty::Group(_) => "{}",
                    Ty::String | Ty::Bytes => "\"\"",
                    Ty::Bool => "false",
                    Ty::Int64 | Ty::Uint64 | Ty::Sint64 | Ty::Fixed64 | Ty::Sfixed64 => "\"0\"",
                    _ => "0",
                }),
            }
        }
        out.push('}');
        Ok(())
    }

    /// The bytes of the map entry or item that scratch field `k` of the
    /// field `name` holds.
    fn entry<'b>(&self, b: &'b [u8], k: usize, name: &str) -> Result<&'b [u8], String> {
        let f = self.scratch[k];
        if f.wire != Wire::Len {
            return Err(format!(
                "{name} (field {}): an entry that is not length-delimited",
                f.number
            ));
        }
        Ok(bytes_of(b, f.value))
    }

    /// `[{key, nested_key, value_json}]` as `{name: value}`.
    fn items(
        &mut self,
        out: &mut String,
        b: &[u8],
        fd: &FieldT,
        from: usize,
        to: usize,
    ) -> Result<(), String> {
        let (Ty::Message(item) | Ty::Group(item)) = fd.ty else {
            return Err(format!("field {} is not a list of items", fd.name));
        };
        let im = self.t.msg(item);
        let (key_no, nested_no, json_no) = (
            im.number("key"),
            im.number("nested_key"),
            im.number("value_json"),
        );
        out.push('{');
        let mut name = String::new();
        for k in from..to {
            let e = self.entry(b, k, &fd.name)?;
            let mut key = "";
            let mut json: Option<&str> = None;
            name.clear();
            let mut nested = 0;
            for x in Scanner::new(e, Range::new(0, e.len() as u64)) {
                let x = whole(x)?;
                let Some(xf) = im.field(x.number) else {
                    continue;
                };
                // The item must decode as the item message (wire types, UTF-8).
                check_value(self.t, e, xf.ty, &x, &xf.name, 1)?;
                if xf.ty != Ty::String {
                    continue;
                }
                let v = utf8(e, &x)?;
                if x.number == key_no {
                    key = v;
                } else if x.number == nested_no {
                    if nested > 0 {
                        name.push('/');
                    }
                    nested += 1;
                    name.push_str(v);
                } else if x.number == json_no {
                    json = Some(v);
                }
            }
            if nested == 0 {
                name.push_str(key);
            }
            if k > from {
                out.push(',');
            }
            string_lit(out, &name);
            out.push(':');
            match json {
                None => out.push_str("null"),
                Some(j) => json_value(out, j),
            }
        }
        out.push('}');
        Ok(())
    }
}

/// Checks that `bytes` decode as message `m` (what [`Writer::write`]
/// checks, without writing), leaving out the field numbered `skip`.
pub(crate) fn check(t: &Table, bytes: &[u8], m: MsgId, skip: u32) -> Result<(), String> {
    if quick_message(t, bytes, m, 0, skip) {
        return Ok(());
    }
    check_message(t, bytes, m, 0, skip)
}

/// [`check_message`] as a tight loop over the bytes that only says yes or
/// no: true means the message is valid. False also comes for what it does
/// not handle (groups, well-known types); the full check then decides and
/// says why.
fn quick_message(t: &Table, b: &[u8], m: MsgId, depth: u32, skip: u32) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let msg = t.msg(m);
    if msg.special == Special::WellKnown {
        return false;
    }
    let mut p = 0;
    while p < b.len() {
        let Some((number, wire, from, to)) = raw_field(b, p) else {
            return false;
        };
        p = to;
        if number == u64::from(skip) {
            continue;
        }
        let q = msg.quick(number);
        let v = &b[from..to];
        // Tests in order of frequency, as branches rather than a jump table:
        // they predict better on the regular field sequences of real data.
        if q.what == QuickWhat::String {
            if wire != 2 || crate::util::utf8(v).is_none() {
                return false;
            }
            continue;
        }
        if q.what == QuickWhat::Message {
            if wire != 2 {
                return false;
            }
            let sub = t.msg(q.id);
            let ok = if sub.leaf {
                quick_leaf(sub, v)
            } else {
                quick_message(t, v, q.id, depth + 1, 0)
            };
            if !ok {
                return false;
            }
            continue;
        }
        if q.what == QuickWhat::Scalar {
            // Unknown numbers (wire u8::MAX) are skipped.
            if q.wire != u8::MAX && u64::from(q.wire) != wire {
                return false;
            }
            continue;
        }
        if q.what == QuickWhat::Packable {
            let ok = if wire == 2 {
                quick_packed(v, fd_wire(q.wire))
            } else {
                u64::from(q.wire) == wire
            };
            if !ok {
                return false;
            }
            continue;
        }
        let Some(fd) = msg.field(number as u32) else {
            continue;
        };
        let ok = match fd.card {
            Card::Map { key, value } => {
                wire == Wire::Len.code() && quick_entry(t, &b[from..to], key, value, depth)
            }
            Card::List if fd.ty.packable() && wire == Wire::Len.code() => {
                quick_packed(&b[from..to], fd.ty.wire())
            }
            _ => quick_value(t, &b[from..to], fd.ty, wire, depth),
        };
        if !ok {
            return false;
        }
    }
    true
}

/// [`quick_message`] for a message of scalars and strings (W&B's items):
/// the same checks, in line.
#[inline(always)]
fn quick_leaf(msg: &Msg, b: &[u8]) -> bool {
    let mut p = 0;
    while p < b.len() {
        let Some((number, wire, from, to)) = raw_field(b, p) else {
            return false;
        };
        p = to;
        let q = msg.quick(number);
        let ok = match q.what {
            QuickWhat::String => wire == 2 && crate::util::utf8(&b[from..to]).is_some(),
            QuickWhat::Scalar => q.wire == u8::MAX || u64::from(q.wire) == wire,
            // Past the dense range a leaf has no fields: unknown, skipped.
            QuickWhat::Lookup => true,
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The field at `p`, for the quick check: (number, wire code, value
/// start, value end), or `None` where it is not one the check reads.
#[inline(always)]
fn raw_field(b: &[u8], p: usize) -> Option<(u64, u64, usize, usize)> {
    let (tag, at) = varint_in(b, p)?;
    let (wire, from, to) = quick_value_at(b, tag, at)?;
    Some((tag >> 3, wire, from, to))
}

/// The wire type and value extent of the field whose tag `tag` ends at
/// `at`; `None` for groups, invalid tags and values past the end.
#[inline(always)]
fn quick_value_at(b: &[u8], tag: u64, at: usize) -> Option<(u64, usize, usize)> {
    let number = tag >> 3;
    if number == 0 || number > (1 << 29) - 1 {
        return None;
    }
    let wire = tag & 7;
    let (from, to) = if wire == 2 {
        let (len, q) = varint_in(b, at)?;
        (q, q.checked_add(usize::try_from(len).ok()?)?)
    } else if wire == 0 {
        (at, varint_in(b, at)?.1)
    } else if wire == 1 {
        (at, at + 8)
    } else if wire == 5 {
        (at, at + 4)
    } else {
        return None;
    };
    (to <= b.len()).then_some((wire, from, to))
}

fn quick_value(t: &Table, v: &[u8], ty: Ty, wire: u64, depth: u32) -> bool {
    if ty.wire().code() != wire {
        return false;
    }
    match ty {
        Ty::String => crate::util::utf8(v).is_some(),
        Ty::Message(m) => quick_message(t, v, m, depth + 1, 0),
        Ty::Group(_) => false,
        _ => true,
    }
}

fn quick_entry(t: &Table, e: &[u8], key: Ty, value: Ty, depth: u32) -> bool {
    let mut p = 0;
    while p < e.len() {
        let Some((number, wire, from, to)) = raw_field(e, p) else {
            return false;
        };
        p = to;
        let ok = match number {
            1 => quick_value(t, &e[from..to], key, wire, depth),
            2 => quick_value(t, &e[from..to], value, wire, depth),
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The wire type with code `c` (varint for anything but the fixed ones).
fn fd_wire(c: u8) -> Wire {
    match c {
        1 => Wire::I64,
        5 => Wire::I32,
        _ => Wire::Varint,
    }
}

fn quick_packed(v: &[u8], wire: Wire) -> bool {
    match wire {
        Wire::I64 => v.len().is_multiple_of(8),
        Wire::I32 => v.len().is_multiple_of(4),
        _ => {
            let mut p = 0;
            while p < v.len() {
                match varint_in(v, p) {
                    Some((_, q)) => p = q,
                    None => return false,
                }
            }
            true
        }
    }
}

fn check_message(t: &Table, b: &[u8], m: MsgId, depth: u32, skip: u32) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested deeper than {MAX_DEPTH}"));
    }
    let msg = t.msg(m);
    if msg.special == Special::WellKnown {
        return DynamicMessage::decode(msg.desc.clone(), b)
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    for f in Scanner::new(b, Range::new(0, b.len() as u64)) {
        let f = whole(f)?;
        if f.number == skip {
            continue;
        }
        let Some(fd) = msg.field(f.number) else {
            continue;
        };
        match fd.card {
            Card::Map { key, value } => {
                if f.wire != Wire::Len {
                    return Err(format!("map field {} is not length-delimited", fd.name));
                }
                let e = bytes_of(b, f.value);
                for x in Scanner::new(e, Range::new(0, e.len() as u64)) {
                    let x = x.map_err(|e| e.reason)?;
                    match x.number {
                        1 => check_value(t, e, key, &x, "map key", depth)?,
                        2 => check_value(t, e, value, &x, "map value", depth)?,
                        _ => {}
                    }
                }
            }
            Card::List if fd.ty.packable() && f.wire == Wire::Len => {
                let mut p = Packed::new(b, &f, fd.ty);
                while let Some(e) = p.next() {
                    e?;
                }
            }
            _ => check_value(t, b, fd.ty, &f, &fd.name, depth)?,
        }
    }
    Ok(())
}

/// A field that the scanner read whole, or why not.
fn whole(f: Result<Field, WireError>) -> Result<Field, String> {
    let f = f.map_err(|e| format!("{} at byte {}", e.reason, e.offset))?;
    if f.cut {
        return Err(format!(
            "field {} runs past the end of its message",
            f.number
        ));
    }
    Ok(f)
}

fn check_value(
    t: &Table,
    b: &[u8],
    ty: Ty,
    f: &Field,
    name: &str,
    depth: u32,
) -> Result<(), String> {
    wire_matches(ty, f, name)?;
    match ty {
        Ty::String => utf8(b, f).map(|_| ()),
        Ty::Message(m) | Ty::Group(m) => check_message(t, bytes_of(b, f.value), m, depth + 1, 0),
        _ => Ok(()),
    }
}

fn wire_matches(ty: Ty, f: &Field, name: &str) -> Result<(), String> {
    let want = ty.wire();
    if f.wire == want {
        return Ok(());
    }
    Err(format!(
        "{name} (field {}) has wire type {}, not {}",
        f.number,
        f.wire.name(),
        want.name()
    ))
}

fn utf8<'b>(b: &'b [u8], f: &Field) -> Result<&'b str, String> {
    crate::util::utf8(bytes_of(b, f.value))
        .ok_or_else(|| format!("field {}: a string that is not UTF-8", f.number))
}

fn bytes_of(b: &[u8], r: Range) -> &[u8] {
    &b[r.start as usize..r.end as usize]
}

fn quoted(out: &mut String, s: &str) {
    out.push('"');
    out.push_str(s);
    out.push('"');
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A double as proto3 JSON: shortest round-trip digits; the non-finite ones
/// as strings.
fn float(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("\"NaN\"");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else {
        out.push_str(ryu::Buffer::new().format_finite(x));
    }
}

/// The elements of a packed field, each as a field of its own.
struct Packed<'b> {
    data: &'b [u8],
    p: usize,
    at: u64,
    number: u32,
    width: usize,
}

impl<'b> Packed<'b> {
    fn new(b: &'b [u8], f: &Field, ty: Ty) -> Self {
        let width = match ty.wire() {
            Wire::I64 => 8,
            Wire::I32 => 4,
            _ => 0,
        };
        Packed {
            data: bytes_of(b, f.value),
            p: 0,
            at: f.value.start,
            number: f.number,
            width,
        }
    }

    fn next(&mut self) -> Option<Result<Field, String>> {
        let rest = self.data.get(self.p..).filter(|r| !r.is_empty())?;
        let (v, l, wire) = match self.width {
            0 => match varint(rest) {
                Some((v, l)) if l > 0 => (v, l, Wire::Varint),
                _ => {
                    self.p = self.data.len();
                    return Some(Err(format!(
                        "field {}: packed values end inside a varint",
                        self.number
                    )));
                }
            },
            w => {
                if rest.len() < w {
                    self.p = self.data.len();
                    return Some(Err(format!(
                        "field {}: packed values end inside one",
                        self.number
                    )));
                }
                let mut x = [0u8; 8];
                x[..w].copy_from_slice(&rest[..w]);
                let wire = if w == 8 { Wire::I64 } else { Wire::I32 };
                (u64::from_le_bytes(x), w, wire)
            }
        };
        let at = self.at + self.p as u64;
        self.p += l;
        let r = Range::new(at, at + l as u64);
        Some(Ok(Field {
            number: self.number,
            wire,
            range: r,
            value: r,
            int: v,
            cut: false,
        }))
    }
}

/// Pastes JSON text that is valid and on one line; otherwise writes it
/// re-encoded (Python's `NaN`/`Infinity` become strings, text that is not
/// JSON a string).
fn json_value(out: &mut String, text: &str) {
    let t = text.trim();
    if json_number(t) || matches!(t, "true" | "false" | "null") {
        out.push_str(t);
        return;
    }
    let one_line = !text.contains(['\n', '\r']);
    if one_line && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
        out.push_str(t);
        return;
    }
    let v = crate::parsers::serial::json::python::parse_value_json(text);
    out.push_str(&v.to_string());
}

/// Whether `s` is exactly one JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn json_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > s
    };
    if b.first() == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

fn timestamp(out: &mut String, b: &[u8]) -> Result<(), String> {
    let (mut secs, mut nanos) = (0i64, 0i64);
    for f in Scanner::new(b, Range::new(0, b.len() as u64)) {
        let f = f.map_err(|e| e.reason)?;
        match (f.number, f.wire) {
            (1, Wire::Varint) => secs = f.int as i64,
            (2, Wire::Varint) => nanos = i64::from(f.int as i32),
            _ => {}
        }
    }
    quoted(out, &crate::util::rfc3339(secs, nanos));
    Ok(())
}

/// The other well-known types (Struct, Value, wrappers, Duration, Any …)
/// through the general decoder.
fn well_known(
    out: &mut String,
    b: &[u8],
    desc: &prost_reflect::MessageDescriptor,
) -> Result<(), String> {
    let msg = DynamicMessage::decode(desc.clone(), b).map_err(|e| e.to_string())?;
    let opts = SerializeOptions::new().use_proto_field_name(true);
    let mut ser = serde_json::Serializer::new(Vec::new());
    msg.serialize_with_options(&mut ser, &opts)
        .map_err(|e| e.to_string())?;
    out.push_str(&String::from_utf8_lossy(&ser.into_inner()));
    Ok(())
}

/// A JSON string literal.
pub(crate) fn string_lit(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.push_str(&s[start..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 15)] as char);
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

fn base64(out: &mut String, data: &[u8]) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.reserve(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::serial::protobuf::schema;

    fn json(bytes: &[u8], ty: &str) -> Result<serde_json::Value, String> {
        let t = Options::default().table(&schema::builtin(ty).unwrap());
        let mut out = String::new();
        let r = Writer::new(&t).write(&mut out, bytes, 0);
        // Checking agrees with writing.
        assert_eq!(check(&t, bytes, 0, 0).is_ok(), r.is_ok(), "{r:?}");
        r?;
        Ok(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
    }

    #[test]
    fn proto3_mapping() {
        // TensorProto: dims 2,3 (unpacked), float_data packed [1.5], name, raw_data.
        let mut b = vec![0x08, 2, 0x08, 3, 0x22, 4];
        b.extend(1.5f32.to_le_bytes());
        b.extend([0x42, 2, b'w', b'"', 0x4a, 2, 0xff, 0x00, 0x10, 1]);
        let v = json(&b, "onnx.TensorProto").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"dims": ["2", "3"], "data_type": 1, "float_data": [1.5], "name": "w\"", "raw_data": "/wA="})
        );
        // A wire type the schema does not allow is an error.
        assert!(json(&[0x42, 0x01], "onnx.TensorProto").is_err());
        assert!(json(&[0x42, 1, 0xff], "onnx.TensorProto").is_err());
        // Packed values that end inside one.
        assert!(json(&[0x22, 3, 0, 0, 0], "onnx.TensorProto").is_err());
    }

    #[test]
    fn equals_the_general_decoder_on_onnx_fixtures() {
        // prost-reflect's serde mapping is the reference for the mapping.
        let desc = schema::builtin("onnx.ModelProto").unwrap();
        let t = Options::default().table(&desc);
        for name in ["attrs.onnx", "tensors.onnx", "silero_vad.onnx"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/onnx")
                .join(name);
            let bytes = std::fs::read(path).unwrap();
            let mut out = String::new();
            Writer::new(&t).write(&mut out, &bytes, 0).unwrap();
            let ours: serde_json::Value = serde_json::from_str(&out).unwrap();
            let msg = DynamicMessage::decode(desc.clone(), &bytes[..]).unwrap();
            let opts = SerializeOptions::new().use_proto_field_name(true);
            let theirs = msg
                .serialize_with_options(serde_json::value::Serializer, &opts)
                .unwrap();
            // prost-reflect widens float32 to its f64 digits, protobuf's
            // own JSON (and this writer) prints the shortest float32 ones.
            assert!(same(&ours, &theirs), "{name}:\n{ours}\n{theirs}");
        }
    }

    fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value as V;
        match (a, b) {
            (V::Number(x), V::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                x == y || (x as f32) == (y as f32)
            }
            (V::Object(x), V::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            (V::Array(x), V::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
            }
            _ => a == b,
        }
    }

    #[test]
    fn the_quick_check_agrees_with_the_full_one() {
        // Every record of the real logs, then with bytes flipped and cut:
        // a quick yes is always a full yes, and on intact records it is yes.
        let t = crate::parsers::serial::wandb::table();
        for name in ["current-core", "v0175-legacy", "v0175-core-buggy"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("../../fixtures/wandb/{name}.wandb"));
            let bytes = std::fs::read(path).unwrap();
            let layout = crate::parsers::serial::wandb::log::detect(&bytes[..]);
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            for item in crate::parsers::serial::wandb::log::Records::new(&bytes[..], layout) {
                let crate::parsers::serial::wandb::log::Item::Record(c) = item else {
                    panic!("{name}: damage in an intact log")
                };
                let p = crate::parsers::serial::wandb::log::payload(&bytes[..], &c).into_owned();
                assert!(quick_message(t, &p, 0, 0, 0), "{name}");
                assert!(check_message(t, &p, 0, 0, 0).is_ok(), "{name}");
                for _ in 0..8 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let mut q = p.clone();
                    let at = (seed % q.len().max(1) as u64) as usize;
                    if seed & 1 == 0 {
                        q[at] ^= 1 << (seed >> 8 & 7);
                    } else {
                        q.truncate(at);
                    }
                    if quick_message(t, &q, 0, 0, 0) {
                        assert!(check_message(t, &q, 0, 0, 0).is_ok(), "{name}: {q:?}");
                    }
                    let mut w = String::new();
                    let wrote = Writer::new(t).write(&mut w, &q, 0).is_ok();
                    assert_eq!(wrote, check(t, &q, 0, 0).is_ok(), "{name}: {q:?}");
                }
            }
        }
    }

    #[test]
    fn numbers_are_recognised() {
        for ok in ["0", "-1", "1.5", "1e-05", "2E+3", "-0.0"] {
            assert!(json_number(ok), "{ok}");
        }
        for bad in ["", "-", "01", "1.", ".5", "1e", "NaN", "1 2", "0x1"] {
            assert!(!json_number(bad), "{bad}");
        }
    }

    #[test]
    fn base64_matches_the_standard() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut s = String::new();
            base64(&mut s, i.as_bytes());
            assert_eq!(s, o);
        }
    }
}
