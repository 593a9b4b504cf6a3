//! Names read from files, and how they are shown.
//!
//! A name in a tar or zip header is whatever bytes the writer put there:
//! invalid UTF-8, control characters, terminal escape sequences. pparse keeps
//! the raw bytes and only ever shows or matches an escaped form in which every
//! control character and invalid byte is spelled out (`\x1b`, `\n`, `\xff`),
//! so a hostile name cannot move the cursor or recolour the terminal.

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

/// Characters that can change terminal state or hide text: C0/C1 controls,
/// DEL, and the bidirectional and zero-width format characters.
fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c as u32, 0x200b..=0x200f | 0x202a..=0x202e | 0x2066..=0x2069 | 0xfeff)
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
    fn keeps_plain_unicode() {
        assert_eq!(Name::from("données/ü.txt").display(), "données/ü.txt");
        assert_eq!(escape_str("a\u{202e}b\u{9b}c"), "a\\u{202e}b\\x9bc");
    }
}
