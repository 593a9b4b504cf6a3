//! `pparse ir`'s listings of Paddle programs, offered through
//! [`crate::offer::program::ProgramOffer::write`]: a printed program read
//! back and shown in printer form, as JSON or as op counts, with the
//! diagnostics found on the way; a program saved as JSON shown the same.
//!
//! The text is read a chunk at a time and each op is written as soon as it
//! is read, so a program of millions of ops takes little memory.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use super::ast::{AttrValue, BlockArg, Era, Op, Type, ValueName};
use super::json_program;
use super::parse::{BlockOf, Builder, Diagnostic, MAX_ERRORS, Place, Reader, Severity, Sink, Text};
use super::print_json::OpJson;
use super::source::read_source;
use crate::data::{Range, Source};
use crate::name::c1_escaped;
use crate::name::json::write_line;
use crate::offer::program::{ProgramsRead as Read, Show};

/// The offer's `write` (see [`crate::offer::program::ProgramOffer`]).
pub(crate) fn write(
    data: &dyn Source,
    show: Show,
    mut out: &mut dyn Write,
) -> (Read, io::Result<()>) {
    let out = &mut out;
    if is_saved(data) {
        let read = Read {
            programs: 1,
            saved: true,
            ..Read::default()
        };
        return (read, saved(data, show, out));
    }
    let mut reader = Reader::new();
    let (diagnostics, programs, r) = match show {
        Show::Text => {
            let mut sink = Printer::new(out);
            let ok = read_source(data, &mut reader, &mut sink);
            let r = sink.err.map_or(Ok(()), Err);
            (check_long(ok, sink.diagnostics), sink.programs, r)
        }
        Show::Json => printed_json(data, &mut reader, out),
        Show::Stats | Show::StatsJson => {
            let mut sink = Counts::default();
            let ok = read_source(data, &mut reader, &mut sink);
            let diagnostics = check_long(ok, sink.diagnostics);
            let r = if show == Show::StatsJson {
                stats_json(out, &sink.ops, &diagnostics, reader.suppressed())
            } else {
                stats_text(out, &sink.ops)
            };
            (diagnostics, sink.programs, r)
        }
    };
    let read = Read {
        diagnostics,
        suppressed: reader.suppressed(),
        programs,
        saved: false,
    };
    (read, r)
}

/// `ir --json` of the printed programs in `data`: how writing went, the
/// diagnostics and the number of programs.
fn printed_json(
    data: &dyn Source,
    reader: &mut Reader,
    out: &mut impl Write,
) -> (Vec<Diagnostic>, usize, io::Result<()>) {
    let mut sink = JsonOut::new(out);
    let ok = read_source(data, reader, &mut sink);
    let diagnostics = check_long(ok, std::mem::take(&mut sink.diagnostics));
    let programs = sink.programs;
    sink.end(&diagnostics, reader.suppressed());
    (diagnostics, programs, sink.err.map_or(Ok(()), Err))
}

/// Whether `data` is a program saved as JSON rather than printed.
fn is_saved(data: &dyn Source) -> bool {
    // A head that cannot be read is read again, and fails, as a printed one.
    crate::parsers::api::head(data).is_ok_and(|head| {
        head.first() == Some(&b'{') && memchr::memmem::find(&head, b"\"base_code\"").is_some()
    })
}

/// A program saved as JSON (`paddle.jit.save`): read whole, then shown
/// like a printed one.
fn saved(data: &dyn Source, show: Show, out: &mut impl Write) -> io::Result<()> {
    let bytes = json_program::whole(data).map_err(io::Error::other)?;
    let s = json_program::read(&bytes).map_err(io::Error::other)?;
    let p = &s.program;
    match show {
        Show::Text => {
            let mut types = HashMap::new();
            writeln!(out, "{{")?;
            for op in &p.block.ops {
                print_op(op, 1, &mut types, out)?;
            }
            writeln!(out, "}}")
        }
        Show::Json => {
            let v = serde_json::json!({
                "programs": [{
                    "start": p.span.start,
                    "end": p.span.end,
                    "era": "saved",
                    "ops": p.block.ops.iter().map(OpJson).collect::<Vec<_>>(),
                }],
                "diagnostics": [],
                "more_errors": 0,
            });
            write_line(out, &v)
        }
        Show::Stats | Show::StatsJson => {
            let mut ops = BTreeMap::new();
            for op in &p.block.ops {
                op.walk(&mut |o| *ops.entry(o.name.to_string()).or_insert(0u64) += 1);
            }
            if show == Show::Stats {
                stats_text(out, &ops)
            } else {
                stats_json(out, &ops, &[], 0)
            }
        }
    }
}

