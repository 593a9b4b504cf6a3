//! `.wandb` run logs: the records of a W&B run, recovered from damage.
//!
//! [`log`] reads the block/chunk layer and reassembles records; this module
//! decodes each record as a `wandb_internal.Record` protobuf (with the
//! schema in `proto/wandb/`) and makes it a node: its type, number and a
//! one-line summary, with its chunk headers and protobuf fields below.
//! Damage — a failed chunk, a broken chunk sequence, a record that does not
//! decode — becomes a node of its own with its range and reason, and
//! reading goes on after it.

pub mod log;

use prost_reflect::{Kind, MessageDescriptor};

use super::protobuf::fields::{self, Depth};
use super::protobuf::wire::{Bytes, Scanner, Wire};
use super::protobuf::{json, schema};
use super::{Format, Parser, Sniff, Step, StepCx};
use crate::data::{Data, Range, Source};
use crate::name::escape_str;
use crate::node::{Children, Node};
use crate::status::{Damage, Status};
use log::{BLOCK, Chunk, ChunkReader, Item, RecordReader};

pub static FORMAT: Format = Format {
    name: "wandb",
    sniff,
    parse,
    load,
};

fn sniff(s: &Sniff) -> bool {
    s.head.starts_with(&log::MAGIC[..4]) || s.name.to_ascii_lowercase().ends_with(".wandb")
}

fn parse(_data: &Data) -> Box<dyn Parser> {
    Box::new(LogParser { reader: None })
}

/// The message type of a record.
pub fn record_type() -> MessageDescriptor {
    schema::message("wandb_internal.Record").expect("the builtin W&B schema has Record")
}

/// Nodes made below one record at most.
const RECORD_NODES: usize = 20_000;

/// One record: its number and type, read from its bytes and checked.
pub struct Record {
    /// Its `num` field (0 when absent, as proto3 has it).
    pub number: i64,
    /// The name of its `record_type` field (`history`, `run`, ...), or
    /// `#N` for a field number the schema does not know, or `none`.
    pub kind: String,
    /// The record's bytes.
    pub payload: Vec<u8>,
    /// The message of its type within `payload`, with that type.
    pub body: Option<(Range, MessageDescriptor)>,
    /// Ok, or why the record does not decode as a `wandb_internal.Record`.
    pub msg: Result<(), String>,
    /// The JSON of the body (`data` of `records --json`) when it decodes.
    pub data: String,
}

/// How records are written as JSON: W&B's key/value item lists as objects.
pub const JSON: json::Options = json::Options {
    items: &[
        ("wandb_internal.HistoryRecord", "item"),
        ("wandb_internal.SummaryRecord", "update"),
        ("wandb_internal.SummaryRecord", "remove"),
        ("wandb_internal.ConfigRecord", "update"),
        ("wandb_internal.ConfigRecord", "remove"),
        ("wandb_internal.StatsRecord", "item"),
    ],
};

/// Reads a record's payload: number, type, whether it decodes (what a
/// protobuf decoder checks) and, with `with_json`, the JSON of its body.
pub fn decode_with(desc: &MessageDescriptor, payload: Vec<u8>, with_json: bool) -> Record {
    let mut number = 0;
    let mut kind: Option<String> = None;
    let mut unknown: Option<u32> = None;
    let mut body = None;
    let all = Range::new(0, payload.len() as u64);
    for f in Scanner::new(&payload[..], all).flatten() {
        if f.number == 1 && f.wire == Wire::Varint {
            number = f.int as i64;
            continue;
        }
        match desc.get_field(f.number) {
            Some(fd) if fd.containing_oneof().is_some() => {
                if let Kind::Message(m) = fd.kind()
                    && f.wire == Wire::Len
                {
                    body = Some((f.value, m));
                }
                kind = Some(fd.name().to_string());
            }
            Some(_) => {}
            None => {
                unknown.get_or_insert(f.number);
            }
        }
    }
    let mut data = String::new();
    let mut skip = 0;
    let mut msg = Ok(());
    if let Some((r, m)) = &body {
        let b = &payload[r.start as usize..r.end as usize];
        msg = if with_json {
            json::write(&mut data, b, m, &JSON)
        } else {
            json::check_except(b, m, &JSON, 0)
        };
        skip = desc
            .get_field_by_name(kind.as_deref().unwrap_or_default())
            .map_or(0, |f| f.number());
    } else {
        data.push_str("{}");
    }
    if msg.is_ok() {
        // The rest of the record (number, control, info) must decode too.
        msg = json::check_except(&payload, desc, &JSON, skip);
    }
    if msg.is_err() {
        data.clear();
    }
    let kind = kind.unwrap_or_else(|| match (&msg, unknown) {
        // A type newer than the schema stays an unknown field.
        (_, Some(n)) => format!("#{n}"),
        (Err(_), None) => "undecodable".to_string(),
        (Ok(()), None) => "none".to_string(),
    });
    Record {
        number,
        kind,
        payload,
        body,
        msg,
        data,
    }
}

