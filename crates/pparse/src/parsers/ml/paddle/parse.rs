//! Reading printed PIR programs: a recursive-descent parser over each op
//! line, a stack of open blocks for the regions, and name resolution.
//!
//! The printer puts one op per line (regions follow their op, indented, and
//! close with `}` or `} else {`), so the line is the unit of reading and of
//! recovery: after an error the reader reports it, skips to the next line
//! and keeps every op before and after. Bytes are fed in chunks
//! ([`Reader::feed`]) and results go to a [`Sink`] as they are read, so a
//! program of millions of ops is never held whole unless the sink keeps it
//! (see [`Builder`]).
//!
//! Free text before a program (log lines such as `IR before lowering = {`)
//! is skipped: a program starts at a line ending in `{` whose next line is
//! an op, a block argument line or a closing brace. A log yields each
//! program it holds.

use std::collections::HashMap;

use super::ast::{
    Attr, AttrValue, Block, BlockArg, Era, NamedAttr, Op, Operand, Program, Region, Type, TypeKind,
    ValueName, ValueRef, intern,
};
use super::dialects;
use super::lex::{Kind, Lexer, NeedMore, Tok, unquote, unquote_into};
use crate::data::Range;

/// Most errors reported per file; past it they are counted.
pub const MAX_ERRORS: usize = 100;
/// Deepest nesting of attributes, types and blocks.
const MAX_DEPTH: usize = 64;
/// Most bytes of a source line kept with a diagnostic.
const SOURCE_CAP: usize = 400;

pub use crate::offer::program::{Diagnostic, Place, Severity};

/// The bytes being read, for sinks that show the text of what they get.
#[derive(Clone, Copy)]
pub struct Text<'a> {
    buf: &'a [u8],
    base: u64,
}

impl<'a> Text<'a> {
    /// The bytes of `r` (absolute offsets), as far as they are here.
    pub fn get(&self, r: Range) -> &'a [u8] {
        let s = (r.start.saturating_sub(self.base) as usize).min(self.buf.len());
        let e = (r.end.saturating_sub(self.base) as usize).clamp(s, self.buf.len());
        &self.buf[s..e]
    }
}

/// What the reader finds, in text order.
pub trait Sink {
    /// A program starts at `start` (its opening brace).
    fn program(&mut self, start: u64);
    /// An op, `depth` blocks deep (1 at a program's top level); `opens`
    /// says a block of it follows.
    /// The reader reuses `op`'s vectors for its next op: a sink that keeps
    /// the op takes it (`std::mem::take`).
    fn op(&mut self, op: &mut Op, depth: usize, opens: bool, text: Text);
    /// A block opens at `start`; `of` says whose it is.
    fn block(&mut self, start: u64, of: BlockOf);
    /// The arguments of the open block (`^%arg_0, …`; `kw` for `^kw:`).
    fn block_args(&mut self, args: Vec<BlockArg>, kw: bool, text: Text);
    /// The open block closes; `end` is past its brace. `inferred` are the
    /// result types of its op read from the block (a while's `cf.yield`).
    fn block_end(&mut self, end: u64, inferred: Option<Vec<Type>>);
    /// The program ends; `era` is how its printer spelled things.
    fn program_end(&mut self, span: Range, era: Era);
    /// A diagnostic.
    fn diagnostic(&mut self, d: Diagnostic);
}

/// Whose block opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockOf {
    /// The program's own block.
    Program,
    /// The op just read (its line ended with `{`).
    NewOp,
    /// The else block of the if op read last at this level (`} else {`).
    Else,
    /// Another block of the last op read at this level (a `{` line after
    /// an op with regions).
    LastOp,
    /// No op: the line that opened it could not be read. Its ops belong to
    /// the block around it.
    Orphan,
}

/// What owns an open block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Program,
    If,
    Else,
    While,
    Generic,
    /// The op line that opened it could not be read.
    Broken,
}

#[derive(Debug)]
struct Frame {
    owner: Owner,
    /// Indentation of the line that opened it: its closing brace is
    /// printed at the same.
    indent: usize,
    start: u64,
    opened: Place,
    has_ops: bool,
    /// Types of the last `cf.yield` in it (for a while's results).
    yielded: Option<Vec<Type>>,
    /// The last op in it could take a `{` block on the next line.
    last_op: Option<usize>,
}

/// Where a value is defined, in 24 bytes: a program may define millions.
#[derive(Debug, Clone, Copy)]
struct Def {
    start: u64,
    len: u32,
    line: u32,
    /// 1-based, in bytes (printed programs are ASCII).
    col: u32,
}

impl Def {
    const NONE: Def = Def {
        start: u64::MAX,
        len: 0,
        line: 0,
        col: 0,
    };

    /// The place, without its line's text (the reader may have moved past
    /// it; a front end reads it again from `line_start`).
    fn place(self) -> Place {
        Place {
            span: Range::new(self.start, self.start + self.len as u64),
            line: self.line as u64,
            col: self.col as u64,
            source: String::new(),
            line_start: self.start.saturating_sub(self.col.saturating_sub(1) as u64),
        }
    }
}

/// Names of one program: definitions, and uses waiting for theirs.
#[derive(Default)]
struct Names {
    /// `%N` by `N`: the printer numbers results densely from 0.
    results: Vec<Def>,
    /// Other names, and numbers too far apart to index.
    other: HashMap<ValueName, Def>,
    pending: Vec<(ValueName, Place)>,
    count: usize,
}

impl Names {
    fn get(&self, n: &ValueName) -> Option<Def> {
        if let ValueName::Result(k) = n
            && let Some(d) = usize::try_from(*k).ok().and_then(|k| self.results.get(k))
            && d.start != u64::MAX
        {
            return Some(*d);
        }
        self.other.get(n).copied()
    }

    fn insert(&mut self, n: &ValueName, d: Def) {
        self.count += 1;
        // Indexed only while the numbers stay near the count of values, so
        // a hostile `%99999999999` costs one map entry, not a huge vector.
        let limit = (1usize << 16).max(self.count.saturating_mul(4));
        if let ValueName::Result(k) = n
            && let Ok(k) = usize::try_from(*k)
            && k < limit
        {
            if self.results.len() <= k {
                self.results.resize(k + 1, Def::NONE);
            }
            self.results[k] = d;
            return;
        }
        self.other.insert(n.clone(), d);
    }
}

/// The reader's state between chunks.
pub struct Reader {
    stack: Vec<Frame>,
    names: Names,
    era: Era,
    /// 1-based number of the next line.
    line: u64,
    errors: usize,
    suppressed: usize,
    program_start: u64,
    ops: u64,
    /// Reading part of a program (an op's bytes, to load its parts): the
    /// reader starts inside a block, and names defined elsewhere are fine.
    partial: bool,
    /// `partial`, and the block is not open yet.
    enter: bool,
    /// Types read lately, by their text.
    types: TypeCache,
    /// The op being read; its vectors are reused from op to op.
    scratch: Op,
    /// Where the last place was, so the next one on its line goes on from
    /// there.
    place_memo: std::cell::Cell<Option<PlaceMemo>>,
    /// Outside a program: the last line ending in `{` whose next line is
    /// not a program's. It may be text around programs, or a program whose
    /// first line is damaged: op lines deeper than it say which.
    opener: Option<Opener>,
}

