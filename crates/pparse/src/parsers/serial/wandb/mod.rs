//! `.wandb` run logs: the records of a W&B run, recovered from damage.
//!
//! [`log`] reads the block/chunk layer and reassembles records; this module
//! decodes each record as a `wandb_internal.Record` protobuf (with the
//! schema in `proto/wandb/`) and makes it a node: its type, number and a
//! one-line summary, with its chunk headers and protobuf fields below.
//! Damage — a failed chunk, a broken chunk sequence, a record that does not
//! decode — becomes a node of its own with its range and reason, and
//! reading goes on after it.

pub mod history;
pub mod listing;
pub mod log;
pub mod record;
pub mod view;

use crate::data::{Data, Range, Source};
use crate::node::{Children, Node};
use crate::offer::Offers;
use crate::parsers::api::{Format, Options, Parser, Sniff, Step, StepCx};
use crate::parsers::serial::protobuf::fields::{self, Depth};
use crate::parsers::serial::protobuf::wire::Bytes;
use crate::status::Damage;
use log::{BLOCK, Chunk, ChunkReader, Item, RecordReader};
use record::RECORD_NODES;
// Some of these only the tests use (the `internals` feature).
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use record::{
    JSON, Record, SUMMARY_CHARS, bad_node, decode, decode_with, record_node, record_type, table,
};

/// W&B run logs (`.wandb`).
pub static FORMAT: Format = Format {
    name: "wandb",
    extent: None,
    sniff,
    parse,
    load,
    offers: Offers {
        records: Some(crate::offer::RecordsOffer {
            list: listing::list,
            each: listing::each,
            types: crate::offer::RecordTypes {
                named: record::type_names,
                known: record::is_type,
            },
        }),
        metrics: Some(history::scan),
        ..Offers::NONE
    },
};

fn sniff(s: &Sniff) -> bool {
    is_log(s.head, s.name)
}

/// Whether bytes starting with `head`, in a file named `name`, are read as
/// a W&B log: its magic, or its name when the header is damaged.
pub fn is_log(head: &[u8], name: &str) -> bool {
    head.starts_with(&log::MAGIC[..4]) || name.to_ascii_lowercase().ends_with(".wandb")
}

fn parse(_data: &Data, _: &Options) -> Box<dyn Parser> {
    Box::new(LogParser { reader: None })
}

/// Bytes of log read per step.
const STEP_BYTES: u64 = 4 << 20;

struct LogParser {
    reader: Option<RecordReader>,
}

impl Parser for LogParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        let data = cx.data.clone();
        let src: &dyn Source = &*data;
        let (avail, fin) = src.extent();
        if self.reader.is_none() {
            // The layout is judged from the first blocks: wait for them.
            if !fin && avail < 16 * BLOCK + 7 {
                return Step::Blocked;
            }
            let mut head = [0u8; 7];
            let n = src.read(0, &mut head);
            let layout = log::detect(src);
            let mut node = Node::new("header", "header", Range::new(0, n as u64));
            match log::check_header(&head[..n]) {
                Ok(()) => node = node.text(format!("W&B log, version 0, {}", layout.describe())),
                Err(e) => {
                    let d = Damage::corrupt(Range::new(0, n as u64), e.clone());
                    cx.damage(d.clone());
                    node = node.text(e).damaged(d);
                }
            }
            cx.push_node(node);
            self.reader = Some(RecordReader::new(ChunkReader::new(layout, 0), fin));
        }
        let reader = self.reader.as_mut().expect("set above");
        // While bytes are coming, read whole blocks only: chunks never
        // cross a block boundary, so nothing is judged on half a chunk.
        reader.chunks.end = if fin {
            avail
        } else {
            let l = reader.chunks.layout;
            let last = l.block_end(avail.saturating_sub(BLOCK));
            if last > avail {
                avail.saturating_sub(BLOCK)
            } else {
                last
            }
        };
        reader.at_end = fin;
        let stop = reader.chunks.pos.saturating_add(STEP_BYTES.max(cx.budget));
        while reader.chunks.pos < stop {
            let Some(item) = reader.next(src) else {
                cx.progress(reader.chunks.pos, Some(avail));
                return if fin { Step::Done } else { Step::Blocked };
            };
            match item {
                Item::Record(chunks) => {
                    let payload = log::payload(src, &chunks);
                    let rec = decode_with(payload, false);
                    let range = Item::Record(chunks).range();
                    let node = record_node(&rec, range);
                    if let Some(d) = &node.damage {
                        cx.damage((**d).clone());
                    }
                    cx.push_node(node);
                }
                Item::Damaged(b) => {
                    cx.damage(Damage {
                        status: b.status,
                        range: b.range,
                        reason: b.reason.clone(),
                        unknown: false,
                    });
                    cx.push_node(bad_node(&b));
                }
            }
        }
        cx.progress(reader.chunks.pos, Some(avail));
        Step::Yield
    }
}

