//! Reading a program text from a [`Source`] a chunk at a time, so a text
//! of any size takes a chunk of memory (plus its longest line).

use std::sync::atomic::{AtomicBool, Ordering};

use super::parse::{Reader, Sink};
use crate::data::Source;

/// Bytes read per step.
pub const CHUNK: usize = 1 << 20;
/// Longest line (an op with its strings) read whole; longer ones are
/// errors.
pub const MAX_LINE: usize = 64 << 20;

/// Reads a whole source through `reader`, a chunk at a time, into `sink`.
/// Returns false if a line longer than [`MAX_LINE`] stopped it.
pub fn read_source(src: &dyn Source, reader: &mut Reader, sink: &mut dyn Sink) -> bool {
    read_source_with(src, reader, sink, &AtomicBool::new(false), &|_, _| {})
}

/// [`read_source`] that stops (returning false) once `stop` is set and
/// reports progress as (bytes read, bytes) after each chunk.
pub fn read_source_with(
    src: &dyn Source,
    reader: &mut Reader,
    sink: &mut dyn Sink,
    stop: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> bool {
    let len = src.available();
    let mut pos = 0u64;
    let mut want = CHUNK;
    let mut buf = Vec::new();
    while pos < len {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        progress(pos, len);
        let n = ((len - pos) as usize).min(want);
        buf.resize(n, 0);
        let got = src.read_at(pos, &mut buf).unwrap_or(0);
        buf.truncate(got);
        if got == 0 {
            break;
        }
        let eof = pos + got as u64 >= len;
        let used = reader.feed(&buf, pos, eof, sink);
        if used == 0 && !eof {
            if want >= MAX_LINE {
                return false;
            }
            want *= 2;
            continue;
        }
        want = CHUNK;
        pos += used as u64;
        if eof {
            break;
        }
    }
    true
}
