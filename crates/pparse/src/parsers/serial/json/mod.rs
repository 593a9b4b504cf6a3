//! JSON and JSON Lines: a lazy scanner with exact byte ranges.
//!
//! Why hand-written: a JSON file can be a gigabyte, still growing, cut off or
//! damaged, and nested absurdly deep. serde_json wants the whole document and
//! builds it (or recurses); this scanner walks the bytes once with an
//! explicit stack, in resumable chunks, and only reports the *top-level*
//! entries (object members, array elements, or one value per line of JSON
//! Lines) with the byte range of each. A node's children are found again by
//! scanning just its range one level deeper (`load`), so memory is bounded
//! by the entries someone looks at, never by the document.
//!
//! What it reports:
//! * a syntax error as corrupt damage with its offset, `line:column` (1-based,
//!   columns in characters as Python's `json` counts them) and what was
//!   expected; everything before it is kept (JSON Lines skip to the next line);
//! * data that ends inside the document as truncated damage naming what was
//!   open;
//! * nesting deeper than `scan::MAX_DEPTH` as corrupt damage; the deep value is
//!   then skipped with a bracket counter, so 100,000 `[` cost nothing;
//! * invalid UTF-8 in strings (without stopping), and trailing data after
//!   the top-level value on the line where it ends.
//!
//! JSON Lines are read as lines under a `.jsonl`/`.ndjson` name, and under
//! any other once a second value starts on a later line than the first one
//! ended (a log, a dataset): the text is then read again as lines.
//!
//! Python's extensions `NaN`, `Infinity` and `-Infinity` are accepted as
//! numbers, since `json.dumps` writes them.

pub(crate) mod python;
mod scan;

use scan::LineIndex;
pub(crate) use scan::{Config, Entry, Event, Kind, Scanner, scan_range};

use crate::data::{Data, Range, Source, view};
use crate::name::escape_str;
use crate::node::{Children, Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{Format, Parser, Sniff, Step, StepCx};
use crate::status::{Damage, Status};

/// JSON and JSON Lines.
pub(crate) static FORMAT: Format = Format {
    name: "json",
    extent: None,
    sniff,
    parse: |data, _| Box::new(JsonParser::new(data.clone())),
    load,
    offers: Offers::NONE,
};

/// Top-level nodes (and children of one loaded node) kept; the rest are
/// counted in one note node.
pub(crate) const MAX_NODES: u64 = 1_000_000;
/// Entries reported per step, so one commit to the tree stays short.
const ENTRIES_PER_STEP: u64 = 4096;
/// Bytes read per chunk.
const CHUNK: usize = 1 << 20;
/// Characters of a string value or key shown.
const SHOWN_CHARS: usize = 200;

fn is_lines_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with(".jsonl") || n.ends_with(".ndjson")
}

/// A `.json`/`.jsonl`/`.ndjson` name, or an object start (`{` then a key or
/// `}`) as the first non-blank bytes, whose value does not break within
/// them: text that only starts like an object (a log line of another
/// shape) is not taken for damaged JSON. A bare `[` is too common in text
/// to claim without the name.
fn sniff(s: &Sniff) -> bool {
    if !s.kind.has_content() {
        return false;
    }
    let n = s.name.to_ascii_lowercase();
    if n.ends_with(".json") || is_lines_name(&n) {
        return true;
    }
    let mut it = s
        .head
        .iter()
        .copied()
        .skip_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
    if it.next() != Some(b'{') {
        return false;
    }
    if !matches!(
        it.find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n')),
        Some(b'"' | b'}')
    ) {
        return false;
    }
    // A syntax error stops the scan before the first value ends.
    let mut sc = Scanner::new(Config::json(0), 0);
    sc.details = false;
    sc.feed(&**s.data, s.head, u64::MAX, &mut |_| {});
    !sc.stopped() || sc.root_end().is_some()
}

// ---------------------------------------------------------------------------
// display
// ---------------------------------------------------------------------------

