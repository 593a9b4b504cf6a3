//! The interface of the explorer's panes: the extraction tree, the node
//! tree, the hex and text view, the inspector, and the side panels (the
//! stepper, the tensor table, the metrics). Each owns its state, takes keys,
//! clicks and the results of its background work, draws from `&self`, and
//! answers with a [`Reply`] the app applies. The app never reaches inside a
//! pane to change it, and a pane never imports the app: what one pane does
//! to another (a node selected moves the hex cursor) goes through the app.
//!
//! Drawing changes nothing. What a frame needs that must be asked for or
//! cached (pages of bytes, highlighting, scroll offsets that follow a
//! resize) is done before it, in each pane's `prepare`.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Widget};

use super::keys::Action;
use super::theme::Theme;
use super::worker::{Payload, To, Worker};
use pparse::data::Range;
use pparse::engine::Session;
use pparse::extraction::{ExtId, Tree};

/// What a pane works with when it handles input or results.
pub struct Cx<'a> {
    /// The open file.
    pub session: &'a Session,
    /// Where its background work runs.
    pub worker: &'a Worker,
    /// Rows inside the pane's border.
    pub rows: usize,
    /// The extraction the explorer shows.
    pub ext: ExtId,
}

/// What a pane draws with.
pub struct Look<'a> {
    /// Colours.
    pub theme: &'a Theme,
    /// The shared tree, read-locked for the frame.
    pub tree: &'a Tree,
    /// Whether the pane has the focus.
    pub focused: bool,
}

/// What the app should do after a pane handled something.
#[derive(Debug, Default)]
pub struct Reply {
    /// A message for the status bar.
    pub say: Option<String>,
    /// Bytes to show in the hex view (selecting their extraction).
    pub show: Option<(ExtId, u64)>,
    /// Where the hex cursor goes if that extraction is the one shown.
    pub cursor: Option<(ExtId, u64)>,
    /// The user moved the hex cursor here: select what lies there (the
    /// deepest node, or the stepper's opcode).
    pub follow: Option<u64>,
}

/// A pane of the explorer. See the module docs.
pub trait Component {
    /// A key, while the pane has the focus.
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply;
    /// A click at `at`, relative to the pane's inside (row 0 is the first
    /// row below the border).
    fn click(&mut self, at: Position, cx: &Cx) -> Reply;
    /// A result of the worker addressed to this pane: taken, or given back
    /// when it is of a type the pane does not read (a bug the app reports).
    fn on_done(&mut self, d: Payload, _cx: &Cx) -> Result<Reply, Payload> {
        Err(d)
    }
    /// Draws the pane, border included, into `area`.
    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect);
}

/// A side panel, drawn in place of the node tree.
pub trait SidePanel: Component {
    /// The address of its background work's results.
    fn address(&self) -> To;
    /// The title of its pane.
    fn title(&self) -> String;
    /// The inspector's title and lines for it.
    fn inspector<'a>(&self, th: &Theme, tree: &Tree, width: u16) -> (&'static str, Vec<Line<'a>>);
    /// The bytes it points at, to mark in the hex view.
    fn marked(&self) -> Option<(ExtId, Range)> {
        None
    }
    /// Draws in place of the hex view, if the panel takes it (the metric
    /// plot); `false` leaves the hex view.
    fn draw_main(&self, _look: &Look, _buf: &mut Buffer, _area: Rect) -> bool {
        false
    }
    /// Whether it takes the hex view's keys too (it draws there).
    fn takes_main(&self) -> bool {
        false
    }
    /// Stops its background work (the panel is closed).
    fn close(&mut self, _worker: &Worker) {}
    /// Called twice a second: a panel made while the parse was running
    /// makes itself again once it is over.
    fn tick(&mut self, _cx: &Cx) {}
}

/// Draws a pane's border and title; returns the inside.
pub fn frame(look: &Look, title: String, buf: &mut Buffer, area: Rect) -> Rect {
    let th = look.theme;
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(if look.focused {
            th.border_focused
        } else {
            th.border
        })
        .title(Span::styled(title, th.title));
    let inner = b.inner(area);
    b.render(area, buf);
    inner
}