/// The last [`Reader::place`]: its line's start in `buf` at `base`, the
/// place, the newlines between them, and the start and column of its line.
#[derive(Clone, Copy)]
struct PlaceMemo {
    base: u64,
    line_start: usize,
    at: usize,
    extra: u64,
    from: usize,
    col: u64,
}

/// Characters in `b`, counted so that counts of adjacent parts add up:
/// bytes that do not continue a UTF-8 sequence.
fn chars(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c & 0xC0 != 0x80).count() as u64
}

/// A line ending in `{` that did not open a program: its next line was
/// not an op, block arguments or `}`.
struct Opener {
    /// Its brace.
    brace: Place,
    /// Its indentation.
    indent: usize,
    /// Its line number.
    line: u64,
    /// The brace is alone on its line.
    bare: bool,
    /// The first non-blank line after it, which is not a program's.
    bad: Option<Place>,
    /// Non-blank lines after `bad`, up to now.
    more: u64,
}

/// Types by their text (`tensor<-1x16xf32>`): a program prints a handful
/// of types on every op line, and looking one up costs less than reading
/// it through its dialect. Direct-mapped, so it stays this small.
struct TypeCache {
    slots: Vec<Option<(Box<[u8]>, TypeKind)>>,
}

impl TypeCache {
    const SLOTS: usize = 64;

    fn new() -> TypeCache {
        TypeCache {
            slots: vec![None; Self::SLOTS],
        }
    }

    fn slot(text: &[u8]) -> usize {
        // The length and the bytes where types differ most: the dims and
        // the element type just before `>`.
        let n = text.len();
        let at = |i: usize| usize::from(text.get(i).copied().unwrap_or(0));
        let h = n
            .wrapping_mul(31)
            .wrapping_add(at(n.wrapping_sub(2)))
            .wrapping_mul(31)
            .wrapping_add(at(n.wrapping_sub(3)))
            .wrapping_mul(31)
            .wrapping_add(at(n.wrapping_sub(5)))
            .wrapping_mul(31)
            .wrapping_add(at(n / 2));
        (h ^ (h >> 7)) % Self::SLOTS
    }

    fn get(&self, text: &[u8]) -> Option<&TypeKind> {
        match &self.slots[Self::slot(text)] {
            Some((k, v)) if **k == *text => Some(v),
            _ => None,
        }
    }

    /// Keeps `kind` for `text`, unless the text is longer than types are
    /// (a damaged line), so the cache stays a few KiB.
    fn put(&mut self, text: &[u8], kind: &TypeKind) {
        if text.len() <= 256 {
            self.slots[Self::slot(text)] = Some((text.into(), kind.clone()));
        }
    }
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

/// The parse of one line failed here.
struct Fail {
    at: usize,
    end: usize,
    message: String,
}

impl Reader {
    /// A reader at the start of the text.
    pub fn new() -> Reader {
        Reader {
            stack: Vec::new(),
            names: Names::default(),
            era: Era::Unknown,
            line: 1,
            errors: 0,
            suppressed: 0,
            program_start: 0,
            ops: 0,
            partial: false,
            enter: false,
            types: TypeCache::new(),
            scratch: Op::default(),
            place_memo: std::cell::Cell::new(None),
            opener: None,
        }
    }

    /// A reader for part of a program, starting inside a block: it reads
    /// ops, and does not check names it cannot see.
    pub fn inside() -> Reader {
        Reader {
            partial: true,
            enter: true,
            ..Reader::new()
        }
    }

    /// Ops read so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Errors past [`MAX_ERRORS`], counted but not reported.
    pub fn suppressed(&self) -> usize {
        self.suppressed
    }

    /// Reads the complete lines of `buf`, whose first byte is at offset
    /// `base` of the text; `eof` says the text ends with `buf`. Returns how
    /// many bytes were used: feed the rest again with more bytes after it.
    pub fn feed(&mut self, buf: &[u8], base: u64, eof: bool, sink: &mut dyn Sink) -> usize {
        if self.enter {
            self.enter = false;
            self.program_start = base;
            sink.program(base);
            let at = self.place(buf, base, 0, 0, 0);
            self.stack.push(Frame {
                owner: Owner::Program,
                indent: 0,
                start: base,
                opened: at,
                has_ops: false,
                yielded: None,
                last_op: None,
            });
            sink.block(base, BlockOf::Program);
        }
        let text = super::lex::utf8_prefix(buf);
        let mut pos = 0;
        while pos < buf.len() {
            let line_end = match memchr::memchr(b'\n', &buf[pos..]) {
                Some(i) => pos + i,
                None if eof => buf.len(),
                None => break,
            };
            let next = match self.line(buf, text, pos, line_end, base, eof, sink) {
                Ok(n) => n.max(pos + 1),
                Err(NeedMore) => break,
            };
            // Past one line, unless a string ran over several.
            self.line += if next == line_end + 1 {
                1
            } else {
                memchr::memchr_iter(b'\n', &buf[pos..next.min(buf.len())]).count() as u64
            };
            pos = next.min(buf.len());
        }
        if eof && pos >= buf.len() {
            self.finish(buf, base, sink);
        }
        pos
    }

    /// At the end of the text: closes what is open, reporting it.
    fn finish(&mut self, buf: &[u8], base: u64, sink: &mut dyn Sink) {
        let end = base + buf.len() as u64;
        if let Some(f) = self.stack.last()
            && !(self.partial && self.stack.len() == 1)
        {
            let at = f.opened.clone();
            self.error(
                sink,
                at,
                "this block is never closed: the text ends first".into(),
            );
        }
        while !self.stack.is_empty() {
            self.close(end, sink);
        }
    }

    /// Where `[at, end)` of `buf` is, with its line's text. Successive
    /// places on one line (the operands of an op of 240k operands) continue
    /// from the last one instead of reading the line again from its start.
    fn place(&self, buf: &[u8], base: u64, line_start: usize, at: usize, end: usize) -> Place {
        let at = at.min(buf.len());
        let line_start = line_start.min(at);
        let memo = self
            .place_memo
            .get()
            .filter(|m| m.base == base && m.line_start == line_start && m.at <= at);
        let (extra, from, col) = match memo {
            Some(m) => {
                let step = &buf[m.at..at];
                match memchr::memrchr(b'\n', step) {
                    Some(i) => {
                        let from = m.at + i + 1;
                        let n = memchr::memchr_iter(b'\n', step).count() as u64;
                        (m.extra + n, from, chars(&buf[from..at]) + 1)
                    }
                    None => (m.extra, m.from, m.col + chars(step)),
                }
            }
            None => {
                let before = &buf[line_start..at];
                let extra = memchr::memchr_iter(b'\n', before).count() as u64;
                let from =
                    memchr::memrchr(b'\n', before).map_or(line_start, |i| line_start + i + 1);
                (extra, from, chars(&buf[from..at]) + 1)
            }
        };
        let shown_end = buf.len().min(from.saturating_add(SOURCE_CAP));
        let line_end = memchr::memchr(b'\n', &buf[from..shown_end]).map_or(shown_end, |i| from + i);
        self.place_memo.set(Some(PlaceMemo {
            base,
            line_start,
            at,
            extra,
            from,
            col,
        }));
        Place {
            span: Range::new(base + at as u64, base + end.max(at) as u64),
            line: self.line + extra,
            col,
            source: String::from_utf8_lossy(&buf[from..line_end]).into_owned(),
            line_start: base + from as u64,
        }
    }