fn hex4(raw: &[u8], at: usize) -> Option<u32> {
    let s = std::str::from_utf8(raw.get(at..at + 4)?).ok()?;
    u32::from_str_radix(s, 16).ok()
}

/// Decodes the escapes of a JSON string's raw bytes (lossy: invalid UTF-8
/// and lone surrogates become U+FFFD; an escape cut off at the end is dropped).
pub(crate) fn unescape(raw: &[u8]) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b != b'\\' {
            out.push(b);
            i += 1;
            continue;
        }
        let Some(&e) = raw.get(i + 1) else { break };
        i += 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let Some(hi) = hex4(raw, i) else { break };
                i += 4;
                if (0xd800..0xdc00).contains(&hi) {
                    let lo = (raw.get(i) == Some(&b'\\') && raw.get(i + 1) == Some(&b'u'))
                        .then(|| hex4(raw, i + 2))
                        .flatten()
                        .filter(|lo| (0xdc00..0xe000).contains(lo));
                    match lo {
                        Some(lo) => {
                            i += 6;
                            char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00))
                                .unwrap_or('\u{fffd}')
                        }
                        None => '\u{fffd}',
                    }
                } else {
                    char::from_u32(hi).unwrap_or('\u{fffd}')
                }
            }
            _ => '\u{fffd}',
        };
        let mut tmp = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// At most `max` characters of `s`, with `…` when cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// An entry's display name: its key (escaped, shortened), or `[index]`.
pub(crate) fn entry_name(e: &Entry) -> String {
    match &e.key {
        Some(k) => {
            let mut s = shorten(&escape_str(&unescape(k)), 256);
            if e.key_cut && !s.ends_with('…') {
                s.push('…');
            }
            s
        }
        None if e.root => "value".to_string(),
        None => format!("[{}]", e.index),
    }
}

