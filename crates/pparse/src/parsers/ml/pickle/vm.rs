//! A pickle virtual machine that never executes anything.
//!
//! It follows `pickle.py`'s `Unpickler` opcode by opcode — stack, MARK as a
//! metastack push, memo — but GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
//! NEWOBJ and friends only build symbolic objects ("a call of
//! `torch._utils._rebuild_tensor_v2` with these arguments"). Nothing is
//! imported or called, so a hostile pickle cannot run code here; its object
//! graph can still be read, and its imports judged.
//!
//! Errors that stop `pickle.loads` (stack underflow, missing mark, unknown
//! memo key) are recorded with their offset and the machine carries on with
//! placeholders, so everything after them is still shown.

use std::collections::BTreeMap;

use super::ops::{Arg, Op, Payload};
use crate::data::{Range, Source};
use crate::name::escape_str;

/// Index of an object in the machine's objects (see [`Vm::get`]).
pub type Id = u32;

/// How a symbolic call was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// REDUCE: `func(*args)`.
    Reduce,
    /// NEWOBJ: `cls.__new__(cls, *args)`.
    NewObj,
    /// NEWOBJ_EX: with keyword arguments.
    NewObjEx,
    /// INST / OBJ: `cls(*args)`.
    Inst,
    /// BUILD on something that is not a call: state applied to it.
    Build,
}

/// A call that was not made.
#[derive(Clone, Debug)]
pub struct Call {
    pub(crate) kind: CallKind,
    pub(crate) func: Id,
    pub(crate) args: Vec<Id>,
    pub(super) kwargs: Option<Id>,
    /// BUILD's state.
    pub state: Option<Id>,
    /// SETITEM(S) applied to the result (an OrderedDict built by REDUCE).
    pub items: Vec<(Id, Id)>,
    /// APPEND(S) applied to the result.
    pub appended: Vec<Id>,
}

/// A text value: short texts are kept decoded, long ones as a range.
#[derive(Clone, Debug)]
pub struct Text {
    /// The decoded text; of a payload, at most its first 4096 bytes.
    pub text: Box<str>,
    /// Bytes of the payload in the pickle, when it came from one.
    pub range: Option<Range>,
    /// The text was cut for display.
    pub cut: bool,
}

/// A symbolic Python object.
#[derive(Clone, Debug)]
pub enum Obj {
    /// Python's `None`.
    None,
    /// `True` or `False` (NEWTRUE, NEWFALSE, or protocol 0's `INT 01`/`00`).
    Bool(bool),
    /// An integer that fits in i64.
    Int(i64),
    /// Decimal text of an integer beyond i64.
    Big(Box<str>),
    /// A float.
    Float(f64),
    /// A `str` (a Python 2 `str` is read as latin-1).
    Str(Text),
    /// A `bytes` or `bytearray`, left in place in the pickle.
    Bytes {
        /// The payload's bytes in the pickle.
        range: Range,
        /// A `bytearray` (BYTEARRAY8) rather than `bytes`.
        bytearray: bool,
    },
    /// A tuple of these objects.
    Tuple(Vec<Id>),
    /// A list of these objects.
    List(Vec<Id>),
    /// A dict's (key, value) pairs, in the order they were set.
    Dict(Vec<(Id, Id)>),
    /// A set's members, in the order they were added.
    Set(Vec<Id>),
    /// A frozenset's members.
    FrozenSet(Vec<Id>),
    /// A class or function named by GLOBAL, STACK_GLOBAL or INST, never
    /// imported.
    Global {
        /// Its module (`torch._utils`).
        module: Box<str>,
        /// Its name in the module (`_rebuild_tensor_v2`).
        name: Box<str>,
    },
    /// A call (or a BUILD) recorded instead of made.
    Call(Box<Call>),
    /// What `persistent_load(pid)` would return.
    Persistent(Id),
    /// An object from the copyreg extension registry.
    Ext(i64),
    /// A protocol 5 out-of-band buffer.
    Buffer {
        /// Its position among the pickle's out-of-band buffers.
        index: u32,
        /// READONLY_BUFFER was applied to it.
        readonly: bool,
    },
    /// A placeholder after an error.
    Unknown,
}

