//! Where the damage lies in a member whose deflate data decoded without an
//! error but failed its CRC-32 or size ("soft" damage: random bytes that a
//! block's Huffman codes decode through, after which they fall back in
//! step with the real symbols).
//!
//! The CRC says only that some byte is wrong. When the member holds a tar
//! archive, its header chain says more, because soft damage almost always
//! changes how many bytes the member decodes to: every byte after the
//! damage then sits `shift` bytes from where it belongs (the stored size
//! gives `shift`, modulo 2^32). So:
//!
//! * every header the chain reaches from the start, each where the one
//!   before says, lies before the damage (shifted, it would not check out);
//! * past the first break, the first header on the grid of offsets that are
//!   `shift` away from a multiple of 512 lies after the damage: before the
//!   damage no header sits on that grid (tar's are 512-aligned), and
//!   damaged output does not make a header whose checksum holds;
//! * the chain from there on must hold to the member's end;
//! * from that header on, the decoder reads real symbols with real codes
//!   (those of the block it is in, read before or after the damage): every
//!   byte it makes without copying from the 32 KiB before the header is
//!   exact. Decoding on from the first symbol at or past the header with
//!   an unknown window (`resync::Recover`, stopped there and restarted)
//!   lists the bytes that copy it: they may copy the damage, or copy the
//!   right bytes from the wrong place (after a shift, a distance that
//!   crosses the damage lands elsewhere), so they stay unverified.
//!
//! What this cannot see, and so what it assumes: a second place of damage
//! that leaves the length unchanged modulo 512 (a flipped bit that turns
//! one literal into another). A member whose length is off by a multiple
//! of 512 (none at all, included) is not narrowed: all of it stays
//! unverified.

use std::sync::Arc;

use crate::data::inflate::resync::{Event, Recover};
use crate::data::{Data, InflateSource, Range, read_exact_at};
use crate::parsers::archive::tar::{Link, link};

const BLOCK: u64 = 512;
/// Decoded bytes scanned for the first header past the damage; past it,
/// the rest of the member stays unverified.
const SCAN_MAX: u64 = 64 << 20;
/// Runs of copying bytes kept apart after the damage; past it, neighbours
/// merge (each one is matched against the members it covers).
const MAX_COPIES: usize = 64;
/// Output of one decoder run.
const RUN: usize = 256 * 1024;

/// Where a walk along the tar header chain of a decoded stream stands,
/// kept across members (a walk never goes over the same headers twice).
#[derive(Clone, Copy, Debug)]
pub(super) struct Chain {
    /// Decoded offset of the next header.
    pub next: u64,
    /// The last header that checked out.
    pub last: Option<u64>,
}

impl Chain {
    pub(super) const START: Chain = Chain {
        next: 0,
        last: None,
    };
}

/// Where a member's damage was found to lie, in decoded offsets.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Located {
    /// From the data of the last header before the damage to the first
    /// header after it (or the member's end).
    pub span: Range,
    /// Bytes after the span that copy bytes from the 32 KiB before it.
    pub copies: Vec<Range>,
    /// From a second break in the chain to the member's end.
    pub tail: Option<Range>,
}

enum Phase {
    /// Walking the chain to its first break in this member.
    Chain,
    /// Looking for the first header past the damage, from `at`.
    Scan { at: u64, lo: u64 },
    /// Walking the chain on from the header at `found`.
    Verify { next: u64, last: u64, found: u64 },
    /// Decoding from a checkpoint at decoded offset `base` to the first
    /// symbol at or past `found`.
    Boundary {
        rec: Box<Recover>,
        base: u64,
        found: u64,
    },
    /// Decoding on from that symbol (`at`), as if the window before it
    /// were unknown, until no byte copies it.
    Marks { rec: Box<Recover>, at: u64 },
}

/// A located search, stepped a bounded amount of work at a time.
pub(super) struct Locate {
    out: Arc<InflateSource>,
    input: Data,
    /// The member's decoded bytes.
    start: u64,
    end: u64,
    /// Decoded length minus the stored one.
    shift: i64,
    chain: Chain,
    /// Where the span starts: the data of the last header before the damage.
    from: u64,
    tail: Option<Range>,
    phase: Phase,
    scratch: Vec<u8>,
}

/// What a step of [`Locate`] came to.
pub(super) enum Outcome {
    Working,
    /// Done: where the damage lies, or `None` when it cannot be narrowed.
    Done(Option<Located>),
}

