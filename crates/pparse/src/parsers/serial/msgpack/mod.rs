//! MessagePack: a lazy scanner with exact byte ranges, and Flax/JAX
//! checkpoints (see [`flax`]) listed as tensors.
//!
//! The parse reads only headers: it walks each top-level value to its end
//! with a counter of values still to read (see [`wire`]), jumping over
//! strings, binaries and extensions, and reports one node per top-level
//! value — several when values were written one after another. A node's
//! children are read again from its range when someone opens it
//! (`load`): array elements as `[i]`, map pairs named by their key (the
//! node covers the key and the value), at most [`PAGE`] at a time, the rest
//! behind a `…` node that opens the next page.
//!
//! Every length and count is checked against the bytes left before it is
//! used: a value whose bytes end early is truncated, with the offset where
//! they end, and everything before it is kept; the byte `0xc1`, which
//! MessagePack never uses, makes its value corrupt. The timestamp extension
//! (type -1) is decoded, and flax's extension types are shown as arrays,
//! scalars and complex numbers.
//!
//! MessagePack has no magic: files are claimed by their name (`.msgpack`,
//! `.mpk`), and flax's `checkpoint_<step>` files only when they start with
//! a map whose first key is a string and whose headers read well.

pub(crate) mod flax;
pub(crate) mod wire;

use wire::{Cursor, Head, Kind, Unreadable, Walker, skip};

use crate::data::{Data, Range, Source};
use crate::name::escape_str;
use crate::node::{Children, Node, Value};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{Format, Parser, Sniff, Step, StepCx};
use crate::parsers::serial::json::shorten;
use crate::status::Damage;

/// MessagePack values and flax checkpoints.
pub(crate) static FORMAT: Format = Format {
    name: "msgpack",
    extent: None,
    sniff,
    parse: |data, _| Box::new(MsgpackParser::new(data.clone())),
    load,
    offers: Offers {
        tensors: Some(TensorOffer::List(flax::tensors)),
        ..Offers::NONE
    },
};

/// Children made into nodes per load; the rest wait behind a `…` node.
pub(crate) const PAGE: usize = 10_000;
/// Top-level values listed as nodes; the rest are counted in one node.
const MAX_TOP: u64 = 1_000_000;
/// Headers read per step.
const HEADERS_PER_STEP: u64 = 1 << 16;
/// Top-level values reported per step, so one commit stays short.
const VALUES_PER_STEP: u64 = 4096;
/// Characters of a string shown.
const SHOWN_CHARS: usize = 200;
/// Headers a checkpoint sniff reads at most.
const SNIFF_HEADERS: u64 = 4096;

/// Node kinds of the `…` nodes that open the next page of a container.
const MORE_ELEMENTS: &str = "more elements";
const MORE_PAIRS: &str = "more pairs";

fn sniff(s: &Sniff) -> bool {
    if !s.kind.has_content() {
        return false;
    }
    let n = s.name.to_ascii_lowercase();
    if n.ends_with(".msgpack") || n.ends_with(".mpk") {
        return true;
    }
    let base = n.rsplit(['/', '\\']).next().unwrap_or(&n);
    base.starts_with("checkpoint_") && looks_like_checkpoint(s.data)
}

/// A map whose first key is a string, and whose headers read without a
/// wrong byte (a cut file passes: its headers are right as far as they go).
fn looks_like_checkpoint(data: &Data) -> bool {
    let src: &dyn Source = &**data;
    let mut cur = Cursor::new(src);
    let avail = src.available();
    let Ok(h) = cur.head(0, avail) else {
        return false;
    };
    if h.kind != Kind::Map || h.count == 0 {
        return false;
    }
    if !matches!(cur.head(h.body(), avail), Ok(k) if k.kind == Kind::Str) {
        return false;
    }
    let mut w = Walker::new(0);
    match w.advance(&mut cur, avail, SNIFF_HEADERS) {
        Ok(_) => true,
        Err(bad) => bad.truncated && w.pos > 16,
    }
}

// ---------------------------------------------------------------------------
// nodes
// ---------------------------------------------------------------------------

/// A string value's text (its start, escaped).
fn string_text(cur: &mut Cursor, h: &Head) -> String {
    let want = h.len.min(4 * SHOWN_CHARS as u64 + 4) as usize;
    let raw = cur.get(h.body(), want);
    let mut s = shorten(&escape_str(&String::from_utf8_lossy(raw)), SHOWN_CHARS);
    if (raw.len() as u64) < h.len && !s.ends_with('…') {
        s.push('…');
    }
    s
}