/// An error `pickle.loads` would raise, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Offset of the opcode that raised it.
    pub pos: u64,
    pub(crate) message: String,
}

/// Longest string kept decoded in memory.
const SHORT_TEXT: u64 = 4096;

/// The machine. See the module docs.
pub struct Vm {
    pub(crate) objs: Vec<Obj>,
    /// First and last opcode offsets that touched each object.
    pub spans: Vec<(u64, u64)>,
    pub(crate) stack: Vec<Id>,
    pub(crate) meta: Vec<Vec<Id>>,
    pub(crate) memo: BTreeMap<u64, Id>,
    /// Errors `pickle.loads` would have raised, in order (the first 1000).
    pub problems: Vec<Problem>,
    /// What STOP returned.
    pub result: Option<Id>,
    pub(super) proto: u8,
    next_buffer: u32,
    frame_end: Option<u64>,
    /// Most objects built before the machine gives up (memory bound).
    limit: usize,
    /// Argument ids copied out of tuples by REDUCE and NEWOBJ: a memoized
    /// tuple passed to many calls is copied each time, so the copies are
    /// bounded like the objects (a 5-byte opcode must not copy a million ids).
    copied: usize,
    /// Where the limit was reached: later opcodes are listed, not rebuilt.
    /// Not a problem of the pickle, so not in `problems`.
    pub exhausted: Option<u64>,
    /// Objects visited by [`Vm::repr`] so far: the work of rendering, which
    /// tests check stays bounded per rendering however deep the objects.
    visits: std::cell::Cell<u64>,
}

impl Vm {
    pub(crate) fn new(limit: usize) -> Vm {
        Vm {
            objs: Vec::new(),
            spans: Vec::new(),
            stack: Vec::new(),
            meta: Vec::new(),
            memo: BTreeMap::new(),
            problems: Vec::new(),
            result: None,
            proto: 0,
            next_buffer: 0,
            frame_end: None,
            limit,
            copied: 0,
            exhausted: None,
            visits: std::cell::Cell::new(0),
        }
    }

    fn problem(&mut self, pos: u64, message: impl Into<String>) {
        if self.problems.len() < 1000 {
            self.problems.push(Problem {
                pos,
                message: message.into(),
            });
        }
    }

    fn add(&mut self, obj: Obj, pos: u64) -> Id {
        self.objs.push(obj);
        self.spans.push((pos, pos));
        (self.objs.len() - 1) as Id
    }

    fn push(&mut self, obj: Obj, pos: u64) {
        let id = self.add(obj, pos);
        self.stack.push(id);
    }

    fn touch(&mut self, id: Id, pos: u64) {
        if let Some(s) = self.spans.get_mut(id as usize) {
            s.1 = s.1.max(pos);
        }
    }

    fn pop(&mut self, op: &Op) -> Id {
        match self.stack.pop() {
            Some(id) => id,
            None => {
                self.problem(op.pos, format!("{}: stack underflow", op.name()));
                self.add(Obj::Unknown, op.pos)
            }
        }
    }

    fn top(&mut self, op: &Op) -> Id {
        match self.stack.last() {
            Some(&id) => id,
            None => {
                self.problem(op.pos, format!("{}: stack is empty", op.name()));
                let id = self.add(Obj::Unknown, op.pos);
                self.stack.push(id);
                id
            }
        }
    }

    fn pop_mark(&mut self, op: &Op) -> Vec<Id> {
        match self.meta.pop() {
            Some(prev) => std::mem::replace(&mut self.stack, prev),
            None => {
                self.problem(op.pos, format!("{}: no MARK to pop to", op.name()));
                std::mem::take(&mut self.stack)
            }
        }
    }

    /// Text of a payload or line argument.
    fn text(&self, arg: &Arg, data: &dyn Source) -> Text {
        match arg {
            Arg::Text(t) => Text {
                text: t.clone(),
                range: None,
                cut: false,
            },
            Arg::Payload(kind, r) => {
                let n = r.len().min(SHORT_TEXT) as usize;
                let mut b = vec![0u8; n];
                let k = data.read_at(r.start, &mut b).unwrap_or(0);
                b.truncate(k);
                let text: String = match kind {
                    Payload::Latin1 => b.iter().map(|&c| c as char).collect(),
                    _ => String::from_utf8_lossy(&b).into_owned(),
                };
                Text {
                    text: text.into(),
                    range: Some(*r),
                    cut: r.len() > SHORT_TEXT,
                }
            }
            _ => Text {
                text: "".into(),
                range: None,
                cut: false,
            },
        }
    }

