//! One log record decoded: its type, its protobuf message as JSON, and its
//! nodes. The parser (`mod.rs`), the record listing and the metrics scan
//! all read records through here.

use std::borrow::Cow;
use std::sync::OnceLock;

use prost_reflect::MessageDescriptor;

use super::log;
use crate::data::Range;
use crate::name::escape_str_into;
use crate::node::Node;
use crate::parsers::serial::json::shorten;
use crate::parsers::serial::protobuf::fields::{self};
use crate::parsers::serial::protobuf::table::{MsgId, Table, Ty};
use crate::parsers::serial::protobuf::wire::{Scanner, Wire};
use crate::parsers::serial::protobuf::{json, schema};
use crate::status::{Damage, Status};

/// The message type of a record.
pub fn record_type() -> MessageDescriptor {
    schema::builtin("wandb_internal.Record").expect("the builtin W&B schema has Record")
}

/// Nodes made below one record at most.
pub(super) const RECORD_NODES: usize = 20_000;

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

/// The record schema flattened for reading many records; `Record` is
/// message 0.
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| JSON.table(&record_type()))
}

/// One record: its number and type, read from its bytes and checked.
pub struct Record<'a> {
    /// Its `num` field (0 when absent, as proto3 has it).
    pub number: i64,
    /// The name of its `record_type` field (`history`, `run`, ...), or
    /// `#N` for a field number the schema does not know, or `none`.
    pub kind: Cow<'static, str>,
    /// The record's bytes.
    pub payload: Cow<'a, [u8]>,
    /// The message of its type within `payload`, with that type.
    pub body: Option<(Range, MsgId)>,
    /// Ok, or why the record does not decode as a `wandb_internal.Record`.
    pub msg: Result<(), String>,
    /// The JSON of the body (`data` of `records --json`) when it decodes
    /// and was asked for.
    pub data: String,
}

/// The record types [`decode_with`] names: the schema's record kinds,
/// then what a record without one is called.
pub fn type_names() -> Vec<&'static str> {
    let rec = table().msg(0);
    rec.fields
        .iter()
        .filter(|f| f.oneof)
        .map(|f| f.name.as_str())
        .chain(["undecodable", "none"])
        .collect()
}

/// Whether a record's type can be `kind`: a named one, or `#N`, a type
/// newer than the schema.
pub fn is_type(kind: &str) -> bool {
    kind.strip_prefix('#')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || type_names().contains(&kind)
}

