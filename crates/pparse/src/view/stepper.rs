//! Stepping a pickle: the VM's state after any opcode, forward and back.
//!
//! The caller keeps a [`StepCache`] holding the last machine run, so
//! stepping forward costs one opcode; stepping back runs the pickle again
//! from its start (a data.pkl of 100,000 opcodes replays in milliseconds).
//! Opcode positions are indexed sparsely (every `EVERY`th), so a pickle of
//! a hundred million opcodes costs a few MiB, not gigabytes.

use crate::data::{Data, Range, Source};
use crate::extraction::{ExtId, Phase, Tree};
use crate::parsers::format_of;
use crate::parsers::ml::pickle::ops::{self, Op};
use crate::parsers::ml::pickle::vm::Vm;
use crate::parsers::ml::pickle::{self, VM_LIMIT};

/// The extraction holding the pickle(s) to list: PATH itself, or the
/// `data.pkl` (else the first child with pickles) of a container named by
/// PATH, such as a torch zip.
pub fn pickle_target(t: &Tree, id: ExtId) -> Option<ExtId> {
    let e = &t.exts[id];
    let has_pickles = |x: ExtId| format_of(&t.exts[x]).is_some_and(|f| f.offers.pickles);
    if has_pickles(id) {
        return Some(id);
    }
    e.children
        .iter()
        .copied()
        .find(|&c| t.exts[c].display_name().ends_with("data.pkl"))
        .or_else(|| e.children.iter().copied().find(|&c| has_pickles(c)))
}

/// The pickle at or below `id` ([`pickle_target`]) and the ranges of the
/// pickles it holds, in order.
pub fn pickles(t: &Tree, id: ExtId) -> Option<(ExtId, Vec<Range>)> {
    let target = pickle_target(t, id)?;
    let ranges = t.exts[target]
        .nodes
        .iter()
        .filter(|n| n.kind == "pickle")
        .map(|n| n.range)
        .collect();
    Some((target, ranges))
}

/// Whether waiting for the tree can stop: the pickle below `id` is parsed,
/// or nothing below `id` is still being sniffed or parsed (then there is
/// none).
pub fn pickles_ready(t: &Tree, id: ExtId) -> bool {
    let parsing = |x: ExtId| matches!(t.exts[x].phase, Phase::Waiting | Phase::Parsing);
    pickle_target(t, id).is_some_and(|x| !parsing(x))
        || t.subtree(id).into_iter().all(|x| !parsing(x))
}

/// Opcodes listed around the current one.
const WINDOW: usize = 200;
/// One indexed position per this many opcodes.
const EVERY: usize = 256;
/// Stack entries, memo entries and metastack frames shown.
const SHOWN: usize = 64;

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

/// What the worker keeps between requests.
#[derive(Default)]
pub struct StepCache {
    key: Option<(usize, Range)>,
    /// Offset of opcode `i * EVERY`.
    index: Vec<u64>,
    total: usize,
    end: Option<String>,
    /// The machine after opcode `.0`, and the offset of the next opcode.
    vm: Option<(usize, u64, Vm)>,
}

impl StepCache {
    fn index(&mut self, data: &dyn Source, range: Range) {
        self.index.clear();
        self.vm = None;
        let mut n = 0usize;
        let end = pickle::scan(data, range.start, range.end, |op| {
            if n.is_multiple_of(EVERY) {
                self.index.push(op.pos);
            }
            n += 1;
            true
        });
        self.total = n;
        self.end = match end {
            pickle::End::Stop(_) | pickle::End::Halted(_) => None,
            pickle::End::Short { at, why } => Some(format!("cut off at {at:#x}: {why}")),
            pickle::End::Invalid { at, why } => Some(format!("unreadable at {at:#x}: {why}")),
        };
    }