    /// Runs one opcode. Returns false after STOP.
    pub fn step(&mut self, op: &Op, data: &dyn Source) -> bool {
        if self.objs.len() >= self.limit || self.copied > self.limit {
            self.exhausted.get_or_insert(op.pos);
            return op.info.name != "STOP";
        }
        if let Some(end) = self.frame_end {
            if op.pos < end && op.pos + op.len > end {
                self.problem(
                    op.pos,
                    format!("{} straddles the end of its frame", op.name()),
                );
            }
            if op.pos >= end {
                self.frame_end = None;
            }
        }
        let pos = op.pos;
        let int = |a: &Arg| match a {
            Arg::Int(v) => *v,
            Arg::Bool(b) => *b as i64,
            _ => 0,
        };
        match op.info.name {
            "PROTO" => {
                let p = int(&op.arg);
                if !(0..=5).contains(&p) {
                    self.problem(pos, format!("unsupported pickle protocol: {p}"));
                }
                self.proto = p.clamp(0, 255) as u8;
            }
            "FRAME" => {
                if self.frame_end.is_some_and(|e| pos < e) {
                    self.problem(pos, "beginning of a new frame before end of current frame");
                }
                self.frame_end = Some(pos + op.len + int(&op.arg).max(0) as u64);
            }
            "STOP" => {
                let v = self.pop(op);
                self.result = Some(v);
                if !self.stack.is_empty() || !self.meta.is_empty() {
                    self.problem(pos, "stack not empty after STOP");
                }
                return false;
            }
            "INT" | "BININT" | "BININT1" | "BININT2" | "LONG" | "LONG1" | "LONG4" => {
                let o = match &op.arg {
                    Arg::Bool(b) => Obj::Bool(*b),
                    Arg::Int(v) => Obj::Int(*v),
                    Arg::Big(s) => Obj::Big(s.clone()),
                    _ => Obj::Unknown,
                };
                self.push(o, pos);
            }
            "FLOAT" | "BINFLOAT" => {
                let v = if let Arg::Float(f) = op.arg { f } else { 0.0 };
                self.push(Obj::Float(v), pos);
            }
            "STRING" | "BINSTRING" | "SHORT_BINSTRING" | "UNICODE" | "SHORT_BINUNICODE"
            | "BINUNICODE" | "BINUNICODE8" => {
                let t = self.text(&op.arg, data);
                self.push(Obj::Str(t), pos);
            }
            "BINBYTES" | "SHORT_BINBYTES" | "BINBYTES8" | "BYTEARRAY8" => {
                let range = match &op.arg {
                    Arg::Payload(_, r) => *r,
                    _ => Range::default(),
                };
                let bytearray = op.info.name == "BYTEARRAY8";
                self.push(Obj::Bytes { range, bytearray }, pos);
            }
            "NONE" => self.push(Obj::None, pos),
            "NEWTRUE" => self.push(Obj::Bool(true), pos),
            "NEWFALSE" => self.push(Obj::Bool(false), pos),
            "NEXT_BUFFER" => {
                let index = self.next_buffer;
                self.next_buffer += 1;
                self.push(
                    Obj::Buffer {
                        index,
                        readonly: false,
                    },
                    pos,
                );
            }
            "READONLY_BUFFER" => {
                let id = self.top(op);
                if let Obj::Buffer { readonly, .. } = &mut self.objs[id as usize] {
                    *readonly = true;
                }
                self.touch(id, pos);
            }
            "EMPTY_LIST" => self.push(Obj::List(Vec::new()), pos),
            "EMPTY_TUPLE" => self.push(Obj::Tuple(Vec::new()), pos),
            "EMPTY_DICT" => self.push(Obj::Dict(Vec::new()), pos),
            "EMPTY_SET" => self.push(Obj::Set(Vec::new()), pos),
            "APPEND" => {
                let v = self.pop(op);
                let l = self.top(op);
                self.extend(l, vec![v], op);
            }
            "APPENDS" => {
                let items = self.pop_mark(op);
                let l = self.top(op);
                self.extend(l, items, op);
            }
            "LIST" => {
                let items = self.pop_mark(op);
                self.push(Obj::List(items), pos);
            }
            "TUPLE" => {
                let items = self.pop_mark(op);
                self.push(Obj::Tuple(items), pos);
            }
            "TUPLE1" | "TUPLE2" | "TUPLE3" => {
                let n = (op.info.code - 0x84) as usize;
                let mut items: Vec<Id> = (0..n).map(|_| self.pop(op)).collect();
                items.reverse();
                self.push(Obj::Tuple(items), pos);
            }
            "DICT" => {
                let items = self.pop_mark(op);
                if items.len() % 2 == 1 {
                    self.problem(pos, "DICT: odd number of items");
                }
                let pairs = items.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                self.push(Obj::Dict(pairs), pos);
            }
            "SETITEM" => {
                let v = self.pop(op);
                let k = self.pop(op);
                let d = self.top(op);
                self.set_items(d, vec![(k, v)], op);
            }
            "SETITEMS" => {
                let items = self.pop_mark(op);
                if items.len() % 2 == 1 {
                    self.problem(pos, "SETITEMS: odd number of items");
                }
                let pairs = items.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                let d = self.top(op);
                self.set_items(d, pairs, op);
            }
            "ADDITEMS" => {
                let items = self.pop_mark(op);
                let s = self.top(op);
                match &mut self.objs[s as usize] {
                    Obj::Set(v) => v.extend(items),
                    _ => self.problem(pos, "ADDITEMS: not a set"),
                }
                self.touch(s, pos);
            }
            "FROZENSET" => {
                let items = self.pop_mark(op);
                self.push(Obj::FrozenSet(items), pos);
            }
            "POP" => {
                if self.stack.pop().is_none() {
                    self.pop_mark(op);
                }
            }
            "DUP" => {
                let id = self.top(op);
                self.stack.push(id);
            }
            "MARK" => {
                let prev = std::mem::take(&mut self.stack);
                self.meta.push(prev);
            }
            "POP_MARK" => {
                self.pop_mark(op);
            }
            "GET" | "BINGET" | "LONG_BINGET" => {
                let k = int(&op.arg);
                match self.memo.get(&(k as u64)).copied().filter(|_| k >= 0) {
                    Some(id) => self.stack.push(id),
                    None => {
                        self.problem(pos, format!("{}: memo key {k} was never stored", op.name()));
                        self.push(Obj::Unknown, pos);
                    }
                }
            }
            "PUT" | "BINPUT" | "LONG_BINPUT" => {
                let k = int(&op.arg);
                if k < 0 {
                    self.problem(pos, "negative PUT argument");
                } else {
                    let id = self.top(op);
                    self.memo.insert(k as u64, id);
                }
            }
            "MEMOIZE" => {
                let id = self.top(op);
                let k = self.memo.len() as u64;
                self.memo.insert(k, id);
            }
            "EXT1" | "EXT2" | "EXT4" => {
                let code = int(&op.arg);
                if code <= 0 {
                    self.problem(pos, "EXT specifies code <= 0");
                }
                self.push(Obj::Ext(code), pos);
            }
            "GLOBAL" => {
                let t = if let Arg::Text(t) = &op.arg {
                    t.to_string()
                } else {
                    String::new()
                };
                let (m, n) = t.split_once(' ').unwrap_or((&t, ""));
                self.push(
                    Obj::Global {
                        module: m.into(),
                        name: n.into(),
                    },
                    pos,
                );
            }
            "STACK_GLOBAL" => {
                let n = self.pop(op);
                let m = self.pop(op);
                let (module, name) = match (&self.objs[m as usize], &self.objs[n as usize]) {
                    (Obj::Str(m), Obj::Str(n)) => (m.text.clone(), n.text.clone()),
                    _ => {
                        self.problem(pos, "STACK_GLOBAL requires str");
                        ("?".into(), "?".into())
                    }
                };
                self.push(Obj::Global { module, name }, pos);
            }
            "REDUCE" => {
                let args = self.pop(op);
                let func = self.pop(op);
                let args = self.tuple_items(args);
                self.push(call(CallKind::Reduce, func, args, None), pos);
            }
            "NEWOBJ" => {
                let args = self.pop(op);
                let cls = self.pop(op);
                let args = self.tuple_items(args);
                self.push(call(CallKind::NewObj, cls, args, None), pos);
            }
            "NEWOBJ_EX" => {
                let kwargs = self.pop(op);
                let args = self.pop(op);
                let cls = self.pop(op);
                let args = self.tuple_items(args);
                self.push(call(CallKind::NewObjEx, cls, args, Some(kwargs)), pos);
            }
            "INST" => {
                let args = self.pop_mark(op);
                let t = if let Arg::Text(t) = &op.arg {
                    t.to_string()
                } else {
                    String::new()
                };
                let (m, n) = t.split_once(' ').unwrap_or((&t, ""));
                let cls = self.add(
                    Obj::Global {
                        module: m.into(),
                        name: n.into(),
                    },
                    pos,
                );
                self.push(call(CallKind::Inst, cls, args, None), pos);
            }
            "OBJ" => {
                let mut items = self.pop_mark(op);
                if items.is_empty() {
                    self.problem(pos, "OBJ: no class after MARK");
                    items.push(self.add(Obj::Unknown, pos));
                }
                let cls = items.remove(0);
                self.push(call(CallKind::Inst, cls, items, None), pos);
            }
            "BUILD" => {
                let state = self.pop(op);
                let obj = self.top(op);
                match &mut self.objs[obj as usize] {
                    Obj::Call(c) => c.state = Some(state),
                    _ => {
                        let wrapped = self.add(call(CallKind::Build, obj, Vec::new(), None), pos);
                        if let Obj::Call(c) = &mut self.objs[wrapped as usize] {
                            c.state = Some(state);
                        }
                        if let Some(t) = self.stack.last_mut() {
                            *t = wrapped;
                        }
                    }
                }
                self.touch(obj, pos);
            }
            "PERSID" => {
                let t = self.text(&op.arg, data);
                let pid = self.add(Obj::Str(t), pos);
                self.push(Obj::Persistent(pid), pos);
            }
            "BINPERSID" => {
                let pid = self.pop(op);
                self.push(Obj::Persistent(pid), pos);
            }
            other => self.problem(pos, format!("{other}: not handled")),
        }
        true
    }