/// Reads a record's payload: number, type, whether it decodes (what a
/// protobuf decoder checks) and, with `with_json`, the JSON of its body.
pub fn decode_with(payload: Cow<'_, [u8]>, with_json: bool) -> Record<'_> {
    let t = table();
    let rec = t.msg(0);
    let mut number = 0;
    let mut kind: Option<&'static str> = None;
    let mut unknown: Option<u32> = None;
    let mut body = None;
    let mut skip = 0;
    for f in Scanner::new(&payload[..], Range::new(0, payload.len() as u64)).flatten() {
        if f.number == 1 && f.wire == Wire::Varint {
            number = f.int as i64;
            continue;
        }
        match rec.field(f.number) {
            Some(fd) if fd.oneof => {
                if let Ty::Message(m) = fd.ty
                    && f.wire == Wire::Len
                {
                    body = Some((f.value, m));
                    skip = f.number;
                }
                kind = Some(&fd.name);
            }
            Some(_) => {}
            None => {
                unknown.get_or_insert(f.number);
            }
        }
    }
    let mut data = String::new();
    let mut msg = Ok(());
    if let Some((r, m)) = body {
        let b = &payload[r.start as usize..r.end as usize];
        msg = if with_json {
            json::Writer::new(t).write(&mut data, b, m)
        } else {
            json::check(t, b, m, 0)
        };
    } else if with_json {
        data.push_str("{}");
    }
    if msg.is_ok() {
        // The rest of the record (number, control, info) must decode too.
        msg = json::check(t, &payload, 0, skip);
    }
    if msg.is_err() {
        data.clear();
    }
    let kind = match (kind, &msg, unknown) {
        (Some(k), _, _) => Cow::Borrowed(k),
        // A type newer than the schema stays an unknown field.
        (None, _, Some(n)) => Cow::Owned(format!("#{n}")),
        (None, Err(_), None) => Cow::Borrowed("undecodable"),
        (None, Ok(()), None) => Cow::Borrowed("none"),
    };
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
pub fn decode(payload: &[u8]) -> Record<'_> {
    decode_with(Cow::Borrowed(payload), true)
}

impl Record<'_> {
    /// The bytes of the record's body and its type.
    fn body_bytes(&self) -> Option<(&[u8], MsgId)> {
        let (r, m) = self.body?;
        Some((&self.payload[r.start as usize..r.end as usize], m))
    }

    /// Writes the JSON of the whole record (number, control, info, body).
    pub fn full_json(&self, out: &mut String) -> Result<(), String> {
        json::Writer::new(table()).write(out, &self.payload, 0)
    }

    /// A one-line summary for listings and the tree, read from the wire.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        self.summary_into(&mut s);
        s
    }

    /// Appends [`Record::summary`] to `out`, terminal-safe and at most
    /// [`SUMMARY_CHARS`] characters.
    pub fn summary_into(&self, out: &mut String) {
        if let Err(e) = &self.msg {
            escape_str_into(
                &shorten(&format!("does not decode: {e}"), SUMMARY_CHARS - 1),
                out,
            );
            return;
        }
        let Some((b, m)) = self.body_bytes() else {
            return;
        };
        let t = table();
        let msg = t.msg(m);
        let all = Range::new(0, b.len() as u64);
        let mut s = Line::new(out);
        match &*self.kind {
            "history" => {
                // One pass: the step, and the items to show.
                let (item, step) = (msg.number("item"), msg.number("step"));
                let mut num = None;
                let mut items = Items::default();
                for f in Scanner::new(b, all).flatten() {
                    if f.number == item && f.wire == Wire::Len {
                        items.add(f.value);
                    } else if f.number == step && f.wire == Wire::Len {
                        num = Some(0);
                        let sb = &b[f.value.start as usize..f.value.end as usize];
                        for g in Scanner::new(sb, Range::new(0, sb.len() as u64)).flatten() {
                            if g.number == 1 && g.wire == Wire::Varint {
                                num = Some(g.int as i64);
                            }
                        }
                    }
                }
                if let Some(n) = num {
                    s.push("step ");
                    s.push(itoa::Buffer::new().format(n));
                    s.push(": ");
                }
                items.write(&mut s, b);
            }
            "summary" | "config" => {
                let (up, rm) = (msg.number("update"), msg.number("remove"));
                let (mut update, mut remove) = (Items::default(), Items::default());
                for f in Scanner::new(b, all)
                    .flatten()
                    .filter(|f| f.wire == Wire::Len)
                {
                    if f.number == up {
                        update.add(f.value);
                    } else if f.number == rm {
                        remove.add(f.value);
                    }
                }
                update.write(&mut s, b);
                if remove.total > 0 {
                    s.push("; remove ");
                    remove.write(&mut s, b);
                }
            }
            "stats" => {
                let item = msg.number("item");
                let mut items = Items::default();
                for f in Scanner::new(b, all).flatten() {
                    if f.number == item && f.wire == Wire::Len {
                        items.add(f.value);
                    }
                }
                items.write(&mut s, b);
            }
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
                s.push(stream);
                s.push(": ");
                s.push(line.trim_end());
            }
            "files" => {
                let mut n = 0;
                for f in Scanner::new(b, all).flatten() {
                    let fb = &b[f.value.start as usize..f.value.end as usize];
                    for g in Scanner::new(fb, Range::new(0, fb.len() as u64)).flatten() {
                        if g.number == 1 && g.wire == Wire::Len {
                            if n > 0 {
                                s.push(", ");
                            }
                            s.push(str_at(fb, g.value));
                            n += 1;
                        }
                    }
                    if n >= 8 || s.full() {
                        break;
                    }
                }
            }
            "header" if b.is_empty() => s.push("(empty: written by the legacy Python writer)"),
            _ => s.push(&fields::summary(b, all, Some(&msg.desc))),
        }
    }
}

/// Characters in a record's summary at most.
pub const SUMMARY_CHARS: usize = 160;

/// A summary line being written: escaped for the terminal as it goes and
/// cut at [`SUMMARY_CHARS`] characters with `…`.
struct Line<'o> {
    out: &'o mut String,
    chars: usize,
    cut: bool,
}

