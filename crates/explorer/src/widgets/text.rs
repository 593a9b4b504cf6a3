//! Text view: the bytes as lines of text, highlighted with syntect.
//!
//! Only what is on screen is highlighted (as yazi does): the job takes the
//! visible lines plus a few KiB of lines before them as context, on the
//! worker thread, so a 1 GB log opens as fast as a small one. Lines longer
//! than 5,000 bytes are shown plain (regex-based grammars are slow on them).

use std::sync::OnceLock;

use ratatui::style::{Color, Style};
use syntect::easy::HighlightLines;
use syntect::highlighting::ThemeSet;
use syntect::parsing::{SyntaxReference, SyntaxSet};

use pparse::extraction::ExtId;

/// Lines longer than this are not highlighted.
pub const LONG_LINE: usize = 5000;
/// Context highlighted before the first visible line.
pub const CONTEXT: u64 = 8 * 1024;
/// A line is cut here when looking for its end.
pub const MAX_LINE: u64 = 64 * 1024;

fn syntaxes() -> &'static SyntaxSet {
    static S: OnceLock<SyntaxSet> = OnceLock::new();
    S.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn themes() -> &'static ThemeSet {
    static T: OnceLock<ThemeSet> = OnceLock::new();
    T.get_or_init(ThemeSet::load_defaults)
}

/// Picks a grammar from the name's extension, then the first line.
fn syntax_for<'a>(set: &'a SyntaxSet, name: &str, first_line: &str) -> &'a SyntaxReference {
    let ext = name.rsplit('.').next().unwrap_or("");
    let by_name = match ext {
        "jsonl" | "ndjson" => set.find_syntax_by_extension("json"),
        "pyi" => set.find_syntax_by_extension("py"),
        "yml" => set.find_syntax_by_extension("yaml"),
        e => set.find_syntax_by_extension(e),
    };
    by_name
        .or_else(|| set.find_syntax_by_first_line(first_line))
        .unwrap_or_else(|| set.find_syntax_plain_text())
}

/// A request to highlight the lines of `bytes` from `first` on.
pub struct HighlightJob {
    pub(crate) ext: ExtId,
    pub(crate) generation: u64,
    /// Name of the extraction (for the grammar).
    pub name: String,
    /// syntect theme name.
    pub theme: &'static str,
    /// Offset of `bytes[0]` in the extraction (a line start).
    pub base: u64,
    /// Offset of the first line to return (a line start, ≥ base).
    pub first: u64,
    pub(crate) bytes: Vec<u8>,
}

/// Highlighted lines starting at `first`: (style, text) runs per line.
pub struct Highlighted {
    pub(crate) ext: ExtId,
    pub(crate) generation: u64,
    pub(crate) first: u64,
    pub(crate) lines: Vec<Vec<(Style, String)>>,
}

impl HighlightJob {
    pub(crate) fn run(&self) -> Highlighted {
        let set = syntaxes();
        let first_line = self.bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let syntax = syntax_for(set, &self.name, &String::from_utf8_lossy(first_line));
        let theme = themes()
            .themes
            .get(self.theme)
            .or_else(|| themes().themes.values().next())
            .expect("syntect ships themes");
        let mut h = HighlightLines::new(syntax, theme);
        let mut lines = Vec::new();
        let mut at = self.base;
        for raw in self.bytes.split_inclusive(|&b| b == b'\n') {
            let visible = at >= self.first;
            at += raw.len() as u64;
            if raw.len() > LONG_LINE {
                if visible {
                    lines.push(vec![(Style::new(), display_line(raw))]);
                }
                continue;
            }
            let text = String::from_utf8_lossy(raw);
            let Ok(runs) = h.highlight_line(&text, set) else {
                break;
            };
            if visible {
                lines.push(
                    runs.into_iter()
                        .map(|(s, t)| {
                            let c = s.foreground;
                            (
                                Style::new().fg(Color::Rgb(c.r, c.g, c.b)),
                                display_line(t.as_bytes()),
                            )
                        })
                        .filter(|(_, t)| !t.is_empty())
                        .collect(),
                );
            }
        }
        Highlighted {
            ext: self.ext,
            generation: self.generation,
            first: self.first,
            lines,
        }
    }
}

/// A line as shown: tabs expanded, newline dropped, control characters and
/// invalid bytes escaped so nothing reaches the terminal raw.
pub fn display_line(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let mut out = String::with_capacity(raw.len());
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\t' => out.push_str("    "),
                c if c.is_control() => out.push_str(&pparse::name::escape_str(&c.to_string())),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Start of the line after the one starting at `at`, found in `bytes`
/// (which start at `base`); `None` if its end is not in `bytes`.
pub fn next_line(bytes: &[u8], base: u64, at: u64) -> Option<u64> {
    let from = (at - base) as usize;
    let limit = (from + MAX_LINE as usize).min(bytes.len());
    match memchr::memchr(b'\n', &bytes[from..limit]) {
        Some(i) => Some(at + i as u64 + 1),
        None if limit - from == MAX_LINE as usize => Some(at + MAX_LINE),
        None => None,
    }
}

/// Start of the line that contains byte `pos`, looking back at most
/// [`MAX_LINE`] bytes in `bytes` (which start at `base`). The line before
/// one that starts at `at` is `line_start(.., at - 1)`.
pub fn line_start(bytes: &[u8], base: u64, pos: u64) -> u64 {
    let end = (pos - base) as usize;
    let lo = end.saturating_sub(MAX_LINE as usize);
    match memchr::memrchr(b'\n', &bytes[lo..end]) {
        Some(i) => base + (lo + i) as u64 + 1,
        None if lo == 0 => base,
        None => base + lo as u64,
    }
}

/// The syntect theme that suits a pparse theme.
pub fn syntect_theme(light: bool) -> &'static str {
    if light {
        "InspiredGitHub"
    } else {
        "base16-ocean.dark"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_found_both_ways() {
        let b = b"one\ntwo\n\nfour";
        assert_eq!(next_line(b, 100, 100), Some(104));
        assert_eq!(next_line(b, 100, 108), Some(109));
        assert_eq!(next_line(b, 100, 109), None);
        assert_eq!(line_start(b, 100, 103), 100);
        assert_eq!(line_start(b, 100, 104), 104);
        assert_eq!(line_start(b, 100, 108), 108);
        assert_eq!(line_start(b, 100, 110), 109);
    }

    #[test]
    fn display_is_safe() {
        assert_eq!(display_line(b"a\tb\x1b[2J\xff\r\n"), "a    b\\x1b[2J\\xff");
    }

    #[test]
    fn highlights_only_the_requested_lines() {
        let src = b"import os\n# comment\ndef f(x):\n    return x\n".to_vec();
        let job = HighlightJob {
            ext: 0,
            generation: 1,
            name: "a.py".into(),
            theme: syntect_theme(false),
            base: 0,
            first: 20,
            bytes: src,
        };
        let h = job.run();
        assert_eq!(h.lines.len(), 2);
        let text: String = h.lines[0].iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(text, "def f(x):");
        let colours: std::collections::HashSet<_> = h.lines[0].iter().map(|(s, _)| s.fg).collect();
        assert!(colours.len() > 1, "Python keywords are coloured");
    }
}
