//! The lexer of printed PIR programs. Every call consumes at least one byte
//! or reports the end, so no input can make it loop; an unterminated string
//! becomes an error token that ends with its line, never a hang.
//!
//! Identifiers are `[A-Za-z_][A-Za-z0-9_.]*` as in Paddle's own lexer, so
//! `pd_op.DataType` is one token; tensor dims (`-1x4xf32`) are read by the
//! type parser from the raw bytes between `<` and `>`, not by the lexer.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `%12`, `%arg_0`, `%kwarg_x`.
    Value,
    /// `<<NULL VALUE>>`.
    NullValue,
    /// `<<NULL TYPE>>`.
    NullType,
    /// `<#AttrNull>`.
    AttrNull,
    /// `<#AttrNotImplemented>` (or any other `<#…>`).
    AttrOther,
    /// A string with its quotes.
    Str,
    /// A string with no closing quote; it ends at the end of its line.
    BadStr,
    /// An identifier.
    Ident,
    /// A number: `-1`, `2.5`, `1e-05`, `0x1f`.
    Num,
    /// `->`.
    Arrow,
    /// One punctuation byte: `( ) { } [ ] < > , : = ^ | -`.
    Punct(u8),
    /// A line break.
    Newline,
    /// A byte no token starts with (one UTF-8 character).
    Error,
    /// The end of the bytes.
    Eof,
}

/// A token: its kind and bytes `[start, end)` of the lexer's buffer.
///
/// Positions are `u32` so that a token fits two registers: the parser takes
/// tens of millions of them. A lexer sees at most [`MAX_BUF`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tok {
    /// What it is.
    pub kind: Kind,
    start: u32,
    end: u32,
}

/// The most bytes one lexer reads; the rest of a longer buffer is
/// reported as [`NeedMore`].
pub const MAX_BUF: usize = u32::MAX as usize;

impl Tok {
    /// A token over `[start, end)`, both at most [`MAX_BUF`].
    pub fn new(kind: Kind, start: usize, end: usize) -> Tok {
        Tok {
            kind,
            start: u32::try_from(start).unwrap_or(u32::MAX),
            end: u32::try_from(end).unwrap_or(u32::MAX),
        }
    }

    /// First byte.
    #[inline]
    pub fn start(self) -> usize {
        self.start as usize
    }

    /// Past its last byte.
    #[inline]
    pub fn end(self) -> usize {
        self.end as usize
    }
}

/// The lexer reached the end of its buffer inside a token while more
/// bytes may come: read more and lex the line again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedMore;

/// A lexer over `buf`; `eof` says whether the bytes end there.
pub struct Lexer<'a> {
    buf: &'a [u8],
    /// The longest prefix of `buf` that is UTF-8, checked once per buffer
    /// rather than once per token.
    text: &'a str,
    pos: usize,
    eof: bool,
    /// The token [`Lexer::peek`] saw at `pos`, kept for the next call.
    ahead: Option<Tok>,
}

fn ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// Bytes that go on an identifier, as a table: the lexer's inner loop.
static IDENT_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'_' || b == b'.';
        i += 1;
    }
    t
};

#[inline]
fn ident_byte(b: u8) -> bool {
    IDENT_BYTE[usize::from(b)]
}

impl<'a> Lexer<'a> {
    /// A lexer at `pos` of `buf`.
    pub fn new(buf: &'a [u8], pos: usize, eof: bool) -> Lexer<'a> {
        let eof = eof && buf.len() <= MAX_BUF;
        let buf = &buf[..buf.len().min(MAX_BUF)];
        Lexer {
            buf,
            text: "",
            pos,
            eof,
            ahead: None,
        }
    }

    /// The same lexer, told that `text` (from [`utf8_prefix`] of its
    /// buffer) is valid UTF-8, so [`Lexer::str`] need not check again.
    pub fn with_text(mut self, text: &'a str) -> Lexer<'a> {
        self.text = text;
        self
    }

    /// Bytes `[start, end)` as text; "" if they are not UTF-8.
    #[inline]
    pub fn str(&self, start: usize, end: usize) -> &'a str {
        match self.text.get(start..end) {
            Some(s) => s,
            None => self
                .buf
                .get(start..end)
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or(""),
        }
    }

    /// Where the next token starts (after spaces).
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Moves to `pos`.
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos.min(self.buf.len());
        self.ahead = None;
    }