/// The timestamp extension (type -1) as RFC 3339, `None` when malformed.
fn timestamp(cur: &mut Cursor, h: &Head) -> Option<String> {
    let b = cur.get(h.body(), h.len as usize);
    let be = |s: &[u8]| s.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
    let (secs, nanos) = match (h.len, b.len()) {
        (4, 4) => (be(b) as i64, 0),
        (8, 8) => {
            let v = be(b);
            ((v & ((1 << 34) - 1)) as i64, (v >> 34) as i64)
        }
        (12, 12) => (be(&b[4..]) as i64, be(&b[..4]) as i64),
        _ => return None,
    };
    (nanos < 1_000_000_000).then(|| crate::util::rfc3339(secs, nanos))
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The node of the value whose header is `h`, named `name`, covering
/// `range` (the value, or a map's key and value).
fn value_node(cur: &mut Cursor, h: &Head, name: String, range: Range) -> Node {
    let mut kind = h.kind.name();
    let mut lazy = false;
    let value = match h.kind {
        Kind::Nil => Value::Str("nil".into()),
        Kind::Bool(b) => Value::Bool(b),
        Kind::UInt(v) => Value::UInt(v),
        Kind::Int(v) => Value::Int(v),
        Kind::F32(v) => Value::Str(format!("{v:?}").into()),
        Kind::F64(v) => Value::Str(format!("{v:?}").into()),
        Kind::Str => Value::Quoted(string_text(cur, h).into()),
        Kind::Bin => Value::Str(plural(h.len, "byte", "bytes").into()),
        Kind::Array => {
            lazy = h.count > 0;
            Value::Str(format!("[{}]", plural(h.count, "element", "elements")).into())
        }
        Kind::Map => {
            lazy = h.count > 0;
            let pairs = plural(h.count / 2, "pair", "pairs");
            let chunked = match cur.head(h.body(), u64::MAX) {
                Ok(k) if h.count > 0 && k.kind == Kind::Str => {
                    flax::key_text(cur, &k) == flax::CHUNKED
                }
                _ => false,
            };
            Value::Str(
                if chunked {
                    format!("{{{pairs}}}: an array flax stored in chunks")
                } else {
                    format!("{{{pairs}}}")
                }
                .into(),
            )
        }
        Kind::Ext(-1) if timestamp(cur, h).is_some() => {
            kind = "timestamp";
            Value::Str(timestamp(cur, h).unwrap_or_default().into())
        }
        Kind::Ext(t) => match flax::ext_summary(cur, h) {
            Some((k, text)) => {
                kind = k;
                lazy = k != "complex";
                Value::Str(text.into())
            }
            None => Value::Str(format!("ext type {t}, {}", plural(h.len, "byte", "bytes")).into()),
        },
    };
    let mut n = Node::new(kind, name, range).value(value);
    if lazy {
        n.children = Children::Unloaded;
    }
    n
}

/// The damage of a value that could not be read to its end: cut off where
/// the bytes end (`avail`), or wrong where the walk failed.
fn bad_damage(bad: &Unreadable, avail: u64) -> Damage {
    if bad.truncated {
        Damage::truncated(
            Range::new(avail, avail),
            format!("the bytes end at {avail} inside this value: {}", bad.reason),
        )
    } else {
        Damage::corrupt(Range::new(bad.at, bad.at + 1), bad.reason.clone())
    }
}

/// The node of a value that ends early or holds a wrong byte: its header's
/// kind when that reads, covering `range`.
fn bad_node(cur: &mut Cursor, at: u64, name: String, range: Range, d: Damage) -> Node {
    let n = match cur.head(at, u64::MAX) {
        Ok(h) => value_node(cur, &h, name, range),
        Err(_) => Node::new("bad", name, range).text("unreadable"),
    };
    n.damaged(d)
}

// ---------------------------------------------------------------------------
// the parser
// ---------------------------------------------------------------------------

struct MsgpackParser {
    data: Data,
    /// Where the value being walked starts.
    at: u64,
    /// The walk over it, when one has begun.
    walk: Option<Walker>,
    /// Top-level values read.
    index: u64,
    /// Values past [`MAX_TOP`]: (first offset, count).
    hidden: Option<(u64, u64)>,
}

impl MsgpackParser {
    fn new(data: Data) -> MsgpackParser {
        MsgpackParser {
            data,
            at: 0,
            walk: None,
            index: 0,
            hidden: None,
        }
    }

    fn top_name(index: u64) -> String {
        if index == 0 {
            "value".into()
        } else {
            format!("[{index}]")
        }
    }

    fn finish(&mut self, cx: &mut StepCx, avail: u64) -> Step {
        if let Some((first, count)) = self.hidden.take() {
            cx.push_node(
                Node::new("more", "…", Range::new(first, avail)).text(format!(
                    "{count} more values not listed (the first {MAX_TOP} are)"
                )),
            );
        }
        cx.progress(avail, Some(avail));
        Step::Done
    }
}

impl Parser for MsgpackParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        let data = self.data.clone();
        let src: &dyn Source = &*data;
        let (avail, fin) = src.extent();
        let mut cur = Cursor::new(src);
        let start = self.at;
        let mut values = 0;
        loop {
            if self.walk.is_none() && self.at >= avail {
                if fin {
                    return self.finish(cx, avail);
                }
                cx.progress(self.at, None);
                return Step::Blocked;
            }
            let at = self.at;
            let w = self.walk.get_or_insert_with(|| Walker::new(at));
            match w.advance(&mut cur, avail, HEADERS_PER_STEP) {
                Ok(true) => {
                    let end = w.pos;
                    self.walk = None;
                    if self.index < MAX_TOP {
                        if let Ok(h) = cur.head(at, end) {
                            let name = Self::top_name(self.index);
                            cx.push_node(value_node(&mut cur, &h, name, Range::new(at, end)));
                        }
                    } else {
                        self.hidden.get_or_insert((at, 0)).1 += 1;
                    }
                    self.index += 1;
                    self.at = end;
                    values += 1;
                }
                Ok(false) => {
                    cx.progress(w.pos, fin.then_some(avail));
                    return Step::Yield;
                }
                Err(bad) if bad.truncated && !fin => {
                    cx.progress(w.pos, None);
                    return Step::Blocked;
                }
                Err(bad) => {
                    self.walk = None;
                    let d = bad_damage(&bad, avail);
                    let name = Self::top_name(self.index);
                    cx.push_node(bad_node(
                        &mut cur,
                        at,
                        name,
                        Range::new(at, avail),
                        d.clone(),
                    ));
                    cx.damage(d);
                    self.at = avail;
                    return self.finish(cx, avail);
                }
            }
            if values >= VALUES_PER_STEP || self.at - start >= cx.budget {
                cx.progress(self.at, fin.then_some(avail));
                return Step::Yield;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// loading
// ---------------------------------------------------------------------------

/// Headers a key is read through to tell a pair's node (key, then value)
/// from a value's: keys are short, and a value's node may be a whole file.
const KEY_HEADERS: u64 = 4096;

/// Where the value of a node starts: after the key of a map pair (whose
/// node covers key and value), else at the node's start.
fn value_start(cur: &mut Cursor, range: Range) -> u64 {
    let mut w = Walker::new(range.start);
    match w.advance(cur, range.end, KEY_HEADERS) {
        Ok(true) if w.pos < range.end => w.pos,
        _ => range.start,
    }
}

/// Rebuilds the children of a container, flax array or `…` node.
fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    let mut cur = Cursor::new(data);
    let avail = data.available();
    let end = node.range.end.min(avail);
    match node.kind {
        "array" | "map" => {
            let at = value_start(&mut cur, node.range);
            let Ok(h) = cur.head(at, u64::MAX) else {
                return Vec::new();
            };
            let map = h.kind == Kind::Map;
            // A container that was walked whole ends where its last value
            // ends: that value is not walked again (a chain of one-element
            // containers costs one pass, not one per level).
            let values = if map { h.count / 2 } else { h.count };
            let last = (node.damage.is_none() && node.range.end <= avail)
                .then(|| values.checked_sub(1))
                .flatten();
            children(&mut cur, h.body(), end, map, 0, last)
        }
        MORE_ELEMENTS | MORE_PAIRS => {
            let first = node
                .name
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix("…]"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            children(
                &mut cur,
                node.range.start,
                end,
                node.kind == MORE_PAIRS,
                first,
                None,
            )
        }
        "ndarray" | "npscalar" => {
            let at = value_start(&mut cur, node.range);
            match cur.head(at, u64::MAX) {
                Ok(h) => flax::array_nodes(&mut cur, &h),
                Err(_) => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// The values from `pos` to `end` as nodes (pairs for a map), `first`
/// being the index of the first; at most [`PAGE`], then a `…` node. With
/// `last`, value `last` is known to end at `end`.
fn children(
    cur: &mut Cursor,
    mut pos: u64,
    end: u64,
    map: bool,
    first: u64,
    last: Option<u64>,
) -> Vec<Node> {
    let avail = cur.source().available();
    let mut out = Vec::new();
    let mut i = first;
    while pos < end {
        if out.len() >= PAGE {
            let kind = if map { MORE_PAIRS } else { MORE_ELEMENTS };
            let what = if map { "pairs" } else { "elements" };
            out.push(
                Node::new(kind, format!("[{i}…]"), Range::new(pos, end))
                    .text(format!("more {what}, from [{i}]"))
                    .lazy(),
            );
            break;
        }
        let (name, vstart) = if map {
            let key_end = match skip(cur, pos, end) {
                Ok(k) => k,
                Err(bad) => {
                    let d = bad_damage(&bad, avail);
                    out.push(bad_node(cur, pos, "(key)".into(), Range::new(pos, end), d));
                    break;
                }
            };
            let Ok(k) = cur.head(pos, end) else {
                break;
            };
            let name = match k.kind {
                Kind::Str => shorten(&escape_str(&flax::key_text(cur, &k)), 256),
                _ => escape_str(&flax::key_text(cur, &k)),
            };
            (name, key_end)
        } else {
            (format!("[{i}]"), pos)
        };
        let walked = if last == Some(i) && vstart < end {
            Ok(end)
        } else {
            skip(cur, vstart, end)
        };
        match walked {
            Ok(vend) => {
                let Ok(h) = cur.head(vstart, end) else {
                    break;
                };
                out.push(value_node(cur, &h, name, Range::new(pos, vend)));
                pos = vend;
            }
            Err(bad) => {
                let d = if map && vstart >= end {
                    Damage::truncated(
                        Range::new(avail, avail),
                        format!("the bytes end at {avail} after this key, before its value"),
                    )
                } else {
                    bad_damage(&bad, avail)
                };
                let n = if vstart >= end {
                    Node::new("missing", name, Range::new(pos, end))
                        .text("no value")
                        .damaged(d)
                } else {
                    bad_node(cur, vstart, name, Range::new(pos, end), d)
                };
                out.push(n);
                break;
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn src(b: &[u8]) -> MemSource {
        MemSource::new(b.to_vec())
    }

    #[test]
    fn children_and_pages() {
        // {"a": [1, 2], "b": nil}
        let b = [0x82, 0xa1, b'a', 0x92, 1, 2, 0xa1, b'b', 0xc0];
        let s = src(&b);
        let mut cur = Cursor::new(&s);
        let h = cur.head(0, 9).unwrap();
        let root = value_node(&mut cur, &h, "value".into(), Range::new(0, 9));
        let kids = load(&s, &root, &Default::default());
        assert_eq!(kids.len(), 2);
        assert_eq!((&*kids[0].name, kids[0].range), ("a", Range::new(1, 6)));
        assert_eq!(kids[0].kind, "array");
        let a = load(&s, &kids[0], &Default::default());
        assert_eq!(a.len(), 2);
        assert_eq!(a[1].range, Range::new(5, 6));
        assert_eq!(a[1].value, Some(Value::UInt(2)));
        // An array of PAGE + 5 nils pages.
        let mut b = vec![0xdd];
        b.extend(((PAGE + 5) as u32).to_be_bytes());
        b.extend(std::iter::repeat_n(0xc0, PAGE + 5));
        let s = src(&b);
        let mut cur = Cursor::new(&s);
        let h = cur.head(0, b.len() as u64).unwrap();
        let root = value_node(&mut cur, &h, "value".into(), Range::new(0, b.len() as u64));
        let kids = load(&s, &root, &Default::default());
        assert_eq!(kids.len(), PAGE + 1);
        let more = load(&s, &kids[PAGE], &Default::default());
        assert_eq!(more.len(), 5);
        assert_eq!(&*more[0].name, format!("[{PAGE}]"));
    }

    #[test]
    fn timestamps() {
        let s = src(&[0xd6, 0xff, 0, 0, 0, 1]);
        let mut cur = Cursor::new(&s);
        let h = cur.head(0, 6).unwrap();
        assert_eq!(timestamp(&mut cur, &h).unwrap(), "1970-01-01T00:00:01Z");
    }
}
