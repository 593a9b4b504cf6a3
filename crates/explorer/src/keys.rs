//! Keys: one table maps keys to actions and is also the help overlay, so the
//! help can never disagree with what the keys do.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave the explorer (`q`, Ctrl-C).
    Quit,
    /// Move the selection up a row (`↑`, `k`).
    Up,
    /// Move the selection down a row (`↓`, `j`).
    Down,
    /// Collapse, or go to the parent; in the hex view, the previous byte (`←`, `h`).
    Left,
    /// Expand; in the hex view, the next byte (`→`, `l`).
    Right,
    /// Expand or collapse the selected row (Enter).
    Expand,
    /// Up a page (PgUp, Ctrl-U).
    PageUp,
    /// Down a page (PgDn, Space, Ctrl-D).
    PageDown,
    /// To the first row or byte (Home).
    Home,
    /// To the last row or byte (End, `G`).
    End,
    /// Focus the next pane (Tab).
    NextPane,
    /// Focus the previous pane (Shift-Tab).
    PrevPane,
    /// Prompt for an offset to go to (`g`).
    Goto,
    /// Prompt for a search (`/`).
    Search,
    /// To the next search match (`n`).
    NextMatch,
    /// To the previous search match (`N`).
    PrevMatch,
    /// Show the bytes as highlighted text or as hex (`t`).
    ToggleText,
    /// Open the pickle stepper (`p`).
    Stepper,
    /// Open the tensor table (`T`).
    Tensors,
    /// Write the selected tensor as `.npy` (`e`).
    Export,
    /// Open the W&B metrics plot (`M`).
    Metrics,
    /// Open a program's diagnostics (`E`).
    Problems,
    /// Run a jq filter over the selected extraction (`:`).
    Query,
    /// Go to the op that defines the selected value (`D`).
    Definition,
    /// Go to the next use of the selected value (`u`).
    NextUse,
    /// Go to the previous use of the selected value (`U`).
    PrevUse,
    /// Mark bytes from the cursor in the hex view, or drop the mark (`v`).
    Mark,
    /// Save the selection to a new file (`s`).
    Save,
    /// Copy the PATH, offset or value (`y`, then `p`, `o` or `v`).
    Copy,
    /// Zoom the focused pane to the whole screen, or back (`z`).
    Zoom,
    /// Narrow the left column (`<`).
    Narrower,
    /// Widen the left column (`>`).
    Wider,
    /// To the next damage: the next extraction that is not complete, or in
    /// the hex view the next damaged span (`]`).
    NextDamage,
    /// To the previous damage (`[`).
    PrevDamage,
    /// Archives' members by folder, or as a flat list (`f`).
    Folders,
    /// Show everything, only what is damaged, only unverified, only
    /// partial (`d`, in turn).
    Filter,
    /// Show the help overlay (`?`).
    Help,
    /// Close a prompt or overlay, or stop a search (Esc).
    Cancel,
}