    /// Counts an error that will not be reported, if [`MAX_ERRORS`] are;
    /// callers ask before they spend work placing it.
    fn suppress_error(&mut self) -> bool {
        if self.errors < MAX_ERRORS {
            return false;
        }
        self.errors += 1;
        self.suppressed += 1;
        true
    }

    fn error(&mut self, sink: &mut dyn Sink, at: Place, message: String) {
        self.diag(sink, Severity::Error, at, message, Vec::new());
    }

    fn diag(
        &mut self,
        sink: &mut dyn Sink,
        severity: Severity,
        at: Place,
        message: String,
        notes: Vec<(Place, String)>,
    ) {
        if severity == Severity::Error {
            self.errors += 1;
            if self.errors > MAX_ERRORS {
                self.suppressed += 1;
                return;
            }
        }
        sink.diagnostic(Diagnostic {
            severity,
            at,
            message,
            notes,
        });
    }

    /// Reads the line `[pos, line_end)`; returns where the next one starts.
    /// `text` is the UTF-8 prefix of `buf`.
    #[allow(clippy::too_many_arguments)]
    fn line(
        &mut self,
        buf: &[u8],
        text: &str,
        pos: usize,
        line_end: usize,
        base: u64,
        eof: bool,
        sink: &mut dyn Sink,
    ) -> Result<usize, NeedMore> {
        let line = &buf[pos..line_end];
        let lead = line
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let body = trim_end(&line[lead..]);
        let after = (line_end + 1).min(buf.len().max(line_end));
        if self.stack.is_empty()
            && !body.is_empty()
            && self.after_opener(buf, base, pos, lead, body, sink)
        {
            return Ok(after);
        }
        if self.stack.is_empty() {
            // Outside a program: a line ending in `{` starts one if the
            // next line looks like a program's.
            if body.last() == Some(&b'{') {
                let next_start = line_end + 1;
                if next_start > buf.len() || (next_start == buf.len() && !eof) {
                    if !eof {
                        return Err(NeedMore);
                    }
                } else {
                    let rest = &buf[next_start.min(buf.len())..];
                    let nl = memchr::memchr(b'\n', rest);
                    if nl.is_none() && !eof {
                        return Err(NeedMore);
                    }
                    let next = &rest[..nl.unwrap_or(rest.len())];
                    let first = next.iter().find(|&&b| b != b' ' && b != b'\t');
                    let brace = pos + lead + body.len() - 1;
                    if matches!(first, Some(b'(' | b'}' | b'^')) {
                        self.open_program(buf, base, pos, brace, sink);
                    } else {
                        self.opener = Some(Opener {
                            brace: self.place(buf, base, pos, brace, brace + 1),
                            indent: lead,
                            line: self.line,
                            bare: body == b"{",
                            bad: None,
                            more: 0,
                        });
                    }
                }
            }
            return Ok(after);
        }
        let start = pos + lead;
        match body.first() {
            None => Ok(after),
            Some(b'}') => {
                let end = base + (start + 1) as u64;
                // The printer closes a block at the indentation of the line
                // that opened it. A brace further in closes a block whose
                // opening line was lost; one further out closes blocks
                // left open too.
                let expected = self.stack.last().map_or(0, |f| f.indent);
                if lead > expected {
                    let at = self.place(buf, base, pos, start, start + body.len());
                    self.error(
                        sink,
                        at,
                        "this closes no open block (the line that opened it may be damaged)".into(),
                    );
                    return Ok(after);
                }
                while lead < self.stack.last().map_or(0, |f| f.indent) && self.stack.len() > 1 {
                    let at = self.stack.last().map(|f| f.opened.clone());
                    if let Some(at) = at {
                        self.error(sink, at, "this block is never closed".into());
                    }
                    self.close(end, sink);
                }
                if body.starts_with(b"} else {") {
                    let owner = self.stack.last().map(|f| f.owner);
                    let brace =
                        self.place(buf, base, pos, start + body.len() - 1, start + body.len());
                    match owner {
                        Some(Owner::If) => {
                            self.close(end, sink);
                            self.open(Owner::Else, BlockOf::Else, lead, brace, sink);
                        }
                        // Its if line could not be read (said there): the
                        // else block's ops go to the block around it.
                        Some(Owner::Broken) => {
                            self.close(end, sink);
                            self.open(Owner::Broken, BlockOf::Orphan, lead, brace, sink);
                        }
                        _ => {
                            let at = self.place(buf, base, pos, start, start + body.len());
                            self.error(sink, at, "`} else {` here closes no if's block".into());
                        }
                    }
                } else {
                    self.close(end, sink);
                    if body.len() > 1 {
                        let at = self.place(buf, base, pos, start + 1, start + body.len());
                        self.error(sink, at, "unexpected text after `}`".into());
                    }
                }
                Ok(after)
            }
            Some(b'^') => {
                let mut lx = Lexer::new(buf, start + 1, eof).with_text(text);
                let kw = body.starts_with(b"^kw:");
                if kw {
                    lx.seek(start + 4);
                }
                let has_ops = self.stack.last().is_some_and(|f| f.has_ops);
                match self.block_args(&mut lx, base, pos, sink)? {
                    Ok(args) => {
                        if has_ops {
                            let at = self.place(buf, base, pos, start, start + 1);
                            self.error(
                                sink,
                                at,
                                "block arguments after the block's first op".into(),
                            );
                        }
                        sink.block_args(args, kw, Text { buf, base });
                    }
                    Err(f) => self.fail(buf, base, pos, f, sink),
                }
                Ok(after)
            }
            Some(b'{') if body.len() == 1 => {
                let at = self.place(buf, base, pos, start, start + 1);
                if self.stack.last().and_then(|f| f.last_op).is_some() {
                    self.open(Owner::Generic, BlockOf::LastOp, lead, at, sink);
                } else {
                    self.error(sink, at.clone(), "a block with no op before it".into());
                    self.open(Owner::Broken, BlockOf::Orphan, lead, at, sink);
                }
                Ok(after)
            }
            Some(b'(') => {
                let l = OpLine {
                    buf,
                    text,
                    pos,
                    start,
                    line_end,
                    base,
                    eof,
                };
                self.op_line(l, sink)
            }
            Some(_) => {
                let at = self.place(buf, base, pos, start, start + body.len());
                self.error(sink, at, "expected an op, `}` or block arguments".into());
                Ok(after)
            }
        }
    }

