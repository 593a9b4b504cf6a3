//! The one driver of the block compressors' parsers (bzip2, xz, zstd): it
//! owns the step loop, the resync after damage (scan forward for the next
//! valid unit, report the input lost on the way, go on there), what
//! follows a stream (padding, another stream, garbage), a cut input and
//! the parse's end. A format supplies only its framing, through
//! [`BlockFormat`]: its own states and their steps, and how the next
//! valid unit is recognised.

use crate::data::{BlockCodec, Data, Pull, Range, view};
use crate::node::Node;
use crate::parsers::api::{Parser, Step, StepCx};
use crate::parsers::compress::decoded::{Decoded, Run};
use crate::status::Damage;

/// What a format's parser and the driver share: the compressed input, the
/// decoded stream, where the parse is, and a buffer for reads.
pub(super) struct Core<S> {
    pub(super) data: Data,
    pub(super) out: Decoded,
    pub(super) state: State<S>,
    pub(super) scratch: Vec<u8>,
}

impl<S> Core<S> {
    /// A parse of `data` from the format's state `start`, decoded by
    /// `codec` (`label` names the decoded source).
    pub(super) fn new(
        data: Data,
        codec: Box<dyn BlockCodec>,
        label: &'static str,
        start: S,
    ) -> Core<S> {
        Core {
            out: Decoded::new(data.clone(), codec, label),
            data,
            state: State::At(start),
            scratch: Vec::new(),
        }
    }
}

/// Where a parse of a block-compressed file is.
pub(super) enum State<S> {
    /// In the format's own framing (headers, blocks, frames, trailers).
    At(S),
    /// After a stream, at byte `at`: zero padding (from `pad`), another
    /// stream, or garbage (see [`Trailer`]).
    After { at: u64, pad: u64 },
    /// Looking for the next valid unit from `from` (in the format's
    /// positions, see [`BlockFormat::PER_BYTE`]) after damage found at
    /// byte `lost`; `why` says what the damage was.
    Resync { from: u64, lost: u64, why: String },
    /// The parse has ended.
    Done,
}

/// What one scan for the next valid unit found.
pub(super) enum Scan<S> {
    /// A valid unit: the input is lost up to byte `to`, and the parse goes
    /// on in `next`.
    Found { to: u64, next: S },
    /// Nothing before position `from`, with more input to scan there: the
    /// scan goes on at the next step.
    Further(u64),
    /// Nothing before position `from`, where the input ends for now: the
    /// scan goes on once more of it comes.
    Wait(u64),
    /// Nothing up to the input's end.
    End,
}

/// What may follow a stream, for the formats whose streams are
/// concatenated (bzip2, xz): zero padding, another stream, or garbage.
pub(super) struct Trailer {
    /// Bytes read right after a stream: another stream's header is the
    /// likely next thing there.
    pub(super) first_read: usize,
    /// A stream header's fixed first bytes.
    pub(super) head: &'static [u8],
    /// The bytes that tell whether a stream starts: fewer, all of them
    /// matching `head`, wait for more input.
    pub(super) head_len: usize,
    /// The padding nodes' name.
    pub(super) padding: &'static str,
    /// What padding's length must be a multiple of (1: any length).
    pub(super) align: u64,
    /// Why bytes after a stream that are neither padding nor a stream are
    /// lost.
    pub(super) garbage: &'static str,
}

/// A block compressor's framing, driven by the provided methods (which a
/// format calls but does not override); a type that implements it is a
/// [`Parser`], whose step is the driver's loop.
pub(super) trait BlockFormat {
    /// The format's own states.
    type At;
    /// The unit resync looks for, as the lost-input reports name it.
    const UNIT: &'static str;
    /// Positions in a byte, as [`State::Resync`] counts them: 8 for a
    /// format whose units start at any bit.
    const PER_BYTE: u64 = 1;
    /// What may follow a stream; `None`: the format never enters
    /// [`State::After`].
    const TRAILER: Option<Trailer> = None;

    /// What the format and the driver share.
    fn core(&mut self) -> &mut Core<Self::At>;
    /// One step in the format's own state (`State::At`): `Some` ends the
    /// step, `None` goes on with the state it left.
    fn step_at(&mut self, cx: &mut StepCx) -> Option<Step>;
    /// Scans for the next valid unit from position `from`, within the
    /// step's budget; damage was found at byte `lost`.
    fn find_next(&mut self, cx: &mut StepCx, from: u64, lost: u64) -> Scan<Self::At>;

    /// The state of a stream whose header starts `bytes`, at byte `at`
    /// (for a format with a [`Trailer`]).
    fn stream_at(_bytes: &[u8], _at: u64) -> Option<Self::At> {
        None
    }
    /// Before the driver reports lost input (`found`: a valid unit follows).
    fn before_lost(&mut self, _cx: &mut StepCx, _found: bool) {}
    /// What the format reports as its parse ends.
    fn wrap_up(&mut self, _cx: &mut StepCx) {}
    /// Pushes a node of the driver's (padding).
    fn push(&mut self, cx: &mut StepCx, node: Node) {
        cx.push_node(node);
    }

    /// Goes on in the format's state `at`.
    fn go(&mut self, at: Self::At) {
        self.core().state = State::At(at);
    }

    /// Looks for the next valid unit from position `from`, after damage
    /// found at byte `lost`.
    fn resync(&mut self, from: u64, lost: u64, why: String) {
        self.core().state = State::Resync { from, lost, why };
    }

    /// A stream ended at byte `end`: what follows it is looked at.
    fn after_stream(&mut self, end: u64) {
        self.core().state = State::After { at: end, pad: end };
    }

