//! What a pickle offers: `pparse pickle`'s listings (like `python -m
//! pickletools`, or one JSON object per opcode), its opcodes one by one as
//! `pickletools.genops` gives them (the Python package), and what loading
//! it would import, with a verdict on each; and the state of its VM after
//! any opcode, for the explorer's stepper.
//!
//! Declared by the formats whose nodes of kind `pickle` each cover one
//! pickle (a `.pkl`, a torch checkpoint's `data.pkl`).

use std::any::Any;
use std::io::{self, Write};

use crate::data::{Data, Range, Source};
use crate::extraction::ExtId;

/// How a format's pickles are listed, read and judged.
#[derive(Clone, Copy)]
pub struct PickleOffer {
    /// The opcodes of the pickles at `ranges` in `data`, one JSON object
    /// each (`pparse pickle --json`).
    pub list_json: fn(data: &dyn Source, ranges: &[Range], out: &mut dyn Write) -> io::Result<()>,
    /// A listing like `python -m pickletools` of the pickles at `ranges`,
    /// one after the other, with the VM's stack and memo after each opcode
    /// when `style.trace`; each range's damage, if any, is said where its
    /// listing stops.
    pub list_text: ListText,
    /// Every global that loading the pickle at `range` would import
    /// (`module.name`), with its verdict, in name order.
    pub imports: fn(data: &dyn Source, range: Range) -> Vec<(String, Verdict)>,
    /// The opcode at `pos`, its argument decoded; `end` bounds it (the
    /// end of the bytes). `scratch` is reused between calls.
    pub opcode: ReadOpcode,
    /// The machine's state after an opcode (the explorer's stepper).
    pub step: fn(req: &StepRequest, cache: &mut StepCache) -> StepResult,
}

/// A listing like `python -m pickletools` of the pickles at `ranges`, one
/// after the other (see [`PickleOffer::list_text`]).
pub type ListText = fn(
    data: &dyn Source,
    ranges: &[(Range, Option<String>)],
    style: ListStyle,
    out: &mut dyn Write,
) -> io::Result<ListingWork>;

/// How a pickle listing is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListStyle {
    /// The VM's stack and memo after each opcode (`pparse pickle --trace`).
    pub trace: bool,
    /// Positions in decimal, as `python -m pickletools` prints them
    /// (`--decimal`); otherwise in hex with `0x`, as pparse prints every
    /// offset.
    pub decimal: bool,
}

impl ListStyle {
    /// `pos` as this style writes a position.
    pub fn pos(&self, pos: u64) -> String {
        if self.decimal {
            pos.to_string()
        } else {
            format!("{pos:#x}")
        }
    }
}

/// The opcode at `pos` (see [`PickleOffer::opcode`]).
pub type ReadOpcode =
    fn(data: &dyn Source, pos: u64, end: u64, scratch: &mut Vec<u8>) -> Result<Opcode, OpError>;

/// What a listing did: the opcodes it listed, and the work besides the
/// lines themselves, which tests check grows linearly with the opcodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListingWork {
    /// Opcodes listed.
    pub opcodes: u64,
    /// Stack segments touched by pickletools' bookkeeping (at least one
    /// per opcode), and objects visited to render `--trace`'s states.
    pub visited: u64,
}

/// One opcode, as `pickletools.genops` gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Opcode {
    /// Offset of the opcode byte.
    pub pos: u64,
    /// Bytes the opcode takes, its argument included.
    pub len: u64,
    /// Its name (`PROTO`, `GLOBAL`, `STOP`…).
    pub name: &'static str,
    /// Its argument.
    pub arg: Arg,
}

/// What a counted payload holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Py2 `str`: pickletools decodes it as latin-1.
    Latin1,
    /// `str`, as UTF-8.
    Utf8,
    /// `bytes`.
    Bytes,
    /// `bytearray`.
    ByteArray,
}