    /// Outside a program, the non-blank line `body` (indented by `lead`)
    /// after a line ending in `{` that opened none. Lines deeper than that
    /// line (the first after it at any depth), followed by an op line: the
    /// program did start there, and those lines are damage inside it. The
    /// program is opened at that brace (this line is then read in it) and
    /// the lines are reported. A line no deeper than the brace's ends the
    /// question: it was text around programs. Returns whether the line is
    /// taken as one of those damaged lines (and is read no further).
    fn after_opener(
        &mut self,
        buf: &[u8],
        base: u64,
        pos: usize,
        lead: usize,
        body: &[u8],
        sink: &mut dyn Sink,
    ) -> bool {
        let Some(o) = &mut self.opener else {
            return false;
        };
        // The first line after the brace may be damaged at any depth, but
        // one that ends in `{` too is a program's opening line of its own
        // (`note {` before `IR before lowering = {`), unless the brace was
        // alone on its line, as `print(program)` writes it. A `{` alone is
        // always asked the question afresh.
        let first = self.line == o.line + 1 && (o.bare || body.last() != Some(&b'{'));
        if !(first || lead > o.indent) || body == b"{" {
            self.opener = None;
            return false;
        }
        let op_like = body.first() == Some(&b'^')
            || (body.first() == Some(&b'(') && memchr::memmem::find(body, b") = \"").is_some());
        if !op_like {
            if o.bad.is_none() {
                let start = pos + lead;
                let at = self.place(buf, base, pos, start, start + body.len());
                if let Some(o) = &mut self.opener {
                    o.bad = Some(at);
                }
            } else {
                o.more += 1;
            }
            return true;
        }
        let Some(o) = self.opener.take() else {
            return false;
        };
        self.names = Names::default();
        self.era = Era::Unknown;
        self.program_start = o.brace.span.start;
        sink.program(self.program_start);
        self.stack.push(Frame {
            owner: Owner::Program,
            indent: o.indent,
            start: o.brace.span.start,
            opened: o.brace.clone(),
            has_ops: false,
            yielded: None,
            last_op: None,
        });
        sink.block(o.brace.span.start, BlockOf::Program);
        if let Some(bad) = o.bad {
            let mut message = String::from("expected an op, `}` or block arguments");
            match o.more {
                0 => {}
                1 => message.push_str(" (so is the line after it)"),
                n => message.push_str(&format!(" (so are the {n} lines after it)")),
            }
            let note = (o.brace, "the program this line is in opens here".into());
            self.diag(sink, Severity::Error, bad, message, vec![note]);
        }
        false
    }

    fn open_program(
        &mut self,
        buf: &[u8],
        base: u64,
        pos: usize,
        brace: usize,
        sink: &mut dyn Sink,
    ) {
        self.opener = None;
        self.names = Names::default();
        self.era = Era::Unknown;
        self.program_start = base + brace as u64;
        sink.program(self.program_start);
        let at = self.place(buf, base, pos, brace, brace + 1);
        let indent = buf[pos..brace]
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        self.stack.push(Frame {
            owner: Owner::Program,
            indent,
            start: base + brace as u64,
            opened: at,
            has_ops: false,
            yielded: None,
            last_op: None,
        });
        sink.block(base + brace as u64, BlockOf::Program);
    }

    fn open(&mut self, owner: Owner, of: BlockOf, indent: usize, at: Place, sink: &mut dyn Sink) {
        if self.stack.len() >= MAX_DEPTH {
            // Deeper blocks are read as part of this one.
            self.error(sink, at, format!("blocks nested deeper than {MAX_DEPTH}"));
            return;
        }
        let start = at.span.start;
        self.stack.push(Frame {
            owner,
            indent,
            start,
            opened: at,
            has_ops: false,
            yielded: None,
            last_op: None,
        });
        sink.block(start, of);
    }

    /// Closes the innermost block at `end`.
    fn close(&mut self, end: u64, sink: &mut dyn Sink) {
        let Some(f) = self.stack.pop() else { return };
        let inferred = match f.owner {
            // The loop's results are its body's yielded values after the
            // condition.
            Owner::While => f.yielded.map(|mut t| {
                if !t.is_empty() {
                    t.remove(0);
                }
                t
            }),
            _ => None,
        };
        sink.block_end(end, inferred);
        if f.owner == Owner::Program {
            self.resolve(sink);
            sink.program_end(Range::new(f.start, end), self.era);
        }
    }

    /// At a program's end: every use must have a definition.
    fn resolve(&mut self, sink: &mut dyn Sink) {
        let mut names = std::mem::take(&mut self.names);
        if self.partial {
            return;
        }
        for (name, at) in std::mem::take(&mut names.pending) {
            if names.get(&name).is_none() {
                self.error(sink, at, format!("use of undefined value {name}"));
            }
        }
    }

    /// Records that `v` is defined; `line_start` is where its line starts
    /// in `buf`.
    fn define(
        &mut self,
        v: &ValueRef,
        buf: &[u8],
        base: u64,
        line_start: usize,
        sink: &mut dyn Sink,
    ) {
        if v.name == ValueName::Null {
            return;
        }
        if let Some(first) = self.names.get(&v.name) {
            if self.suppress_error() {
                return;
            }
            let s = (v.span.start - base) as usize;
            let e = (v.span.end - base) as usize;
            let at = self.place(buf, base, line_start, s, e);
            let note = (first.place(), format!("{} is first defined here", v.name));
            self.diag(
                sink,
                Severity::Error,
                at,
                format!("redefinition of {}", v.name),
                vec![note],
            );
            return;
        }
        let col = (v.span.start - base).saturating_sub(line_start as u64) + 1;
        let def = Def {
            start: v.span.start,
            len: u32::try_from(v.span.len()).unwrap_or(u32::MAX),
            line: u32::try_from(self.line).unwrap_or(u32::MAX),
            col: u32::try_from(col).unwrap_or(u32::MAX),
        };
        self.names.insert(&v.name, def);
    }

    /// `v` is used; unless already defined, it waits for its definition
    /// until the program ends.
    fn using(&mut self, v: &ValueRef, buf: &[u8], base: u64, line_start: usize) {
        // Part of a program: names are not checked.
        if self.partial || v.name == ValueName::Null || self.names.get(&v.name).is_some() {
            return;
        }
        let s = (v.span.start - base) as usize;
        let mut at = self.place(buf, base, line_start, s, (v.span.end - base) as usize);
        // Only the first errors are shown with their line; the text of the
        // rest would cost its line's length for each of them.
        if self.names.pending.len() >= 2 * MAX_ERRORS {
            at.source = String::new();
        }
        self.names.pending.push((v.name.clone(), at));
    }

    fn fail(&mut self, buf: &[u8], base: u64, line_start: usize, f: Fail, sink: &mut dyn Sink) {
        if self.suppress_error() {
            return;
        }
        let at = self.place(buf, base, line_start, f.at, f.end);
        self.error(sink, at, f.message);
    }