/// (keys as shown, action, what it does)
pub const HELP: &[(&str, Action, &str)] = &[
    ("↑ k / ↓ j", Action::Up, "move up / down"),
    (
        "← h",
        Action::Left,
        "collapse, or go to parent; hex: previous byte",
    ),
    ("→ l", Action::Right, "expand; hex: next byte"),
    ("Enter", Action::Expand, "expand or collapse"),
    ("PgUp / PgDn", Action::PageUp, "page up / down"),
    ("Ctrl-U / Ctrl-D", Action::PageDown, "page up / down"),
    ("Space", Action::PageDown, "page down"),
    ("Home / End", Action::Home, "first / last row or byte"),
    ("G", Action::End, "last row or byte"),
    ("Tab / Shift-Tab", Action::NextPane, "next / previous pane"),
    (
        "g",
        Action::Goto,
        "go to offset: 0x1f, 4096, +16, -0x10; gg: the first row or byte",
    ),
    (
        "/",
        Action::Search,
        "search names and values; hex: bytes (1f 8b) or text",
    ),
    (
        "n / N",
        Action::NextMatch,
        "next / previous match, going on from the other end",
    ),
    (
        "t",
        Action::ToggleText,
        "show the bytes as highlighted text / as hex",
    ),
    (
        "v",
        Action::Mark,
        "hex: mark bytes from the cursor (move to extend); again to drop",
    ),
    (
        "s",
        Action::Save,
        "save to a new file: the marked bytes, the selected node, or the extraction",
    ),
    (
        "y",
        Action::Copy,
        "copy, then p: PATH, o: offset, v: value (OSC 52 clipboard)",
    ),
    (
        "z",
        Action::Zoom,
        "zoom the focused pane to the whole screen, or back",
    ),
    ("< / >", Action::Narrower, "narrow / widen the left column"),
    (
        "p",
        Action::Stepper,
        "pickle stepper: the VM's stack and memo after each opcode",
    ),
    (
        "T",
        Action::Tensors,
        "tensor table: bytes, values, statistics, histogram",
    ),
    (
        "e",
        Action::Export,
        "tensor table: write the tensor as .npy",
    ),
    (
        "M",
        Action::Metrics,
        "W&B run log: plot the history metrics by step",
    ),
    (
        "E",
        Action::Problems,
        "Paddle program: its errors, each with its line and a caret",
    ),
    (
        ":",
        Action::Query,
        "jq filter over the selected extraction, as pparse query (members, nodes)",
    ),
    (
        "D",
        Action::Definition,
        "Paddle program: go to the op that defines the selected value",
    ),
    (
        "u / U",
        Action::NextUse,
        "Paddle program: next / previous use of the selected value",
    ),
    (
        "f",
        Action::Folders,
        "extraction tree: archives' members by folder, or as a flat list",
    ),
    (
        "d",
        Action::Filter,
        "extraction tree: only damaged, only unverified, only partial, or all, in turn",
    ),
    (
        "] / [",
        Action::NextDamage,
        "next / previous damage: an extraction that is not complete; hex: a damaged span",
    ),
    ("?", Action::Help, "this help (↑ ↓ PgUp PgDn scroll it)"),
    (
        "Esc",
        Action::Cancel,
        "close a prompt or overlay, drop the mark, stop a search",
    ),
    ("q / Ctrl-C", Action::Quit, "quit"),
    (
        "mouse",
        Action::Cancel,
        "click to select, wheel to scroll, drag to select or resize",
    ),
];

/// The action for a key press, if any.
pub fn action(k: KeyEvent) -> Option<Action> {
    if k.modifiers.contains(KeyModifiers::CONTROL) {
        return match k.code {
            KeyCode::Char('c') => Some(Action::Quit),
            KeyCode::Char('d') => Some(Action::PageDown),
            KeyCode::Char('u') => Some(Action::PageUp),
            _ => None,
        };
    }
    Some(match k.code {
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::Left | KeyCode::Char('h') => Action::Left,
        KeyCode::Right | KeyCode::Char('l') => Action::Right,
        KeyCode::Enter => Action::Expand,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown | KeyCode::Char(' ') => Action::PageDown,
        KeyCode::Home => Action::Home,
        KeyCode::End | KeyCode::Char('G') => Action::End,
        KeyCode::Tab => Action::NextPane,
        KeyCode::BackTab => Action::PrevPane,
        KeyCode::Char('g') => Action::Goto,
        KeyCode::Char('/') => Action::Search,
        KeyCode::Char('n') => Action::NextMatch,
        KeyCode::Char('N') => Action::PrevMatch,
        KeyCode::Char('t') => Action::ToggleText,
        KeyCode::Char('p') => Action::Stepper,
        KeyCode::Char('T') => Action::Tensors,
        KeyCode::Char('e') => Action::Export,
        KeyCode::Char('M') => Action::Metrics,
        KeyCode::Char('E') => Action::Problems,
        KeyCode::Char(':') => Action::Query,
        KeyCode::Char('D') => Action::Definition,
        KeyCode::Char('u') => Action::NextUse,
        KeyCode::Char('U') => Action::PrevUse,
        KeyCode::Char('v') => Action::Mark,
        KeyCode::Char('s') => Action::Save,
        KeyCode::Char('y') => Action::Copy,
        KeyCode::Char('z') => Action::Zoom,
        KeyCode::Char('<') => Action::Narrower,
        KeyCode::Char('>') => Action::Wider,
        KeyCode::Char(']') => Action::NextDamage,
        KeyCode::Char('[') => Action::PrevDamage,
        KeyCode::Char('f') => Action::Folders,
        KeyCode::Char('d') => Action::Filter,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Esc => Action::Cancel,
        _ => return None,
    })
}

