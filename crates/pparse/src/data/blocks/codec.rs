//! What a format supplies to decode its blocks: a [`BlockCodec`] opens a
//! [`BlockReader`] on a block, and may tell where the next block starts.

use std::io;

use crate::data::source::{Block, Data, Source};

/// Output buffer of one reader call in the first pass (and of a worker
/// decoding ahead, which must make what the first pass would).
pub(super) const OUT_BUF: usize = 64 * 1024;

/// What one [`BlockReader::read`] call gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pull {
    /// This many bytes were written at the start of the buffer (never 0).
    Out(usize),
    /// The block ended where its format says it ends.
    End,
    /// The input has no more bytes yet but is still growing.
    NeedInput,
    /// The input ended for good inside the block.
    Truncated,
    /// The block's data is invalid here.
    Error(String),
}

/// A decoder of one block, pulled for output.
pub trait BlockReader: Send {
    /// Decodes more of the block into `out` (never empty).
    fn read(&mut self, out: &mut [u8]) -> Pull;
    /// Input offset of the first compressed byte not yet consumed.
    fn input_pos(&self) -> u64;
}

/// How a format decodes one of its blocks.
pub trait BlockCodec: Send + Sync + 'static {
    /// Its name, by which an index finds it again.
    fn name(&self) -> &'static str;
    /// A reader at the start of `block`, over the compressed bytes `input`.
    fn open(&self, input: &Data, block: &Block) -> io::Result<Box<dyn BlockReader>>;
    /// The block after `block`, as the first pass would open it, when
    /// where it starts can be told from the compressed bytes without
    /// decoding: workers then decode it ahead (`blocks/ahead.rs`). `None`: not
    /// known (the default), or none follows. A wrong answer costs only
    /// the work: the first pass takes a block decoded ahead only where it
    /// opens one itself.
    fn next_block(&self, _input: &dyn Source, _block: &Block) -> Option<Block> {
        None
    }
}