    /// Reads the op line `l` into the reused op and hands it on.
    fn op_line(&mut self, l: OpLine, sink: &mut dyn Sink) -> Result<usize, NeedMore> {
        let mut lx = Lexer::new(l.buf, l.start, l.eof).with_text(l.text);
        let mut op = std::mem::take(&mut self.scratch);
        let mut p = OpParser {
            lx: &mut lx,
            base: l.base,
            era: self.era,
            types: &mut self.types,
        };
        let parsed = p.op(&mut op);
        let era = p.era;
        let next = self.after_op(parsed, era, &mut op, l, sink);
        self.scratch = op;
        next
    }

    /// What follows an op line read into `op`: its names, its block, the
    /// sink; or the error that stopped it.
    fn after_op(
        &mut self,
        parsed: Parse<(bool, usize)>,
        era: Era,
        op: &mut Op,
        l: OpLine,
        sink: &mut dyn Sink,
    ) -> Result<usize, NeedMore> {
        let OpLine {
            buf,
            pos,
            start,
            line_end,
            base,
            eof,
            ..
        } = l;
        match parsed {
            Err(Step::More) => Err(NeedMore),
            Err(Step::Fail(f)) => {
                let f = *f;
                // A string ran on past this line and the error is on a
                // later one: its line must be whole to be shown.
                if !eof
                    && f.at > line_end
                    && memchr::memchr(b'\n', &buf[f.at.min(buf.len())..]).is_none()
                {
                    return Err(NeedMore);
                }
                let raw_end = trim_end(&buf[start..line_end]);
                let opens = raw_end.last() == Some(&b'{');
                self.fail(buf, base, pos, f, sink);
                if opens {
                    let at = self.place(buf, base, pos, line_end - 1, line_end);
                    self.open(Owner::Broken, BlockOf::Orphan, start - pos, at, sink);
                }
                Ok((line_end + 1).min(buf.len()))
            }
            Ok((opens, end)) => {
                self.era = era;
                self.ops += 1;
                for r in &op.results {
                    self.define(r, buf, base, pos, sink);
                }
                for o in &op.operands {
                    self.using(&o.value, buf, base, pos);
                }
                let owner = if op.name.as_str() == "pd_op.if" {
                    Owner::If
                } else if op.name.as_str() == "pd_op.while" {
                    Owner::While
                } else {
                    Owner::Generic
                };
                let depth = self.stack.len();
                if let Some(f) = self.stack.last_mut() {
                    f.has_ops = true;
                    f.last_op = Some(0);
                    if op.name.as_str() == "cf.yield" {
                        f.yielded = Some(op.operand_types.clone());
                    }
                }
                let brace = if opens {
                    Some(self.place(buf, base, pos, end - 1, end))
                } else {
                    None
                };
                sink.op(op, depth, opens, Text { buf, base });
                if let Some(at) = brace {
                    self.open(owner, BlockOf::NewOp, start - pos, at, sink);
                }
                // A string may have run over several lines.
                let next = memchr::memchr(b'\n', &buf[end.min(buf.len())..])
                    .map_or(buf.len(), |i| end + i + 1);
                Ok(next)
            }
        }
    }

    fn block_args(
        &mut self,
        lx: &mut Lexer,
        base: u64,
        line_start: usize,
        sink: &mut dyn Sink,
    ) -> Result<Result<Vec<BlockArg>, Fail>, NeedMore> {
        let mut p = OpParser {
            lx,
            base,
            era: self.era,
            types: &mut self.types,
        };
        let args = match p.block_args() {
            Ok(a) => a,
            Err(Step::Fail(f)) => return Ok(Err(*f)),
            // A string in an argument's attributes runs past the bytes.
            Err(Step::More) => return Err(NeedMore),
        };
        let buf = p.lx.buf();
        for a in &args {
            self.define(&a.value, buf, base, line_start, sink);
        }
        Ok(Ok(args))
    }
}

/// An op line in the buffer being read: the buffer (its first byte at
/// `base` of the text, `text` its UTF-8 prefix, `eof` if the text ends
/// with it), where the line starts, where its op starts, where it ends.
#[derive(Clone, Copy)]
struct OpLine<'b> {
    buf: &'b [u8],
    text: &'b str,
    pos: usize,
    start: usize,
    line_end: usize,
    base: u64,
    eof: bool,
}

fn trim_end(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rposition(|&c| !matches!(c, b' ' | b'\t' | b'\r'))
        .map_or(0, |i| i + 1);
    &b[..n]
}

/// Why an op line stopped.
enum Step {
    /// The bytes ran out mid-line.
    More,
    /// It is wrong here (boxed: the happy path stays small).
    Fail(Box<Fail>),
}

impl From<NeedMore> for Step {
    fn from(_: NeedMore) -> Step {
        Step::More
    }
}

type Parse<T> = Result<T, Step>;

/// The recursive-descent parser of one op line.
struct OpParser<'l, 'a> {
    lx: &'l mut Lexer<'a>,
    base: u64,
    era: Era,
    types: &'l mut TypeCache,
}

fn fail<T>(t: Tok, message: impl Into<String>) -> Parse<T> {
    Err(Step::Fail(Box::new(Fail {
        at: t.start(),
        end: t.end().max(t.start() + 1),
        message: message.into(),
    })))
}

fn describe(buf: &[u8], t: Tok) -> String {
    match t.kind {
        Kind::Newline => "the end of the line".into(),
        Kind::Eof => "the end of the text".into(),
        Kind::BadStr => "an unterminated string".into(),
        _ => {
            let s = String::from_utf8_lossy(&buf[t.start()..t.end().min(t.start() + 40)]);
            format!("`{}`", crate::name::escape_str(&s))
        }
    }
}

