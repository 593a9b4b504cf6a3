//! A stream's blocks as units decoded ahead (`data/ahead.rs`): planned by
//! the codec's [`BlockCodec::next_block`], each decoded into a buffer of
//! its own, and read back as the block's reader would have been.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::codec::{BlockCodec, BlockReader, OUT_BUF, Pull};
use crate::data::ahead;
use crate::data::pages::Pages;
use crate::data::source::{Block, Data, Range};
use crate::data::stats::Counted;

/// Output a worker decodes of one block before it stops and hands the
/// rest over with the decoder: blocks in flight stay a few tens of MiB,
/// whatever a block decodes to (a zstd frame of a gigabyte).
const BLOCK_OUT_MAX: usize = 512 * OUT_BUF;

/// A block as the first pass opens it: where its compressed bytes start,
/// and its `aux`.
pub(super) type Key = (u64, [u64; 2]);

/// The blocks of one stream, planned and decoded by its codec.
pub(super) struct Blocks {
    pub(super) input: Data,
    pub(super) codec: Arc<dyn BlockCodec>,
    pub(super) counters: Counted,
}

fn block(key: &Key) -> Block {
    Block {
        input: Range::new(key.0, key.0),
        out_start: 0,
        out_len: 0,
        aux: key.1,
    }
}

impl ahead::Plan for Blocks {
    type Key = Key;
    type Made = Recorded;

    fn next(&self, key: &Key) -> Option<Key> {
        let b = self.codec.next_block(&*self.input, &block(key))?;
        Some((b.input.start, b.aux))
    }

    /// Decodes the block into a buffer of its own, up to
    /// [`BLOCK_OUT_MAX`] bytes, with reads of the first pass's size (a
    /// decoder that meets damage may give more or less before it fails
    /// with more room).
    fn make(&self, key: &Key, stop: &AtomicBool) -> Option<Recorded> {
        let mut reader = self.codec.open(&self.input, &block(key)).ok()?;
        let mut out = Pages::<u8>::new();
        out.reserve(BLOCK_OUT_MAX);
        let last = loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            if out.len() >= BLOCK_OUT_MAX {
                break None;
            }
            match reader.read(out.spare(OUT_BUF)) {
                Pull::Out(n) => {
                    let n = n.min(OUT_BUF);
                    out.advance(n);
                    crate::data::stats::decoded_ahead(self.counters.as_deref(), n as u64);
                }
                other => break Some(other),
            }
        };
        let input_pos = reader.input_pos();
        Some(Recorded {
            out,
            pos: 0,
            rest: match last {
                None => Rest::Reader(reader),
                Some(pull) => Rest::Ended(pull, input_pos),
            },
        })
    }
}

/// What follows a recorded block's bytes.
enum Rest {
    /// The block ended: how its reader stopped, and where in the input.
    Ended(Pull, u64),
    /// The block goes on: its decoder, where the worker left it.
    Reader(Box<dyn BlockReader>),
}

/// A block a worker decoded, read as its reader would have been: its
/// bytes, then how it stopped (or the decoder, to go on with).
pub(super) struct Recorded {
    out: Pages<u8>,
    pos: usize,
    rest: Rest,
}

impl BlockReader for Recorded {
    fn read(&mut self, out: &mut [u8]) -> Pull {
        if self.pos < self.out.len() {
            let n = out.len().min(self.out.len() - self.pos);
            out[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
            self.pos += n;
            if self.pos == self.out.len() {
                // Done with: its pages go back now, not when the block ends.
                self.out = Pages::new();
                self.pos = 0;
            }
            return Pull::Out(n);
        }
        match &mut self.rest {
            Rest::Ended(pull, _) => pull.clone(),
            Rest::Reader(r) => r.read(out),
        }
    }

    fn input_pos(&self) -> u64 {
        match &self.rest {
            Rest::Ended(_, at) => *at,
            Rest::Reader(r) => r.input_pos(),
        }
    }
}
