//! The extraction tree: the file, what was found inside it, and what was
//! found inside that. Its selection is the extraction every other pane
//! shows.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, put, put_row};
use crate::widgets::folders::{Filter, Row, Rows, open_exts};
use crate::widgets::treeview::{TreeModel, TreeView};
use pparse::extraction::{EntryKind, ExtId, Extraction, Phase, Tree};
use pparse::status::Status;
use pparse::util::{human, thousands};

/// The extraction tree pane: archives' members by folder (`f` flips to
/// the flat list), everything or only what is damaged (`d`).
#[derive(Debug, Clone)]
pub struct ExtPane {
    tree: TreeView<Row>,
    rows: Rows,
}

impl Default for ExtPane {
    fn default() -> Self {
        let mut tree = TreeView::default();
        tree.selected = Some(Row::Ext(0));
        ExtPane {
            tree,
            rows: Rows::default(),
        }
    }
}

impl ExtPane {
    /// The selected extraction (a folder's: its archive).
    pub fn selected(&self) -> ExtId {
        self.tree.selected.as_ref().map_or(0, Rows::ext_of)
    }

    /// The selected row, when it is a folder: its path in the archive.
    pub fn selected_folder(&self) -> Option<&str> {
        match &self.tree.selected {
            Some(Row::Dir { path, .. }) => Some(path),
            _ => None,
        }
    }

    /// Members put in folders so far (see `Rows::placed`).
    pub fn placed(&self) -> u64 {
        self.rows.placed()
    }

    /// Whether archives' members are grouped by folder, and the filter.
    pub fn view(&self) -> (bool, Filter) {
        (self.rows.folders(), self.rows.filter())
    }

    /// Selects `id`, opening its ancestors, and scrolls to it.
    pub fn reveal(&mut self, id: ExtId, cx: &Cx) {
        let t = cx.session.tree();
        let mut up = Vec::new();
        let mut at = t.exts.get(id).and_then(|e| e.parent());
        while let Some(p) = at {
            up.push(p);
            at = t.exts[p].parent();
        }
        self.rows.prepare(&t, &up);
        let row = self.rows.row_of(&t, id);
        self.tree.reveal(&self.rows.model(&t), &row, cx.rows);
    }

    /// Keeps the selection in view of `rows` rows (the tree grows, the
    /// screen is resized), and the folders of open archives up to date.
    pub fn prepare(&mut self, cx: &Cx) {
        let t = cx.session.tree();
        let mut open = open_exts(self.tree.expanded_ids());
        open.push(0);
        self.rows.prepare(&t, &open);
        self.tree.clamp(&self.rows.model(&t), cx.rows);
    }

    /// Groups by folder or lists flat, keeping the selection.
    pub fn flip_folders(&mut self, cx: &Cx) {
        let keep = self.selected();
        self.rows.set_folders(!self.rows.folders());
        self.tree = TreeView::default();
        self.reveal(keep, cx);
    }

    /// The next filter: damaged only, unverified only, partial only, all.
    pub fn next_filter(&mut self, cx: &Cx) -> Filter {
        let keep = self.selected();
        let f = self.rows.filter().next();
        {
            let t = cx.session.tree();
            self.rows.set_filter(&t, f);
        }
        self.tree = TreeView::default();
        self.tree.selected = Some(Row::Ext(0));
        let shown = {
            let t = cx.session.tree();
            f == Filter::All || t.status_of(keep) != Status::Complete
        };
        self.reveal(if shown { keep } else { 0 }, cx);
        f
    }
}