    fn tuple_items(&mut self, id: Id) -> Vec<Id> {
        match &self.objs[id as usize] {
            Obj::Tuple(v) => {
                self.copied = self.copied.saturating_add(v.len());
                v.clone()
            }
            _ => vec![id],
        }
    }

    fn extend(&mut self, target: Id, items: Vec<Id>, op: &Op) {
        match &mut self.objs[target as usize] {
            Obj::List(v) => v.extend(items),
            Obj::Call(c) => c.appended.extend(items),
            _ => self.problem(op.pos, format!("{}: target is not a list", op.name())),
        }
        self.touch(target, op.pos);
    }

    fn set_items(&mut self, target: Id, items: Vec<(Id, Id)>, op: &Op) {
        match &mut self.objs[target as usize] {
            Obj::Dict(v) => v.extend(items),
            Obj::Call(c) => c.items.extend(items),
            _ => self.problem(op.pos, format!("{}: target is not a dict", op.name())),
        }
        self.touch(target, op.pos);
    }

    /// The object `id` names.
    pub fn get(&self, id: Id) -> &Obj {
        &self.objs[id as usize]
    }

    /// The `(module, name)` of a Global.
    pub fn global(&self, id: Id) -> Option<(&str, &str)> {
        match self.get(id) {
            Obj::Global { module, name } => Some((module, name)),
            _ => None,
        }
    }

