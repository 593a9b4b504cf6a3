//! The bookkeeping of `pickletools.dis`, so that `pparse pickle` prints the
//! same lines: indentation by open MARKs, `(MARK at N)` and `(as N)` notes,
//! and the same complaints about the memo and the stack.
//!
//! Only what the listing needs is kept: how many items lie above each MARK
//! (not the items) and which memo keys are set (a bit per key), so a pickle
//! of a hundred million opcodes is listed in a few MiB.

use std::collections::HashSet;

use super::ops::{Arg, Op};

/// How an opcode moves the stack, as pickletools describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Effect {
    /// Items taken (a MARK and the slice above it count as two).
    before: u64,
    /// Where the MARK is among the items taken, for opcodes that take one.
    mark: Option<u64>,
    /// Items pushed.
    after: u64,
    /// It pushes a MARK.
    pushes_mark: bool,
}

fn effect(name: &str) -> Effect {
    let e = |before, after| Effect {
        before,
        mark: None,
        after,
        pushes_mark: false,
    };
    let m = |before, mark, after| Effect {
        before,
        mark: Some(mark),
        after,
        pushes_mark: false,
    };
    match name {
        "MARK" => Effect {
            before: 0,
            mark: None,
            after: 0,
            pushes_mark: true,
        },
        "APPENDS" | "SETITEMS" | "ADDITEMS" => m(3, 1, 1),
        "LIST" | "TUPLE" | "DICT" | "FROZENSET" | "INST" => m(2, 0, 1),
        "POP_MARK" => m(2, 0, 0),
        "OBJ" => m(3, 0, 1),
        "READONLY_BUFFER" | "TUPLE1" | "MEMOIZE" | "BINPERSID" => e(1, 1),
        "APPEND" | "TUPLE2" | "STACK_GLOBAL" | "REDUCE" | "BUILD" | "NEWOBJ" => e(2, 1),
        "TUPLE3" | "SETITEM" | "NEWOBJ_EX" => e(3, 1),
        "POP" | "STOP" => e(1, 0),
        "DUP" => e(1, 2),
        "PUT" | "BINPUT" | "LONG_BINPUT" | "PROTO" | "FRAME" => e(0, 0),
        // Everything else pushes one object.
        _ => e(0, 1),
    }
}

/// Memo keys seen: a bit per small key, a set for the rest.
#[derive(Default)]
struct Keys {
    bits: Vec<u64>,
    big: HashSet<i64>,
    len: u64,
}

/// Keys below this use the bitmap (1 MiB of bits at most).
const BITMAP_KEYS: i64 = 1 << 23;

impl Keys {
    fn contains(&self, k: i64) -> bool {
        if (0..BITMAP_KEYS).contains(&k) {
            let (w, b) = ((k / 64) as usize, k % 64);
            self.bits.get(w).is_some_and(|x| x & (1 << b) != 0)
        } else {
            self.big.contains(&k)
        }
    }
    fn insert(&mut self, k: i64) {
        if (0..BITMAP_KEYS).contains(&k) {
            let (w, b) = ((k / 64) as usize, k % 64);
            if self.bits.len() <= w {
                self.bits.resize(w + 1, 0);
            }
            self.bits[w] |= 1 << b;
        } else {
            self.big.insert(k);
        }
        self.len += 1;
    }
}

/// The note pickletools prints after an opcode's argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// `(MARK at 12)`: the MARK this opcode pops to.
    At(u64),
    /// `(as 3)`: the memo key MEMOIZE stores under.
    As(i64),
    /// `no MARK exists on stack`.
    Missing,
}

impl std::fmt::Display for Mark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mark::At(at) => write!(f, "(MARK at {at})"),
            Mark::As(k) => write!(f, "(as {k})"),
            Mark::Missing => f.write_str(NO_MARK),
        }
    }
}

const NO_MARK: &str = "no MARK exists on stack";

/// What the listing adds to an opcode's line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Notes {
    /// The note pickletools prints after the argument, if any.
    pub mark: Option<Mark>,
    /// What pickletools would stop with after printing the line.
    pub error: Option<String>,
}