/// An op in printer form (Paddle 3.x), its operand types taken from where
/// their values were defined.
fn print_op(
    op: &Op,
    depth: usize,
    types: &mut HashMap<ValueName, String>,
    out: &mut impl Write,
) -> io::Result<()> {
    let ind = "    ".repeat(depth);
    let names = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(", ");
    let results = names(&mut op.results.iter().map(|r| r.name.to_string()));
    let operands = names(&mut op.operands.iter().map(|o| o.value.name.to_string()));
    let attrs: Vec<String> = op
        .attrs
        .iter()
        .map(|a| format!("{}:{}", a.key, attr_text(&a.attr.value)))
        .collect();
    let in_types = names(&mut op.operands.iter().map(|o| {
        types
            .get(&o.value.name)
            .cloned()
            .unwrap_or_else(|| "<<NULL TYPE>>".into())
    }));
    let out_types: Vec<String> = op.result_types.iter().map(Type::to_string).collect();
    for (r, t) in op.results.iter().zip(&out_types) {
        types.insert(r.name.clone(), t.clone());
    }
    write!(
        out,
        "{ind}({results}) = \"{}\" ({operands}) {{{}}} : ({in_types}) -> {}",
        crate::name::escape_str(&op.name),
        attrs.join(","),
        out_types.join(", ")
    )?;
    if op.regions.is_empty() {
        return writeln!(out);
    }
    writeln!(out, " {{")?;
    for (i, r) in op.regions.iter().enumerate() {
        for b in &r.blocks {
            if i > 0 {
                writeln!(out, "{ind}}} else {{")?;
            }
            for o in &b.ops {
                print_op(o, depth + 1, types, out)?;
            }
        }
    }
    writeln!(out, "{ind}}}")
}

fn attr_text(v: &AttrValue) -> String {
    match v {
        AttrValue::Bool(b) => b.to_string(),
        AttrValue::Int(i) => i.to_string(),
        AttrValue::Float(f) => f.to_string(),
        AttrValue::Str(s) => format!("\"{}\"", crate::name::escape_str(s).replace('"', "\\\"")),
        AttrValue::Array(items) => {
            let v: Vec<String> = items.iter().map(|a| attr_text(&a.value)).collect();
            format!("[{}]", v.join(","))
        }
        AttrValue::Place(p) => format!("Place({})", crate::name::escape_str(p)),
        AttrValue::KernelKey(kv) => {
            let v: Vec<String> = kv.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            format!("<{}>", v.join("|"))
        }
        AttrValue::Word(w) => crate::name::escape_str(w),
        AttrValue::Null => "<#AttrNull>".into(),
        AttrValue::Opaque => "<#AttrNotImplemented>".into(),
    }
}

fn check_long(ok: bool, mut d: Vec<Diagnostic>) -> Vec<Diagnostic> {
    if !ok {
        // A line too long to read whole: said once, at the end.
        d.push(Diagnostic {
            severity: Severity::Error,
            at: Place {
                span: Range::default(),
                line: 0,
                col: 0,
                source: String::new(),
                line_start: 0,
            },
            message: "a line longer than 64 MiB: reading stopped there".into(),
            notes: Vec::new(),
        });
    }
    d
}

/// Prints each op as it is read, indented by its depth.
struct Printer<'w, W: Write> {
    out: &'w mut W,
    err: Option<io::Error>,
    depth: usize,
    /// A block closed; its `}` waits to see whether an else follows.
    pending_close: bool,
    diagnostics: Vec<Diagnostic>,
    programs: usize,
}