/// A decoded argument, as `pickletools.genops` gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// No argument.
    None,
    /// INT's `00`/`01`.
    Bool(bool),
    /// An integer within i64.
    Int(i64),
    /// An integer beyond i64, in decimal.
    Big(Box<str>),
    /// A float.
    Float(f64),
    /// Text decoded from a line (STRING, UNICODE, PERSID, GLOBAL's pair).
    Text(Box<str>),
    /// A counted payload, left in place: its bytes are not read.
    Payload(Payload, Range),
}

/// Why an opcode could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpError {
    /// The bytes end inside it.
    Short(String),
    /// Not an opcode, or an argument that makes no sense (a negative
    /// length, a malformed text line).
    Invalid(String),
}

/// A global's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// In torch's weights-only allowlist.
    Allowed,
    /// Not known to be safe: loading would import and may call it.
    Unknown,
    /// Gives a pickle code execution, files, processes or the network.
    Dangerous,
}

impl Verdict {
    /// The verdict as a word (`allowed`, `unknown`, `DANGEROUS`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Unknown => "unknown",
            Verdict::Dangerous => "DANGEROUS",
        }
    }
    /// What it means, for people.
    pub fn explain(self) -> &'static str {
        match self {
            Verdict::Allowed => "in torch's weights-only allowlist",
            Verdict::Unknown => {
                "not in the weights-only allowlist: loading imports and may call it"
            }
            Verdict::Dangerous => "can run code, touch files or processes: do not load this pickle",
        }
    }
}

/// Where to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The state after opcode `n` (clamped to the pickle).
    Step(usize),
    /// The opcode whose bytes hold this offset.
    Offset(u64),
}

/// Asks for the state after an opcode of the pickle at `range`.
pub struct StepRequest {
    /// The extraction holding the pickle.
    pub ext: ExtId,
    /// Its bytes.
    pub data: Data,
    /// The pickle's bytes in it.
    pub range: Range,
    /// Where to go.
    pub target: Target,
    /// The asker's count, returned with the result to tell stale ones apart.
    pub generation: u64,
    /// The format's offer, which runs the request.
    pub offer: PickleOffer,
}

impl StepRequest {
    /// The machine's state at the target, reusing what `cache` kept.
    pub fn run(&self, cache: &mut StepCache) -> StepResult {
        (self.offer.step)(self, cache)
    }
}

/// The machine after one opcode, ready to draw.
#[derive(Clone, Debug, Default)]
pub struct StepResult {
    /// See [`StepRequest::ext`].
    pub ext: ExtId,
    /// See [`StepRequest::generation`].
    pub generation: u64,
    /// See [`StepRequest::range`].
    pub range: Range,
    /// The step shown.
    pub step: usize,
    /// Opcodes in the pickle.
    pub total: usize,
    /// Index of the first listed opcode and the listing, one line each.
    pub first: usize,
    /// Offset and text of each listed opcode.
    pub listing: Vec<(u64, String)>,
    /// Bytes of the current opcode.
    pub op: Range,
    /// Stack depth and its top entries (bottom first).
    pub depth: usize,
    /// Text of each stack entry shown.
    pub stack: Vec<String>,
    /// Metastack frames (innermost last), each with its top entries.
    pub meta: Vec<(usize, Vec<String>)>,
    /// Memo size and its highest keys.
    pub memo_len: usize,
    /// Key and text of each memo entry shown.
    pub memo: Vec<(u64, String)>,
    /// What the machine found wrong so far.
    pub problems: Vec<String>,
    /// How the pickle ends when it does not end with STOP.
    pub end: Option<String>,
}

/// What the worker keeps between requests, for the format that runs them
/// (the last machine run, where the opcodes are).
#[derive(Default)]
pub struct StepCache {
    kept: Option<Box<dyn Any + Send>>,
}

impl StepCache {
    /// What the format keeps here, fresh if it kept something else.
    pub(crate) fn get<T: Default + Send + 'static>(&mut self) -> &mut T {
        if !self.kept.as_ref().is_some_and(|k| k.is::<T>()) {
            self.kept = Some(Box::new(T::default()));
        }
        self.kept
            .as_mut()
            .and_then(|k| k.downcast_mut::<T>())
            .expect("just made")
    }
}