/// [`decode_with`] with the JSON.
pub fn decode(desc: &MessageDescriptor, payload: &[u8]) -> Record {
    decode_with(desc, payload.to_vec(), true)
}

impl Record {
    /// The bytes of the record's body.
    fn body_bytes(&self) -> Option<(&[u8], &MessageDescriptor)> {
        let (r, m) = self.body.as_ref()?;
        Some((&self.payload[r.start as usize..r.end as usize], m))
    }

    /// Writes the JSON of the whole record (number, control, info, body).
    pub fn full_json(&self, out: &mut String) -> Result<(), String> {
        json::write(out, &self.payload, &record_type(), &JSON)
    }

    /// A one-line summary for listings and the tree, read from the wire.
    pub fn summary(&self) -> String {
        if let Err(e) = &self.msg {
            return format!("does not decode: {e}");
        }
        let Some((b, m)) = self.body_bytes() else {
            return String::new();
        };
        let all = Range::new(0, b.len() as u64);
        let field = |name: &str| m.get_field_by_name(name).map_or(0, |f| f.number());
        let s = match self.kind.as_str() {
            "history" => {
                let (item, step) = (field("item"), field("step"));
                let mut num = None;
                for f in Scanner::new(b, all).flatten() {
                    if f.number == step {
                        num = Some(0);
                        let sb = &b[f.value.start as usize..f.value.end as usize];
                        for g in Scanner::new(sb, Range::new(0, sb.len() as u64)).flatten() {
                            if g.number == 1 && g.wire == Wire::Varint {
                                num = Some(g.int as i64);
                            }
                        }
                    }
                }
                let items = items_text(b, &[item]);
                match num {
                    Some(n) => format!("step {n}: {items}"),
                    None => items,
                }
            }
            "summary" | "config" => {
                let up = items_text(b, &[field("update")]);
                let rm = items_text(b, &[field("remove")]);
                if rm.is_empty() {
                    up
                } else {
                    format!("{up}; remove {rm}")
                }
            }
            "stats" => items_text(b, &[field("item")]),
            "output" | "output_raw" => {
                let mut stream = "stderr";
                let mut line = "";
                for f in Scanner::new(b, all).flatten() {
                    match (f.number, f.wire) {
                        (1, Wire::Varint) if f.int == 1 => stream = "stdout",
                        (3, Wire::Len) => line = str_at(b, f.value),
                        _ => {}
                    }
                }
                format!("{stream}: {}", shorten(line.trim_end(), 160))
            }
            "files" => {
                let mut paths = Vec::new();
                for f in Scanner::new(b, all).flatten() {
                    let fb = &b[f.value.start as usize..f.value.end as usize];
                    for g in Scanner::new(fb, Range::new(0, fb.len() as u64)).flatten() {
                        if g.number == 1 && g.wire == Wire::Len {
                            paths.push(str_at(fb, g.value).to_string());
                        }
                    }
                    if paths.len() >= 8 {
                        break;
                    }
                }
                paths.join(", ")
            }
            "header" if b.is_empty() => "(empty: written by the legacy Python writer)".to_string(),
            _ => fields::summary(b, all, Some(m)),
        };
        escape_str(&shorten(&s, 160))
    }
}