    /// The index and offset of the opcode holding byte `at`.
    fn find(&self, data: &dyn Source, range: Range, at: u64) -> usize {
        let k = self.index.partition_point(|&p| p <= at).saturating_sub(1);
        let mut i = k * EVERY;
        let mut pos = self.index.get(k).copied().unwrap_or(range.start);
        let mut scratch = Vec::new();
        while i + 1 < self.total {
            match ops::decode(data, pos, range.end, &mut scratch) {
                Ok(op) if op.pos + op.len <= at => {
                    pos += op.len;
                    i += 1;
                }
                _ => break,
            }
        }
        i
    }

    /// Offset of opcode `i`.
    fn position(&self, data: &dyn Source, range: Range, i: usize) -> u64 {
        let k = i / EVERY;
        let mut pos = self.index.get(k).copied().unwrap_or(range.start);
        let mut scratch = Vec::new();
        for _ in 0..i % EVERY {
            match ops::decode(data, pos, range.end, &mut scratch) {
                Ok(op) => pos += op.len,
                Err(_) => break,
            }
        }
        pos
    }
}

impl StepRequest {
    /// The machine's state at the target, reusing what `cache` kept.
    pub fn run(&self, cache: &mut StepCache) -> StepResult {
        let data = &*self.data;
        let key = (
            std::sync::Arc::as_ptr(&self.data) as *const u8 as usize,
            self.range,
        );
        if cache.key != Some(key) {
            cache.key = Some(key);
            cache.index(data, self.range);
        }
        let total = cache.total;
        let mut out = StepResult {
            ext: self.ext,
            generation: self.generation,
            range: self.range,
            total,
            end: cache.end.clone(),
            ..StepResult::default()
        };
        if total == 0 {
            return out;
        }
        let step = match self.target {
            Target::Step(n) => n.min(total - 1),
            Target::Offset(at) => cache.find(data, self.range, at),
        };
        out.step = step;
        // Go on from the cached machine when it is not past the target.
        let (mut at, mut pos, mut vm) = match cache.vm.take() {
            Some((s, p, vm)) if s <= step => (s + 1, p, vm),
            _ => (0, self.range.start, Vm::new(VM_LIMIT)),
        };
        let mut scratch = Vec::new();
        let mut current: Option<Range> = None;
        while at <= step {
            match ops::decode(data, pos, self.range.end, &mut scratch) {
                Ok(op) => {
                    vm.step(&op, data);
                    current = Some(op.range());
                    pos += op.len;
                }
                Err(_) => break,
            }
            at += 1;
        }
        let lo = step.saturating_sub(WINDOW / 2);
        let hi = (lo + WINDOW).min(total);
        let mut p = cache.position(data, self.range, lo);
        out.first = lo;
        for _ in lo..hi {
            let Ok(op) = ops::decode(data, p, self.range.end, &mut scratch) else {
                break;
            };
            out.listing.push((p, line(&op, data)));
            p += op.len;
        }
        out.op = current.unwrap_or_else(|| Range::new(pos, pos));
        out.depth = vm.stack.len();
        let skip = vm.stack.len().saturating_sub(SHOWN);
        out.stack = vm.stack[skip..].iter().map(|&x| vm.repr(x, 200)).collect();
        let skip = vm.meta.len().saturating_sub(SHOWN);
        out.meta = vm.meta[skip..]
            .iter()
            .map(|s| {
                let top = s.len().saturating_sub(8);
                (s.len(), s[top..].iter().map(|&x| vm.repr(x, 80)).collect())
            })
            .collect();
        out.memo_len = vm.memo.len();
        out.memo = vm
            .memo
            .iter()
            .rev()
            .take(SHOWN)
            .map(|(k, v)| (*k, vm.repr(*v, 120)))
            .collect();
        out.problems = vm
            .problems
            .iter()
            .map(|p| format!("{:#x}: {}", p.pos, p.message))
            .collect();
        if let Some(at) = vm.exhausted {
            out.problems.push(format!(
                "{at:#x}: more than {VM_LIMIT} objects: the state is not rebuilt past here"
            ));
        }
        cache.vm = Some((step, pos, vm));
        out
    }
}

fn line(op: &Op, data: &dyn Source) -> String {
    let arg = pickle::arg_repr(op, data, 120).unwrap_or_default();
    format!("{:<16}{arg}", op.name())
}
