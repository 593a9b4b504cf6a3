//! The extraction tree: the file, what was found inside it, and what was
//! found inside that. Its selection is the extraction every other pane
//! shows.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, put, put_row};
use crate::widgets::models::Exts;
use crate::widgets::treeview::{TreeModel, TreeView};
use pparse::extraction::{EntryKind, ExtId, Extraction, Phase};
use pparse::status::Status;
use pparse::util::{human, thousands};

/// The extraction tree pane.
#[derive(Debug, Clone)]
pub struct ExtPane {
    tree: TreeView<ExtId>,
}

impl Default for ExtPane {
    fn default() -> Self {
        let mut tree = TreeView::default();
        tree.selected = Some(0);
        ExtPane { tree }
    }
}

impl ExtPane {
    /// The selected extraction.
    pub fn selected(&self) -> ExtId {
        self.tree.selected.unwrap_or(0)
    }

    /// Selects `id`, opening its ancestors, and scrolls to it.
    pub fn reveal(&mut self, id: ExtId, cx: &Cx) {
        let t = cx.session.tree();
        self.tree.reveal(&Exts(&t), &id, cx.rows);
    }

    /// Keeps the selection in view of `rows` rows (the tree grows, the
    /// screen is resized).
    pub fn prepare(&mut self, cx: &Cx) {
        let t = cx.session.tree();
        self.tree.clamp(&Exts(&t), cx.rows);
    }
}

impl Component for ExtPane {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        let h = cx.rows;
        let t = cx.session.tree();
        let m = Exts(&t);
        let v = &mut self.tree;
        let cur = v.cursor(&m);
        match a {
            _ if v.step(&m, a, h) => {}
            Action::Expand | Action::Right | Action::Left => {
                let Some(id) = v.selected else {
                    return Reply::default();
                };
                let has_kids = !t.exts[id].children.is_empty();
                let open = v.is_expanded(&id);
                match a {
                    Action::Expand if open => v.collapse(&id),
                    Action::Expand | Action::Right if has_kids && !open => v.expand(&m, &id),
                    Action::Right if open => v.select_row(&m, cur + 1, h),
                    Action::Left if open => v.collapse(&id),
                    Action::Left => {
                        if let Some(p) = m.parent(&id) {
                            v.reveal(&m, &p, h);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Reply::default()
    }

    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        let t = cx.session.tree();
        let m = Exts(&t);
        let target = self.tree.offset + at.y as usize;
        if target < self.tree.count(&m, None) {
            self.tree.select_row(&m, target, cx.rows);
        }
        Reply::default()
    }

    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let t = look.tree;
        let th = look.theme;
        let m = Exts(t);
        let title = format!(" Extractions ({}) ", thousands(t.len() as u64));
        let inner = panel::frame(look, title, buf, area);
        let v = &self.tree;
        for i in 0..inner.height as usize {
            let Some((id, depth)) = v.at(&m, v.offset + i) else {
                break;
            };
            let e = &t.exts[id];
            let y = inner.y + i as u16;
            let base = if v.selected == Some(id) {
                th.row_selected
            } else {
                Style::new()
            };
            buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
            let mut x = inner.x;
            let mut w = inner.width;
            let indent = "  ".repeat(depth.min(40));
            let marker = if e.children.is_empty() {
                "  "
            } else if v.is_expanded(&id) {
                "▾ "
            } else {
                "▸ "
            };
            for (s, st) in [(indent.as_str(), Style::new()), (marker, th.dim)] {
                let n = put(buf, x, y, w, s, st.patch(base));
                x += n;
                w -= n;
            }
            let status = t.status_of(id);
            let name_style = if status == Status::Complete {
                th.text
            } else {
                th.status(status)
            };
            let mut detail = String::new();
            if let Some(p) = e.parser {
                detail.push_str(&format!("  [{p}]"));
            }
            match &e.kind {
                EntryKind::Dir => detail.push_str("  dir"),
                EntryKind::Symlink(t) => detail.push_str(&format!("  -> {t}")),
                EntryKind::HardLink(t) => detail.push_str(&format!("  link {t}")),
                EntryKind::Other(what) => detail.push_str(&format!("  {what}")),
                // A cut member: how much of it is there.
                _ => match e.declared_size {
                    Some(d) if d > e.size() => {
                        detail.push_str(&format!("  {} of {}", human(e.size()), human(d)));
                    }
                    _ => detail.push_str(&format!("  {}", human(e.size()))),
                },
            }
            if e.phase == Phase::Parsing || e.phase == Phase::Waiting && !e.is_final() {
                detail.push_str("  …");
            }
            // The status in words, next to the name, so that it is seen
            // without colour and is never the part cut off.
            let tags: Vec<(String, Style)> = status_tag(e, status)
                .map(|tag| (format!("  {tag}"), th.status(status).patch(base)))
                .into_iter()
                .collect();
            put_row(
                buf,
                (x, y, w),
                (&e.display_name(), name_style.patch(base)),
                &tags,
                (&detail, th.dim.patch(base)),
            );
        }
    }
}

/// An extraction's status in words: a member whose bytes are only partly
/// there (a cut member: what is there is kept) is told apart from one
/// with bad bytes and from one with nothing.
pub fn status_tag(e: &Extraction, status: Status) -> Option<String> {
    match status {
        Status::Complete => None,
        Status::Truncated if e.parent.is_some() && e.size() > 0 => Some("◐ partial".into()),
        Status::Truncated if e.parent.is_some() => Some("○ missing".into()),
        s => Some(format!("✗ {}", s.as_str())),
    }
}