impl<'a> OpParser<'_, 'a> {
    #[inline]
    fn range(&self, t: Tok) -> Range {
        Range::new(self.base + t.start() as u64, self.base + t.end() as u64)
    }

    #[inline]
    fn text(&self, t: Tok) -> &'a str {
        self.lx.str(t.start(), t.end())
    }

    #[inline]
    fn next(&mut self) -> Parse<Tok> {
        let t = self.lx.token()?;
        if t.kind == Kind::BadStr {
            return fail(t, "unterminated string: it has no closing `\"` on its line");
        }
        Ok(t)
    }

    #[inline]
    fn peek(&mut self) -> Parse<Tok> {
        Ok(self.lx.peek()?)
    }

    #[inline]
    fn expect(&mut self, c: u8, what: &str) -> Parse<Tok> {
        if c != b'<' && c != b'-' && self.lx.eat_punct(c)? {
            let end = self.lx.pos();
            return Ok(Tok::new(Kind::Punct(c), end - 1, end));
        }
        let t = self.next()?;
        if t.kind == Kind::Punct(c) {
            return Ok(t);
        }
        let found = describe(self.lx.buf(), t);
        fail(t, format!("expected `{}` {what}, found {found}", c as char))
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Parse<bool> {
        if c != b'<' && c != b'-' {
            return Ok(self.lx.eat_punct(c)?);
        }
        if self.peek()?.kind == Kind::Punct(c) {
            self.lx.token()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn value(&mut self) -> Parse<ValueRef> {
        let t = self.next()?;
        let name = match t.kind {
            Kind::NullValue => ValueName::Null,
            Kind::Value => {
                let s = &self.text(t)[1..];
                match ValueName::parse(s) {
                    Some(n) => n,
                    None => {
                        return fail(
                            t,
                            format!("`%{s}` is not a value name (%N, %arg_N, %kwarg_NAME)"),
                        );
                    }
                }
            }
            _ => {
                let found = describe(self.lx.buf(), t);
                return fail(t, format!("expected a value (%N), found {found}"));
            }
        };
        Ok(ValueRef {
            name,
            span: self.range(t),
        })
    }

    /// `(%1, %2)` or `()`, into `out`.
    fn results(&mut self, out: &mut Vec<ValueRef>) -> Parse<()> {
        self.expect(b'(', "to open the op's results")?;
        if self.eat(b')')? {
            return Ok(());
        }
        loop {
            out.push(self.value()?);
            if self.eat(b')')? {
                return Ok(());
            }
            self.expect(b',', "between results")?;
        }
    }

    /// Reads an op line into `op`, whose vectors are cleared first and
    /// reused (an op of a million does not allocate them again); returns
    /// whether it opens a block and where its text ends.
    fn op(&mut self, op: &mut Op) -> Parse<(bool, usize)> {
        op.results.clear();
        op.operands.clear();
        op.attrs.clear();
        op.operand_types.clear();
        op.result_types.clear();
        op.regions.clear();
        op.inferred = false;
        let first = self.peek()?;
        op.span = Range::new(self.base + first.start() as u64, 0);
        self.results(&mut op.results)?;
        self.expect(b'=', "after the op's results")?;
        let t = self.next()?;
        op.name.clear();
        match t.kind {
            Kind::Str => unquote_into(&self.lx.buf()[t.start()..t.end()], &mut op.name),
            // CINN's ops print their names unquoted.
            Kind::Ident => op.name.push_str(self.text(t)),
            _ => {
                let found = describe(self.lx.buf(), t);
                return fail(
                    t,
                    format!("expected the op's name in quotes, found {found}"),
                );
            }
        }
        op.name_span = self.range(t);
        let mut id = None;
        if self.eat(b'[')? {
            let k = self.next()?;
            if self.text(k) != "id" {
                return fail(k, "expected `id:` in `[id:N]`");
            }
            self.expect(b':', "in `[id:N]`")?;
            let n = self.next()?;
            id = self.text(n).parse().ok();
            if id.is_none() {
                return fail(n, "expected the op's id, a number");
            }
            self.expect(b']', "to close `[id:N]`")?;
        }
        op.id = id;
        self.operands(&mut op.operands)?;
        let mut opens = false;
        let t = self.peek()?;
        if t.kind == Kind::Punct(b'{') {
            if self.brace_ends_line(t)? {
                self.lx.token()?;
                opens = true;
            } else {
                self.attr_map(&mut op.attrs)?;
            }
        }
        if !opens {
            let t = self.peek()?;
            match t.kind {
                Kind::Punct(b':') => {
                    self.lx.token()?;
                    self.expect(b'(', "to open the operand types")?;
                    self.types_until(b')', &mut op.operand_types)?;
                    let a = self.next()?;
                    if a.kind != Kind::Arrow {
                        let found = describe(self.lx.buf(), a);
                        return fail(
                            a,
                            format!("expected `->` before the result types, found {found}"),
                        );
                    }
                    self.result_types(&mut op.result_types)?;
                }
                Kind::Arrow => {
                    self.lx.token()?;
                    self.result_types(&mut op.result_types)?;
                }
                _ => {}
            }
            let t = self.peek()?;
            if t.kind == Kind::Punct(b'{') && self.brace_ends_line(t)? {
                self.lx.token()?;
                opens = true;
            }
        }
        let t = self.lx.token()?;
        let end = match t.kind {
            Kind::Newline | Kind::Eof => t.start(),
            _ => {
                let found = describe(self.lx.buf(), t);
                return fail(t, format!("unexpected {found} after the op"));
            }
        };
        let end_trim = trim_end(&self.lx.buf()[..end]).len();
        op.span.end = self.base + end_trim as u64;
        Ok((opens, end_trim))
    }

    /// Whether the `{` token `t` is the last thing on its line.
    fn brace_ends_line(&mut self, t: Tok) -> Parse<bool> {
        let save = self.lx.pos();
        self.lx.seek(t.end());
        let n = self.lx.token();
        self.lx.seek(save);
        Ok(matches!(n?.kind, Kind::Newline | Kind::Eof))
    }

    fn operands(&mut self, out: &mut Vec<Operand>) -> Parse<()> {
        self.expect(b'(', "to open the operands")?;
        if self.eat(b')')? {
            return Ok(());
        }
        let mut label: Option<Box<str>> = None;
        loop {
            let t = self.peek()?;
            if t.kind == Kind::Ident {
                // `cond=%1, inputs=%2, %3` of a while.
                self.lx.token()?;
                label = Some(self.text(t).into());
                self.expect(b'=', "after an operand label")?;
            }
            let value = self.value()?;
            out.push(Operand {
                label: label.clone(),
                value,
            });
            if self.eat(b')')? {
                return Ok(());
            }
            self.expect(b',', "between operands")?;
        }
    }

    fn attr_map(&mut self, out: &mut Vec<NamedAttr>) -> Parse<()> {
        self.expect(b'{', "to open the attributes")?;
        if self.eat(b'}')? {
            return Ok(());
        }
        loop {
            let k = self.next()?;
            if k.kind != Kind::Ident {
                let found = describe(self.lx.buf(), k);
                return fail(k, format!("expected an attribute name, found {found}"));
            }
            self.expect(b':', "after an attribute name")?;
            let attr = self.attr(0)?;
            out.push(NamedAttr {
                key: intern(self.text(k)),
                key_span: self.range(k),
                attr,
            });
            if self.eat(b'}')? {
                return Ok(());
            }
            self.expect(b',', "between attributes (or `}` to close them)")?;
        }
    }

    /// Bytes from `<` at `open` to its matching `>` on the same line.
    fn angle_body(&mut self, open: Tok) -> Parse<(usize, usize)> {
        let b = self.lx.buf();
        let mut depth = 0usize;
        let mut i = open.start();
        while i < b.len() {
            match b[i] {
                b'<' => depth += 1,
                b'>' => {
                    depth -= 1;
                    if depth == 0 {
                        self.lx.seek(i + 1);
                        return Ok((open.end(), i));
                    }
                }
                b'\n' => break,
                _ => {}
            }
            i += 1;
        }
        fail(open, "this `<` is never closed on its line")
    }

    fn attr(&mut self, depth: usize) -> Parse<Attr> {
        let start = self.peek()?;
        if depth > MAX_DEPTH {
            return fail(start, format!("attributes nested deeper than {MAX_DEPTH}"));
        }
        let mut tag: Option<Box<str>> = None;
        if start.kind == Kind::Punct(b'(') {
            self.lx.token()?;
            let t = self.next()?;
            if t.kind != Kind::Ident {
                let found = describe(self.lx.buf(), t);
                return fail(
                    t,
                    format!("expected an attribute tag such as `Float`, found {found}"),
                );
            }
            tag = Some(self.text(t).into());
            self.expect(b')', "to close the attribute's tag")?;
            self.era = Era::Tagged;
        }
        let t = self.next()?;
        let mut value = match t.kind {
            Kind::Punct(b'[') => {
                let mut items = Vec::new();
                if !self.eat(b']')? {
                    loop {
                        items.push(self.attr(depth + 1)?);
                        if self.eat(b']')? {
                            break;
                        }
                        self.expect(b',', "between array items")?;
                    }
                }
                AttrValue::Array(items)
            }
            Kind::Str => AttrValue::Str(unquote(&self.lx.buf()[t.start()..t.end()]).into()),
            Kind::Num => number(self.text(t)),
            Kind::Punct(b'-') => {
                let n = self.next()?;
                match self.text(n) {
                    "inf" => AttrValue::Float(f64::NEG_INFINITY),
                    "nan" => AttrValue::Float(f64::NAN),
                    _ => return fail(n, "expected a number after `-`"),
                }
            }
            Kind::Ident => {
                let word = self.text(t);
                match word {
                    "true" => AttrValue::Bool(true),
                    "false" => AttrValue::Bool(false),
                    "inf" => AttrValue::Float(f64::INFINITY),
                    "nan" => AttrValue::Float(f64::NAN),
                    _ => {
                        let p = self.peek()?;
                        if p.kind == Kind::Punct(b'(') && p.start() == t.end() {
                            let (s, e) = self.paren_body(p)?;
                            let inner = String::from_utf8_lossy(&self.lx.buf()[s..e]);
                            if word == "Place" {
                                AttrValue::Place(inner.into())
                            } else {
                                let all = &self.lx.buf()[t.start()..e + 1];
                                AttrValue::Word(String::from_utf8_lossy(all).into_owned().into())
                            }
                        } else if p.kind == Kind::Punct(b'<') && p.start() == t.end() {
                            // A type as an attribute: kept as its text.
                            self.lx.token()?;
                            self.angle_body(p)?;
                            AttrValue::Opaque
                        } else {
                            AttrValue::Word(intern(word))
                        }
                    }
                }
            }
            Kind::Punct(b'<') => {
                let (s, e) = self.angle_body(t)?;
                let inner = String::from_utf8_lossy(&self.lx.buf()[s..e]);
                let pairs = inner
                    .split('|')
                    .map(|kv| match kv.split_once(':') {
                        Some((k, v)) => (k.trim().into(), v.trim().into()),
                        None => (kv.trim().into(), "".into()),
                    })
                    .collect();
                AttrValue::KernelKey(pairs)
            }
            Kind::AttrNull => AttrValue::Null,
            Kind::AttrOther | Kind::NullType => AttrValue::Opaque,
            _ => {
                // Unknown forms are kept as their text, up to the next
                // `,` or `}` outside brackets.
                self.skip_opaque(t)?;
                AttrValue::Opaque
            }
        };
        if let Some(tag) = &tag {
            value = tagged(tag, value);
        }
        let end = self.lx.pos();
        let end = trim_end(&self.lx.buf()[..end]).len();
        Ok(Attr {
            tag,
            value,
            span: Range::new(self.base + start.start() as u64, self.base + end as u64),
        })
    }

    fn paren_body(&mut self, open: Tok) -> Parse<(usize, usize)> {
        let b = self.lx.buf();
        let mut depth = 0usize;
        let mut i = open.start();
        while i < b.len() && b[i] != b'\n' {
            match b[i] {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        self.lx.seek(i + 1);
                        return Ok((open.end(), i));
                    }
                }
                _ => {}
            }
            i += 1;
        }
        fail(open, "this `(` is never closed on its line")
    }

    fn skip_opaque(&mut self, first: Tok) -> Parse<()> {
        let mut depth = 0usize;
        let mut t = first;
        loop {
            match t.kind {
                Kind::Punct(b'[' | b'(' | b'<') => depth += 1,
                Kind::Punct(b']' | b')' | b'>') if depth > 0 => depth -= 1,
                Kind::Newline | Kind::Eof => return fail(t, "the line ends inside an attribute"),
                _ => {}
            }
            let p = self.peek()?;
            if depth == 0 && matches!(p.kind, Kind::Punct(b',' | b'}' | b']')) {
                return Ok(());
            }
            t = self.next()?;
        }
    }

    /// Types up to the closing `c` (consumed).
    fn types_until(&mut self, c: u8, out: &mut Vec<Type>) -> Parse<()> {
        if self.eat(c)? {
            return Ok(());
        }
        loop {
            out.push(self.ty(0)?);
            if self.eat(c)? {
                return Ok(());
            }
            self.expect(b',', "between types")?;
        }
    }

    /// Result types after `->`: none (the line ends), or a list.
    fn result_types(&mut self, out: &mut Vec<Type>) -> Parse<()> {
        loop {
            let t = self.peek()?;
            if matches!(t.kind, Kind::Newline | Kind::Eof) {
                return Ok(());
            }
            if t.kind == Kind::Punct(b'{') && self.brace_ends_line(t)? {
                return Ok(());
            }
            out.push(self.ty(0)?);
            if !self.eat(b',')? {
                return Ok(());
            }
        }
    }

    fn ty(&mut self, depth: usize) -> Parse<Type> {
        let t = self.next()?;
        if depth > MAX_DEPTH {
            return fail(t, format!("types nested deeper than {MAX_DEPTH}"));
        }
        let kind = match t.kind {
            Kind::NullType => TypeKind::Null,
            Kind::Ident => {
                let word = self.text(t);
                if word == "vec" && self.eat(b'[')? {
                    let mut items = Vec::new();
                    self.types_until(b']', &mut items)?;
                    let span = Range::new(
                        self.base + t.start() as u64,
                        self.base + self.lx.pos() as u64,
                    );
                    return Ok(Type {
                        span,
                        kind: TypeKind::Vec(items),
                    });
                }
                // A body in `<…>` right after the name (not `<<` or `<#`,
                // which start other tokens): looked at as bytes, as most
                // types have one.
                let b = self.lx.buf();
                let angle = b.get(t.end()) == Some(&b'<')
                    && !matches!(b.get(t.end() + 1), Some(b'<' | b'#'));
                self.note_era(word, angle);
                if angle {
                    let open = Tok::new(Kind::Punct(b'<'), t.end(), t.end() + 1);
                    let (s, e) = self.angle_body(open)?;
                    let text = &b[t.start()..e + 1];
                    match self.types.get(text) {
                        Some(kind) => kind.clone(),
                        None => {
                            let body = match self.lx.str(s, e) {
                                "" if e > s => "\u{fffd}",
                                body => body,
                            };
                            let kind = type_kind(word, Some(body));
                            self.types.put(text, &kind);
                            kind
                        }
                    }
                } else {
                    type_kind(word, None)
                }
            }
            _ => {
                let found = describe(self.lx.buf(), t);
                return fail(t, format!("expected a type, found {found}"));
            }
        };
        Ok(Type {
            span: Range::new(
                self.base + t.start() as u64,
                self.base + self.lx.pos() as u64,
            ),
            kind,
        })
    }

    /// What a type's spelling says of the printer's era: a dialect
    /// prefix with a body is the tagged era, a bare `tensor<…>` the bare
    /// one.
    fn note_era(&mut self, word: &str, has_body: bool) {
        if !has_body {
            return;
        }
        if memchr::memchr(b'.', word.as_bytes()).is_some() {
            self.era = Era::Tagged;
        } else if word == "tensor" && self.era == Era::Unknown {
            self.era = Era::Bare;
        }
    }

    /// `^%arg_0 {attrs}, %arg_1` (the `^` already read).
    fn block_args(&mut self) -> Parse<Vec<BlockArg>> {
        let mut out = Vec::new();
        loop {
            let t = self.peek()?;
            if matches!(t.kind, Kind::Newline | Kind::Eof) {
                return Ok(out);
            }
            let value = self.value()?;
            let mut attrs = Vec::new();
            if self.peek()?.kind == Kind::Punct(b'{') {
                self.attr_map(&mut attrs)?;
            }
            out.push(BlockArg { value, attrs });
            if !self.eat(b',')? {
                let t = self.peek()?;
                if !matches!(t.kind, Kind::Newline | Kind::Eof) {
                    let found = describe(self.lx.buf(), t);
                    return fail(
                        t,
                        format!("expected `,` between block arguments, found {found}"),
                    );
                }
            }
        }
    }
}

