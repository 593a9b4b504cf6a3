//! The node tree of the shown extraction: its structure as the parser sees
//! it, loaded lazily. A node's children are read from its bytes in the
//! background when it is opened, and the least recently opened subtrees
//! are dropped again past a budget.

use std::collections::{HashMap, HashSet, VecDeque};

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, put, put_row};
use crate::widgets::models::{self, Nodes};
use crate::widgets::treeview::{TreeModel, TreeView};
use crate::worker::{Job, Payload, To};
use pparse::extraction::{ExtId, Phase};
use pparse::node::{Children, Node};
use pparse::status::Status;

/// The children of a node, loaded by the worker.
struct NodesLoaded {
    ext: ExtId,
    path: Vec<usize>,
}

/// The node tree pane, with one view (expansion, selection, scroll) per
/// extraction, kept when another one is shown.
pub struct NodePane {
    views: HashMap<ExtId, TreeView<Vec<usize>>>,
    /// The extraction shown at the last `prepare`.
    ext: ExtId,
    loading: HashSet<(ExtId, Vec<usize>)>,
    /// Nodes loaded on request, oldest first, with their child counts.
    loaded: VecDeque<(ExtId, Vec<usize>, usize)>,
    loaded_total: usize,
    /// Whether an extraction's top-level nodes are in offset order, by the
    /// node count it was found for.
    sorted: HashMap<ExtId, (usize, bool)>,
    /// Most node children kept loaded before cold ones are dropped.
    pub budget: usize,
}

impl Default for NodePane {
    fn default() -> Self {
        NodePane {
            views: HashMap::new(),
            ext: 0,
            loading: HashSet::new(),
            loaded: VecDeque::new(),
            loaded_total: 0,
            sorted: HashMap::new(),
            budget: 200_000,
        }
    }
}

impl NodePane {
    /// The selected node of extraction `ext`, as an index path.
    pub fn selected(&self, ext: ExtId) -> Option<&Vec<usize>> {
        self.views.get(&ext)?.selected.as_ref()
    }

    /// Children loaded through the explorer and still held.
    pub fn loaded(&self) -> usize {
        self.loaded_total
    }

    /// Keeps the selection in view after a resize, and learns whether the
    /// shown extraction's nodes are sorted (for drawing).
    pub fn prepare(&mut self, cx: &Cx) {
        self.ext = cx.ext;
        let t = cx.session.tree();
        let Some(e) = t.get(cx.ext) else { return };
        self.sorted_nodes(cx.ext, &e.nodes);
        let m = Nodes(&e.nodes);
        self.views.entry(cx.ext).or_default().clamp(&m, cx.rows);
    }

    /// Whether an extraction's top-level nodes are sorted (cached by count).
    fn sorted_nodes(&mut self, ext: ExtId, nodes: &[Node]) -> bool {
        match self.sorted.get(&ext) {
            Some(&(n, s)) if n == nodes.len() => s,
            _ => {
                let s = models::is_sorted(nodes);
                self.sorted.insert(ext, (nodes.len(), s));
                s
            }
        }
    }

    /// Whether `nodes` of `ext` were found sorted at the last `prepare`
    /// (`false`, which is always safe, if not known).
    pub fn known_sorted(&self, ext: ExtId, nodes: &[Node]) -> bool {
        matches!(self.sorted.get(&ext), Some(&(n, true)) if n == nodes.len())
    }

    /// Selects the deepest loaded node holding `offset`; if it has unloaded
    /// children, asks for them so the selection can go deeper.
    pub fn select_at(&mut self, offset: u64, cx: &Cx) {
        let t = cx.session.tree();
        let Some(e) = t.get(cx.ext) else { return };
        let sorted = self.sorted_nodes(cx.ext, &e.nodes);
        let Some(path) = models::deepest_at(&e.nodes, sorted, offset) else {
            return;
        };
        let m = Nodes(&e.nodes);
        let unloaded = m
            .get(&path)
            .is_some_and(|n| models::expandable(n) == Some(true));
        self.views
            .entry(cx.ext)
            .or_default()
            .reveal(&m, &path, cx.rows);
        drop(t);
        if unloaded {
            self.request_load(cx, path);
        }
    }