/// Reads the chunk headers of a record node's range again.
fn chunks_in(src: &dyn Source, range: Range) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut pos = range.start;
    while pos + log::CHUNK_HEADER <= range.end {
        let mut h = [0u8; 7];
        if src.read(pos, &mut h) < 7 {
            break;
        }
        let len = u64::from(u16::from_le_bytes([h[4], h[5]]));
        let end = (pos + log::CHUNK_HEADER + len).min(range.end);
        out.push(Chunk {
            kind: h[6],
            range: Range::new(pos, end),
            crc: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
        });
        pos = end;
    }
    out
}

/// Moves node ranges from payload offsets to file offsets.
fn remap(nodes: &mut [Node], chunks: &[Chunk]) {
    for n in nodes {
        let start = log::file_offset(chunks, n.range.start);
        let end = if n.range.is_empty() {
            start
        } else {
            log::file_offset(chunks, n.range.end - 1) + 1
        };
        n.range = Range::new(start, end);
        if let Some(d) = &mut n.damage {
            let ds = log::file_offset(chunks, d.range.start);
            d.range = Range::new(ds, ds.max(end));
        }
        if let Children::Loaded(c) = &mut n.children {
            remap(c, chunks);
        }
    }
}

/// The chunk headers and protobuf fields of a record.
fn load(data: &dyn Source, node: &Node, opts: &crate::Options) -> Vec<Node> {
    if node.kind != "record" {
        return fields::load(data, node, &opts.schemas);
    }
    let chunks = chunks_in(data, node.range);
    if chunks.is_empty() {
        return Vec::new();
    }
    let payload = log::payload(data, &chunks);
    let chunk_node = |c: &Chunk| {
        Node::new(
            "chunk",
            format!("chunk {}", log::chunk_type_name(c.kind)),
            Range::new(c.range.start, c.range.start + 7),
        )
        .text(format!("{} bytes, crc32 {:08x}", c.payload().len(), c.crc))
    };
    let mut out = Vec::new();
    if chunks.len() == 1 {
        out.push(chunk_node(&chunks[0]));
    } else {
        let kids: Vec<Node> = chunks.iter().map(chunk_node).collect();
        out.push(
            Node::new("chunks", "chunks", node.range)
                .text(format!("{} chunks", chunks.len()))
                .with_children(kids),
        );
    }
    let all = Range::new(0, payload.len() as u64);
    let mut depth = Depth::eager(RECORD_NODES);
    let mut kids = fields::message_nodes(&payload[..], all, Some(&record_type()), &mut depth);
    remap(&mut kids, &chunks);
    out.extend(kids);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_record_types_are_named_by_number() {
        // num=3, field 99 (not in the schema) holding an empty message.
        let rec = decode(&[0x08, 3, 0x9a, 0x06, 0]);
        assert_eq!((rec.number, &*rec.kind), (3, "#99"));
        let bad = decode(&[0x08, 5, 0x12, 9, 1]);
        assert!(bad.msg.is_err());
        assert_eq!((bad.number, &*bad.kind), (5, "history"));
    }
}