    /// A short Python-like rendering of an object.
    pub fn repr(&self, id: Id, max: usize) -> String {
        let mut out = String::new();
        self.repr_into(id, &mut out, max, 0);
        if out.len() > max {
            let mut cut = max;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
        }
        out
    }

    /// Objects [`Vm::repr`] has visited so far, over all its calls.
    pub fn repr_visits(&self) -> u64 {
        self.visits.get()
    }

    fn repr_into(&self, id: Id, out: &mut String, max: usize, depth: usize) {
        self.visits.set(self.visits.get() + 1);
        if out.len() > max {
            return;
        }
        if depth > 24 {
            out.push_str("...");
            return;
        }
        let list = |vm: &Vm, out: &mut String, items: &[Id], open: &str, close: &str| {
            out.push_str(open);
            for (i, &x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if out.len() > max {
                    out.push_str("...");
                    break;
                }
                vm.repr_into(x, out, max, depth + 1);
            }
            if open == "(" && items.len() == 1 {
                out.push(',');
            }
            out.push_str(close);
        };
        match self.get(id) {
            Obj::None => out.push_str("None"),
            Obj::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Obj::Int(v) => out.push_str(&v.to_string()),
            Obj::Big(s) => out.push_str(s),
            Obj::Float(f) => out.push_str(&py_float(*f)),
            Obj::Str(t) => {
                out.push_str(&py_str(&t.text));
                if t.cut {
                    out.push('…');
                }
            }
            Obj::Bytes { range, bytearray } => out.push_str(&format!(
                "{}<{} bytes at {:#x}>",
                if *bytearray { "bytearray" } else { "bytes" },
                range.len(),
                range.start
            )),
            Obj::Tuple(v) => list(self, out, v, "(", ")"),
            Obj::List(v) => list(self, out, v, "[", "]"),
            Obj::Set(v) => list(self, out, v, "{", "}"),
            Obj::FrozenSet(v) => list(self, out, v, "frozenset({", "})"),
            Obj::Dict(v) => {
                out.push('{');
                for (i, (k, val)) in v.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    if out.len() > max {
                        out.push_str("...");
                        break;
                    }
                    self.repr_into(*k, out, max, depth + 1);
                    out.push_str(": ");
                    self.repr_into(*val, out, max, depth + 1);
                }
                out.push('}');
            }
            Obj::Global { module, name } => {
                // Strings show as their repr, escaped; so do these.
                crate::name::escape_str_into(module, out);
                out.push('.');
                crate::name::escape_str_into(name, out);
            }
            Obj::Call(c) => {
                self.repr_into(c.func, out, max, depth + 1);
                // What SETITEMS / APPENDS put into the result shows as the
                // call's argument (`OrderedDict({'w': …, +43})`) when the
                // call had none, else as the method that added it.
                let filled = !c.items.is_empty() || !c.appended.is_empty();
                if filled && c.args.is_empty() {
                    out.push('(');
                } else {
                    list(self, out, &c.args, "(", ")");
                    if c.args.len() == 1 {
                        out.pop();
                        out.pop();
                        out.push(')');
                    }
                    if !c.items.is_empty() {
                        out.push_str(".update(");
                    } else if !c.appended.is_empty() {
                        out.push_str(".extend(");
                    }
                }
                if !c.items.is_empty() {
                    self.items_into(&c.items, out, max, depth);
                    out.push(')');
                } else if !c.appended.is_empty() {
                    self.appended_into(&c.appended, out, max, depth);
                    out.push(')');
                }
                if let Some(s) = c.state {
                    out.push_str(".__setstate__(");
                    self.repr_into(s, out, max, depth + 1);
                    out.push(')');
                }
            }
            Obj::Persistent(p) => {
                out.push_str("persistent_load(");
                self.repr_into(*p, out, max, depth + 1);
                out.push(')');
            }
            Obj::Ext(c) => out.push_str(&format!("<extension {c}>")),
            Obj::Buffer { index, readonly } => out.push_str(&format!(
                "<out-of-band buffer {index}{}>",
                if *readonly { ", read-only" } else { "" }
            )),
            Obj::Unknown => out.push_str("<?>"),
        }
    }
}

