//! Colour themes: `themes/*.toml`, built into the binary, or any file.

use std::collections::HashMap;
use std::path::Path;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// Built-in themes, by name.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("dark", include_str!("../../../themes/dark.toml")),
    ("light", include_str!("../../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../../themes/high-contrast.toml"),
    ),
];

/// Resolved styles used when drawing.
#[derive(Debug, Clone)]
pub struct Theme {
    null: Style,
    printable: Style,
    whitespace: Style,
    other_ascii: Style,
    non_ascii: Style,
    pub(super) offset: Style,
    /// Background of the selected node's bytes (backgrounds are layered
    /// under the byte classes' colours).
    pub selection: Color,
    /// Background of every other child within the selection, so that
    /// neighbouring children stand apart.
    pub child: Color,
    /// Background of the byte under the hex cursor.
    pub cursor: Color,
    pub(super) damage: Color,
    /// Background of bytes that could not be known (after deflate damage).
    pub(super) unknown: Color,
    pub(super) unparsed: Color,
    pub(super) complete: Style,
    /// Unverified: the theme's `unverified` colour, else its truncated one,
    /// in italics.
    unverified: Style,
    truncated: Style,
    pub(super) corrupt: Style,
    pub(super) border: Style,
    pub(super) border_focused: Style,
    pub(super) title: Style,
    pub(super) row_selected: Style,
    pub(super) text: Style,
    pub(super) dim: Style,
    pub(super) bar: Style,
    /// No colours at all (NO_COLOR): emphasis by modifiers only.
    pub mono: bool,
}

#[derive(Deserialize)]
struct File {
    hex: HashMap<String, String>,
    status: HashMap<String, String>,
    ui: HashMap<String, String>,
}

/// Parses a colour: a terminal colour name, `#rrggbb`, or `default`.
pub fn color(s: &str) -> Result<Color, String> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix('#') {
        if hex.len() == 6
            && let Ok(v) = u32::from_str_radix(hex, 16)
        {
            return Ok(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
        }
        return Err(format!("bad colour {s:?}: use #rrggbb"));
    }
    Ok(match s.replace('-', "_").as_str() {
        "default" | "reset" => Color::Reset,
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "white" | "gray" | "grey" => Color::Gray,
        "bright_black" | "dark_gray" | "dark_grey" => Color::DarkGray,
        "bright_red" => Color::LightRed,
        "bright_green" => Color::LightGreen,
        "bright_yellow" => Color::LightYellow,
        "bright_blue" => Color::LightBlue,
        "bright_magenta" => Color::LightMagenta,
        "bright_cyan" => Color::LightCyan,
        "bright_white" => Color::White,
        other => return Err(format!("unknown colour {other:?}")),
    })
}

/// A theme file's text: a regular file only (a FIFO would hang the
/// explorer before it starts), at most 1 MiB.
fn read_theme(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    pparse::data::open_regular(path)?
        .take(1 << 20)
        .read_to_string(&mut text)?;
    Ok(text)
}

impl Theme {
    /// Loads a theme by built-in name or from a TOML file path.
    pub fn load(name: &str) -> Result<Theme, String> {
        let text = match BUILT_IN.iter().find(|(n, _)| *n == name) {
            Some((_, t)) => t.to_string(),
            None => read_theme(Path::new(name)).map_err(|e| {
                let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
                format!(
                    "no theme {name:?} ({e}); built-in themes: {}",
                    names.join(", ")
                )
            })?,
        };
        Theme::parse(&text).map_err(|e| format!("theme {name}: {e}"))
    }