    /// After a load, a hex cursor at `offset` may reach a deeper node.
    pub fn deepen(&mut self, offset: u64, cx: &Cx) {
        let t = cx.session.tree();
        let Some(e) = t.get(cx.ext) else { return };
        let found = models::deepest_at(&e.nodes, true, offset)
            .or_else(|| models::deepest_at(&e.nodes, false, offset));
        if let Some(p) = found {
            let m = Nodes(&e.nodes);
            // Still not the deepest: open it too, one level per load, so
            // the cursor ends on the leaf it is in (a field's payload).
            let unloaded = m
                .get(&p)
                .is_some_and(|n| models::expandable(n) == Some(true));
            self.views
                .entry(cx.ext)
                .or_default()
                .reveal(&m, &p, cx.rows);
            drop(t);
            if unloaded {
                self.request_load(cx, p);
            }
        }
    }

    /// Selects the node at `path`; returns where its bytes start.
    pub fn reveal(&mut self, path: &[usize], cx: &Cx) -> Option<u64> {
        let t = cx.session.tree();
        let e = t.get(cx.ext)?;
        let m = Nodes(&e.nodes);
        let start = m.get(path).map(|n| n.range.start);
        self.views
            .entry(cx.ext)
            .or_default()
            .reveal(&m, &path.to_vec(), cx.rows);
        start
    }

    fn request_load(&mut self, cx: &Cx, path: Vec<usize>) {
        let ext = cx.ext;
        if self.loading.insert((ext, path.clone())) {
            cx.worker.submit(Job::new(To::Nodes, move |session, _| {
                session.load(ext, &path);
                Some(Box::new(NodesLoaded { ext, path }))
            }));
        }
    }

    fn on_loaded(&mut self, ext: ExtId, path: Vec<usize>, cx: &Cx) {
        self.loading.remove(&(ext, path.clone()));
        let t = cx.session.tree();
        let Some(e) = t.get(ext) else { return };
        let m = Nodes(&e.nodes);
        let kids = m.get(&path).map_or(0, subtree_size);
        if kids > 0 {
            self.views.entry(ext).or_default().expand(&m, &path);
            self.loaded.push_back((ext, path, kids));
            self.loaded_total += kids;
        }
        drop(t);
        self.unload_cold(cx);
    }

    /// Drops the children of the least recently loaded nodes that are
    /// collapsed, once more than `budget` children are loaded. They are
    /// loaded again from their bytes when expanded.
    fn unload_cold(&mut self, cx: &Cx) {
        let mut keep = VecDeque::new();
        while self.loaded_total > self.budget {
            let Some((ext, path, n)) = self.loaded.pop_front() else {
                break;
            };
            let open = self.views.get(&ext).is_some_and(|v| v.is_expanded(&path));
            if open {
                keep.push_back((ext, path, n));
                continue;
            }
            cx.session.unload(ext, &path);
            self.loaded_total -= n;
        }
        while let Some(x) = keep.pop_back() {
            self.loaded.push_front(x);
        }
    }
}

/// Nodes loaded below `n` (its loaded descendants).
fn subtree_size(n: &Node) -> usize {
    n.loaded_children()
        .iter()
        .map(|c| 1 + subtree_size(c))
        .sum()
}

