//! The interface of the explorer's side panels (the stepper, the tensor
//! table, the metrics): each owns its state, takes keys, clicks and the
//! results of its background work, draws from `&self`, and answers with a
//! [`Reply`] the app applies. The app never reaches inside a panel, and a
//! panel never imports the app.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::keys::Action;
use super::theme::Theme;
use super::worker::{Done, Worker};
use crate::data::Range;
use crate::engine::Session;
use crate::extraction::{ExtId, Tree};

/// What a panel works with.
pub struct Cx<'a> {
    /// The open file.
    pub session: &'a Session,
    /// Where its background work runs.
    pub worker: &'a Worker,
    /// Rows of the pane it is drawn in.
    pub rows: usize,
}

/// What the app should do after a panel handled something.
#[derive(Debug, Default)]
pub struct Reply {
    /// A message for the status bar.
    pub say: Option<String>,
    /// Bytes to show in the hex view (selecting their extraction).
    pub show: Option<(ExtId, u64)>,
    /// Where the hex cursor goes if that extraction is the one shown.
    pub cursor: Option<(ExtId, u64)>,
}

/// A side panel, drawn in place of the node tree. See the module docs.
pub trait SidePanel {
    /// The title of its pane.
    fn title(&self) -> String;
    /// A key, while its pane has the focus.
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply;
    /// A click on row `row` of its pane.
    fn click(&mut self, row: usize, cx: &Cx) -> Reply;
    /// A result of the worker: taken if it is this panel's, else given back.
    fn on_done(&mut self, d: Done, cx: &Cx) -> Result<Reply, Done>;
    /// Draws into `inner`, the pane inside its border.
    fn draw(&self, th: &Theme, buf: &mut Buffer, inner: Rect);
    /// The inspector's title and lines for it.
    fn inspector<'a>(&self, th: &Theme, tree: &Tree, width: u16) -> (&'static str, Vec<Line<'a>>);
    /// The bytes it points at, to mark in the hex view.
    fn marked(&self) -> Option<(ExtId, Range)> {
        None
    }
    /// Stops its background work (the panel is closed).
    fn close(&mut self, _worker: &Worker) {}
    /// Called twice a second: a panel made while the parse was running
    /// makes itself again once it is over.
    fn tick(&mut self, _cx: &Cx) {}
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
