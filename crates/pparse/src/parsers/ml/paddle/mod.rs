//! PaddlePaddle programs: the text Paddle prints (`print(program)`,
//! `FLAGS_print_ir` logs, pass dumps), read back with byte ranges,
//! diagnostics and recovery.
//!
//! Paddle deleted its own reader of this text (PR #70534, December 2024);
//! the one before stopped at the first error, hung on an unterminated
//! string and accepted undefined values. This one reads both printer eras
//! (tagged attributes and `builtin.tensor<…>` up to 3.0, bare ones after),
//! every error of a file at once, and keeps every op around them:
//! [`parse`] has the reader, [`dialects`] what each dialect adds, [`ast`]
//! the program tree.
//!
//! In the tree, a file is its programs (a log may hold several), a program
//! its top-level ops, an op its operands, attributes, types and regions,
//! each loaded when opened, from its bytes.

pub mod ast;
pub mod dialect;
pub mod dialects;
pub mod json_program;
pub mod lex;
pub mod links;
pub mod nodes;
pub mod params;
pub mod parse;
mod print;
mod print_json;
pub mod source;

use source::{CHUNK, MAX_LINE};

use ast::{BlockArg, Era, Op, Type};
use nodes::{op_node, op_parts};
use parse::{BlockOf, Diagnostic, Reader, Severity, Sink};

use crate::data::{Data, Range, Source};
use crate::node::Node;
use crate::offer::Offers;
use crate::parsers::api::{Format, Parser, Sniff, Step, StepCx};
use crate::status::Damage;

/// Printed PIR programs.
pub static FORMAT: Format = Format {
    name: "pir",
    extent: None,
    sniff,
    parse: |data, _| Box::new(PirParser::new(data.clone())),
    load,
    offers: Offers {
        program: Some(links::OFFER),
        ..Offers::NONE
    },
};

/// Diagnostics recorded as damage on the extraction.
const MAX_DAMAGE: usize = 100;

/// A printed program has op lines such as `(%0) = "pd_op.data" (` or
/// `() = "builtin.set_parameter"`.
fn sniff(s: &Sniff) -> bool {
    let h = s.head;
    let has = |needle: &[u8]| memchr::memmem::find(h, needle).is_some();
    (has(b") = \"pd_op.") || has(b") = \"builtin.") || has(b") = \"cf.") || has(b"(phi_kernel)\""))
        && has(b"{")
}

/// Makes top-level nodes as the reader finds them: one per program.
struct Programs<'a, 'c> {
    cx: &'a mut StepCx<'c>,
    start: u64,
    ops: u64,
    damage: usize,
    errors: u64,
}

impl Sink for Programs<'_, '_> {
    fn program(&mut self, start: u64) {
        self.start = start;
        self.ops = 0;
        self.errors = 0;
    }
    fn op(&mut self, _op: &mut Op, depth: usize, _opens: bool, _text: parse::Text) {
        if depth == 1 {
            self.ops += 1;
        }
    }
    fn block(&mut self, _start: u64, _of: BlockOf) {}
    fn block_args(&mut self, _args: Vec<BlockArg>, _kw: bool, _text: parse::Text) {}
    fn block_end(&mut self, _end: u64, _inferred: Option<Vec<Type>>) {}
    fn program_end(&mut self, span: Range, era: Era) {
        let mut n = Node::new("program", format!("program at {:#x}", span.start), span)
            .text(format!("{} ops, {} printer", self.ops, era.as_str()))
            .lazy();
        if self.errors > 0 {
            n = n.damaged(Damage::corrupt(
                Range::new(span.start, span.start),
                format!("{} errors in this program", self.errors),
            ));
        }
        self.cx.push_node(n);
    }
    fn diagnostic(&mut self, d: Diagnostic) {
        if d.severity != Severity::Error {
            return;
        }
        self.errors += 1;
        self.damage += 1;
        if self.damage <= MAX_DAMAGE {
            let msg = format!("line {}:{}: {}", d.at.line, d.at.col, d.message);
            self.cx.damage(Damage::corrupt(d.at.span, msg));
        }
    }
}

/// The engine's parser: reads the text a chunk per step.
struct PirParser {
    data: Data,
    reader: Reader,
    pos: u64,
    want: usize,
    buf: Vec<u8>,
    damage: usize,
}

impl PirParser {
    fn new(data: Data) -> PirParser {
        PirParser {
            data,
            reader: Reader::new(),
            pos: 0,
            want: CHUNK,
            buf: Vec::new(),
            damage: 0,
        }
    }
}

impl Parser for PirParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        let (avail, fin) = self.data.extent();
        if self.pos >= avail {
            return if fin { Step::Done } else { Step::Blocked };
        }
        let n = ((avail - self.pos) as usize).min(self.want);
        self.buf.resize(n, 0);
        let got = self.data.read_at(self.pos, &mut self.buf).unwrap_or(0);
        self.buf.truncate(got);
        let eof = fin && self.pos + got as u64 >= avail;
        let mut sink = Programs {
            cx,
            start: 0,
            ops: 0,
            damage: self.damage,
            errors: 0,
        };
        let used = self.reader.feed(&self.buf, self.pos, eof, &mut sink);
        self.damage = sink.damage;
        cx.progress(self.pos + used as u64, Some(avail));
        if used == 0 && !eof {
            if self.pos + (n as u64) < avail || self.want >= MAX_LINE {
                if self.want >= MAX_LINE {
                    cx.damage(Damage::corrupt(
                        Range::new(self.pos, avail),
                        format!("a line longer than {MAX_LINE} bytes"),
                    ));
                    return Step::Done;
                }
                self.want *= 2;
                return Step::Yield;
            }
            return if fin { Step::Done } else { Step::Blocked };
        }
        self.want = CHUNK;
        self.pos += used as u64;
        if eof { Step::Done } else { Step::Yield }
    }
}

/// Children of a program (its top-level ops) or of an op (its parts and
/// the ops of its regions), read again from the node's bytes.
fn load(src: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    let r = node.range;
    let Some(len) = usize::try_from(r.len()).ok().filter(|&l| l <= MAX_LINE * 4) else {
        return vec![Node::new("note", "too large to load at once", r)];
    };
    let mut buf = vec![0u8; len];
    let got = src.read_at(r.start, &mut buf).unwrap_or(0);
    buf.truncate(got);
    match node.kind {
        "program" => {
            let mut b = parse::Builder::default();
            Reader::new().feed(&buf, r.start, true, &mut b);
            b.programs
                .into_iter()
                .next()
                .map(|p| p.block.ops.iter().map(op_node).collect())
                .unwrap_or_default()
        }
        "op" => {
            let mut b = parse::Builder::default();
            let mut reader = Reader::inside();
            reader.feed(&buf, r.start, true, &mut b);
            b.programs
                .into_iter()
                .next()
                .and_then(|p| p.block.ops.into_iter().next())
                .map(|op| op_parts(&op))
                .unwrap_or_default()
        }
        _ => Vec::new(),
    }
}