fn plural(n: u64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The node for an entry.
pub(crate) fn entry_node(e: &Entry, name: String) -> Node {
    let mut n = Node::new(e.kind.as_str(), name, e.range);
    let cut = if e.damage.is_some() { ", cut off" } else { "" };
    n.value = match e.kind {
        Kind::String => {
            let mut s = shorten(&escape_str(&unescape(&e.scalar)), SHOWN_CHARS);
            if e.scalar_cut && !s.ends_with('…') {
                s.push('…');
            }
            Some(Value::Str(s.into()))
        }
        Kind::Number => {
            let raw = String::from_utf8_lossy(&e.scalar);
            Some(if let Ok(v) = raw.parse::<u64>() {
                Value::UInt(v)
            } else if let Ok(v) = raw.parse::<i64>() {
                Value::Int(v)
            } else {
                Value::Str(shorten(&raw, SHOWN_CHARS).into())
            })
        }
        Kind::True => Some(Value::Bool(true)),
        Kind::False => Some(Value::Bool(false)),
        Kind::Null => Some(Value::Str("null".into())),
        Kind::Object => Some(Value::Str(
            format!("{{{}{cut}}}", plural(e.count, "member")).into(),
        )),
        Kind::Array => Some(Value::Str(
            format!("[{}{cut}]", plural(e.count, "element")).into(),
        )),
        Kind::Missing => Some(Value::Str("no value".into())),
    };
    if e.kind.is_container() && e.count > 0 {
        n.children = Children::Unloaded;
    }
    if let Some(d) = &e.damage {
        n = n.damaged(d.clone());
    }
    n
}

/// The note that stands for entries beyond [`MAX_NODES`].
fn more_node(first: u64, last: u64, count: u64) -> Node {
    Node::new("more", "…", Range::new(first, last)).text(format!(
        "{count} more entries not listed (the first {MAX_NODES} are)"
    ))
}

/// Collects nodes up to [`MAX_NODES`], counting the rest.
#[derive(Default)]
struct Capped {
    shown: u64,
    hidden: Option<(u64, u64, u64)>,
}

impl Capped {
    /// Whether the entry gets a node; otherwise it is counted.
    fn admit(&mut self, r: Range) -> bool {
        if self.shown < MAX_NODES {
            self.shown += 1;
            return true;
        }
        let h = self.hidden.get_or_insert((r.start, r.end, 0));
        h.1 = r.end;
        h.2 += 1;
        false
    }
    fn note(&self) -> Option<Node> {
        self.hidden.map(|(a, b, n)| more_node(a, b, n))
    }
}

// ---------------------------------------------------------------------------
// parsing and loading
// ---------------------------------------------------------------------------

struct JsonParser {
    data: Data,
    scan: Option<Scanner>,
    lines_mode: bool,
    /// Problems before this offset were reported already: they are in the
    /// first value, which was scanned as JSON before the text turned out
    /// to be JSON Lines.
    reported_until: u64,
    /// Line numbers of JSON Lines entries.
    line_names: LineIndex,
    capped: Capped,
    scratch: Vec<u8>,
    released: u64,
}

impl JsonParser {
    fn new(data: Data) -> JsonParser {
        JsonParser {
            data,
            scan: None,
            lines_mode: false,
            reported_until: 0,
            line_names: LineIndex::new(0),
            capped: Capped::default(),
            scratch: Vec::new(),
            released: 0,
        }
    }

    /// A second value started on a later line than the first one ended:
    /// the text is JSON Lines (a log, a dataset), whatever its name. It is
    /// read again from its start as lines; the first value's members,
    /// listed as the document's, make way for its lines.
    fn restart_as_lines(&mut self, cx: &mut StepCx) {
        self.reported_until = self.scan.as_ref().and_then(Scanner::root_end).unwrap_or(0);
        cx.clear_nodes();
        self.lines_mode = true;
        self.scan = Some(Scanner::new(
            Config {
                lines: true,
                ..Config::json(0)
            },
            0,
        ));
        self.line_names = LineIndex::new(0);
        self.capped = Capped::default();
        self.released = 0;
    }
}

impl Parser for JsonParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if self.scan.is_none() {
            self.lines_mode = is_lines_name(cx.name);
        }
        let budget = cx.budget;
        let mut done = 0;
        let mut first_entry = self.scan.as_ref().map_or(0, |s| s.emitted);
        let data = self.data.clone();
        let src: &dyn Source = &*data;
        loop {
            let JsonParser {
                scan,
                lines_mode,
                reported_until,
                line_names,
                capped,
                scratch,
                released,
                ..
            } = self;
            let lines = *lines_mode;
            let scan = scan.get_or_insert_with(|| {
                let cfg = Config {
                    lines,
                    maybe_lines: !lines,
                    ..Config::json(0)
                };
                Scanner::new(cfg, 0)
            });
            let quiet = *reported_until;
            let mut handle = |ev: Event, cx: &mut StepCx| match ev {
                Event::Entry(e) => {
                    if capped.admit(e.range) {
                        let name = if lines {
                            let (l, _) = line_names.locate(src, e.range.start);
                            format!("line {l}")
                        } else {
                            entry_name(&e)
                        };
                        cx.push_node(entry_node(&e, name));
                    }
                }
                Event::Problem(d) if d.range.start < quiet => {}
                Event::Problem(d) => cx.damage(d),
            };
            let pos = scan.pos();
            let (avail, fin) = src.extent();
            if pos >= avail {
                if !fin {
                    cx.progress(pos, None);
                    return Step::Blocked;
                }
                scan.finish(&mut |ev| handle(ev, cx));
                break;
            }
            let chunk = match view(src, pos, CHUNK.min((avail - pos) as usize), scratch) {
                Ok(c) if !c.is_empty() => c,
                _ => {
                    cx.damage(Damage::corrupt(
                        Range::new(pos, avail),
                        "the bytes could not be read",
                    ));
                    break;
                }
            };
            // Past the cap entries are only counted.
            scan.details = scan.emitted < MAX_NODES;
            let left = if scan.details {
                ENTRIES_PER_STEP.saturating_sub(scan.emitted - first_entry)
            } else {
                u64::MAX
            };
            done += scan.feed(src, chunk, left, &mut |ev| handle(ev, cx)) as u64;
            let now = scan.pos();
            if now - *released >= crate::data::RELEASE_STEP {
                src.release(*released, now);
                *released = now;
            }
            if scan.second_value().is_some() {
                self.restart_as_lines(cx);
                first_entry = 0;
                continue;
            }
            if scan.stopped() {
                break;
            }
            if (scan.details && scan.emitted - first_entry >= ENTRIES_PER_STEP) || done >= budget {
                cx.progress(now, src.is_final().then(|| src.available()));
                return Step::Yield;
            }
        }
        if let Some(n) = self.capped.note() {
            cx.push_node(n);
        }
        let more = self.scan.as_ref().map_or(0, Scanner::unreported);
        let end = src.available();
        if more > 0 {
            cx.damage(Damage::corrupt(
                Range::new(end, end),
                format!("{more} more problems not listed"),
            ));
        }
        cx.progress(end, Some(end));
        Step::Done
    }
}