impl Locate {
    /// A search in the member decoded to `start..end` of `out` from
    /// `input`, whose decoded length is `shift` bytes off the stored one;
    /// `None` when the chain cannot narrow it (see the module docs).
    pub(super) fn new(
        out: Arc<InflateSource>,
        input: Data,
        (start, end): (u64, u64),
        shift: i64,
        chain: Chain,
    ) -> Option<Locate> {
        if shift.rem_euclid(BLOCK as i64) == 0 || chain.next > end {
            return None;
        }
        Some(Locate {
            out,
            input,
            start,
            end,
            shift,
            chain,
            from: start,
            tail: None,
            phase: Phase::Chain,
            scratch: Vec::new(),
        })
    }

    fn block(&self, at: u64) -> Option<[u8; 512]> {
        let mut b = [0u8; 512];
        match read_exact_at(&*self.out, at, &mut b) {
            Ok(true) => Some(b),
            _ => None,
        }
    }

    /// The span from the last header before the damage to the member's
    /// end: all that can be said when nothing after the damage is found.
    fn to_end(&self) -> Outcome {
        Outcome::Done((self.from < self.end).then(|| Located {
            span: Range::new(self.from, self.end),
            copies: Vec::new(),
            tail: None,
        }))
    }

    /// Works on for about `budget` bytes read or decoded.
    pub(super) fn step(&mut self, budget: u64) -> Outcome {
        let mut work = 0u64;
        while work < budget.max(1 << 16) {
            let phase = std::mem::replace(&mut self.phase, Phase::Chain);
            match phase {
                Phase::Chain => {
                    let next = self.chain.next;
                    if next.saturating_add(BLOCK) > self.end {
                        // The chain reaches past the member: its damage
                        // lies in the data of the last header.
                        return self.after_last();
                    }
                    let Some(b) = self.block(next) else {
                        return Outcome::Done(None);
                    };
                    work += BLOCK;
                    match link(&b) {
                        Link::Header(n) => {
                            self.chain.last = Some(next);
                            self.chain.next = next.saturating_add(n);
                        }
                        // The archive ends: the damage lies in the last
                        // member's data or in the zeros after it.
                        Link::End => return self.after_last(),
                        // A break in a member that checked out is not
                        // this damage: nothing can be said.
                        Link::Broken if next < self.start => return Outcome::Done(None),
                        Link::Broken => {
                            let Some(last) = self.chain.last else {
                                return Outcome::Done(None);
                            };
                            self.from = (last + BLOCK).max(self.start);
                            // The header that was at `next` is now at
                            // `next + shift`, if the damage spared it.
                            let lo = (next as i64)
                                .saturating_add(self.shift)
                                .max(self.from as i64) as u64;
                            let phase = (self.shift - lo as i64).rem_euclid(BLOCK as i64) as u64;
                            self.phase = Phase::Scan { at: lo + phase, lo };
                        }
                    }
                }
                Phase::Scan { at, lo } => {
                    if at + BLOCK > self.end || at - lo > SCAN_MAX {
                        return self.to_end();
                    }
                    let Some(b) = self.block(at) else {
                        return self.to_end();
                    };
                    work += BLOCK;
                    self.phase = match link(&b) {
                        Link::Header(n) => Phase::Verify {
                            next: at.saturating_add(n),
                            last: at,
                            found: at,
                        },
                        _ => Phase::Scan { at: at + BLOCK, lo },
                    };
                }
                Phase::Verify { next, last, found } => {
                    let mut stop = next.saturating_add(BLOCK) > self.end;
                    let mut phase = Phase::Verify { next, last, found };
                    if !stop {
                        let Some(b) = self.block(next) else {
                            return self.to_end();
                        };
                        work += BLOCK;
                        match link(&b) {
                            Link::Header(n) => {
                                phase = Phase::Verify {
                                    next: next.saturating_add(n),
                                    last: next,
                                    found,
                                }
                            }
                            Link::End => stop = true,
                            Link::Broken => {
                                self.tail = Some(Range::new(last + BLOCK, self.end));
                                stop = true;
                            }
                        }
                    }
                    if stop {
                        let Some((base, bit)) = self.out.block_before(self.start, found) else {
                            return self.to_end();
                        };
                        phase = Phase::Boundary {
                            rec: Box::new(Recover::new(self.input.clone(), bit)),
                            base,
                            found,
                        };
                    }
                    self.phase = phase;
                }
                Phase::Boundary {
                    mut rec,
                    base,
                    found,
                } => {
                    self.scratch.clear();
                    let before = rec.produced();
                    // A run stops between two symbols once it reaches its
                    // limit: the first one at or past the header.
                    let left = found.saturating_sub(base + before);
                    let ev = match left {
                        0 => Ok(Event::Progress),
                        n => rec.run(&mut self.scratch, RUN.min(n as usize)),
                    };
                    work += rec.produced() - before;
                    let at = base + rec.produced();
                    match ev {
                        Ok(Event::Progress | Event::Block) if at < found => {
                            self.phase = Phase::Boundary { rec, base, found }
                        }
                        Ok(Event::Progress | Event::Block) if at < self.end => {
                            rec.restart_here();
                            self.phase = Phase::Marks { rec, at };
                        }
                        // The member ends before it.
                        _ => return self.to_end(),
                    }
                }
                Phase::Marks { mut rec, at } => {
                    self.scratch.clear();
                    let before = rec.produced();
                    let ev = rec.run(&mut self.scratch, RUN);
                    work += rec.produced() - before;
                    let reached = at + rec.produced();
                    let over = match ev {
                        Ok(Event::Progress | Event::Block) if reached < self.end => {
                            if !rec.clean() {
                                self.phase = Phase::Marks { rec, at };
                                continue;
                            }
                            None
                        }
                        Ok(Event::Progress | Event::Block | Event::End(_)) => None,
                        // Decoding failed where zlib did not: nothing on
                        // from here is proved.
                        _ => Some(Range::new(reached.min(self.end), self.end)),
                    };
                    return Outcome::Done(Some(self.located(at, &mut rec, over)));
                }
            }
        }
        Outcome::Working
    }

