//! Where the panes go on the screen. Worked out before each frame from the
//! terminal's size and the explorer's state, and kept for mouse hits and
//! page sizes until the next.

use ratatui::layout::{Constraint, Direction, Layout as Split, Rect};

use super::panes::hex::fitting_bpr;

/// The three panes that take the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    /// The extraction tree.
    Extractions,
    /// The node tree, or the side panel drawn in its place.
    Nodes,
    /// The bytes (hex or text), or the plot of the metrics panel.
    Hex,
}

/// How much room the inspector takes below the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// No side panel: the byte readings.
    Readings,
    /// A side panel's state (the stepper's stack, a tensor's statistics).
    Panel,
    /// A plot takes the room; its figures need a few lines.
    Plot,
}

/// Where the panes are.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    /// The extraction tree.
    pub exts: Rect,
    /// The node tree or side panel.
    pub nodes: Rect,
    /// The bytes.
    pub hex: Rect,
    /// The inspector.
    pub inspector: Rect,
    /// The status bar.
    pub status: Rect,
    /// Column of the border between the left and right columns.
    pub split_x: u16,
    /// Bytes per hex row.
    pub bpr: u64,
}

impl Layout {
    /// The panes in `area`, the left column `split` percent wide, for
    /// bytes of length `len`; with `zoom`, that pane alone above the
    /// status bar (the others empty).
    pub fn new(area: Rect, split: u16, room: Room, len: u64, zoom: Option<Pane>) -> Layout {
        let rows = Split::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Min(3), Constraint::Length(1)])
            .split(area);
        if let Some(pane) = zoom {
            let full = rows[0];
            let none = Rect::new(full.x, full.y, 0, 0);
            let pick = |p: Pane| if p == pane { full } else { none };
            return Layout {
                exts: pick(Pane::Extractions),
                nodes: pick(Pane::Nodes),
                hex: pick(Pane::Hex),
                inspector: none,
                status: rows[1],
                // No border to drag.
                split_x: u16::MAX,
                bpr: fitting_bpr(full.width.saturating_sub(2) as u64, len),
            };
        }
        let cols = Split::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(split), Constraint::Min(10)])
            .split(rows[0]);
        let left = Split::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Percentage(40), Constraint::Percentage(60)])
            .split(cols[0]);
        let h = cols[1].height;
        let insp_h = match room {
            Room::Readings => (h * 2 / 5).clamp(6.min(h), 16),
            Room::Plot => 6.min(h / 2),
            Room::Panel => h / 2,
        };
        let right = Split::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Min(3), Constraint::Length(insp_h)])
            .split(cols[1]);
        let inner_w = right[0].width.saturating_sub(2) as u64;
        Layout {
            exts: left[0],
            nodes: left[1],
            hex: right[0],
            inspector: right[1],
            status: rows[1],
            split_x: cols[1]
                .x
                .saturating_sub(1)
                .max(cols[0].x + cols[0].width.saturating_sub(1)),
            bpr: fitting_bpr(inner_w, len),
        }
    }

    /// The area of a pane.
    pub fn area(&self, pane: Pane) -> Rect {
        match pane {
            Pane::Extractions => self.exts,
            Pane::Nodes => self.nodes,
            Pane::Hex => self.hex,
        }
    }

    /// Rows inside a pane's border (at least 1).
    pub fn rows(&self, pane: Pane) -> usize {
        (self.area(pane).height.saturating_sub(2) as usize).max(1)
    }

    /// The pane under a screen position, and the position relative to its
    /// inside (`None` on its top or bottom border); `None` outside the panes.
    pub fn hit(&self, x: u16, y: u16) -> Option<(Pane, Option<(u16, u16)>)> {
        let inside = |r: Rect| {
            !r.is_empty() && x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height
        };
        let pane = [Pane::Extractions, Pane::Nodes, Pane::Hex]
            .into_iter()
            .find(|p| inside(self.area(*p)))?;
        let r = self.area(pane);
        let within = y > r.y && y + 1 < r.y + r.height;
        Some((
            pane,
            within.then(|| (x.saturating_sub(r.x + 1), y - r.y - 1)),
        ))
    }
}