/// Re-loads the members or elements of an object or array node.
fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    if !matches!(node.kind, "object" | "array") {
        return Vec::new();
    }
    children(data, node.range, 0, node.damage.as_deref())
}

/// Where the value of a node's range starts: after the key and colon of a
/// member (`"key": value`), or at the first non-blank byte.
fn value_start(data: &dyn Source, range: Range) -> Option<u64> {
    let mut buf = Vec::new();
    let mut pos = range.start;
    // 0 before anything, 1 in the key, 2 after a backslash in it, 3 after the
    // key, 4 after the colon.
    let mut st = 0;
    while pos < range.end {
        let chunk = view(
            data,
            pos,
            ((range.end - pos) as usize).min(64 * 1024),
            &mut buf,
        )
        .ok()?;
        if chunk.is_empty() {
            return None;
        }
        for (i, &b) in chunk.iter().enumerate() {
            let ws = matches!(b, b' ' | b'\t' | b'\r' | b'\n');
            let at = pos + i as u64;
            st = match (st, b) {
                (0 | 3 | 4, _) if ws => st,
                (0, b'"') => 1,
                (0 | 4, _) => return Some(at),
                (1, b'\\') => 2,
                (1, b'"') => 3,
                (1, _) => 1,
                (2, _) => 1,
                (3, b':') => 4,
                _ => return None,
            };
        }
        pos += chunk.len() as u64;
    }
    None
}