impl Component for NodePane {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        let (ext, h) = (cx.ext, cx.rows);
        let t = cx.session.tree();
        let Some(e) = t.get(ext) else {
            return Reply::default();
        };
        let m = Nodes(&e.nodes);
        let v = self.views.entry(ext).or_default();
        let total = v.count(&m, None);
        let before = v.selected.clone();
        let at_start = |p: &[usize]| m.get(p).map(|n| (ext, n.range.start));
        if before.is_none() && total > 0 {
            // Nothing selected yet: the first key selects the first node.
            v.select_row(&m, 0, h);
            if !matches!(a, Action::Expand | Action::Right | Action::Left) {
                return Reply {
                    cursor: at_start(&[0]),
                    ..Reply::default()
                };
            }
        }
        let cur = v.cursor(&m);
        let mut load = None;
        match a {
            _ if v.step(&m, a, h) => {}
            Action::Expand | Action::Right | Action::Left => {
                let Some(path) = v.selected.clone() else {
                    return Reply::default();
                };
                let Some(n) = m.get(&path) else {
                    return Reply::default();
                };
                let open = v.is_expanded(&path);
                match (a, models::expandable(n)) {
                    (Action::Expand | Action::Left, _) if open => v.collapse(&path),
                    (Action::Expand | Action::Right, Some(true)) => load = Some(path),
                    (Action::Expand | Action::Right, Some(false)) if !open => v.expand(&m, &path),
                    (Action::Right, Some(false)) => v.select_row(&m, cur + 1, h),
                    (Action::Left, _) => {
                        if let Some(p) = m.parent(&path) {
                            v.reveal(&m, &p, h);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        let after = v.selected.clone();
        let cursor = match &after {
            Some(p) if after != before => at_start(p),
            _ => None,
        };
        drop(t);
        if let Some(path) = load {
            self.request_load(cx, path);
        }
        Reply {
            cursor,
            ..Reply::default()
        }
    }

    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        let t = cx.session.tree();
        let Some(e) = t.get(cx.ext) else {
            return Reply::default();
        };
        let m = Nodes(&e.nodes);
        let v = self.views.entry(cx.ext).or_default();
        let target = v.offset + at.y as usize;
        if target >= v.count(&m, None) {
            return Reply::default();
        }
        v.select_row(&m, target, cx.rows);
        let start = v.selected.as_ref().and_then(|p| m.get(p));
        Reply {
            cursor: start.map(|n| (cx.ext, n.range.start)),
            ..Reply::default()
        }
    }

    fn on_done(&mut self, d: Payload, cx: &Cx) -> Result<Reply, Payload> {
        let l = d.downcast::<NodesLoaded>()?;
        self.on_loaded(l.ext, l.path, cx);
        Ok(Reply::default())
    }

    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let ext = self.ext;
        let Some(e) = look.tree.get(ext) else { return };
        let th = look.theme;
        let m = Nodes(&e.nodes);
        let title = format!(" Nodes: {} ", e.display_name());
        let inner = panel::frame(look, title, buf, area);
        let empty = TreeView::default();
        let v = self.views.get(&ext).unwrap_or(&empty);
        if v.count(&m, None) == 0 {
            let msg = match e.phase {
                Phase::Leaf => "no parser recognised these bytes (raw data)",
                Phase::Waiting => "waiting for bytes…",
                _ if e.parser().is_some() => "no structure found yet…",
                _ => "",
            };
            let w = inner.width.saturating_sub(1);
            put(buf, inner.x + 1, inner.y, w, msg, th.dim);
            return;
        }
        for i in 0..inner.height as usize {
            let Some((path, depth)) = v.at(&m, v.offset + i) else {
                break;
            };
            let Some(n) = m.get(&path) else { break };
            let y = inner.y + i as u16;
            let base = if v.selected.as_ref() == Some(&path) {
                th.row_selected
            } else {
                Style::new()
            };
            buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
            let mut x = inner.x;
            let mut w = inner.width;
            let loading = self.loading.contains(&(ext, path.clone()));
            let marker = if loading {
                "⋯ "
            } else {
                match (&n.children, v.is_expanded(&path)) {
                    (Children::Leaf, _) => "  ",
                    (Children::Loaded(c), _) if c.is_empty() => "  ",
                    (_, true) => "▾ ",
                    _ => "▸ ",
                }
            };
            let indent = "  ".repeat(depth.min(40));
            for (s, st) in [(indent.as_str(), Style::new()), (marker, th.dim)] {
                let k = put(buf, x, y, w, s, st.patch(base));
                x += k;
                w -= k;
            }
            let status = n.status();
            let name_style = match status {
                Status::Complete => th.text,
                s => th.status(s),
            };
            let mut detail = format!("  {}", n.kind);
            if let Some(val) = &n.value {
                detail.push_str(&format!("  {val}"));
            }
            if loading {
                detail.push_str("  loading…");
            }
            // The status in words, so that it is seen without colour.
            let tags: Vec<(String, Style)> = match status {
                Status::Complete => Vec::new(),
                s => vec![(format!("  [{}]", s.as_str()), th.status(s).patch(base))],
            };
            put_row(
                buf,
                (x, y, w),
                (&n.name, name_style.patch(base)),
                &tags,
                (&detail, th.dim.patch(base)),
            );
        }
    }
}