/// Longest rendering of one value inside a summary of items; a longer
/// one (a tensor's rebuild call) shows as `…`, so the keys stay in view.
const ITEM_VALUE: usize = 48;

impl Vm {
    /// `{k: v, …, +N}`: the items that fit in `max`, then how many more.
    fn items_into(&self, items: &[(Id, Id)], out: &mut String, max: usize, depth: usize) {
        out.push('{');
        for (i, (k, v)) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if out.len() > max / 2 && i > 0 {
                out.push_str(&format!("+{}", items.len() - i));
                break;
            }
            self.repr_into(*k, out, max, depth + 1);
            out.push_str(": ");
            out.push_str(&self.short(*v, depth));
        }
        out.push('}');
    }

    /// `[a, b, …, +N]` for what APPENDS added.
    fn appended_into(&self, items: &[Id], out: &mut String, max: usize, depth: usize) {
        out.push('[');
        for (i, v) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if out.len() > max / 2 && i > 0 {
                out.push_str(&format!("+{}", items.len() - i));
                break;
            }
            out.push_str(&self.short(*v, depth));
        }
        out.push(']');
    }

    /// `id` rendered in at most [`ITEM_VALUE`] bytes, else `…`.
    fn short(&self, id: Id, depth: usize) -> String {
        let mut s = String::new();
        self.repr_into(id, &mut s, ITEM_VALUE, depth + 1);
        if s.len() > ITEM_VALUE {
            "…".into()
        } else {
            s
        }
    }
}

