//! Reading one pickle: its opcodes decoded in order, the VM run over them,
//! and the globals it saw.

use std::collections::BTreeMap;

use super::ops::{self, Op, OpError};
use super::safety::{self, Verdict};
use super::vm::{Obj, Vm};
use crate::data::Source;

/// Objects a VM may build before it stops rebuilding (memory bound).
pub const VM_LIMIT: usize = 4_000_000;

/// How the scan of one pickle ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// STOP read; the pickle ends at this offset.
    Stop(u64),
    /// The bytes end inside the pickle.
    Short {
        /// Where the opcode the bytes end in starts (the end itself when
        /// they end between opcodes).
        at: u64,
        /// What was cut off.
        why: String,
    },
    /// Not a valid opcode or argument.
    Invalid {
        /// Where the bad opcode starts.
        at: u64,
        /// What is wrong with it.
        why: String,
    },
    /// Stopped by the caller (budget, or bytes still arriving).
    Halted(u64),
}

/// Decodes the opcodes of one pickle from `start` (bounded by `end`),
/// calling `each` for every opcode; `each` returning false halts.
pub fn scan(data: &dyn Source, start: u64, end: u64, mut each: impl FnMut(&Op) -> bool) -> End {
    let mut scratch = Vec::new();
    let mut pos = start;
    loop {
        if pos >= end {
            return End::Short {
                at: pos,
                why: "the bytes end before STOP".into(),
            };
        }
        match ops::decode(data, pos, end, &mut scratch) {
            Ok(op) => {
                pos += op.len;
                let stop = op.info.name == "STOP";
                if !each(&op) {
                    return End::Halted(pos);
                }
                if stop {
                    return End::Stop(pos);
                }
            }
            Err(OpError::Short(why)) => return End::Short { at: pos, why },
            Err(OpError::Invalid(why)) => return End::Invalid { at: pos, why },
        }
    }
}

/// Runs the VM over the pickle at `start`; returns the machine, how the
/// scan ended and the number of opcodes.
pub fn run(data: &dyn Source, start: u64, end: u64, limit: usize) -> (Vm, End, u64) {
    let mut vm = Vm::new(limit);
    let mut n = 0;
    let e = scan(data, start, end, |op| {
        n += 1;
        vm.step(op, data);
        true
    });
    (vm, e, n)
}
/// The globals a VM saw, with verdicts.
pub fn globals(vm: &Vm) -> BTreeMap<String, Verdict> {
    let mut out = BTreeMap::new();
    for o in &vm.objs {
        if let Obj::Global { module, name } = o {
            out.insert(format!("{module}.{name}"), safety::classify(module, name));
        }
    }
    out
}
