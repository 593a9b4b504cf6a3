//! What the parsers of block compressors (bzip2, xz, zstd) share: the
//! decoded stream as one child extraction, its name, and how input lost to
//! damage is recorded in both the input and the decoded stream.

use std::sync::Arc;

use crate::data::{BlockCodec, Data, Range, Source};
use crate::data::{BlockSource, Pull, Pumped};
use crate::extraction::{EntryKind, ExtId};
use crate::name::Name;
use crate::node::Node;
use crate::parsers::api::{ChildSpec, StepCx};
use crate::status::Damage;

/// The decoded stream of one compressed file and its child extraction.
pub(super) struct Decoded {
    pub(super) src: Arc<BlockSource>,
    child: Option<ExtId>,
    scratch: Vec<u8>,
}

/// How one pump of a block ended, budget taken into account.
pub(super) enum Run {
    /// More to decode: yield.
    More,
    /// The session's decode budget is used up (already recorded).
    Budget,
    /// The reader stopped.
    Stopped(Pull),
}

impl Decoded {
    pub(super) fn new(input: Data, codec: Box<dyn BlockCodec>, label: &'static str) -> Decoded {
        Decoded {
            src: BlockSource::new(input, codec, label),
            child: None,
            scratch: Vec::new(),
        }
    }

    /// Decoded bytes so far.
    pub(super) fn pos(&self) -> u64 {
        self.src.available()
    }

    /// Creates the child on the first good block, named after the file
    /// as `table` says (suffix → replacement).
    pub(super) fn ensure_child(&mut self, cx: &mut StepCx, origin: u64, table: &[(&str, &str)]) {
        if self.child.is_some() {
            return;
        }
        let data: Data = self.src.clone();
        let mut spec = ChildSpec::new(
            Name::new(derived_name(cx.name, table)),
            EntryKind::Stream,
            data,
        );
        let end = cx.data.available().max(origin);
        spec.origin = Some(Range::new(origin, end));
        self.child = Some(cx.add_child(spec));
    }

    /// Records damage in the decoded stream.
    pub(super) fn damage(&self, cx: &mut StepCx, d: Damage) {
        if let Some(c) = self.child {
            cx.child_damage(c, d);
        }
    }

    /// Pumps `reader` within the step's and the session's budgets.
    pub(super) fn run(
        &mut self,
        cx: &mut StepCx,
        reader: &mut dyn crate::data::BlockReader,
        seen: &mut dyn FnMut(&[u8]),
    ) -> Run {
        if cx.decode_left == 0 {
            let at = self.pos();
            let d = cx.budget_damage(at);
            self.damage(cx, d);
            return Run::Budget;
        }
        let before = self.pos();
        let r = self.src.pump(
            reader,
            cx.budget.min(cx.decode_left),
            &mut self.scratch,
            seen,
        );
        cx.decoded(self.pos() - before);
        match r {
            Pumped::Progress => Run::More,
            Pumped::Stopped(p) => Run::Stopped(p),
        }
    }

    /// Records compressed bytes `[lost, next)` that decoded to nothing
    /// trustworthy: a `skipped` node, corrupt input, and a point of loss in
    /// the decoded stream. `what` names the unit ("block", "frame").
    pub(super) fn record_lost(
        &self,
        cx: &mut StepCx,
        lost: u64,
        next: u64,
        why: &str,
        what: &str,
        found: bool,
    ) {
        if found && next <= lost {
            return; // nothing skipped: the damage is already reported
        }
        let r = Range::new(lost, next);
        let reason = if found {
            format!(
                "{why}; skipped {} compressed bytes to the next valid {what}",
                r.len()
            )
        } else {
            format!(
                "{why}; no further valid {what} ({} bytes unreadable)",
                r.len()
            )
        };
        if !r.is_empty() {
            cx.push_node(
                Node::new("skipped", "unreadable bytes", r)
                    .uint(r.len())
                    .damaged(Damage::corrupt(r, reason.clone())),
            );
        }
        cx.damage(Damage::corrupt(r, reason.clone()));
        let at = self.pos();
        self.damage(
            cx,
            Damage::corrupt(
                Range::new(at, at),
                format!(
                    "bytes lost here: {reason}; the decoded length of what they held is unknown"
                ),
            ),
        );
    }

    /// Ends the decoded stream.
    pub(super) fn finish(&self) {
        self.src.finish();
    }
}

/// The decoded stream's name, as the decompressor would write it: the
/// last component of the file's name (a tar member's name is its whole
/// path) with its suffix replaced as `table` says, or `.decoded` added.
pub(super) fn derived_name(name: &str, table: &[(&str, &str)]) -> String {
    let name = name.rsplit('/').next().unwrap_or(name);
    let lower = name.to_ascii_lowercase();
    for (suffix, repl) in table {
        if lower.ends_with(suffix) && name.len() > suffix.len() {
            return format!("{}{repl}", &name[..name.len() - suffix.len()]);
        }
    }
    format!("{name}.decoded")
}

/// For the formats' tests: random reads of `src` after its cache is
/// dropped give `reference`'s bytes (every read decodes its block again).
#[cfg(test)]
pub(super) fn check_random_reads(src: &BlockSource, reference: &[u8]) {
    assert_eq!(src.available(), reference.len() as u64);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..120 {
        if i % 2 == 0 {
            src.evict();
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = x % reference.len() as u64;
        let len = (x >> 24) % 200_000 + 1;
        let mut buf = vec![0; len as usize];
        let k = src.read_at(off, &mut buf).unwrap();
        let want = len.min(reference.len() as u64 - off) as usize;
        assert_eq!(k, want, "read at {off}");
        assert!(
            buf[..k] == reference[off as usize..off as usize + k],
            "read at {off}"
        );
    }
}

/// For the formats' tests: a fixture of fixtures/compress/.
#[cfg(test)]
pub(super) fn fixture(name: &str) -> Vec<u8> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/compress/");
    std::fs::read(format!("{dir}{name}")).expect("fixture")
}

/// For the formats' tests: fills `src` with the block at `start` (aux
/// `aux`) to its end; returns the reader's input position.
#[cfg(test)]
pub(super) fn decode_block(src: &BlockSource, start: u64, aux: [u64; 2]) -> u64 {
    let mut r = src.open(start, aux).unwrap();
    src.begin_block(start, aux);
    let mut scratch = Vec::new();
    loop {
        match src.pump(&mut *r, u64::MAX, &mut scratch, &mut |_| {}) {
            Pumped::Progress => {}
            Pumped::Stopped(Pull::End) => break,
            Pumped::Stopped(p) => panic!("block at {start}: {p:?}"),
        }
    }
    let end = r.input_pos();
    src.end_block(end);
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let t = [(".tbz2", ".tar"), (".bz2", "")];
        assert_eq!(derived_name("a.tar.bz2", &t), "a.tar");
        assert_eq!(derived_name("a.TBZ2", &t), "a.tar");
        assert_eq!(derived_name(".bz2", &t), ".bz2.decoded");
        assert_eq!(derived_name("x", &t), "x.decoded");
        assert_eq!(derived_name("bundle/bash/a.tbz2", &t), "a.tar");
    }
}
