//! What a printed program offers the explorer ([`crate::offer::program`]):
//! its diagnostics, and its values followed from use to definition. Both
//! read the text again in the background, a chunk at a time, so a program
//! of millions of ops costs a pass, not its size in memory.

use std::sync::atomic::{AtomicBool, Ordering};

use super::ast::{BlockArg, Era, Op, Type, ValueName};
use super::parse::{BlockOf, Diagnostic, Reader, Sink, Text};
use super::source::{MAX_LINE, read_source_with};
use crate::data::{Range, Source};
use crate::offer::program::{MAX_USES, Problem, ProgramOffer, ValueLinks};

/// The offer of printed programs.
pub const OFFER: ProgramOffer = ProgramOffer {
    write: super::print::write,
    diagnostics,
    value,
};

/// Collects diagnostics; the ops are dropped as they come.
#[derive(Default)]
struct Problems(Vec<Problem>);

fn problem(d: Diagnostic) -> Problem {
    Problem {
        severity: d.severity.as_str(),
        message: d.message,
        span: d.at.span,
        line: d.at.line,
        col: d.at.col,
        source: d.at.source,
        notes: d.notes.into_iter().map(|(p, m)| (p.span, m)).collect(),
    }
}

impl Sink for Problems {
    fn program(&mut self, _start: u64) {}
    fn op(&mut self, _op: &mut Op, _depth: usize, _opens: bool, _text: Text) {}
    fn block(&mut self, _start: u64, _of: BlockOf) {}
    fn block_args(&mut self, _args: Vec<BlockArg>, _kw: bool, _text: Text) {}
    fn block_end(&mut self, _end: u64, _inferred: Option<Vec<Type>>) {}
    fn program_end(&mut self, _span: Range, _era: Era) {}
    fn diagnostic(&mut self, d: Diagnostic) {
        self.0.push(problem(d));
    }
}

fn diagnostics(
    src: &dyn Source,
    stop: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> Option<Vec<Problem>> {
    let mut reader = Reader::new();
    let mut sink = Problems::default();
    let whole = read_source_with(src, &mut reader, &mut sink, stop, progress);
    if stop.load(Ordering::Relaxed) {
        return None;
    }
    let mut out = sink.0;
    let end = src.available();
    if !whole {
        out.push(Problem {
            severity: "error",
            message: format!("a line longer than {MAX_LINE} bytes: the text is not read past it"),
            span: Range::new(end, end),
            line: 0,
            col: 0,
            source: String::new(),
            notes: Vec::new(),
        });
    }
    if reader.suppressed() > 0 {
        out.push(Problem {
            severity: "note",
            message: format!("{} more errors not listed", reader.suppressed()),
            span: Range::new(end, end),
            line: 0,
            col: 0,
            source: String::new(),
            notes: Vec::new(),
        });
    }
    Some(out)
}

/// Bytes of a value name: `%` then these.
fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The value named at `at` (inside or at the start of `%name`) or, if
/// none is there, the first one after it on its line; with where it is.
fn name_at(src: &dyn Source, at: u64) -> Option<(ValueName, Range)> {
    const BACK: u64 = 64;
    let from = at.saturating_sub(BACK);
    let mut buf = vec![0u8; 4096 + BACK as usize];
    let got = src.read_at(from, &mut buf).ok()?;
    buf.truncate(got);
    let here = usize::try_from(at - from).ok()?;
    // Inside a name: back to its `%`.
    let mut p = here.min(buf.len());
    while p > 0 && p < buf.len() && name_byte(buf[p]) {
        p -= 1;
    }
    if buf.get(p) != Some(&b'%') {
        // After `at` on its line.
        let line = &buf[here.min(buf.len())..];
        let end = memchr::memchr(b'\n', line).unwrap_or(line.len());
        p = here + memchr::memchr(b'%', &line[..end])?;
    }
    let e = buf[p + 1..]
        .iter()
        .position(|&b| !name_byte(b))
        .map_or(buf.len(), |i| p + 1 + i);
    let name = ValueName::parse(std::str::from_utf8(&buf[p + 1..e]).ok()?)?;
    Some((name, Range::new(from + p as u64, from + e as u64)))
}

/// Collects where one value is defined and used, program by program,
/// keeping the program that holds `at`.
struct Links<'a> {
    name: ValueName,
    at: u64,
    def: Option<(Range, Range)>,
    uses: Vec<Range>,
    more_uses: u64,
    found: Option<ValueLinks>,
    halt: &'a AtomicBool,
}

impl Links<'_> {
    fn used(&mut self, span: Range) {
        if self.uses.len() < MAX_USES {
            self.uses.push(span);
        } else {
            self.more_uses += 1;
        }
    }
}