impl<'o> Line<'o> {
    fn new(out: &'o mut String) -> Self {
        Line {
            out,
            chars: 0,
            cut: false,
        }
    }

    fn full(&self) -> bool {
        self.cut
    }

    fn push(&mut self, text: &str) {
        if self.cut {
            return;
        }
        if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            // Printable ASCII: nothing to escape, a character per byte.
            let room = SUMMARY_CHARS - self.chars;
            if text.len() <= room {
                self.out.push_str(text);
                self.chars += text.len();
            } else {
                if room == 0 {
                    self.out.pop();
                } else {
                    self.out.push_str(&text[..room - 1]);
                }
                self.out.push('…');
                self.chars = SUMMARY_CHARS;
                self.cut = true;
            }
            return;
        }
        let before = self.out.len();
        escape_str_into(text, self.out);
        let added = &self.out[before..];
        let n = if added.is_ascii() {
            added.len()
        } else {
            added.chars().count()
        };
        if self.chars + n <= SUMMARY_CHARS {
            self.chars += n;
            return;
        }
        // Keep SUMMARY_CHARS - 1 characters and the ellipsis.
        let keep = SUMMARY_CHARS - 1 - self.chars.min(SUMMARY_CHARS - 1);
        let cut_at = added
            .char_indices()
            .nth(keep)
            .map_or(added.len(), |(i, _)| i);
        self.out.truncate(before + cut_at);
        self.out.push('…');
        self.chars = SUMMARY_CHARS;
        self.cut = true;
    }
}

fn str_at(b: &[u8], r: Range) -> &str {
    crate::util::utf8(&b[r.start as usize..r.end as usize]).unwrap_or("")
}

/// Items shown in a summary at most (the line is full long before).
const SHOWN_ITEMS: usize = 8;

/// The `{key, nested_key, value_json}` items of a message, as found.
#[derive(Default)]
struct Items {
    /// The first ones (enough to show [`SHOWN_ITEMS`] past a few internal ones).
    first: [Range; 24],
    kept: usize,
    total: usize,
}

impl Items {
    fn add(&mut self, r: Range) {
        if self.kept < self.first.len() {
            self.first[self.kept] = r;
            self.kept += 1;
        }
        self.total += 1;
    }

    /// `k=v, ...`, internal (`_`) keys left out; their count when there
    /// are only those.
    fn write(&self, s: &mut Line, b: &[u8]) {
        let mut shown = 0;
        let mut internal = 0;
        for r in &self.first[..self.kept] {
            if s.full() {
                return;
            }
            let e = &b[r.start as usize..r.end as usize];
            let mut key = "";
            let mut nested: [&str; 4] = [""; 4];
            let mut n_nested = 0;
            let mut val = "";
            for g in Scanner::new(e, Range::new(0, e.len() as u64)).flatten() {
                match (g.number, g.wire) {
                    (1, Wire::Len) => key = str_at(e, g.value),
                    (2, Wire::Len) => {
                        if n_nested < nested.len() {
                            nested[n_nested] = str_at(e, g.value);
                        }
                        n_nested += 1;
                    }
                    (16, Wire::Len) => val = str_at(e, g.value),
                    _ => {}
                }
            }
            let first = if n_nested > 0 { nested[0] } else { key };
            if first.starts_with('_') {
                internal += 1;
                continue;
            }
            if shown == SHOWN_ITEMS {
                s.push(", …");
                return;
            }
            if shown > 0 {
                s.push(", ");
            }
            shown += 1;
            if n_nested > 0 {
                for (i, part) in nested[..n_nested.min(nested.len())].iter().enumerate() {
                    if i > 0 {
                        s.push("/");
                    }
                    s.push(part);
                }
            } else {
                s.push(key);
            }
            if !val.is_empty() {
                s.push("=");
                if val.len() <= 40 || val.chars().count() <= 40 {
                    s.push(val);
                } else {
                    s.push(&shorten(val, 39));
                }
            }
        }
        if shown == 0 && self.total > 0 {
            let n = if self.kept == self.total {
                internal
            } else {
                self.total
            };
            s.push(itoa::Buffer::new().format(n));
            s.push(" internal items");
        }
    }
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
pub fn bad_node(b: &log::Damaged) -> Node {
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
            unknown: false,
        })
}