    /// The buffer.
    pub fn buf(&self) -> &'a [u8] {
        self.buf
    }

    fn at(&self, i: usize) -> u8 {
        self.buf.get(i).copied().unwrap_or(0)
    }

    /// The next token without consuming it.
    #[inline]
    pub fn peek(&mut self) -> Result<Tok, NeedMore> {
        if let Some(t) = self.ahead {
            return Ok(t);
        }
        let save = self.pos;
        let t = self.lex()?;
        self.pos = save;
        self.ahead = Some(t);
        Ok(t)
    }

    /// The next token.
    #[inline]
    pub fn token(&mut self) -> Result<Tok, NeedMore> {
        // Most tokens are peeked first: taking the kept one stays inline
        // in the parser, and only lexing is a call.
        if let Some(t) = self.ahead.take() {
            self.pos = t.end();
            return Ok(t);
        }
        self.lex()
    }

    /// Takes the punctuation byte `c` if it is the next token. Only for
    /// bytes that are always a token of their own (not `<` or `-`, which
    /// may start longer ones). The parser asks this more than anything
    /// else, so it looks at one byte rather than lexing a token.
    #[inline]
    pub fn eat_punct(&mut self, c: u8) -> Result<bool, NeedMore> {
        debug_assert!(!matches!(c, b'<' | b'-'));
        if let Some(t) = self.ahead {
            if t.kind == Kind::Punct(c) {
                self.ahead = None;
                self.pos = t.end();
                return Ok(true);
            }
            return Ok(false);
        }
        let b = self.buf;
        let mut p = self.pos;
        while p < b.len() && matches!(b[p], b' ' | b'\t' | b'\r') {
            p += 1;
        }
        match b.get(p) {
            Some(&x) if x == c => {
                self.pos = p + 1;
                Ok(true)
            }
            Some(_) => Ok(false),
            None if self.eof => Ok(false),
            None => Err(NeedMore),
        }
    }

    /// Lexes the token at `pos`.
    fn lex(&mut self) -> Result<Tok, NeedMore> {
        let b = self.buf;
        while self.pos < b.len() && matches!(b[self.pos], b' ' | b'\t' | b'\r') {
            self.pos += 1;
        }
        let s = self.pos;
        if s >= b.len() {
            return if self.eof {
                Ok(self.tok(Kind::Eof, s, s))
            } else {
                Err(NeedMore)
            };
        }
        let c = b[s];
        let kind_end = match c {
            b'\n' => (Kind::Newline, s + 1),
            b'"' => return self.string(s),
            b'%' => {
                let mut e = s + 1;
                while e < b.len() && (b[e].is_ascii_alphanumeric() || b[e] == b'_') {
                    e += 1;
                }
                if e == b.len() && !self.eof {
                    return Err(NeedMore);
                }
                if e == s + 1 {
                    (Kind::Error, s + 1)
                } else {
                    (Kind::Value, e)
                }
            }
            b'<' if self.at(s + 1) == b'<' || self.at(s + 1) == b'#' => {
                // `<<NULL TYPE>>`, `<<NULL VALUE>>`, `<#AttrNull>`: up to
                // the closing `>`s on this line.
                let close: &[u8] = if self.at(s + 1) == b'<' { b">>" } else { b">" };
                let line_end = memchr::memchr(b'\n', &b[s..]).map_or(b.len(), |i| s + i);
                match memchr::memmem::find(&b[s..line_end], close) {
                    Some(i) => {
                        let e = s + i + close.len();
                        let kind = match &b[s..e] {
                            b"<<NULL TYPE>>" => Kind::NullType,
                            b"<<NULL VALUE>>" => Kind::NullValue,
                            b"<#AttrNull>" => Kind::AttrNull,
                            _ if close.len() == 1 => Kind::AttrOther,
                            _ => Kind::Error,
                        };
                        (kind, e)
                    }
                    None if line_end == b.len() && !self.eof => return Err(NeedMore),
                    None => (Kind::Punct(b'<'), s + 1),
                }
            }
            b'-' if self.at(s + 1) == b'>' => (Kind::Arrow, s + 2),
            b'-' if self.at(s + 1).is_ascii_digit() || self.at(s + 1) == b'.' => {
                return self.number(s, s + 1);
            }
            b'0'..=b'9' => return self.number(s, s),
            b'(' | b')' | b'{' | b'}' | b'[' | b']' | b'<' | b'>' | b',' | b':' | b'=' | b'^'
            | b'|' | b'-' => (Kind::Punct(c), s + 1),
            _ if ident_start(c) => {
                let mut e = s + 1;
                while e < b.len() && ident_byte(b[e]) {
                    e += 1;
                }
                if e == b.len() && !self.eof {
                    return Err(NeedMore);
                }
                (Kind::Ident, e)
            }
            _ => {
                // One whole UTF-8 character, so errors point at characters.
                let mut e = s + 1;
                while e < b.len() && e - s < 4 && (b[e] & 0xC0) == 0x80 {
                    e += 1;
                }
                (Kind::Error, e)
            }
        };
        let (kind, end) = kind_end;
        Ok(self.tok(kind, s, end))
    }

    fn tok(&mut self, kind: Kind, start: usize, end: usize) -> Tok {
        self.pos = end;
        Tok::new(kind, start, end)
    }

    fn number(&mut self, s: usize, digits: usize) -> Result<Tok, NeedMore> {
        let b = self.buf;
        let mut e = digits;
        if b[e..].starts_with(b"0x") {
            e += 2;
            while e < b.len() && b[e].is_ascii_hexdigit() {
                e += 1;
            }
        } else {
            while e < b.len() && (b[e].is_ascii_digit() || b[e] == b'.') {
                e += 1;
            }
            if e < b.len() && (b[e] == b'e' || b[e] == b'E') {
                let mut f = e + 1;
                if f < b.len() && (b[f] == b'+' || b[f] == b'-') {
                    f += 1;
                }
                if f < b.len() && b[f].is_ascii_digit() {
                    e = f;
                    while e < b.len() && b[e].is_ascii_digit() {
                        e += 1;
                    }
                }
            }
        }
        if e == b.len() && !self.eof {
            return Err(NeedMore);
        }
        Ok(self.tok(Kind::Num, s, e))
    }

    /// A string: `\"` is the only escape the printer writes, and other
    /// bytes (newlines too) are printed raw. A newline followed by what
    /// looks like the next op or a closing brace ends an unterminated one.
    fn string(&mut self, s: usize) -> Result<Tok, NeedMore> {
        let b = self.buf;
        let mut i = s + 1;
        loop {
            let Some(off) = memchr::memchr3(b'"', b'\\', b'\n', &b[i..]) else {
                if !self.eof {
                    return Err(NeedMore);
                }
                let end = memchr::memchr(b'\n', &b[s..]).map_or(b.len(), |j| s + j);
                return Ok(self.tok(Kind::BadStr, s, end));
            };
            i += off;
            match b[i] {
                b'"' => return Ok(self.tok(Kind::Str, s, i + 1)),
                b'\\' => i += 2,
                _ => {
                    // A newline: the string goes on unless the next line
                    // is the start of an op or a brace.
                    let mut j = i + 1;
                    while j < b.len() && b[j] == b' ' {
                        j += 1;
                    }
                    if j >= b.len() && !self.eof {
                        return Err(NeedMore);
                    }
                    if j >= b.len() || matches!(b[j], b'(' | b'}' | b'^' | b'{') {
                        return Ok(self.tok(Kind::BadStr, s, i));
                    }
                    i += 1;
                }
            }
            if i > b.len() {
                i = b.len();
            }
        }
    }
}