    /// A step of the resync: on a valid unit, the input skipped to it is
    /// reported lost and the parse goes on there; at the input's end, all
    /// after `lost` is.
    fn step_resync(&mut self, cx: &mut StepCx, from: u64, lost: u64, why: String) -> Option<Step> {
        match self.find_next(cx, from, lost) {
            Scan::Found { to, next } => {
                self.report_lost(cx, lost, to, &why, true);
                self.go(next);
                None
            }
            Scan::Further(from) => {
                self.resync(from, lost, why);
                Some(Step::Yield)
            }
            Scan::Wait(from) => {
                self.resync(from, lost, why);
                Some(Step::Blocked)
            }
            Scan::End => {
                let avail = self.core().data.available();
                self.report_lost(cx, lost, avail, &why, false);
                Some(self.finish(cx))
            }
        }
    }

    /// Reports input bytes `[lost, to)` lost (`found`: a valid unit
    /// follows them) in the input and the decoded stream.
    fn report_lost(&mut self, cx: &mut StepCx, lost: u64, to: u64, why: &str, found: bool) {
        self.before_lost(cx, found);
        self.core()
            .out
            .record_lost(cx, lost, to, why, Self::UNIT, found);
    }

    /// A step after a stream, at byte `at`, padding from `pad`: zero bytes
    /// are padding, a stream header starts a stream, anything else is lost
    /// up to the next valid unit.
    fn step_after(&mut self, cx: &mut StepCx, at: u64, pad: u64) -> Option<Step> {
        let Some(t) = Self::TRAILER else {
            return Some(self.finish(cx));
        };
        let (avail, fin) = self.core().data.extent();
        let data = self.core().data.clone();
        // Right after a stream, another stream's header is the likely
        // next thing: a short read, not a megabyte per stream.
        let len = if at == pad { t.first_read } else { 1 << 20 };
        let Ok(bytes) = view(&*data, at, len, &mut self.core().scratch) else {
            return Some(self.finish(cx));
        };
        if bytes.is_empty() {
            if !fin {
                return Some(Step::Blocked);
            }
            if avail > pad {
                let r = Range::new(pad, avail);
                let mut n = Node::new("padding", t.padding, r).uint(r.len());
                if !r.len().is_multiple_of(t.align) {
                    let d = Damage::corrupt(
                        r,
                        format!("{} is not a multiple of {} bytes", t.padding, t.align),
                    );
                    n = n.damaged(d.clone());
                    cx.damage(d);
                }
                self.push(cx, n);
            }
            return Some(self.finish(cx));
        }
        if at == pad {
            let part = &bytes[..bytes.len().min(t.head.len())];
            if bytes.len() < t.head_len && !fin && t.head.starts_with(part) {
                return Some(Step::Blocked);
            }
            if let Some(next) = Self::stream_at(bytes, at) {
                self.go(next);
                return None;
            }
        }
        let zeros = bytes.iter().take_while(|&&b| b == 0).count();
        if zeros == bytes.len() {
            self.core().state = State::After {
                at: at + zeros as u64,
                pad,
            };
            return Some(Step::Yield);
        }
        let q = at + zeros as u64;
        if q > pad && (q - pad).is_multiple_of(t.align) {
            let r = Range::new(pad, q);
            self.push(cx, Node::new("padding", t.padding, r).uint(r.len()));
            self.after_stream(q);
            return None;
        }
        self.resync(q * Self::PER_BYTE, q, t.garbage.into());
        None
    }

    /// What a pump of the unit being decoded ([`Decoded::run`]) did, with
    /// progress at input byte `done`: `Err`, the step's end (more to
    /// decode; or the session's decode budget used up, which ends the unit
    /// at byte `end`, and the parse); `Ok`, why the reader stopped.
    fn pumped(&mut self, cx: &mut StepCx, run: Run, done: u64, end: u64) -> Result<Pull, Step> {
        cx.progress(done, Some(self.core().data.available()));
        match run {
            Run::More => Err(Step::Yield),
            Run::Budget => {
                self.core().out.src.end_block(end);
                Err(self.finish(cx))
            }
            Run::Stopped(p) => Ok(p),
        }
    }

    /// Ends the parse at a cut: `why`, as truncation at `r` in the input
    /// and at the decoded stream's end.
    fn cut(&mut self, cx: &mut StepCx, r: Range, why: &str) -> Step {
        cx.damage(Damage::truncated(r, why.to_string()));
        let o = self.core().out.pos();
        self.core().out.damage(
            cx,
            Damage::truncated(
                Range::new(o, o),
                format!("decoded stream ends early: {why}"),
            ),
        );
        self.finish(cx)
    }

    /// Ends the parse: the format's last reports, the decoded stream's
    /// end, all input done.
    fn finish(&mut self, cx: &mut StepCx) -> Step {
        self.wrap_up(cx);
        self.core().out.finish();
        let len = self.core().data.available();
        cx.progress(len, Some(len));
        self.core().state = State::Done;
        Step::Done
    }
}

/// Every block format's parser: the driver's step loop.
impl<F: BlockFormat + Send> Parser for F {
    /// Up to 64 state changes.
    fn step(&mut self, cx: &mut StepCx) -> Step {
        for _ in 0..64 {
            let r = match &mut self.core().state {
                State::At(_) => self.step_at(cx),
                &mut State::After { at, pad } => self.step_after(cx, at, pad),
                State::Resync { from, lost, why } => {
                    // The scan sets the state again, `why` with it.
                    let (from, lost, why) = (*from, *lost, std::mem::take(why));
                    self.step_resync(cx, from, lost, why)
                }
                State::Done => Some(Step::Done),
            };
            if let Some(step) = r {
                return step;
            }
        }
        Step::Yield
    }
}
