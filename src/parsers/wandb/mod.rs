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

use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage, Value as PValue};

use super::protobuf::fields::{self, Depth};
use super::protobuf::schema;
use super::protobuf::wire::Bytes;
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

/// One record, decoded.
pub struct Record {
    /// Its `num` field (0 when absent, as proto3 has it).
    pub number: i64,
    /// The name of its `record_type` field (`history`, `run`, ...), or
    /// `#N` for a field number the schema does not know, or `none`.
    pub kind: String,
    /// The decoded message, or why it does not decode.
    pub msg: Result<DynamicMessage, String>,
}

/// Decodes a record's payload.
pub fn decode(desc: &MessageDescriptor, payload: &[u8]) -> Record {
    match DynamicMessage::decode(desc.clone(), payload) {
        Ok(msg) => {
            let number = match msg.get_field_by_number(1).as_deref() {
                Some(PValue::I64(n)) => *n,
                _ => 0,
            };
            let kind = match desc.oneofs().find(|o| o.name() == "record_type") {
                Some(o) => o
                    .fields()
                    .find(|f| msg.has_field(f))
                    .map(|f| f.name().to_string()),
                None => None,
            };
            let kind = kind.unwrap_or_else(|| {
                // A type newer than the schema stays an unknown field.
                msg.unknown_fields()
                    .map(|f| f.number())
                    .find(|&n| n != 1)
                    .map_or_else(|| "none".to_string(), |n| format!("#{n}"))
            });
            Record {
                number,
                kind,
                msg: Ok(msg),
            }
        }
        Err(e) => {
            // Still name what can be read of it.
            let mut number = 0;
            let mut kind = "undecodable".to_string();
            let all = Range::new(0, payload.len() as u64);
            for f in super::protobuf::wire::Scanner::new(payload, all).flatten() {
                if f.number == 1 && f.wire == super::protobuf::wire::Wire::Varint {
                    number = f.int as i64;
                } else if let Some(fd) = desc.get_field(f.number)
                    && fd.containing_oneof().is_some()
                {
                    kind = fd.name().to_string();
                }
            }
            Record {
                number,
                kind,
                msg: Err(e.to_string()),
            }
        }
    }
}

impl Record {
    /// The message of the record's type (`history` → its HistoryRecord).
    pub fn body(&self) -> Option<DynamicMessage> {
        let msg = self.msg.as_ref().ok()?;
        let fd = msg.descriptor().get_field_by_name(&self.kind)?;
        match msg.get_field(&fd).as_ref() {
            PValue::Message(m) => Some(m.clone()),
            _ => None,
        }
    }

    /// A one-line summary for listings and the tree.
    pub fn summary(&self) -> String {
        let Some(body) = self.body() else {
            return match &self.msg {
                Err(e) => format!("does not decode: {e}"),
                Ok(_) => String::new(),
            };
        };
        let s = match self.kind.as_str() {
            "history" => {
                let step = body.get_field_by_name("step").and_then(|s| {
                    s.as_message()
                        .and_then(|m| m.get_field_by_name("num"))
                        .map(|v| v.into_owned())
                });
                let items = items_text(&body, "item");
                match step {
                    Some(PValue::I64(n)) => format!("step {n}: {items}"),
                    _ => items,
                }
            }
            "summary" | "config" => {
                let up = items_text(&body, "update");
                let rm = items_text(&body, "remove");
                if rm.is_empty() {
                    up
                } else {
                    format!("{up}; remove {rm}")
                }
            }
            "stats" => items_text(&body, "item"),
            "output" | "output_raw" => {
                let stream = match body.get_field_by_name("output_type").as_deref() {
                    Some(PValue::EnumNumber(1)) => "stdout",
                    _ => "stderr",
                };
                let line = str_field(&body, "line");
                format!("{stream}: {}", line.trim_end())
            }
            "files" => match body.get_field_by_name("files").as_deref() {
                Some(PValue::List(l)) => l
                    .iter()
                    .filter_map(|f| f.as_message().map(|m| str_field(m, "path")))
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => String::new(),
            },
            "header" if body.fields().next().is_none() => {
                "(empty: written by the legacy Python writer)".to_string()
            }
            _ => scalars_text(&body, 2),
        };
        let s = escape_str(&s);
        shorten(&s, 160)
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max).collect();
    t.push('…');
    t
}

fn str_field(m: &DynamicMessage, name: &str) -> String {
    match m.get_field_by_name(name).as_deref() {
        Some(PValue::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// The name of a `{key, nested_key, value_json}` item: nested keys joined by `/`.
pub fn item_key(item: &DynamicMessage) -> String {
    match item.get_field_by_name("nested_key").as_deref() {
        Some(PValue::List(l)) if !l.is_empty() => l
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join("/"),
        _ => str_field(item, "key"),
    }
}

/// `k=v, ...` of a list of items, internal (`_`) keys left out.
fn items_text(body: &DynamicMessage, field: &str) -> String {
    let Some(PValue::List(items)) = body.get_field_by_name(field).as_deref().cloned() else {
        return String::new();
    };
    let mut parts = Vec::new();
    for it in &items {
        let Some(m) = it.as_message() else { continue };
        let k = item_key(m);
        if k.starts_with('_') && items.len() > 1 {
            continue;
        }
        let v = str_field(m, "value_json");
        parts.push(if v.is_empty() {
            k
        } else {
            format!("{k}={}", shorten(&v, 40))
        });
        if parts.len() >= 8 {
            parts.push("…".into());
            break;
        }
    }
    parts.join(", ")
}

/// The first scalar fields of a message and of its sub-messages.
fn scalars_text(m: &DynamicMessage, depth: u32) -> String {
    let mut parts = Vec::new();
    for (fd, v) in m.fields() {
        if fd.name().starts_with('_') {
            continue;
        }
        let t = match v {
            PValue::String(s) if !s.is_empty() => format!("{}={}", fd.name(), shorten(s, 40)),
            PValue::Bool(b) => format!("{}={b}", fd.name()),
            PValue::I32(x) => format!("{}={x}", fd.name()),
            PValue::I64(x) => format!("{}={x}", fd.name()),
            PValue::U32(x) => format!("{}={x}", fd.name()),
            PValue::U64(x) => format!("{}={x}", fd.name()),
            PValue::F64(x) => format!("{}={x}", fd.name()),
            PValue::F32(x) => format!("{}={x}", fd.name()),
            PValue::Message(sub) if sub.descriptor().full_name() == "google.protobuf.Timestamp" => {
                let secs = match sub.get_field_by_name("seconds").as_deref() {
                    Some(PValue::I64(s)) => *s,
                    _ => 0,
                };
                format!("{}={}", fd.name(), crate::util::utc(secs))
            }
            PValue::Message(sub) if depth > 0 => {
                let s = scalars_text(sub, depth - 1);
                if s.is_empty() {
                    continue;
                }
                format!("{}: {s}", fd.name())
            }
            _ => continue,
        };
        parts.push(t);
        if parts.len() >= 6 {
            break;
        }
    }
    parts.join(" ")
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
                    let rec = decode(&desc, &payload);
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