impl Component for ExtPane {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        let h = cx.rows;
        let t = cx.session.tree();
        // An archive opened now is grouped before its rows are counted.
        if let (Action::Expand | Action::Right, Some(Row::Ext(id))) = (a, &self.tree.selected) {
            self.rows.prepare(&t, &[*id]);
        }
        let m = self.rows.model(&t);
        let v = &mut self.tree;
        let cur = v.cursor(&m);
        match a {
            _ if v.step(&m, a, h) => {}
            Action::Expand | Action::Right | Action::Left => {
                let Some(id) = v.selected.clone() else {
                    return Reply::default();
                };
                let has_kids = self.rows.has_children(&t, &id);
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
        let m = self.rows.model(&t);
        let target = self.tree.offset + at.y as usize;
        if target < self.tree.count(&m, None) {
            self.tree.select_row(&m, target, cx.rows);
        }
        Reply::default()
    }

    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let t = look.tree;
        let th = look.theme;
        let m = self.rows.model(t);
        let (folders, filter) = self.view();
        let mut title = format!(" Extractions ({}) ", thousands(t.len() as u64));
        if !folders {
            title.push_str("flat ");
        }
        if filter != Filter::All {
            title.push_str(&format!("· {} ", filter.label()));
        }
        let inner = panel::frame(look, title, buf, area);
        let v = &self.tree;
        for i in 0..inner.height as usize {
            let Some((row, depth)) = v.at(&m, v.offset + i) else {
                break;
            };
            let y = inner.y + i as u16;
            let base = if v.selected.as_ref() == Some(&row) {
                th.row_selected
            } else {
                Style::new()
            };
            buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
            let mut x = inner.x;
            let mut w = inner.width;
            let indent = "  ".repeat(depth.min(40));
            let marker = if !self.rows.has_children(t, &row) {
                "  "
            } else if v.is_expanded(&row) {
                "▾ "
            } else {
                "▸ "
            };
            for (s, st) in [(indent.as_str(), Style::new()), (marker, th.dim)] {
                let n = put(buf, x, y, w, s, st.patch(base));
                x += n;
                w -= n;
            }
            let name = self.rows.name(t, &row);
            match &row {
                Row::Dir { of, path } => {
                    let s = self.rows.stats(*of, path);
                    let tags: Vec<(String, Style)> = (s.damaged > 0)
                        .then(|| {
                            (
                                format!("  ✗ {} damaged", thousands(s.damaged)),
                                th.status(Status::Corrupt).patch(base),
                            )
                        })
                        .into_iter()
                        .collect();
                    let files = if s.files == 1 { "file" } else { "files" };
                    let detail = format!("  {} {files}  {}", thousands(s.files), human(s.bytes));
                    put_row(
                        buf,
                        (x, y, w),
                        (&name, th.text.patch(base)),
                        &tags,
                        (&detail, th.dim.patch(base)),
                    );
                }
                Row::Ext(id) => draw_ext(t, *id, &name, look, base, buf, (x, y, w)),
            }
        }
    }
}

/// One extraction's row: its name, its status in words, kind and size.
fn draw_ext(
    t: &Tree,
    id: ExtId,
    name: &str,
    look: &Look,
    base: Style,
    buf: &mut Buffer,
    at: (u16, u16, u16),
) {
    let th = look.theme;
    let e = &t.exts[id];
    let status = t.status_of(id);
    let name_style = if status == Status::Complete {
        th.text
    } else {
        th.status(status)
    };
    let mut detail = String::new();
    if let Some(p) = e.parser() {
        detail.push_str(&format!("  [{p}]"));
    }
    match &e.kind {
        EntryKind::Dir => detail.push_str("  dir"),
        EntryKind::Symlink(t) => detail.push_str(&format!("  -> {t}")),
        EntryKind::HardLink(t) => detail.push_str(&format!("  link {t}")),
        EntryKind::Other(what) => detail.push_str(&format!("  {what}")),
        // A cut member: how much of it is there.
        _ => match e.declared_size() {
            Some(d) if d > e.size() => {
                detail.push_str(&format!("  {} of {}", human(e.size()), human(d)));
            }
            _ => detail.push_str(&format!("  {}", human(e.size()))),
        },
    }
    if e.phase == Phase::Parsing || e.phase == Phase::Waiting && !e.is_final() {
        detail.push_str("  …");
    }
    // The status in words, next to the name, so that it is seen without
    // colour and is never the part cut off.
    let tags: Vec<(String, Style)> = status_tag(e, status)
        .map(|tag| (format!("  {tag}"), th.status(status).patch(base)))
        .into_iter()
        .collect();
    put_row(
        buf,
        at,
        (name, name_style.patch(base)),
        &tags,
        (&detail, th.dim.patch(base)),
    );
}

/// An extraction's status in words: a member whose bytes are only partly
/// there (a cut member: what is there is kept) is told apart from one
/// with bad bytes and from one with nothing.
pub fn status_tag(e: &Extraction, status: Status) -> Option<String> {
    match status {
        Status::Complete => None,
        Status::Truncated if e.parent().is_some() && e.size() > 0 => Some("◐ partial".into()),
        Status::Truncated if e.parent().is_some() => Some("○ missing".into()),
        s => Some(format!("✗ {}", s.as_str())),
    }
}