fn call(kind: CallKind, func: Id, args: Vec<Id>, kwargs: Option<Id>) -> Obj {
    Obj::Call(Box::new(Call {
        kind,
        func,
        args,
        kwargs,
        state: None,
        items: Vec::new(),
        appended: Vec::new(),
    }))
}

/// Python's `repr(float)`: the shortest digits that read back, in fixed
/// notation for exponents -4..16 and scientific otherwise.
pub fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{f:e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let e = exp as usize;
            let (int, frac) = if digits.len() > e + 1 {
                (digits[..e + 1].to_string(), digits[e + 1..].to_string())
            } else {
                (format!("{digits:0<width$}", width = e + 1), "0".to_string())
            };
            format!("{sign}{int}.{frac}")
        } else {
            let zeros = "0".repeat((-exp - 1) as usize);
            format!("{sign}0.{zeros}{digits}")
        }
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        let es = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    }
}

/// Python's `repr(str)`, with terminal control characters escaped.
pub fn py_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    py_str_into(s, &mut out);
    out
}

/// [`py_str`] appended to `out`.
pub fn py_str_into(s: &str, out: &mut String) {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    // Most strings are plain ASCII: nothing to escape, nothing to look up.
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'\\' && b != q as u8)
    {
        out.push(q);
        out.push_str(s);
        out.push(q);
        return;
    }
    let mut repr = String::with_capacity(s.len() + 2);
    let out_final = out;
    let out = &mut repr;
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if !py_printable(c) => {
                let n = c as u32;
                if n < 0x100 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out_final.push_str(&escape_str(&repr));
}

/// Python's `str.isprintable` for one character: not a control, format,
/// surrogate, private-use, unassigned or separator character (but space).
fn py_printable(c: char) -> bool {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
    c == ' '
        || !matches!(
            c.general_category(),
            G::Control
                | G::Format
                | G::Surrogate
                | G::PrivateUse
                | G::Unassigned
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::SpaceSeparator
        )
}

/// Python's `repr(bytes)`.
pub fn py_bytes(b: &[u8]) -> String {
    let q = if b.contains(&b'\'') && !b.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(b.len() + 3);
    out.push('b');
    out.push(q);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c as char == q => {
                out.push('\\');
                out.push(q);
            }
            0x20..=0x7e => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push(q);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_reprs() {
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(-0.0), "-0.0");
        assert_eq!(py_float(1.5e-7), "1.5e-07");
        assert_eq!(py_float(1e20), "1e+20");
        assert_eq!(py_float(0.1), "0.1");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(123456789012345.0), "123456789012345.0");
        assert_eq!(py_float(0.0001), "0.0001");
        assert_eq!(py_float(0.00001), "1e-05");
        assert_eq!(py_float(-2.5e-300), "-2.5e-300");
        assert_eq!(py_float(2.75), "2.75");
        assert_eq!(py_str("it's"), "\"it's\"");
        assert_eq!(py_str("a\nb'\""), "'a\\nb\\'\"'");
        assert_eq!(py_str("é\u{1b}"), "'é\\x1b'");
        assert_eq!(py_bytes(b"a\x00'"), "b\"a\\x00'\"");
    }
}