/// `s` in at most `room` characters: its middle replaced by `…` when it
/// is longer (a path's start and its file name both matter).
pub fn cut_middle(s: &str, room: usize) -> String {
    let n = s.chars().count();
    if n <= room {
        return s.to_string();
    }
    if room < 3 {
        return s
            .chars()
            .take(room.saturating_sub(1))
            .chain(['…'])
            .collect();
    }
    let head = (room - 1) / 2;
    let tail = room - 1 - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// `line` in at most `width` columns, its last one `…` when it is cut,
/// so that a cut value never passes for a whole one.
pub fn fit(line: Line<'_>, width: usize) -> Line<'_> {
    let total: usize = line.spans.iter().map(|s| s.content.chars().count()).sum();
    if total <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
    let mut spans = Vec::new();
    for sp in line.spans {
        if left == 0 {
            break;
        }
        let n = sp.content.chars().count();
        if n <= left {
            left -= n;
            spans.push(sp);
        } else {
            let cut: String = sp.content.chars().take(left).collect();
            spans.push(Span::styled(cut, sp.style));
            left = 0;
        }
    }
    spans.push(Span::raw("…"));
    Line::from(spans).style(line.style)
}

/// Writes `s` at (x, y) in `width` columns, ending in `…` when it is cut;
/// returns the columns used.
pub fn put_cut(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    width: u16,
    s: &str,
    style: ratatui::style::Style,
) -> u16 {
    let n = s.chars().count();
    if n <= width as usize {
        return put(buf, x, y, width, s, style);
    }
    let cut: String = s
        .chars()
        .take((width as usize).saturating_sub(1))
        .chain(['…'])
        .collect();
    put(buf, x, y, width, &cut, style)
}

/// One row of a tree: `name` cut in the middle and `tags` (a status in
/// words, which must survive `NO_COLOR`) kept whole as far as they can
/// be, then `detail` cut at its end with `…`. Returns the columns used.
pub fn put_row(
    buf: &mut Buffer,
    (x, y, w): (u16, u16, u16),
    name: (&str, ratatui::style::Style),
    tags: &[(String, ratatui::style::Style)],
    detail: (&str, ratatui::style::Style),
) -> u16 {
    let tag_w: usize = tags.iter().map(|(t, _)| t.chars().count()).sum();
    let name_n = name.0.chars().count();
    let w_us = w as usize;
    // The name gives way to the tags only (the detail takes what is
    // left), and keeps a dozen columns whatever the tags.
    let name_room = w_us.saturating_sub(tag_w).max(w_us.min(12)).min(name_n);
    let mut used = put(buf, x, y, w, &cut_middle(name.0, name_room), name.1);
    for (t, st) in tags {
        used += put_cut(buf, x + used, y, w - used, t, *st);
    }
    used + put_cut(buf, x + used, y, w - used, detail.0, detail.1)
}

/// Writes `s` at (x, y) clipped to `width` columns; returns the columns used.
pub fn put(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    width: u16,
    s: &str,
    style: ratatui::style::Style,
) -> u16 {
    if width == 0 {
        return 0;
    }
    let (end, _) = buf.set_stringn(x, y, s, width as usize, style);
    end - x
}

/// Where a list key moves the selection in a list of `len` rows (`len` >
/// 0) that shows `page` rows; `None` for keys a list does not take.
/// `Expand` stays on the row (it asks for it again).
pub fn list_target(a: Action, cur: usize, len: usize, page: usize) -> Option<usize> {
    let to = match a {
        Action::Down | Action::Right => cur + 1,
        Action::Up | Action::Left => cur.saturating_sub(1),
        Action::PageDown => cur + page,
        Action::PageUp => cur.saturating_sub(page),
        Action::Home => 0,
        Action::End => len - 1,
        Action::Expand => cur,
        _ => return None,
    };
    Some(to.min(len - 1))
}

/// Scrolls `offset` (the first row shown of `page` rows) as little as
/// keeps row `i` in view.
pub fn scroll_to(offset: &mut usize, i: usize, page: usize) {
    if i < *offset {
        *offset = i;
    } else if i >= *offset + page {
        *offset = i + 1 - page;
    }
}

/// The item a click `y` rows into a list lands on, when the list shows
/// `page` items of `per` rows each from [`first_row`]; `None` past its end.
pub fn clicked_item(
    offset: usize,
    selected: usize,
    len: usize,
    page: usize,
    y: u16,
    per: usize,
) -> Option<usize> {
    let i = first_row(offset, selected, len, page) + y as usize / per.max(1);
    (i < len).then_some(i)
}

/// The first row drawn of a list of `len` rows in `rows` rows: `offset`,
/// unless that leaves the end short or `selected` out of view (after a
/// resize).
pub fn first_row(offset: usize, selected: usize, len: usize, rows: usize) -> usize {
    let top = offset.min(len.saturating_sub(rows));
    if selected < top || selected >= top + rows {
        selected.saturating_sub(rows / 2)
    } else {
        top
    }
}