impl<'w, W: Write> Printer<'w, W> {
    fn new(out: &'w mut W) -> Self {
        Printer {
            out,
            err: None,
            depth: 0,
            pending_close: false,
            diagnostics: Vec::new(),
            programs: 0,
        }
    }

    fn line(&mut self, depth: usize, text: &[u8]) {
        if self.err.is_some() {
            return;
        }
        let r = (|| {
            for _ in 0..depth {
                self.out.write_all(b"    ")?;
            }
            // The program's own bytes, unless they hold what a terminal
            // would act on (OSC 52 writes the clipboard, OSC 0 the title).
            if text.iter().all(|b| (0x20..0x7f).contains(b)) {
                self.out.write_all(text)?;
            } else {
                self.out
                    .write_all(crate::name::escape_bytes(text).as_bytes())?;
            }
            self.out.write_all(b"\n")
        })();
        if let Err(e) = r {
            self.err = Some(e);
        }
    }

    fn flush_close(&mut self) {
        if self.pending_close {
            self.pending_close = false;
            self.line(self.depth, b"}");
        }
    }
}

impl<W: Write> Sink for Printer<'_, W> {
    fn program(&mut self, _start: u64) {
        self.depth = 0;
        self.programs += 1;
    }
    fn op(&mut self, op: &mut Op, depth: usize, _opens: bool, text: Text) {
        self.flush_close();
        self.line(depth, text.get(op.span));
    }
    fn block(&mut self, _start: u64, of: BlockOf) {
        match of {
            BlockOf::Program => {
                self.line(0, b"{");
                self.depth = 1;
            }
            BlockOf::Else => {
                self.pending_close = false;
                self.line(self.depth, b"} else {");
                self.depth += 1;
            }
            BlockOf::LastOp | BlockOf::Orphan => {
                self.flush_close();
                self.line(self.depth, b"{");
                self.depth += 1;
            }
            BlockOf::NewOp => self.depth += 1,
        }
    }
    fn block_args(&mut self, args: Vec<BlockArg>, kw: bool, text: Text) {
        let parts: Vec<String> = args
            .iter()
            .map(|a| {
                let mut s = a.value.name.to_string();
                if let (Some(first), Some(last)) = (a.attrs.first(), a.attrs.last()) {
                    let r = Range::new(first.key_span.start, last.attr.span.end);
                    s.push_str(&format!(" {{{}}}", String::from_utf8_lossy(text.get(r))));
                }
                s
            })
            .collect();
        let head = if kw { "^kw: " } else { "^" };
        let line = format!("{head}{}", parts.join(", "));
        self.line(self.depth.saturating_sub(1), line.as_bytes());
    }
    fn block_end(&mut self, _end: u64, _inferred: Option<Vec<Type>>) {
        self.flush_close();
        self.depth = self.depth.saturating_sub(1);
        self.pending_close = true;
    }
    fn program_end(&mut self, _span: Range, _era: Era) {
        self.flush_close();
        self.depth = 0;
    }
    fn diagnostic(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }
}

/// Counts ops per name, at every depth.
#[derive(Default)]
struct Counts {
    ops: BTreeMap<String, u64>,
    diagnostics: Vec<Diagnostic>,
    programs: usize,
}

impl Sink for Counts {
    fn program(&mut self, _start: u64) {
        self.programs += 1;
    }
    fn op(&mut self, op: &mut Op, _depth: usize, _opens: bool, _text: Text) {
        match self.ops.get_mut(op.name.as_str()) {
            Some(n) => *n += 1,
            None => {
                self.ops.insert(op.name.to_string(), 1);
            }
        }
    }
    fn block(&mut self, _start: u64, _of: BlockOf) {}
    fn block_args(&mut self, _args: Vec<BlockArg>, _kw: bool, _text: Text) {}
    fn block_end(&mut self, _end: u64, _inferred: Option<Vec<Type>>) {}
    fn program_end(&mut self, _span: Range, _era: Era) {}
    fn diagnostic(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }
}

