//! The members of a BGZF file decoded ahead on worker threads
//! (`data/ahead.rs`). bgzip writes gzip members of at most 64 KiB whose
//! header gives the member's size (the `BC` extra subfield), so where
//! the next member starts is known without decoding: workers decode the
//! members after the one being read, each whole, and check its trailer.
//! The first pass takes a member decoded ahead only where it reaches a
//! member header itself, at the same deflate start, and only one whose
//! CRC and size hold (see [`Inflater::new_member`]).
//!
//! [`Inflater::new_member`]: super::Inflater::new_member

use std::sync::atomic::{AtomicBool, Ordering};

use super::zlib::{Code, RawInflate};
use crate::data::ahead;
use crate::data::source::{Data, Source, read_exact_at};
use crate::data::stats::Counted;
use crate::data::workers::threads;

/// A BGZF member's compressed size is at most this (its size field is 16
/// bits).
const MEMBER_MAX: u64 = 1 << 16;
/// Output a member may decode to here (BGZF members hold 64 KiB); a
/// larger one is the first pass's to decode.
const OUT_MAX: usize = 128 << 10;

/// The BGZF member header at `at`: where its deflate data starts and
/// where the next member starts; `None` when it is no BGZF header (only
/// the extra field, holding the `BC` subfield, as bgzip writes it).
pub(super) fn bgzf_member(input: &dyn Source, at: u64) -> Option<(u64, u64)> {
    let mut h = [0u8; 12];
    if !read_exact_at(input, at, &mut h).ok()? || h[..4] != [0x1f, 0x8b, 8, 4] {
        return None;
    }
    let xlen = u16::from_le_bytes([h[10], h[11]]) as usize;
    if xlen > 64 {
        return None;
    }
    let mut x = [0u8; 64];
    if !read_exact_at(input, at + 12, &mut x[..xlen]).ok()? {
        return None;
    }
    let mut p = 0;
    while p + 4 <= xlen {
        let len = u16::from_le_bytes([x[p + 2], x[p + 3]]) as usize;
        if x[p..p + 2] == *b"BC" && len == 2 && p + 6 <= xlen {
            let size = u16::from_le_bytes([x[p + 4], x[p + 5]]) as u64 + 1;
            let body = at + 12 + xlen as u64;
            // The deflate data and the 8-byte trailer fit in it.
            return (size <= MEMBER_MAX && at + size >= body + 8 + 2).then_some((body, at + size));
        }
        p += 4 + len;
    }
    None
}

/// A member decoded ahead, whose trailer checked out.
pub(crate) struct Member {
    /// Where its deflate data starts and ends.
    pub(super) body: u64,
    pub(super) in_end: u64,
    pub(super) bytes: Vec<u8>,
}

/// The members of one BGZF file, keyed by their header's offset.
pub(super) struct Members {
    pub(super) input: Data,
    pub(super) counters: Counted,
}

impl ahead::Plan for Members {
    type Key = u64;
    type Made = Member;

    fn next(&self, at: &u64) -> Option<u64> {
        let (_, next) = bgzf_member(&*self.input, *at)?;
        bgzf_member(&*self.input, next).map(|_| next)
    }

    /// Decodes the member whole, as zlib decodes it on one thread; only a
    /// member that ends where its trailer says, with the CRC and size the
    /// trailer holds, is kept.
    fn make(&self, at: &u64, stop: &AtomicBool) -> Option<Member> {
        let (body, next) = bgzf_member(&*self.input, *at)?;
        let mut input = vec![0u8; (next - body) as usize];
        if !read_exact_at(&*self.input, body, &mut input).ok()? {
            return None;
        }
        let mut z = RawInflate::new();
        let mut bytes = vec![0u8; OUT_MAX];
        let s = z.inflate(&input, &mut bytes, false);
        if s.code != Code::StreamEnd || stop.load(Ordering::Relaxed) {
            return None;
        }
        bytes.truncate(s.produced);
        let t = input.get(s.consumed..s.consumed + 8)?;
        let crc = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let size = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
        if crc != crc32fast::hash(&bytes) || size != bytes.len() as u32 {
            return None;
        }
        crate::data::stats::decoded_ahead(self.counters.as_deref(), bytes.len() as u64);
        Some(Member {
            body,
            in_end: body + s.consumed as u64,
            bytes,
        })
    }
}

/// Workers decoding a BGZF file's members ahead of its first pass (the
/// gzip parser holds them). Dropping it stops them.
pub(crate) struct MembersAhead(ahead::Ahead<Members>);

impl MembersAhead {
    /// Workers for the gzip file `input`, if the member header at `at` is
    /// a BGZF one and more than one thread is set.
    pub(crate) fn start(input: &Data, at: u64) -> Option<MembersAhead> {
        bgzf_member(&**input, at)?;
        let members = Members {
            input: input.clone(),
            counters: input.counters().cloned(),
        };
        ahead::Ahead::start(input, members, threads()).map(MembersAhead)
    }

    /// The first pass reaches the member header at `at`: the member, if a
    /// worker decoded it (see [`ahead::Ahead::take`]).
    pub(crate) fn take(&mut self, at: u64) -> Option<Member> {
        self.0.take(&at)
    }
}