    /// When the chain holds to the member's end (or the archive's): the
    /// damage lies after the last header that checked out.
    fn after_last(&self) -> Outcome {
        match self.chain.last {
            Some(last) if last + BLOCK < self.end => Outcome::Done(Some(Located {
                span: Range::new((last + BLOCK).max(self.start), self.end),
                copies: Vec::new(),
                tail: None,
            })),
            _ => Outcome::Done(None),
        }
    }

    /// The result once decoding from the boundary at decoded offset `at`
    /// stopped; `over`: bytes from where it failed.
    fn located(&self, at: u64, rec: &mut Recover, over: Option<Range>) -> Located {
        let mut copies: Vec<Range> = rec
            .take_unknown(true)
            .into_iter()
            .map(|(s, e)| Range::new((at + s).min(self.end), (at + e).min(self.end)))
            .filter(|r| !r.is_empty())
            .collect();
        copies.extend(over.filter(|r| !r.is_empty()));
        merge_to(&mut copies, MAX_COPIES);
        Located {
            span: Range::new(self.from, at),
            copies,
            tail: self.tail,
        }
    }
}

/// Merges the closest neighbours of sorted, disjoint ranges until at most
/// `max` are left.
fn merge_to(rs: &mut Vec<Range>, max: usize) {
    rs.sort_by_key(|r| r.start);
    while rs.len() > max {
        // Each pass merges about half: the gaps at or under the median.
        let mut gaps: Vec<u64> = rs.windows(2).map(|w| w[1].start - w[0].end).collect();
        gaps.sort_unstable();
        let cut = gaps[gaps.len() / 2];
        let mut out: Vec<Range> = Vec::with_capacity(rs.len());
        for r in rs.drain(..) {
            match out.last_mut() {
                Some(p) if r.start.saturating_sub(p.end) <= cut => p.end = p.end.max(r.end),
                _ => out.push(r),
            }
        }
        *rs = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_keeps_every_byte_and_the_bound() {
        let mut rs: Vec<Range> = (0..1000u64)
            .map(|i| Range::new(i * 100 + i % 7, i * 100 + 10 + i % 13))
            .collect();
        let total: Vec<u64> = rs.iter().flat_map(|r| r.start..r.end).collect();
        merge_to(&mut rs, 64);
        assert!(rs.len() <= 64);
        for b in total {
            assert!(rs.iter().any(|r| r.start <= b && b < r.end), "{b}");
        }
        assert!(rs.windows(2).all(|w| w[0].end < w[1].start));
    }
}
