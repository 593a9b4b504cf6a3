//! The JSON scanner: one pass over the bytes with an explicit stack,
//! resumable at any byte, reporting top-level entries with their ranges.
//!
//! It never builds the document and never recurses: containers deeper than
//! [`MAX_DEPTH`] are skipped with a bracket counter. Entries are handed to a
//! sink as they end, so a caller can keep, count or drop them.

use crate::data::{Range, Source, view};
use crate::status::Damage;

/// Containers open at once before the rest of a value is skipped.
pub(crate) const MAX_DEPTH: usize = 512;
/// Problems reported per scan before they are only counted.
const MAX_PROBLEMS: u64 = 1000;
/// Bytes read per chunk by [`scan_range`].
const CHUNK: usize = 1 << 20;

/// The type of a JSON value (a node's kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An object, `{...}`.
    Object,
    /// An array, `[...]`.
    Array,
    /// A string.
    String,
    /// A number.
    Number,
    /// `true`.
    True,
    /// `false`.
    False,
    /// `null`.
    Null,
    /// A member whose value never came (cut off or broken after its key).
    Missing,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Object => "object",
            Kind::Array => "array",
            Kind::String => "string",
            Kind::Number => "number",
            Kind::True => "true",
            Kind::False => "false",
            Kind::Null => "null",
            Kind::Missing => "missing",
        }
    }
    pub(super) fn is_container(self) -> bool {
        matches!(self, Kind::Object | Kind::Array)
    }
}

/// What a scan is asked to do.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    /// JSON Lines: every value at the root is an entry, errors skip a line.
    pub lines: bool,
    /// JSON, unless a second value starts on a later line than the first
    /// one ended: then the text is JSON Lines, and the scan stops there
    /// without a problem ([`Scanner::second_value`]) for the caller to scan
    /// it again as lines. Otherwise a second value is trailing data.
    pub maybe_lines: bool,
    /// Where the JSON text starts in the source (line 1, column 1).
    pub origin: u64,
    /// Raw bytes of an entry's key kept (longer keys are cut).
    pub key_cap: usize,
    /// Raw bytes of an entry's scalar value kept.
    pub value_cap: usize,
}

impl Config {
    pub(crate) fn json(origin: u64) -> Config {
        Config {
            lines: false,
            maybe_lines: false,
            origin,
            key_cap: 1024,
            value_cap: 1024,
        }
    }
}

/// One top-level entry: an object member, an array element, a root scalar or
/// a line of JSON Lines.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// `"key": value` for a member, the value otherwise.
    pub range: Range,
    /// Where the value starts (after the key and colon for a member).
    pub value_start: u64,
    /// The raw bytes between the key's quotes (escapes not decoded), if a member.
    pub key: Option<Vec<u8>>,
    /// The key was longer than [`Config::key_cap`].
    pub key_cut: bool,
    /// Position among the entries (member or element index, or line index).
    pub index: u64,
    pub(crate) kind: Kind,
    /// Raw text of a scalar (a string without its quotes), up to the cap.
    pub scalar: Vec<u8>,
    pub(crate) scalar_cut: bool,
    /// Members or elements of a container value seen.
    pub count: u64,
    /// The document's own value (a scalar at the root of a JSON text).
    pub root: bool,
    /// Set when the entry is cut off or broken.
    pub damage: Option<Damage>,
}