fn stats_text(out: &mut impl Write, ops: &BTreeMap<String, u64>) -> io::Result<()> {
    let total: u64 = ops.values().sum();
    let mut rows: Vec<(&String, &u64)> = ops.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (name, n) in rows {
        writeln!(out, "{n:>10}  {}", crate::name::escape_str(name))?;
    }
    writeln!(out, "{total:>10}  ops in all")
}

fn diagnostics_json(d: &[Diagnostic]) -> serde_json::Value {
    serde_json::Value::Array(
        d.iter()
            .map(|d| {
                let mut o = serde_json::json!({
                    "severity": d.severity.as_str(),
                    "line": d.at.line,
                    "col": d.at.col,
                    "message": d.message,
                    "start": d.at.span.start,
                    "end": d.at.span.end,
                });
                if !d.notes.is_empty() {
                    o["notes"] = d
                        .notes
                        .iter()
                        .map(|(at, m)| serde_json::json!({"line": at.line, "col": at.col, "message": m}))
                        .collect();
                }
                o
            })
            .collect(),
    )
}

fn stats_json(
    out: &mut impl Write,
    ops: &BTreeMap<String, u64>,
    d: &[Diagnostic],
    suppressed: usize,
) -> io::Result<()> {
    let v = serde_json::json!({
        "ops": ops,
        "diagnostics": diagnostics_json(d),
        "more_errors": suppressed,
    });
    write_line(out, &v)
}

/// Writes `{"programs": [...], "diagnostics": [...]}`, each top-level op
/// as soon as it (and its regions) is read.
struct JsonOut<'w, W: Write> {
    out: &'w mut W,
    b: Builder,
    err: Option<io::Error>,
    programs: usize,
    first_op: bool,
    diagnostics: Vec<Diagnostic>,
}

impl<'w, W: Write> JsonOut<'w, W> {
    fn new(out: &'w mut W) -> Self {
        let mut s = JsonOut {
            out,
            b: Builder::streaming(),
            err: None,
            programs: 0,
            first_op: true,
            diagnostics: Vec::new(),
        };
        s.write(b"{\"programs\":[");
        s
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.err.is_none()
            && let Err(e) = self.out.write_all(&c1_escaped(bytes))
        {
            self.err = Some(e);
        }
    }

    fn drain(&mut self) {
        for op in std::mem::take(&mut self.b.ready) {
            if !self.first_op {
                self.write(b",");
            }
            self.first_op = false;
            let mut text = Vec::with_capacity(1024);
            if let Err(e) = serde_json::to_writer(&mut text, &OpJson(&op)) {
                self.err.get_or_insert(io::Error::other(e));
            }
            self.write(&text);
        }
    }

    fn end(&mut self, d: &[Diagnostic], suppressed: usize) {
        let tail = format!(
            "],\"diagnostics\":{},\"more_errors\":{suppressed}}}\n",
            diagnostics_json(d)
        );
        self.write(tail.as_bytes());
    }
}

impl<W: Write> Sink for JsonOut<'_, W> {
    fn program(&mut self, start: u64) {
        if self.programs > 0 {
            self.write(b",");
        }
        self.programs += 1;
        self.first_op = true;
        self.write(format!("{{\"start\":{start},\"ops\":[").as_bytes());
        self.b.program(start);
    }
    fn op(&mut self, op: &mut Op, depth: usize, opens: bool, text: Text) {
        self.b.op(op, depth, opens, text);
        self.drain();
    }
    fn block(&mut self, start: u64, of: BlockOf) {
        self.b.block(start, of);
    }
    fn block_args(&mut self, args: Vec<BlockArg>, kw: bool, text: Text) {
        self.b.block_args(args, kw, text);
    }
    fn block_end(&mut self, end: u64, inferred: Option<Vec<Type>>) {
        self.b.block_end(end, inferred);
        self.drain();
    }
    fn program_end(&mut self, span: Range, era: Era) {
        self.b.program_end(span, era);
        self.drain();
        self.b.programs.clear();
        self.write(format!("],\"end\":{},\"era\":\"{}\"}}", span.end, era.as_str()).as_bytes());
    }
    fn diagnostic(&mut self, d: Diagnostic) {
        if self.diagnostics.len() < MAX_ERRORS {
            self.diagnostics.push(d);
        }
    }
}
