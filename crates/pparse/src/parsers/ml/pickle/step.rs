//! Stepping a pickle for the explorer's stepper (the offer's `step`): the
//! VM's state after any opcode, forward and back.
//!
//! The caller keeps a [`StepCache`] holding the last machine run, so
//! stepping forward costs one opcode; stepping back runs the pickle again
//! from its start (a data.pkl of 100,000 opcodes replays in milliseconds).
//! Opcode positions are indexed sparsely (every `EVERY`th), so a pickle of
//! a hundred million opcodes costs a few MiB, not gigabytes.

use super::ops::{self, Op};
use super::read::{End, VM_LIMIT, scan};
use super::text::arg_repr;
use super::vm::Vm;
use crate::data::{Range, Source};
use crate::offer::pickle::{StepCache, StepRequest, StepResult, Target};

/// Opcodes listed around the current one.
const WINDOW: usize = 200;
/// One indexed position per this many opcodes.
const EVERY: usize = 256;
/// Stack entries, memo entries and metastack frames shown.
const SHOWN: usize = 64;

/// What a [`StepCache`] keeps for pickles between requests.
#[derive(Default)]
struct Cache {
    key: Option<(usize, Range)>,
    /// Offset of opcode `i * EVERY`.
    index: Vec<u64>,
    total: usize,
    end: Option<String>,
    /// The machine after opcode `.0`, and the offset of the next opcode.
    vm: Option<(usize, u64, Vm)>,
}

impl Cache {
    fn index(&mut self, data: &dyn Source, range: Range) {
        self.index.clear();
        self.vm = None;
        let mut n = 0usize;
        let end = scan(data, range.start, range.end, |op| {
            if n.is_multiple_of(EVERY) {
                self.index.push(op.pos);
            }
            n += 1;
            true
        });
        self.total = n;
        self.end = match end {
            End::Stop(_) | End::Halted(_) => None,
            End::Short { at, why } => Some(format!("cut off at {at:#x}: {why}")),
            End::Invalid { at, why } => Some(format!("unreadable at {at:#x}: {why}")),
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

/// The offer's `step`: the machine's state at the request's target,
/// reusing what `cache` kept.
pub(super) fn step(req: &StepRequest, cache: &mut StepCache) -> StepResult {
    req.run_with(cache.get::<Cache>())
}

impl StepRequest {
    fn run_with(&self, cache: &mut Cache) -> StepResult {
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
    let arg = arg_repr(op, data, 120).unwrap_or_default();
    format!("{:<16}{arg}", op.name())
}