    /// The theme from `--theme`, else `PPARSE_THEME`, else dark; with
    /// `NO_COLOR` set (to anything non-empty), the colourless theme.
    pub fn from_env(flag: Option<&str>) -> Result<Theme, String> {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return Ok(Theme::mono());
        }
        let env = std::env::var("PPARSE_THEME").ok();
        Theme::load(flag.or(env.as_deref()).unwrap_or("dark"))
    }

    fn parse(text: &str) -> Result<Theme, String> {
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let get = |m: &HashMap<String, String>, k: &str| -> Result<Color, String> {
            color(m.get(k).ok_or_else(|| format!("missing key {k:?}"))?)
        };
        let fg = |m: &HashMap<String, String>, k: &str| get(m, k).map(|c| Style::new().fg(c));
        let (h, s, u) = (&f.hex, &f.status, &f.ui);
        Ok(Theme {
            null: fg(h, "null")?,
            printable: fg(h, "printable")?,
            whitespace: fg(h, "whitespace")?,
            other_ascii: fg(h, "other_ascii")?,
            non_ascii: fg(h, "non_ascii")?,
            offset: fg(h, "offset")?,
            selection: get(h, "selection")?,
            child: get(h, "child")?,
            cursor: get(h, "cursor")?,
            damage: get(h, "damage")?,
            unknown: get(h, "unknown")?,
            unparsed: get(h, "unparsed")?,
            complete: fg(s, "complete")?,
            unverified: match s.get("unverified") {
                Some(c) => Style::new().fg(color(c)?),
                None => fg(s, "truncated")?,
            }
            .add_modifier(Modifier::ITALIC),
            truncated: fg(s, "truncated")?.add_modifier(Modifier::BOLD),
            corrupt: fg(s, "corrupt")?.add_modifier(Modifier::BOLD),
            border: fg(u, "border")?,
            border_focused: fg(u, "border_focused")?.add_modifier(Modifier::BOLD),
            title: fg(u, "title")?.add_modifier(Modifier::BOLD),
            row_selected: Style::new().bg(get(u, "row_selected")?),
            text: fg(u, "text")?,
            dim: fg(u, "dim")?,
            bar: Style::new().bg(get(u, "bar")?),
            mono: false,
        })
    }

    /// No colours: selection reversed, damage underlined.
    pub fn mono() -> Theme {
        let plain = Style::new();
        Theme {
            null: plain,
            printable: plain,
            whitespace: plain,
            other_ascii: plain,
            non_ascii: plain,
            offset: plain,
            selection: Color::Reset,
            child: Color::Reset,
            cursor: Color::Reset,
            damage: Color::Reset,
            unknown: Color::Reset,
            unparsed: Color::Reset,
            complete: plain,
            unverified: plain.add_modifier(Modifier::ITALIC),
            truncated: plain.add_modifier(Modifier::BOLD),
            corrupt: plain.add_modifier(Modifier::BOLD),
            border: plain,
            border_focused: plain.add_modifier(Modifier::BOLD),
            title: plain.add_modifier(Modifier::BOLD),
            row_selected: plain.add_modifier(Modifier::REVERSED),
            text: plain,
            dim: plain.add_modifier(Modifier::DIM),
            bar: plain.add_modifier(Modifier::REVERSED),
            mono: true,
        }
    }

    /// The hexyl class of a byte.
    pub fn byte(&self, b: u8) -> Style {
        match b {
            0 => self.null,
            b' ' | b'\t' | b'\n' | b'\r' => self.whitespace,
            0x21..=0x7e => self.printable,
            0x01..=0x7f => self.other_ascii,
            _ => self.non_ascii,
        }
    }

    pub(super) fn status(&self, s: pparse::status::Status) -> Style {
        match s {
            pparse::status::Status::Complete => self.complete,
            pparse::status::Status::Unverified => self.unverified,
            pparse::status::Status::Truncated => self.truncated,
            pparse::status::Status::Corrupt => self.corrupt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_themes_parse() {
        for (name, _) in BUILT_IN {
            let t = Theme::load(name).unwrap();
            assert!(!t.mono, "{name}");
        }
        assert_eq!(color("#ff8000"), Ok(Color::Rgb(255, 128, 0)));
        assert!(color("#ff80").is_err());
        assert!(color("plaid").is_err());
        assert!(
            Theme::load("no-such-theme")
                .unwrap_err()
                .contains("dark, light")
        );
    }
}
