//! Names read from files, and how they are shown.
//!
//! A name in a tar or zip header is whatever bytes the writer put there:
//! invalid UTF-8, control characters, terminal escape sequences. pparse keeps
//! the raw bytes and only ever shows or matches an escaped form in which every
//! control character and invalid byte is spelled out (`\x1b`, `\n`, `\xff`),
//! so a hostile name cannot move the cursor or recolour the terminal.

pub mod json;

use std::fmt;

/// A name as stored in the file.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Name(Box<[u8]>);

impl Name {
    /// A name from its raw bytes.
    pub fn new(raw: impl Into<Vec<u8>>) -> Name {
        Name(raw.into().into_boxed_slice())
    }
    /// The raw bytes, as the container holds them.
    pub fn raw(&self) -> &[u8] {
        &self.0
    }
    /// The escaped, printable form (see the module docs).
    pub fn display(&self) -> String {
        escape_bytes(&self.0)
    }

    /// Like [`Name::display`], without allocating for the common case of a
    /// name that needs no escaping.
    pub fn display_cow(&self) -> std::borrow::Cow<'_, str> {
        match std::str::from_utf8(&self.0) {
            Ok(s)
                if !s
                    .chars()
                    .any(|c| is_unsafe_char(c) || matches!(c, '\n' | '\r' | '\t')) =>
            {
                std::borrow::Cow::Borrowed(s)
            }
            _ => std::borrow::Cow::Owned(self.display()),
        }
    }

    /// The displayed name as a PATH step: [`Name::display_cow`] in
    /// [`normal_path`] form (a format that keeps `./x` as a name is still
    /// found and listed as `x`).
    pub fn path_form(&self) -> std::borrow::Cow<'_, str> {
        match self.display_cow() {
            std::borrow::Cow::Borrowed(s) => normal_path(s),
            std::borrow::Cow::Owned(s) => std::borrow::Cow::Owned(normal_path(&s).into_owned()),
        }
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s.as_bytes().to_vec())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.display())
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

/// Escapes control characters (C0, DEL, C1) and invalid UTF-8 so that the
/// result is safe to print on a terminal.
pub fn escape_bytes(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for chunk in raw.utf8_chunks() {
        escape_str_into(chunk.valid(), &mut out);
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Escapes control characters of an already valid string.
pub fn escape_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_str_into(s, &mut out);
    out
}

/// Appends `s` to `out` with control characters escaped.
pub fn escape_str_into(s: &str, out: &mut String) {
    // Printable ASCII, by far the most common, is copied as it is.
    let plain = s
        .bytes()
        .position(|b| !(0x20..0x7f).contains(&b))
        .unwrap_or(s.len());
    out.push_str(&s[..plain]);
    for c in s[plain..].chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe_char(c) => {
                let n = c as u32;
                if n < 0x100 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else {
                    out.push_str(&format!("\\u{{{n:x}}}"));
                }
            }
            c => out.push(c),
        }
    }
}

/// JSON text with DEL and the C1 controls (U+0080–U+009F, which only
/// strings can hold) written as `\u00XX`: JSON escapes C0 controls itself,
/// and a terminal may act on C1 ones as on ESC sequences.
pub fn c1_escaped(json: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let c1 = |w: &[u8]| w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1]);
    if !json.contains(&0x7f) && !json.windows(2).any(c1) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = Vec::with_capacity(json.len() + 16);
    let mut i = 0;
    while i < json.len() {
        if json[i] == 0x7f {
            out.extend_from_slice(b"\\u007f");
            i += 1;
        } else if i + 1 < json.len() && c1(&json[i..i + 2]) {
            out.extend_from_slice(format!("\\u{:04x}", json[i + 1]).as_bytes());
            i += 2;
        } else {
            out.push(json[i]);
            i += 1;
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Characters that can change terminal state or hide text: C0/C1 controls,
/// DEL, and the bidirectional and zero-width format characters.
fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c as u32, 0x200b..=0x200f | 0x202a..=0x202e | 0x2066..=0x2069 | 0xfeff)
}

/// A member's name as `tar x` and `unzip` take it: `.` and empty
/// components are dropped (`./a//b` is `a/b`) and so is a leading `/`
/// (GNU tar strips it, with a message); a trailing `/` (a directory) is
/// kept. Empty when nothing is left: a member named `./` is the archive's
/// own top. `..` is left alone (it is a name; writing it is
/// [`crate::unpack`]'s business). Borrows when the name is already so.
pub fn member_path(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if is_plain_path(raw) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    for c in raw.split(|&b| b == b'/') {
        if c.is_empty() || c == b"." {
            continue;
        }
        if !out.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(c);
    }
    if !out.is_empty() && raw.ends_with(b"/") {
        out.push(b'/');
    }
    std::borrow::Cow::Owned(out)
}

/// [`member_path`] of a PATH or a name already shown as text: a PATH may
/// spell a member as its archive holds it (`./a/x`, `a//x`) and still find
/// it.
pub fn normal_path(s: &str) -> std::borrow::Cow<'_, str> {
    match member_path(s.as_bytes()) {
        std::borrow::Cow::Borrowed(_) => std::borrow::Cow::Borrowed(s),
        // Only whole ASCII components were dropped: still UTF-8.
        std::borrow::Cow::Owned(v) => {
            std::borrow::Cow::Owned(String::from_utf8(v).unwrap_or_else(|_| s.to_string()))
        }
    }
}

/// Whether [`member_path`] leaves `raw` as it is: no empty or `.`
/// component (a trailing `/` aside).
fn is_plain_path(raw: &[u8]) -> bool {
    let body = raw.strip_suffix(b"/").unwrap_or(raw);
    !body.is_empty()
        && body
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b".")
}

/// Whether a name read from a file is a plain relative path that stays in
/// the folder it is resolved in: no `..`, no root, no NUL, at most `max`
/// bytes (sibling files a model names: shards, external data).
pub fn plain_relative(name: &str, max: usize) -> bool {
    use std::path::{Component, Path};
    !name.is_empty()
        && name.len() <= max
        && !name.contains('\0')
        && Path::new(name)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_sequences() {
        let n = Name::new(b"evil\x1b[2J\x07name\xff\n".to_vec());
        assert_eq!(n.display(), "evil\\x1b[2J\\x07name\\xff\\n");
        assert!(!n.display().chars().any(|c| c.is_control()));
    }

    #[test]
    fn member_paths_drop_dots_and_empty_components() {
        for (raw, want) in [
            (&b"a/x"[..], &b"a/x"[..]),
            (b"a/", b"a/"),
            (b"./", b""),
            (b".", b""),
            (b"/", b""),
            (b"", b""),
            (b"./a/", b"a/"),
            (b"./a/x", b"a/x"),
            (b"/etc/passwd", b"etc/passwd"),
            (b"a//b/./c", b"a/b/c"),
            (b"a/.", b"a"),
            (b"../x", b"../x"),
            (b".hidden/./x", b".hidden/x"),
        ] {
            assert_eq!(&*member_path(raw), want, "{}", escape_bytes(raw));
        }
        assert!(matches!(
            member_path(b"a/b/"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(normal_path("x.tar/./a//x"), "x.tar/a/x");
    }

    #[test]
    fn keeps_plain_unicode() {
        assert_eq!(Name::from("données/ü.txt").display(), "données/ü.txt");
        assert_eq!(escape_str("a\u{202e}b\u{9b}c"), "a\\u{202e}b\\x9bc");
    }
}