/// The nodes one level below the JSON value in `range` (a value, or a
/// `"key": value` member), lazily loadable in turn. `origin` is where the JSON
/// text starts (for line numbers); a damaged parent passes its damage on to
/// the child it cuts off.
pub(crate) fn children(
    data: &dyn Source,
    range: Range,
    origin: u64,
    damage: Option<&Damage>,
) -> Vec<Node> {
    let Some(vs) = value_start(data, range) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut capped = Capped::default();
    scan_range(
        data,
        Range::new(vs, range.end),
        Config::json(origin),
        &mut |ev| {
            if let Event::Entry(mut e) = ev
                && capped.admit(e.range)
            {
                if let (Some(parent), Some(d)) = (damage, e.damage.as_mut())
                    && parent.status != Status::Complete
                {
                    d.status = parent.status;
                    d.reason = parent.reason.clone();
                }
                let name = entry_name(&e);
                out.push(entry_node(&e, name));
            }
        },
    );
    out.extend(capped.note());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn scan(text: &str, lines: bool) -> (Vec<Entry>, Vec<Damage>) {
        let src = MemSource::new(text.as_bytes().to_vec());
        let mut entries = Vec::new();
        let mut damage = Vec::new();
        let cfg = Config {
            lines,
            ..Config::json(0)
        };
        scan_range(
            &src,
            Range::new(0, text.len() as u64),
            cfg,
            &mut |ev| match ev {
                Event::Entry(e) => entries.push(e),
                Event::Problem(d) => damage.push(d),
            },
        );
        (entries, damage)
    }

    /// The same scan fed one byte at a time.
    fn scan_bytewise(text: &str) -> (Vec<(Range, String)>, Vec<String>) {
        let src = MemSource::new(text.as_bytes().to_vec());
        let mut sc = Scanner::new(Config::json(0), 0);
        let mut entries = Vec::new();
        let mut damage = Vec::new();
        let mut sink = |ev: Event| match ev {
            Event::Entry(e) => entries.push((e.range, entry_name(&e))),
            Event::Problem(d) => damage.push(d.reason),
        };
        for b in text.as_bytes() {
            let n = sc.feed(&src, std::slice::from_ref(b), u64::MAX, &mut sink);
            if n == 0 {
                break;
            }
        }
        sc.finish(&mut sink);
        (entries, damage)
    }

    fn spans<'a>(text: &'a str, entries: &[Entry]) -> Vec<&'a str> {
        entries
            .iter()
            .map(|e| &text[e.range.start as usize..e.range.end as usize])
            .collect()
    }

    #[test]
    fn member_and_element_ranges() {
        let t = r#" {"a": 1, "b" : [1, {"x": "y"}], "c\"d": "s\u00e9", "e": {}, "f": -1.5e3} "#;
        let (e, d) = scan(t, false);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            spans(t, &e),
            [
                r#""a": 1"#,
                r#""b" : [1, {"x": "y"}]"#,
                r#""c\"d": "s\u00e9""#,
                r#""e": {}"#,
                r#""f": -1.5e3"#
            ]
        );
        assert_eq!(e[1].kind, Kind::Array);
        assert_eq!(e[1].count, 2);
        assert_eq!(entry_name(&e[2]), "c\"d");
        assert_eq!(unescape(&e[2].scalar), "sé");
        let (arr, d) = scan("[1, \"two\", [3], null, true]", false);
        assert!(d.is_empty());
        assert_eq!(
            arr.iter().map(entry_name).collect::<Vec<_>>(),
            ["[0]", "[1]", "[2]", "[3]", "[4]"]
        );
        assert_eq!(arr[3].kind, Kind::Null);
        let (root, d) = scan("  42 ", false);
        assert!(d.is_empty());
        assert_eq!(root.len(), 1);
        assert_eq!(root[0].range, Range::new(2, 4));
    }

    #[test]
    fn bytewise_feeding_gives_the_same_result() {
        for t in [
            r#"{"a": [1, 2, {"b": "c\\\"\u00e9"}], "n": -0.5E+10, "t": true, "é": null}"#,
            r#"{"a": [1, 2 "#,
            r#"{"a": 1 "b": 2}"#,
            "[1, 2, 3]   x",
        ] {
            let (whole, dw) = scan(t, false);
            let whole: Vec<_> = whole.iter().map(|e| (e.range, entry_name(e))).collect();
            let dw: Vec<_> = dw.into_iter().map(|d| d.reason).collect();
            assert_eq!((whole, dw), scan_bytewise(t), "{t}");
        }
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let t = "{\n  \"a\": 1,\n  \"b\": 2\n  \"c\": 3\n}";
        let (e, d) = scan(t, false);
        assert_eq!(e.len(), 2, "the entries before the error are kept");
        assert_eq!(d.len(), 1);
        assert!(
            d[0].reason
                .contains("at 4:3: expected ',' or '}' after object member"),
            "{}",
            d[0].reason
        );
        assert_eq!(d[0].status, Status::Corrupt);
        assert_eq!(d[0].range.start, t.find("\"c\"").unwrap() as u64);
        // Columns count characters, as Python's json does.
        let (_, d) = scan("{\"é\": x}", false);
        assert!(d[0].reason.contains("at 1:7:"), "{}", d[0].reason);
        let (_, d) = scan("[1, 2,]", false);
        assert!(d[0].reason.contains("trailing comma"), "{}", d[0].reason);
    }

    #[test]
    fn truncation_says_what_is_open() {
        let t = r#"{"a": 1, "b": [1, {"c": "xy"#;
        let (e, d) = scan(t, false);
        assert_eq!(e.len(), 2);
        assert!(e[1].damage.is_some());
        assert_eq!(e[1].range, Range::new(9, t.len() as u64));
        assert_eq!(d[0].status, Status::Truncated);
        assert!(
            d[0].reason
                .contains("a string (open: object > array > object; 3 levels)"),
            "{}",
            d[0].reason
        );
        let (_, d) = scan("   ", false);
        assert!(d[0].reason.contains("no JSON value"));
        // A number at the very end of the data is complete.
        let (e, d) = scan("12", false);
        assert!(d.is_empty());
        assert_eq!(e[0].range, Range::new(0, 2));
    }

    #[test]
    fn deep_nesting_is_skipped_not_recursed() {
        let n = 100_000;
        let t = format!(
            "{{\"deep\": {}{}, \"after\": 1}}",
            "[".repeat(n),
            "]".repeat(n)
        );
        let (e, d) = scan(&t, false);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].reason.contains("nesting deeper than 512 levels at 1:"));
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].range.end as usize, t.len() - ", \"after\": 1}".len());
        assert_eq!(entry_name(&e[1]), "after");
        // Unclosed: truncation names the skipped depth.
        let t = format!("[{}", "[".repeat(n));
        let (_, d) = scan(&t, false);
        assert_eq!(d.len(), 2);
        assert!(d[1].reason.contains("deeper than 512"), "{}", d[1].reason);
    }

    #[test]
    fn json_lines_resync_after_a_bad_line() {
        let t = "{\"a\": 1}\n{\"b\": oops}\n\n[1, 2]\n\"s\" 3\n7";
        let (e, d) = scan(t, true);
        assert_eq!(
            spans(t, &e),
            ["{\"a\": 1}", "{\"b\": ", "[1, 2]", "\"s\"", "7"]
        );
        assert!(e[1].damage.is_some());
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].reason.contains("at 2:7"));
        assert!(d[1].reason.contains("expected a line break"));
    }

    #[test]
    fn invalid_utf8_is_reported_and_scanning_goes_on() {
        let mut b = b"{\"a\": \"x".to_vec();
        b.push(0xff);
        b.extend_from_slice(b"y\", \"b\": 2}");
        let src = MemSource::new(b.clone());
        let mut entries = 0;
        let mut damage = Vec::new();
        scan_range(
            &src,
            Range::new(0, b.len() as u64),
            Config::json(0),
            &mut |ev| match ev {
                Event::Entry(_) => entries += 1,
                Event::Problem(d) => damage.push(d),
            },
        );
        assert_eq!(entries, 2);
        assert_eq!(damage.len(), 1);
        assert!(damage[0].reason.contains("invalid UTF-8"));
    }

    #[test]
    fn load_goes_one_level_down() {
        let t = r#"{"a": {"b": [1, 2], "c": "d"}, "e": [[1], {}]}"#;
        let src = MemSource::new(t.as_bytes().to_vec());
        let top = children(&src, Range::new(0, t.len() as u64), 0, None);
        assert_eq!(top.len(), 2);
        assert!(matches!(top[0].children, Children::Unloaded));
        let a = load(&src, &top[0], &Default::default());
        assert_eq!(a.len(), 2);
        assert_eq!(&*a[0].name, "b");
        assert_eq!(
            &t[a[0].range.start as usize..a[0].range.end as usize],
            r#""b": [1, 2]"#
        );
        let b = load(&src, &a[0], &Default::default());
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].value, Some(Value::UInt(2)));
        let e = load(&src, &top[1], &Default::default());
        assert_eq!(e.len(), 2);
        assert!(matches!(e[1].children, Children::Leaf), "empty object");
    }

    #[test]
    fn display_helpers() {
        assert_eq!(unescape(br#"a\nb\u00e9\ud83d\ude00\"x"#), "a\nbé😀\"x");
        assert_eq!(unescape(br#"\ud800x"#), "\u{fffd}x");
        assert_eq!(unescape(br#"cut\u00"#), "cut");
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shorten("abc", 3), "abc");
    }
}