fn str_at(b: &[u8], r: Range) -> &str {
    std::str::from_utf8(&b[r.start as usize..r.end as usize]).unwrap_or("")
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max).collect();
    t.push('…');
    t
}

/// `k=v, ...` of the items in the fields numbered `numbers` (internal `_`
/// keys left out when there are others).
fn items_text(b: &[u8], numbers: &[u32]) -> String {
    let all = Range::new(0, b.len() as u64);
    let mut parts = Vec::new();
    let mut total = 0;
    for f in Scanner::new(b, all).flatten() {
        if !numbers.contains(&f.number) || f.wire != Wire::Len {
            continue;
        }
        total += 1;
        let e = &b[f.value.start as usize..f.value.end as usize];
        let mut key = "";
        let mut nested: Vec<&str> = Vec::new();
        let mut val = "";
        for g in Scanner::new(e, Range::new(0, e.len() as u64)).flatten() {
            match (g.number, g.wire) {
                (1, Wire::Len) => key = str_at(e, g.value),
                (2, Wire::Len) => nested.push(str_at(e, g.value)),
                (16, Wire::Len) => val = str_at(e, g.value),
                _ => {}
            }
        }
        let key = if nested.is_empty() {
            key.to_string()
        } else {
            nested.join("/")
        };
        if key.starts_with('_') {
            continue;
        }
        parts.push(if val.is_empty() {
            key
        } else {
            format!("{key}={}", shorten(val, 40))
        });
        if parts.len() >= 8 {
            parts.push("…".into());
            break;
        }
    }
    if parts.is_empty() && total > 0 {
        return format!("{total} internal items");
    }
    parts.join(", ")
}

/// The node of a record (its children are loaded on demand).
pub fn record_node(rec: &Record, range: Range) -> Node {
    let name = format!("{} #{}", rec.kind, rec.number);
    let mut n = Node::new("record", name, range).text(rec.summary()).lazy();
    if let Err(e) = &rec.msg {
        n = n.damaged(Damage::corrupt(
            range,
            format!("record does not decode as wandb_internal.Record: {e}"),
        ));
    }
    n
}

/// The node of damage found in the log.
pub fn bad_node(b: &log::Bad) -> Node {
    let name = if b.status == Status::Truncated {
        "truncated"
    } else {
        "corrupt"
    };
    Node::new("damage", name, b.range)
        .text(b.reason.clone())
        .damaged(Damage {
            status: b.status,
            range: b.range,
            reason: b.reason.clone(),
        })
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
        let avail = src.available();
        let fin = src.is_final();
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
        let desc = record_type();
        let stop = reader.chunks.pos.saturating_add(STEP_BYTES.max(cx.budget));
        while reader.chunks.pos < stop {
            let Some(item) = reader.next(src) else {
                cx.progress(reader.chunks.pos, Some(avail));
                return if fin { Step::Done } else { Step::Blocked };
            };
            match item {
                Item::Record(chunks) => {
                    let payload = log::payload(src, &chunks);
                    let rec = decode_with(&desc, payload, false);
                    let range = Item::Record(chunks).range();
                    let node = record_node(&rec, range);
                    if let Some(d) = &node.damage {
                        cx.damage((**d).clone());
                    }
                    cx.push_node(node);
                }
                Item::Bad(b) => {
                    let node = bad_node(&b);
                    cx.damage((*node.damage.clone().expect("set")).clone());
                    cx.push_node(node);
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
fn load(data: &dyn Source, node: &Node) -> Vec<Node> {
    if node.kind != "record" {
        return fields::load(data, node);
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
        let rec = decode(&record_type(), &[0x08, 3, 0x9a, 0x06, 0]);
        assert_eq!((rec.number, rec.kind.as_str()), (3, "#99"));
        let bad = decode(&record_type(), &[0x08, 5, 0x12, 9, 1]);
        assert!(bad.msg.is_err());
        assert_eq!((bad.number, bad.kind.as_str()), (5, "history"));
    }
}