fn number(s: &str) -> AttrValue {
    if s.starts_with("0x") || s.starts_with("-0x") {
        return AttrValue::Opaque;
    }
    if !s.contains(['.', 'e', 'E'])
        && let Ok(i) = s.parse::<i64>()
    {
        return AttrValue::Int(i);
    }
    match s.parse::<f64>() {
        Ok(f) => AttrValue::Float(f),
        Err(_) => AttrValue::Opaque,
    }
}

/// Asks the dialects about a type; what none takes is opaque.
fn type_kind(word: &str, body: Option<&str>) -> TypeKind {
    let dot = memchr::memchr(b'.', word.as_bytes());
    let found = match dot.map(|i| (&word[..i], &word[i + 1..])) {
        Some((prefix, name)) => dialects::named(prefix).and_then(|d| (d.parse_type)(name, body)),
        None => dialects::DIALECTS
            .iter()
            .find(|d| (d.bare_type)(word))
            .and_then(|d| (d.parse_type)(word, body)),
    };
    found.unwrap_or(TypeKind::Opaque)
}

/// A tagged attribute as its dialect reads it (`(pd_op.DataType)float32`);
/// opaque if no dialect takes the tag.
fn tagged(tag: &str, value: AttrValue) -> AttrValue {
    let found = match tag.split_once('.') {
        Some((prefix, name)) => dialects::named(prefix).and_then(|d| (d.parse_attr)(name, &value)),
        None => dialects::named("builtin").and_then(|d| (d.parse_attr)(tag, &value)),
    };
    found.unwrap_or(AttrValue::Opaque)
}