/// What a scan reports.
pub(crate) enum Event {
    /// A top-level entry, once it has ended.
    Entry(Entry),
    /// Damage in the scanned bytes; the scan goes on unless it stopped.
    Problem(Damage),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
    /// The document's value (or a line's, in JSON Lines).
    Root,
    /// After `"key":`.
    Member,
    /// After `[`: a value or `]`.
    First,
    /// After `,` in an array.
    Next,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lex {
    Value(Ctx),
    /// A key: `first` right after `{` (where `}` may close).
    Key {
        first: bool,
    },
    Colon,
    /// After a value in a container: `,` or the closing bracket.
    Comma,
    /// In a string; `esc` 0 plain, 1 after `\`, 2..=5 in `\uXXXX`.
    Str {
        key: bool,
        esc: u8,
    },
    Num(Num),
    Lit {
        word: &'static [u8],
        i: u8,
    },
    /// Skipping a value nested too deep.
    Skip {
        depth: u64,
        in_str: bool,
        esc: bool,
    },
    /// JSON: the document's value is complete; only whitespace may follow.
    AfterRoot,
    /// JSON Lines: a line's value is complete; only blanks until `\n`.
    LineEnd,
    /// JSON Lines: after an error, up to the next `\n`.
    SkipLine,
    /// A fatal syntax error (JSON): nothing more is scanned.
    Stopped,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Capture {
    None,
    Key,
    Value,
}

/// Line and column of offsets, counted incrementally from the text's start
/// (offsets asked for in increasing order cost one pass in total).
pub(super) struct LineIndex {
    origin: u64,
    at: u64,
    line: u64,
    col: u64,
}

impl LineIndex {
    pub(super) fn new(origin: u64) -> LineIndex {
        LineIndex {
            origin,
            at: origin,
            line: 1,
            col: 1,
        }
    }

    pub(super) fn locate(&mut self, src: &dyn Source, off: u64) -> (u64, u64) {
        if off < self.at {
            *self = LineIndex::new(self.origin);
        }
        let mut buf = Vec::new();
        while self.at < off {
            let want = ((off - self.at) as usize).min(64 * 1024);
            let chunk = match view(src, self.at, want, &mut buf) {
                Ok(c) if !c.is_empty() => c,
                _ => break,
            };
            for &b in chunk {
                if b == b'\n' {
                    self.line += 1;
                    self.col = 1;
                } else if b & 0xc0 != 0x80 {
                    self.col += 1;
                }
            }
            self.at += chunk.len() as u64;
        }
        (self.line, self.col)
    }
}

/// An entry being scanned.
struct Partial {
    start: u64,
    value_start: u64,
    key: Option<Vec<u8>>,
    key_cut: bool,
    index: u64,
    kind: Kind,
    scalar: Vec<u8>,
    scalar_cut: bool,
    count: u64,
    root: bool,
}

/// The resumable scanner. Feed it the bytes in order with [`Scanner::feed`]
/// and call [`Scanner::finish`] when they end.
pub(crate) struct Scanner {
    cfg: Config,
    /// Offset of the next byte to scan.
    pos: u64,
    /// Open containers: true for an object.
    stack: Vec<bool>,
    lex: Lex,
    /// UTF-8 check inside strings: continuation bytes still needed, and the
    /// allowed range of the next one.
    utf8_need: u8,
    utf8_lo: u8,
    utf8_hi: u8,
    capture: Capture,
    cur: Option<Partial>,
    /// Stack depth at which the current entry's value began.
    entry_value_depth: Option<usize>,
    next_index: u64,
    /// Entries at depth 1 are top-level (0 for JSON Lines).
    entry_depth: usize,
    root_seen: bool,
    lines: LineIndex,
    problems: u64,
    /// Where the document's value ended (JSON).
    root_end: Option<u64>,
    /// A line break came after the document's value (JSON).
    break_after_root: bool,
    /// Where a second value starts, on a later line (see
    /// [`Config::maybe_lines`]).
    second: Option<u64>,
    /// An entry that ended, waiting to be handed to the sink.
    pending: Option<Entry>,
    /// Entries reported by this scanner.
    pub emitted: u64,
    /// Whether entries carry their key and scalar text (a caller that only
    /// counts them turns this off and saves the copies).
    pub details: bool,
}

/// Why a value is expected, for error messages.
fn value_expected(ctx: Ctx) -> &'static str {
    match ctx {
        Ctx::Root => "expected a JSON value",
        Ctx::Member => "expected a value after ':'",
        Ctx::First => "expected a value or ']'",
        Ctx::Next => "expected a value after ','",
    }
}

/// A byte as it reads in a message: `'x'`, or a hex escape.
fn show_byte(b: u8) -> String {
    if b.is_ascii_graphic() || b == b' ' {
        format!("'{}'", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

impl Scanner {
    /// A scanner whose text starts at `start` (the first byte fed).
    pub(crate) fn new(cfg: Config, start: u64) -> Scanner {
        Scanner {
            cfg,
            pos: start,
            stack: Vec::new(),
            lex: Lex::Value(Ctx::Root),
            utf8_need: 0,
            utf8_lo: 0x80,
            utf8_hi: 0xbf,
            capture: Capture::None,
            cur: None,
            entry_value_depth: None,
            next_index: 0,
            entry_depth: if cfg.lines { 0 } else { 1 },
            root_seen: false,
            lines: LineIndex::new(cfg.origin),
            problems: 0,
            root_end: None,
            break_after_root: false,
            second: None,
            pending: None,
            emitted: 0,
            details: true,
        }
    }

    /// Offset of the next byte to feed.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    /// Whether a fatal error ended the scan.
    pub(crate) fn stopped(&self) -> bool {
        self.lex == Lex::Stopped
    }

    /// Where the document's top-level value ended, once it has (JSON).
    pub(crate) fn root_end(&self) -> Option<u64> {
        self.root_end
    }

    /// Where a second top-level value starts on a later line than the
    /// first one ended, which stopped a scan with [`Config::maybe_lines`].
    pub(crate) fn second_value(&self) -> Option<u64> {
        self.second
    }

    /// Scans `buf`, which holds the bytes at [`Scanner::pos`]. Stops early after
    /// `max_entries` entries or a fatal error; returns the bytes consumed.
    pub(crate) fn feed(
        &mut self,
        src: &dyn Source,
        buf: &[u8],
        max_entries: u64,
        sink: &mut dyn FnMut(Event),
    ) -> usize {
        let base = self.pos;
        let stop_at = self.emitted.saturating_add(max_entries);
        let mut i = 0;
        while i < buf.len() && self.emitted < stop_at && self.lex != Lex::Stopped {
            // Fast path: a run of plain ASCII inside a string.
            if let Lex::Str { esc: 0, .. } = self.lex
                && self.utf8_need == 0
            {
                let run = buf[i..]
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b))
                    .unwrap_or(buf.len() - i);
                if run > 0 {
                    self.keep(&buf[i..i + run]);
                    i += run;
                    continue;
                }
            }
            // Fast path: a run of digits inside a number.
            if let Lex::Num(Num::Int | Num::Frac | Num::ExpDigits) = self.lex {
                let run = buf[i..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .unwrap_or(buf.len() - i);
                if run > 0 {
                    self.keep(&buf[i..i + run]);
                    i += run;
                    continue;
                }
            }
            let b = buf[i];
            // Fast path: blanks between tokens (after the document's value
            // its line breaks count).
            if matches!(b, b' ' | b'\n' | b'\r' | b'\t')
                && matches!(
                    self.lex,
                    Lex::Value(_) | Lex::Key { .. } | Lex::Colon | Lex::Comma
                )
            {
                i += 1;
                continue;
            }
            let off = base + i as u64;
            self.pos = off;
            if self.byte(b, off, src, sink) {
                i += 1;
                // A JSON Lines error at a line break: the next line starts here.
                if b == b'\n' && self.lex == Lex::SkipLine {
                    self.lex = Lex::Value(Ctx::Root);
                }
            }
            if self.pending.is_some() {
                self.flush(sink);
            }
        }
        self.pos = base + i as u64;
        i
    }

    /// Appends captured raw bytes to the current key or scalar, up to the cap.
    fn keep(&mut self, bytes: &[u8]) {
        let (cap, cur) = match (self.capture, self.cur.as_mut()) {
            (Capture::Key, Some(c)) => (self.cfg.key_cap, c),
            (Capture::Value, Some(c)) => (self.cfg.value_cap, c),
            _ => return,
        };
        let (buf, cut) = match self.capture {
            Capture::Key => (cur.key.get_or_insert_with(Vec::new), &mut cur.key_cut),
            _ => (&mut cur.scalar, &mut cur.scalar_cut),
        };
        let room = cap.saturating_sub(buf.len());
        if bytes.len() > room {
            *cut = true;
        }
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Handles one byte; false when it must be looked at again in the new state.
    #[inline]
    fn byte(&mut self, b: u8, off: u64, src: &dyn Source, sink: &mut dyn FnMut(Event)) -> bool {
        let ws = matches!(b, b' ' | b'\t' | b'\r' | b'\n');
        match self.lex {
            Lex::Value(ctx) => {
                if ws {
                    return true;
                }
                match b {
                    b'{' => {
                        self.begin_value(Kind::Object, off);
                        self.open(true, off, src, sink);
                    }
                    b'[' => {
                        self.begin_value(Kind::Array, off);
                        self.open(false, off, src, sink);
                    }
                    b'"' => {
                        self.begin_value(Kind::String, off);
                        self.lex = Lex::Str { key: false, esc: 0 };
                    }
                    b'-' => {
                        self.begin_value(Kind::Number, off);
                        self.keep(&[b]);
                        self.lex = Lex::Num(Num::Minus);
                    }
                    b'0' => {
                        self.begin_value(Kind::Number, off);
                        self.keep(&[b]);
                        self.lex = Lex::Num(Num::Zero);
                    }
                    b'1'..=b'9' => {
                        self.begin_value(Kind::Number, off);
                        self.keep(&[b]);
                        self.lex = Lex::Num(Num::Int);
                    }
                    b't' | b'f' | b'n' | b'N' | b'I' => {
                        let (kind, word): (Kind, &'static [u8]) = match b {
                            b't' => (Kind::True, b"true"),
                            b'f' => (Kind::False, b"false"),
                            b'n' => (Kind::Null, b"null"),
                            b'N' => (Kind::Number, b"NaN"),
                            _ => (Kind::Number, b"Infinity"),
                        };
                        self.begin_value(kind, off);
                        self.keep(&[b]);
                        self.lex = Lex::Lit { word, i: 1 };
                    }
                    b']' if ctx == Ctx::First => self.close(off),
                    b']' if ctx == Ctx::Next => {
                        self.syntax(off, "trailing comma: expected a value after ','", src, sink);
                    }
                    _ => self.syntax(
                        off,
                        &format!("{} (found {})", value_expected(ctx), show_byte(b)),
                        src,
                        sink,
                    ),
                }
                true
            }
            Lex::Key { first } => {
                if ws {
                    return true;
                }
                match b {
                    b'"' => self.begin_key(off),
                    b'}' if first => self.close(off),
                    b'}' => self.syntax(off, "trailing comma: expected a key after ','", src, sink),
                    _ if first => self.syntax(
                        off,
                        &format!("expected a string key or '}}' (found {})", show_byte(b)),
                        src,
                        sink,
                    ),
                    _ => self.syntax(
                        off,
                        &format!("expected a string key after ',' (found {})", show_byte(b)),
                        src,
                        sink,
                    ),
                }
                true
            }
            Lex::Colon => {
                if ws {
                    return true;
                }
                if b == b':' {
                    self.lex = Lex::Value(Ctx::Member);
                } else {
                    self.syntax(
                        off,
                        &format!("expected ':' after object key (found {})", show_byte(b)),
                        src,
                        sink,
                    );
                }
                true
            }
            Lex::Comma => {
                if ws {
                    return true;
                }
                let obj = self.stack.last().copied().unwrap_or(false);
                match (b, obj) {
                    (b',', true) => self.lex = Lex::Key { first: false },
                    (b',', false) => self.lex = Lex::Value(Ctx::Next),
                    (b'}', true) | (b']', false) => self.close(off),
                    (_, true) => self.syntax(
                        off,
                        &format!(
                            "expected ',' or '}}' after object member (found {})",
                            show_byte(b)
                        ),
                        src,
                        sink,
                    ),
                    (_, false) => self.syntax(
                        off,
                        &format!(
                            "expected ',' or ']' after array element (found {})",
                            show_byte(b)
                        ),
                        src,
                        sink,
                    ),
                }
                true
            }
            Lex::Str { key, esc } => {
                self.string_byte(b, off, key, esc, src, sink);
                true
            }
            Lex::Num(state) => self.number_byte(b, off, state, src, sink),
            Lex::Lit { word, i } => {
                if word.get(i as usize) == Some(&b) {
                    self.keep(&[b]);
                    if i as usize + 1 == word.len() {
                        self.end_value(off + 1);
                    } else {
                        self.lex = Lex::Lit { word, i: i + 1 };
                    }
                } else {
                    let w = String::from_utf8_lossy(word);
                    self.syntax(
                        off,
                        &format!("invalid literal: expected '{w}' (found {})", show_byte(b)),
                        src,
                        sink,
                    );
                }
                true
            }
            Lex::Skip {
                mut depth,
                mut in_str,
                mut esc,
            } => {
                if in_str {
                    if esc {
                        esc = false;
                    } else if b == b'\\' {
                        esc = true;
                    } else if b == b'"' {
                        in_str = false;
                    }
                } else {
                    match b {
                        b'"' => in_str = true,
                        b'[' | b'{' => depth += 1,
                        b']' | b'}' => depth -= 1,
                        _ => {}
                    }
                }
                if depth == 0 {
                    self.end_value(off + 1);
                } else {
                    self.lex = Lex::Skip { depth, in_str, esc };
                }
                true
            }
            Lex::AfterRoot => {
                if b == b'\n' {
                    self.break_after_root = true;
                } else if !ws && self.cfg.maybe_lines && self.break_after_root {
                    self.second = Some(off);
                    self.lex = Lex::Stopped;
                } else if !ws {
                    let (l, c) = self.lines.locate(src, off);
                    self.problem(
                        Damage::corrupt(
                            Range::new(off, off + 1),
                            format!("trailing data after the top-level JSON value at {l}:{c}"),
                        ),
                        sink,
                    );
                    self.lex = Lex::Stopped;
                }
                true
            }
            Lex::LineEnd => {
                match b {
                    b' ' | b'\t' | b'\r' => {}
                    b'\n' => self.lex = Lex::Value(Ctx::Root),
                    _ => self.syntax(
                        off,
                        &format!(
                            "expected a line break after the value (found {})",
                            show_byte(b)
                        ),
                        src,
                        sink,
                    ),
                }
                true
            }
            Lex::SkipLine => {
                if b == b'\n' {
                    self.lex = Lex::Value(Ctx::Root);
                }
                true
            }
            Lex::Stopped => true,
        }
    }

    fn string_byte(
        &mut self,
        b: u8,
        off: u64,
        key: bool,
        esc: u8,
        src: &dyn Source,
        sink: &mut dyn FnMut(Event),
    ) {
        match esc {
            0 => {
                if self.utf8_need > 0 {
                    if (self.utf8_lo..=self.utf8_hi).contains(&b) {
                        self.utf8_need -= 1;
                        self.utf8_lo = 0x80;
                        self.utf8_hi = 0xbf;
                        self.keep(&[b]);
                        return;
                    }
                    self.utf8_need = 0;
                    self.bad_utf8(off, src, sink);
                }
                match b {
                    b'"' => {
                        self.capture = Capture::None;
                        if key {
                            self.lex = Lex::Colon;
                        } else {
                            self.end_value(off + 1);
                        }
                    }
                    b'\\' => {
                        self.keep(&[b]);
                        self.lex = Lex::Str { key, esc: 1 };
                    }
                    0..=0x1f => {
                        let what = match b {
                            b'\n' => "a line break".to_string(),
                            b'\t' => "a tab".to_string(),
                            _ => format!("control character 0x{b:02x}"),
                        };
                        self.syntax(off, &format!("unescaped {what} in a string"), src, sink);
                    }
                    0x20..=0x7f => self.keep(&[b]),
                    _ => {
                        let (need, lo, hi) = match b {
                            0xc2..=0xdf => (1, 0x80, 0xbf),
                            0xe0 => (2, 0xa0, 0xbf),
                            0xe1..=0xec | 0xee..=0xef => (2, 0x80, 0xbf),
                            0xed => (2, 0x80, 0x9f),
                            0xf0 => (3, 0x90, 0xbf),
                            0xf1..=0xf3 => (3, 0x80, 0xbf),
                            0xf4 => (3, 0x80, 0x8f),
                            _ => (0, 0, 0),
                        };
                        if need == 0 {
                            self.bad_utf8(off, src, sink);
                        } else {
                            self.utf8_need = need;
                            self.utf8_lo = lo;
                            self.utf8_hi = hi;
                        }
                        self.keep(&[b]);
                    }
                }
            }
            1 => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                    self.keep(&[b]);
                    self.lex = Lex::Str { key, esc: 0 };
                }
                b'u' => {
                    self.keep(&[b]);
                    self.lex = Lex::Str { key, esc: 2 };
                }
                _ => self.syntax(
                    off,
                    &format!(
                        "invalid escape '\\{}' in a string",
                        show_byte(b).trim_matches('\'')
                    ),
                    src,
                    sink,
                ),
            },
            _ => {
                if b.is_ascii_hexdigit() {
                    self.keep(&[b]);
                    let esc = if esc == 5 { 0 } else { esc + 1 };
                    self.lex = Lex::Str { key, esc };
                } else {
                    self.syntax(
                        off,
                        &format!(
                            "invalid \\u escape: expected 4 hex digits (found {})",
                            show_byte(b)
                        ),
                        src,
                        sink,
                    );
                }
            }
        }
    }

    fn number_byte(
        &mut self,
        b: u8,
        off: u64,
        state: Num,
        src: &dyn Source,
        sink: &mut dyn FnMut(Event),
    ) -> bool {
        let digit = b.is_ascii_digit();
        let next = match (state, b) {
            (Num::Minus, b'0') => Some(Num::Zero),
            (Num::Minus, b'1'..=b'9') => Some(Num::Int),
            (Num::Minus, b'I') => {
                self.keep(&[b]);
                self.lex = Lex::Lit {
                    word: b"-Infinity",
                    i: 2,
                };
                return true;
            }
            (Num::Int, _) if digit => Some(Num::Int),
            (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::Exp),
            (Num::Dot | Num::Frac, _) if digit => Some(Num::Frac),
            (Num::Exp, b'+' | b'-') => Some(Num::ExpSign),
            (Num::Exp | Num::ExpSign | Num::ExpDigits, _) if digit => Some(Num::ExpDigits),
            _ => None,
        };
        if let Some(n) = next {
            self.keep(&[b]);
            self.lex = Lex::Num(n);
            return true;
        }
        match state {
            Num::Zero | Num::Int | Num::Frac | Num::ExpDigits => {
                // The number ended before this byte, which is read again.
                self.end_value(off);
                false
            }
            Num::Minus => {
                self.syntax(
                    off,
                    &format!("expected a digit after '-' (found {})", show_byte(b)),
                    src,
                    sink,
                );
                true
            }
            Num::Dot => {
                self.syntax(
                    off,
                    &format!("expected a digit after '.' (found {})", show_byte(b)),
                    src,
                    sink,
                );
                true
            }
            Num::Exp | Num::ExpSign => {
                self.syntax(
                    off,
                    &format!("expected a digit in the exponent (found {})", show_byte(b)),
                    src,
                    sink,
                );
                true
            }
        }
    }

    fn bad_utf8(&mut self, off: u64, src: &dyn Source, sink: &mut dyn FnMut(Event)) {
        let (l, c) = self.lines.locate(src, off);
        self.problem(
            Damage::corrupt(
                Range::new(off, off + 1),
                format!("invalid UTF-8 in a string at {l}:{c}"),
            ),
            sink,
        );
    }

    fn problem(&mut self, d: Damage, sink: &mut dyn FnMut(Event)) {
        self.flush(sink);
        self.problems += 1;
        if self.problems <= MAX_PROBLEMS {
            sink(Event::Problem(d));
        }
    }

    /// Problems found but not reported (beyond the cap).
    pub(crate) fn unreported(&self) -> u64 {
        self.problems.saturating_sub(MAX_PROBLEMS)
    }

    fn begin_key(&mut self, off: u64) {
        let depth = self.stack.len();
        if depth == self.entry_depth {
            self.cur = Some(Partial {
                start: off,
                value_start: off,
                key: Some(Vec::new()),
                key_cut: false,
                index: self.next_index,
                kind: Kind::Missing,
                scalar: Vec::new(),
                scalar_cut: false,
                count: 0,
                root: false,
            });
            self.next_index += 1;
            self.capture = if self.details {
                Capture::Key
            } else {
                Capture::None
            };
        } else {
            if depth == self.entry_depth + 1
                && let Some(c) = self.cur.as_mut()
            {
                c.count += 1;
            }
            self.capture = Capture::None;
        }
        self.lex = Lex::Str { key: true, esc: 0 };
    }

    fn begin_value(&mut self, kind: Kind, off: u64) {
        let depth = self.stack.len();
        self.root_seen = true;
        if depth == self.entry_depth || (depth < self.entry_depth && !kind.is_container()) {
            let index = self.next_index;
            let cur = self.cur.get_or_insert_with(|| Partial {
                start: off,
                value_start: off,
                key: None,
                key_cut: false,
                index,
                kind,
                scalar: Vec::new(),
                scalar_cut: false,
                count: 0,
                root: depth < self.entry_depth,
            });
            if cur.key.is_none() {
                self.next_index += 1;
            }
            cur.kind = kind;
            cur.value_start = off;
            self.entry_value_depth = Some(depth);
            self.capture = if kind.is_container() || !self.details {
                Capture::None
            } else {
                cur.scalar.reserve(24);
                Capture::Value
            };
        } else {
            if depth == self.entry_depth + 1
                && self.stack.last() == Some(&false)
                && let Some(c) = self.cur.as_mut()
            {
                c.count += 1;
            }
            self.capture = Capture::None;
        }
    }

    fn open(&mut self, obj: bool, off: u64, src: &dyn Source, sink: &mut dyn FnMut(Event)) {
        if self.stack.len() >= MAX_DEPTH {
            let (l, c) = self.lines.locate(src, off);
            self.problem(
                Damage::corrupt(
                    Range::new(off, off + 1),
                    format!(
                        "nesting deeper than {MAX_DEPTH} levels at {l}:{c}; the deeper value is skipped"
                    ),
                ),
                sink,
            );
            self.lex = Lex::Skip {
                depth: 1,
                in_str: false,
                esc: false,
            };
            return;
        }
        self.stack.push(obj);
        self.lex = if obj {
            Lex::Key { first: true }
        } else {
            Lex::Value(Ctx::First)
        };
    }

    fn close(&mut self, off: u64) {
        self.stack.pop();
        self.end_value(off + 1);
    }

    /// A value ended just before `end`.
    fn end_value(&mut self, end: u64) {
        let depth = self.stack.len();
        self.capture = Capture::None;
        if self.entry_value_depth == Some(depth) {
            self.entry_value_depth = None;
            if let Some(p) = self.cur.take() {
                self.emit(p, end, None);
            }
        }
        self.lex = if !self.stack.is_empty() {
            Lex::Comma
        } else if self.cfg.lines {
            Lex::LineEnd
        } else {
            self.root_end.get_or_insert(end);
            Lex::AfterRoot
        };
    }

    fn emit(&mut self, p: Partial, end: u64, damage: Option<Damage>) {
        self.emitted += 1;
        self.pending = Some(Entry {
            range: Range::new(p.start, end),
            value_start: p.value_start,
            key: p.key,
            key_cut: p.key_cut,
            index: p.index,
            kind: p.kind,
            scalar: p.scalar,
            scalar_cut: p.scalar_cut,
            count: p.count,
            root: p.root,
            damage,
        });
    }

    fn flush(&mut self, sink: &mut dyn FnMut(Event)) {
        if let Some(e) = self.pending.take() {
            sink(Event::Entry(e));
        }
    }

    /// A syntax error at `off`: the entry being scanned ends there, damaged.
    /// JSON stops; JSON Lines go on at the next line.
    fn syntax(&mut self, off: u64, reason: &str, src: &dyn Source, sink: &mut dyn FnMut(Event)) {
        let (l, c) = self.lines.locate(src, off);
        let range = if self.cfg.lines {
            Range::new(off, off + 1)
        } else {
            Range::new(off, src.available().max(off + 1))
        };
        let rest = if self.cfg.lines {
            "the rest of the line is skipped"
        } else {
            "nothing after it is parsed"
        };
        let d = Damage::corrupt(range, format!("syntax error at {l}:{c}: {reason}; {rest}"));
        if let Some(p) = self.cur.take() {
            let nd = Damage::corrupt(Range::new(off, off + 1), d.reason.clone());
            self.emit(p, off, Some(nd));
        }
        self.entry_value_depth = None;
        self.capture = Capture::None;
        self.utf8_need = 0;
        self.problem(d, sink);
        if self.cfg.lines {
            self.stack.clear();
            self.lex = Lex::SkipLine;
        } else {
            self.lex = Lex::Stopped;
        }
    }

    /// The bytes have ended (the source is final, or a range was scanned to
    /// its end): reports what is cut off.
    pub(crate) fn finish(&mut self, sink: &mut dyn FnMut(Event)) {
        let end = self.pos;
        // A number at the very end is whole only outside any container (a root
        // value, a JSON Lines line); inside one, more digits may be missing.
        if let Lex::Num(Num::Zero | Num::Int | Num::Frac | Num::ExpDigits) = self.lex
            && self.stack.is_empty()
        {
            self.end_value(end);
            self.flush(sink);
        }
        match self.lex {
            Lex::Stopped | Lex::AfterRoot | Lex::LineEnd | Lex::SkipLine => {}
            Lex::Value(Ctx::Root) if self.stack.is_empty() => {
                if !self.root_seen && !self.cfg.lines {
                    self.problem(
                        Damage::truncated(
                            Range::new(end, end),
                            "no JSON value: the data is empty or only whitespace",
                        ),
                        sink,
                    );
                }
            }
            _ => {
                let d = Damage::truncated(
                    Range::new(end, end),
                    format!("JSON ends inside {}", self.open_text()),
                );
                if let Some(p) = self.cur.take() {
                    self.emit(p, end, Some(d.clone()));
                }
                self.problem(d, sink);
            }
        }
        self.flush(sink);
        self.lex = Lex::Stopped;
    }

    /// What is open, for a truncation message.
    fn open_text(&self) -> String {
        let obj = self.stack.last().copied().unwrap_or(false);
        let inner = match self.lex {
            Lex::Str { key: true, .. } => "an object key".to_string(),
            Lex::Str { .. } => "a string".to_string(),
            Lex::Num(_) => "a number".to_string(),
            Lex::Lit { .. } => "a literal".to_string(),
            Lex::Key { .. } => "an object, where a key was expected".to_string(),
            Lex::Colon => "an object member, before its ':'".to_string(),
            Lex::Value(Ctx::Member) => "an object member, before its value".to_string(),
            Lex::Value(_) => "an array, where a value was expected".to_string(),
            Lex::Comma if obj => "an object".to_string(),
            Lex::Comma => "an array".to_string(),
            Lex::Skip { depth, .. } => {
                format!("a value nested deeper than {MAX_DEPTH} levels ({depth} more levels open)")
            }
            _ => "the document".to_string(),
        };
        let names: Vec<&str> = self
            .stack
            .iter()
            .map(|&o| if o { "object" } else { "array" })
            .collect();
        let path = if names.len() > 8 {
            format!(
                "{} > ... > {}",
                names[..3].join(" > "),
                names[names.len() - 3..].join(" > ")
            )
        } else {
            names.join(" > ")
        };
        match names.len() {
            0 => inner,
            1 => format!("{inner} (open: {path})"),
            n => format!("{inner} (open: {path}; {n} levels)"),
        }
    }
}

/// Scans the JSON value in `range` (bytes of `data`) with `cfg`, handing
/// every event to `sink`, and ends the scan at the range's end.
pub(crate) fn scan_range(
    data: &dyn Source,
    range: Range,
    cfg: Config,
    sink: &mut dyn FnMut(Event),
) {
    let mut sc = Scanner::new(cfg, range.start);
    let mut buf = Vec::new();
    while sc.pos() < range.end && !sc.stopped() {
        let want = ((range.end - sc.pos()) as usize).min(CHUNK);
        let chunk = match view(data, sc.pos(), want, &mut buf) {
            Ok(c) if !c.is_empty() => c,
            _ => break,
        };
        sc.feed(data, chunk, u64::MAX, sink);
    }
    sc.finish(sink);
}