/// pickletools' emulation of one pickle.
pub struct Dis {
    /// Items between MARKs: `[below the first MARK, above it, ...]`.
    segments: Vec<u64>,
    /// The sum of `segments`, kept as they change: the stack's length is
    /// asked at every opcode, and a million open MARKs must not make each
    /// opcode walk a million segments.
    items: u64,
    /// Segments touched so far (at least one per opcode): the work of the
    /// listing's bookkeeping, which tests check is linear in the opcodes.
    pub work: u64,
    /// Where each open MARK is.
    marks: Vec<u64>,
    memo: Keys,
    /// Highest protocol among the opcodes so far.
    pub max_proto: u8,
}

impl Default for Dis {
    fn default() -> Dis {
        Dis {
            segments: vec![0],
            items: 0,
            work: 0,
            marks: Vec::new(),
            memo: Keys::default(),
            max_proto: 0,
        }
    }
}

impl Dis {
    /// Open MARKs: the indentation of the next line, in steps of 4 spaces.
    pub fn depth(&self) -> usize {
        self.marks.len()
    }

    fn len(&self) -> u64 {
        self.items + self.marks.len() as u64
    }

    fn top_is_mark(&self) -> bool {
        self.segments.len() > 1 && self.segments.last() == Some(&0)
    }

    /// Takes `n` items off the stack (MARKs among them included).
    fn pop(&mut self, mut n: u64) {
        while n > 0 {
            self.work += 1;
            let last = self.segments.last_mut().expect("never empty");
            let k = (*last).min(n);
            *last -= k;
            self.items -= k;
            n -= k;
            if n > 0 {
                if self.segments.len() == 1 {
                    return;
                }
                self.segments.pop();
                self.marks.pop();
                n -= 1;
            }
        }
    }

    /// Records `op`; returns the notes for its line.
    pub fn step(&mut self, op: &Op) -> Notes {
        let name = op.name();
        self.work += 1;
        self.max_proto = self.max_proto.max(op.info.proto);
        let fx = effect(name);
        let mut notes = Notes::default();
        let mut take = fx.before;
        if fx.mark.is_some() || (name == "POP" && self.top_is_mark()) {
            match self.marks.pop() {
                Some(at) => {
                    notes.mark = Some(Mark::At(at));
                    // The items above the MARK go with it.
                    self.items -= self.segments.pop().unwrap_or(0);
                    take = fx.mark.unwrap_or(0);
                }
                None => {
                    notes.mark = Some(Mark::Missing);
                    notes.error = Some(NO_MARK.to_string());
                }
            }
        }
        match name {
            "PUT" | "BINPUT" | "LONG_BINPUT" | "MEMOIZE" => {
                let key = if name == "MEMOIZE" {
                    let k = self.memo.len as i64;
                    notes.mark = Some(Mark::As(k));
                    Some(k)
                } else if let Arg::Int(k) = op.arg {
                    Some(k)
                } else {
                    None
                };
                let error = match key {
                    Some(k) if self.memo.contains(k) => Some(format!(
                        "memo key {} already defined",
                        if name == "MEMOIZE" {
                            "None".to_string()
                        } else {
                            k.to_string()
                        }
                    )),
                    _ if self.len() == 0 => {
                        Some("stack is empty -- can't store into memo".to_string())
                    }
                    _ if self.top_is_mark() => {
                        Some("can't store markobject in the memo".to_string())
                    }
                    Some(k) => {
                        self.memo.insert(k);
                        None
                    }
                    None => None,
                };
                notes.error = notes.error.or(error);
            }
            "GET" | "BINGET" | "LONG_BINGET" => {
                if let Arg::Int(k) = op.arg
                    && !self.memo.contains(k)
                {
                    notes.error = notes
                        .error
                        .or(Some(format!("memo key {k} has never been stored into")));
                }
            }
            _ => {}
        }
        let have = self.len();
        if notes.error.is_none() && have < take {
            notes.error = Some(format!(
                "tries to pop {take} items from stack with only {have} items"
            ));
        }
        self.pop(take);
        if fx.pushes_mark {
            self.marks.push(op.pos);
            self.segments.push(0);
        }
        *self.segments.last_mut().expect("never empty") += fx.after;
        self.items += fx.after;
        notes
    }

    /// pickletools' complaint after STOP, if any.
    pub fn finish(&self) -> Option<String> {
        let n = self.len();
        (n > 0).then(|| format!("stack not empty after STOP: {n} items"))
    }
}