impl Sink for Links<'_> {
    fn program(&mut self, _start: u64) {
        self.def = None;
        self.uses.clear();
        self.more_uses = 0;
    }
    fn op(&mut self, op: &mut Op, _depth: usize, _opens: bool, _text: Text) {
        if self.def.is_none()
            && let Some(r) = op.results.iter().find(|r| r.name == self.name)
        {
            self.def = Some((op.span, r.span));
        }
        for o in &op.operands {
            if o.value.name == self.name {
                self.used(o.value.span);
            }
        }
    }
    fn block(&mut self, _start: u64, _of: BlockOf) {}
    fn block_args(&mut self, args: Vec<BlockArg>, _kw: bool, _text: Text) {
        if self.def.is_none()
            && let Some(a) = args.iter().find(|a| a.value.name == self.name)
        {
            self.def = Some((a.value.span, a.value.span));
        }
    }
    fn block_end(&mut self, _end: u64, _inferred: Option<Vec<Type>>) {}
    fn program_end(&mut self, span: Range, _era: Era) {
        if self.found.is_none() && span.start <= self.at && self.at <= span.end {
            self.found = Some(ValueLinks {
                name: self.name.to_string(),
                def: self.def.take(),
                uses: std::mem::take(&mut self.uses),
                more_uses: self.more_uses,
            });
            self.halt.store(true, Ordering::Relaxed);
        }
    }
    fn diagnostic(&mut self, _d: Diagnostic) {}
}

fn value(src: &dyn Source, at: u64, stop: &AtomicBool) -> Option<ValueLinks> {
    let (name, _) = name_at(src, at)?;
    let halt = AtomicBool::new(false);
    let mut sink = Links {
        name,
        at,
        def: None,
        uses: Vec::new(),
        more_uses: 0,
        found: None,
        halt: &halt,
    };
    let mut reader = Reader::new();
    // Stops at the end of the program that holds `at`, or when asked.
    let progress = |_: u64, _: u64| {
        if stop.load(Ordering::Relaxed) {
            halt.store(true, Ordering::Relaxed);
        }
    };
    read_source_with(src, &mut reader, &mut sink, &halt, &progress);
    if stop.load(Ordering::Relaxed) {
        return None;
    }
    sink.found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    const TEXT: &str = "{\n    (%0) = \"pd_op.data\" () {name:\"x\"} : () -> tensor<2xf32>\n    (%1) = \"pd_op.relu\" (%0) {} : (tensor<2xf32>) -> tensor<2xf32>\n    (%2) = \"pd_op.add\" (%0, %1) {} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n    (%2) = \"pd_op.relu\" (%9) {} : (tensor<2xf32>) -> tensor<2xf32>\n}\n";

    fn at(needle: &str, nth: usize) -> u64 {
        TEXT.match_indices(needle).nth(nth).unwrap().0 as u64
    }

    #[test]
    fn a_value_is_followed_to_its_definition_and_uses() {
        let src = MemSource::new(TEXT.as_bytes().to_vec());
        let stop = AtomicBool::new(false);
        // From the first use of %0 (in relu's operands).
        let l = value(&src, at("%0", 1) + 1, &stop).unwrap();
        assert_eq!(l.name, "%0");
        let (op, name) = l.def.unwrap();
        assert_eq!(op.start, at("(%0) = ", 0));
        assert_eq!(name, Range::new(at("%0", 0), at("%0", 0) + 2));
        let uses: Vec<u64> = l.uses.iter().map(|r| r.start).collect();
        assert_eq!(uses, vec![at("%0", 1), at("%0", 2)]);
        // From an op line: its first result.
        let l = value(&src, at("    (%1)", 0), &stop).unwrap();
        assert_eq!((l.name.as_str(), l.uses.len()), ("%1", 1));
        // Undefined: no definition.
        let l = value(&src, at("%9", 0), &stop).unwrap();
        assert_eq!((l.def, l.uses.len()), (None, 1));
        // No value on the line from there.
        assert_eq!(value(&src, at("}\n", 0), &stop), None);
    }

    #[test]
    fn diagnostics_carry_lines_and_carets() {
        let src = MemSource::new(TEXT.as_bytes().to_vec());
        let p = diagnostics(&src, &AtomicBool::new(false), &|_, _| {}).unwrap();
        let msgs: Vec<(&str, u64, u64)> = p
            .iter()
            .map(|p| (p.message.as_str(), p.line, p.col))
            .collect();
        assert_eq!(
            msgs,
            vec![
                ("redefinition of %2", 5, 6),
                ("use of undefined value %9", 5, 26)
            ]
        );
        assert_eq!(p[0].caret(), "     ^^");
        assert_eq!(p[0].notes.len(), 1);
        assert!(p[1].source.contains("(%9)"));
    }
}