/// The longest prefix of `buf` that is valid UTF-8.
pub fn utf8_prefix(buf: &[u8]) -> &str {
    match std::str::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&buf[..e.valid_up_to()]).unwrap_or(""),
    }
}

/// The text of a string token without its quotes, `\"` unescaped.
pub fn unquote(raw: &[u8]) -> String {
    let mut s = String::new();
    unquote_into(raw, &mut s);
    s
}

/// [`unquote`], appended to `out` (whose allocation a caller may reuse).
pub fn unquote_into(raw: &[u8], out: &mut String) {
    let inner = raw.strip_prefix(b"\"").unwrap_or(raw);
    let inner = inner.strip_suffix(b"\"").unwrap_or(inner);
    // Valid UTF-8 (nearly always) is checked at full speed; the lossy
    // conversion is for the rest.
    let text = match std::str::from_utf8(inner) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(inner),
    };
    if memchr::memchr(b'\\', inner).is_some() {
        out.push_str(&text.replace("\\\"", "\""));
    } else {
        out.push_str(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Kind> {
        let mut l = Lexer::new(s.as_bytes(), 0, true);
        let mut out = Vec::new();
        loop {
            let t = l.token().unwrap();
            out.push(t.kind);
            if t.kind == Kind::Eof {
                return out;
            }
        }
    }

    #[test]
    fn tokens_of_an_op_line() {
        use Kind::*;
        assert_eq!(
            kinds("(%1) = \"pd_op.data\" () {v:-1e-05,p:Place(cpu)} -> <<NULL TYPE>>\n"),
            vec![
                Punct(b'('),
                Value,
                Punct(b')'),
                Punct(b'='),
                Str,
                Punct(b'('),
                Punct(b')'),
                Punct(b'{'),
                Ident,
                Punct(b':'),
                Num,
                Punct(b','),
                Ident,
                Punct(b':'),
                Ident,
                Punct(b'('),
                Ident,
                Punct(b')'),
                Punct(b'}'),
                Arrow,
                NullType,
                Newline,
                Eof
            ]
        );
    }

    #[test]
    fn unterminated_strings_end_with_their_line() {
        let s = b"a:\"x\n    (%2) = \"y\"";
        let mut l = Lexer::new(s, 2, true);
        let t = l.token().unwrap();
        assert_eq!((t.kind, t.start(), t.end()), (Kind::BadStr, 2, 4));
        let s = b"\"abc";
        let t = Lexer::new(s, 0, true).token().unwrap();
        assert_eq!(t.kind, Kind::BadStr);
        assert_eq!(Lexer::new(s, 0, false).token(), Err(NeedMore));
    }

    #[test]
    fn every_token_consumes_a_byte() {
        let junk: Vec<u8> = (0..=255u8).cycle().take(2000).collect();
        let mut l = Lexer::new(&junk, 0, true);
        let mut last = 0;
        loop {
            let t = l.token().unwrap();
            if t.kind == Kind::Eof {
                break;
            }
            assert!(
                t.end() > last || (t.end() > t.start()),
                "no progress at {last}"
            );
            last = t.end();
        }
    }
}
