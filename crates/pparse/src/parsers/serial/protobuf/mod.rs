//! Protobuf: any message, with a schema or without.
//!
//! [`wire`] delimits fields with exact offsets, [`fields`] turns them into
//! nodes (named and typed by a schema, or guessed and marked `?`), and
//! [`schema`] holds the message types: the builtin ONNX and W&B schemas and
//! any `--proto FILE` a user adds. Formats built on protobuf (ONNX, the
//! records of a `.wandb` log) use the same pieces.
//!
//! This module's own format reads a file as one message: the type given
//! with `--message`, or no type at all for a `.pb` file, whose fields are
//! then guessed.

pub(crate) mod fields;
pub(crate) mod json;
pub(crate) mod schema;
pub(crate) mod table;
pub(crate) mod wire;

use prost_reflect::MessageDescriptor;

use crate::data::{Data, Range, Source};
use crate::extraction::EntryKind;
use crate::node::Node;
use crate::offer::Offers;
use crate::parsers::api::{Format, Options, Parser, Sniff, Step, StepCx};
use fields::{Counter, Depth};
use wire::Scanner;

/// A file as one protobuf message: of the type `--message` names, else (a
/// `.pb` file) as bare wire fields.
pub(crate) static FORMAT: Format = Format {
    name: "protobuf",
    extent: None,
    sniff,
    parse,
    load,
    offers: Offers::NONE,
};

/// File name endings taken for protobuf without `--message`.
const EXTENSIONS: &[&str] = &[".pb", ".binpb", ".protobuf"];

fn sniff(s: &Sniff) -> bool {
    if *s.kind == EntryKind::Root && s.options.message.is_some() {
        return true;
    }
    let lower = s.name.to_ascii_lowercase();
    if !EXTENSIONS.iter().any(|e| lower.ends_with(e)) || s.head.is_empty() {
        return false;
    }
    // The head must read as fields up to its end (where it may cut one).
    let mut scan = Scanner::new(s.head, Range::new(0, s.head.len() as u64));
    scan.all(|f| f.is_ok())
}

fn parse(_data: &Data, options: &Options) -> Box<dyn Parser> {
    let msg = options
        .message
        .as_deref()
        .and_then(|m| options.schemas.message(m));
    Box::new(TopLevel::new(msg))
}

fn load(data: &dyn Source, node: &Node, opts: &crate::Options) -> Vec<Node> {
    fields::load(data, node, &opts.schemas)
}

/// Fields read per step before yielding.
const FIELDS_PER_STEP: usize = 4096;

/// Walks the top-level fields of a message that is a whole extraction,
/// pushing one lazy node per field, a step at a time.
pub(crate) struct TopLevel {
    msg: Option<MessageDescriptor>,
    pos: u64,
    counts: Counter,
}

impl TopLevel {
    pub(crate) fn new(msg: Option<MessageDescriptor>) -> TopLevel {
        TopLevel {
            msg,
            pos: 0,
            counts: Counter::default(),
        }
    }

    /// Reads up to a step's worth of fields. `each` sees every field before
    /// its node is pushed (formats on top of protobuf look at some).
    pub(crate) fn step(
        &mut self,
        cx: &mut StepCx,
        mut each: impl FnMut(&wire::Field, &mut StepCx),
    ) -> Step {
        let data = cx.data.clone();
        let src: &dyn Source = &*data;
        let (avail, fin) = src.extent();
        let mut scan = Scanner::within(src, Range::new(self.pos, avail), avail);
        for _ in 0..FIELDS_PER_STEP {
            let Some(item) = scan.next() else {
                cx.progress(self.pos, Some(avail));
                return if fin { Step::Done } else { Step::Blocked };
            };
            match item {
                Ok(f) if f.cut && !fin => return Step::Blocked,
                Ok(f) => {
                    let fd = self.msg.as_ref().and_then(|m| m.get_field(f.number));
                    let index = self.counts.next(f.number);
                    each(&f, cx);
                    let node = fields::field_node(src, &f, fd.as_ref(), index, &mut Depth::lazy());
                    if let Some(d) = &node.damage {
                        cx.damage((**d).clone());
                    }
                    cx.push_node(node);
                    self.pos = f.range.end;
                }
                Err(e) if e.status == crate::status::Status::Truncated && !fin => {
                    return Step::Blocked;
                }
                Err(e) => {
                    cx.damage(fields::wire_damage(&e, avail, self.msg.as_ref()));
                    cx.push_node(fields::damage_node(&e, avail, self.msg.as_ref()));
                    self.pos = avail;
                    cx.progress(avail, Some(avail));
                    return Step::Done;
                }
            }
        }
        cx.progress(self.pos, Some(avail));
        Step::Yield
    }
}

impl Parser for TopLevel {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        TopLevel::step(self, cx, |_, _| {})
    }
}