/// A [`Sink`] that keeps everything: the programs as trees, and the
/// diagnostics.
#[derive(Default)]
pub struct Builder {
    /// The programs read, in order.
    pub programs: Vec<Program>,
    /// Every diagnostic, in order.
    pub diagnostics: Vec<Diagnostic>,
    /// Open blocks, the innermost last, each with the op that owns it.
    open: Vec<(Block, Owned)>,
    /// An op whose block comes next.
    waiting: Option<Op>,
    /// The program's block, once closed.
    done: Option<Block>,
    /// Hand the program's top-level ops out through `ready` as they are
    /// complete, instead of keeping them.
    stream: bool,
    /// Complete top-level ops, in order, when streaming: take them.
    pub ready: Vec<Op>,
}

impl Builder {
    /// A builder that hands out each top-level op once it is complete
    /// (through [`Builder::ready`]), so only one is held at a time.
    pub fn streaming() -> Builder {
        Builder {
            stream: true,
            ..Builder::default()
        }
    }

    /// Adds a complete op to the innermost open block.
    fn push(&mut self, op: Op) {
        let stream = self.stream;
        let Some((b, owned)) = self.open.last_mut() else {
            return;
        };
        if stream && matches!(owned, Owned::Program) {
            // The op before it is complete now: an else or a region block
            // can only follow the last one.
            self.ready.append(&mut b.ops);
        }
        b.ops.push(op);
    }
}

enum Owned {
    Program,
    Op(Box<Op>),
    Orphan,
}

impl Sink for Builder {
    fn program(&mut self, _start: u64) {
        self.open.clear();
        self.waiting = None;
    }

    fn op(&mut self, op: &mut Op, _depth: usize, opens: bool, _text: Text) {
        let op = std::mem::take(op);
        if opens {
            self.waiting = Some(op);
        } else {
            self.push(op);
        }
    }

    fn block(&mut self, start: u64, of: BlockOf) {
        let owned = match of {
            BlockOf::Program => Owned::Program,
            BlockOf::NewOp => self
                .waiting
                .take()
                .map_or(Owned::Orphan, |op| Owned::Op(Box::new(op))),
            BlockOf::LastOp | BlockOf::Else => self
                .open
                .last_mut()
                .and_then(|(b, _)| b.ops.pop())
                .map_or(Owned::Orphan, |op| Owned::Op(Box::new(op))),
            BlockOf::Orphan => Owned::Orphan,
        };
        let block = Block {
            span: Range::new(start, start),
            ..Block::default()
        };
        self.open.push((block, owned));
    }

    fn block_args(&mut self, args: Vec<BlockArg>, kw: bool, _text: Text) {
        if let Some((b, _)) = self.open.last_mut() {
            if kw {
                b.kwargs.extend(args);
            } else {
                b.args.extend(args);
            }
        }
    }

    fn block_end(&mut self, end: u64, inferred: Option<Vec<Type>>) {
        let Some((mut block, owned)) = self.open.pop() else {
            return;
        };
        block.span.end = end;
        match owned {
            Owned::Program => {
                if self.stream {
                    self.ready.append(&mut block.ops);
                }
                self.done = Some(block);
            }
            Owned::Op(mut op) => {
                op.regions.push(Region {
                    blocks: vec![block],
                });
                if let Some(t) = inferred
                    && op.result_types.is_empty()
                {
                    op.result_types = t;
                    op.inferred = true;
                }
                self.push(*op);
            }
            Owned::Orphan => {
                if let Some((b, _)) = self.open.last_mut() {
                    b.ops.append(&mut block.ops);
                }
            }
        }
    }

    fn program_end(&mut self, span: Range, era: Era) {
        let block = self.done.take().unwrap_or_default();
        self.open.clear();
        self.programs.push(Program { span, block, era });
    }

    fn diagnostic(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }
}

/// Reads a whole text held in memory.
pub fn read_all(text: &[u8]) -> Builder {
    let mut b = Builder::default();
    let mut r = Reader::new();
    let mut pos = 0;
    // One pass unless the text is longer than a lexer reads.
    loop {
        let used = r.feed(&text[pos..], pos as u64, true, &mut b);
        pos += used;
        if used == 0 || pos >= text.len() {
            return b;
        }
    }
}