/// Parses a "go to" target: `0x1f`, `4096`, `+16`, `-0x10` (relative to `from`).
pub fn parse_offset(s: &str, from: u64) -> Option<u64> {
    let s = s.trim().replace('_', "");
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1i8, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => (0, s.as_str()),
    };
    let rest = rest.trim();
    let v = if let Some(h) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else {
        rest.parse::<u64>().ok()?
    };
    match sign {
        1 => from.checked_add(v),
        -1 => Some(from.saturating_sub(v)),
        _ => Some(v),
    }
}

/// Parses a byte search: hex pairs (`1f 8b 08`, `1f8b`) when the text is all
/// hex digits and spaces with an even digit count, else the text's UTF-8.
pub fn parse_pattern(s: &str) -> Vec<u8> {
    let t = s.trim();
    let digits: String = t.chars().filter(|c| *c != ' ').collect();
    // Hex only when it cannot be meant as a word: spaced pairs, or a digit.
    let hex = digits.len() >= 2
        && digits.len().is_multiple_of(2)
        && digits.chars().all(|c| c.is_ascii_hexdigit())
        && (t.contains(' ') || digits.chars().any(|c| c.is_ascii_digit()));
    if hex {
        (0..digits.len())
            .step_by(2)
            .filter_map(|i| u8::from_str_radix(&digits[i..i + 2], 16).ok())
            .collect()
    } else {
        s.as_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets() {
        assert_eq!(parse_offset("0x1f", 0), Some(31));
        assert_eq!(parse_offset("4096", 7), Some(4096));
        assert_eq!(parse_offset("+16", 100), Some(116));
        assert_eq!(parse_offset("-0x10", 100), Some(84));
        assert_eq!(parse_offset("-500", 100), Some(0));
        assert_eq!(parse_offset("1_000", 0), Some(1000));
        assert_eq!(parse_offset("zz", 0), None);
        assert_eq!(parse_offset("", 0), None);
    }

    #[test]
    fn patterns() {
        assert_eq!(parse_pattern("1f 8b 08"), vec![0x1f, 0x8b, 0x08]);
        assert_eq!(parse_pattern("1f8b"), vec![0x1f, 0x8b]);
        assert_eq!(parse_pattern("ustar"), b"ustar".to_vec());
        assert_eq!(parse_pattern("cafe"), b"cafe".to_vec());
        assert_eq!(parse_pattern("PK"), b"PK".to_vec());
    }

    #[test]
    fn every_help_line_names_a_bound_action() {
        for (_, a, _) in HELP {
            let bound = [
                KeyCode::Char('q'),
                KeyCode::Up,
                KeyCode::Left,
                KeyCode::Right,
                KeyCode::Enter,
                KeyCode::PageUp,
                KeyCode::Home,
                KeyCode::Tab,
                KeyCode::Char('g'),
                KeyCode::Char('/'),
                KeyCode::Char('n'),
                KeyCode::Char('t'),
                KeyCode::Char('p'),
                KeyCode::Char('T'),
                KeyCode::Char('e'),
                KeyCode::Char('M'),
                KeyCode::Char('E'),
                KeyCode::Char(':'),
                KeyCode::Char('D'),
                KeyCode::Char('u'),
                KeyCode::Char('?'),
                KeyCode::Char(' '),
                KeyCode::Char('G'),
                KeyCode::Char('v'),
                KeyCode::Char('s'),
                KeyCode::Char('y'),
                KeyCode::Char('z'),
                KeyCode::Char('<'),
                KeyCode::Char(']'),
                KeyCode::Char('f'),
                KeyCode::Char('d'),
                KeyCode::Esc,
            ]
            .into_iter()
            .any(|c| action(KeyEvent::new(c, KeyModifiers::NONE)) == Some(*a));
            assert!(bound, "{a:?} has no key");
        }
    }
}
