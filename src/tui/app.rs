//! The explorer's state and how input changes it. Drawing is in `draw.rs`.
//!
//! Everything here runs on the UI thread and only ever takes the shared
//! tree's read lock briefly; bytes, node loads, searches and highlighting
//! come back from the worker as [`Done`] messages.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use super::keys::{self, Action};
use super::metrics::MetricsPanel;
use super::models::{self, Exts, Nodes};
use super::panel::{Cx, Reply, SidePanel};
use super::stepper::Stepper;
use super::tensorview::TensorPanel;
use super::text::{self, HighlightJob, Highlighted};
use super::theme::Theme;
use super::treeview::{TreeModel, TreeView};
use super::worker::{Done, Job, Worker};
use crate::data::{Data, Range};
use crate::engine::Session;
use crate::extraction::{ExtId, Phase};
use crate::view::search;

/// The three panes that take the focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Extractions,
    Nodes,
    Hex,
}

/// What covers the screen besides the panes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help,
    Prompt { kind: PromptKind, input: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptKind {
    Goto,
    Search,
    /// Where to write the selected tensor as .npy.
    Export,
}

/// What the Nodes pane shows instead of the node tree.
#[derive(Debug, Clone)]
pub enum Panel {
    None,
    /// The pickle stepper (`p`).
    Stepper(Box<Stepper>),
    /// The tensor table (`T`).
    Tensors(Box<TensorPanel>),
    /// A W&B log's metrics (`M`): their list here, a plot in place of the
    /// hex view.
    Metrics(Box<MetricsPanel>),
}

impl Panel {
    /// The open side panel, if any.
    pub fn side(&self) -> Option<&dyn SidePanel> {
        match self {
            Panel::Stepper(s) => Some(&**s),
            Panel::Tensors(p) => Some(&**p),
            Panel::Metrics(p) => Some(&**p),
            Panel::None => None,
        }
    }
    fn side_mut(&mut self) -> Option<&mut dyn SidePanel> {
        match self {
            Panel::Stepper(s) => Some(&mut **s),
            Panel::Tensors(p) => Some(&mut **p),
            Panel::Metrics(p) => Some(&mut **p),
            Panel::None => None,
        }
    }
    /// The bytes the panel points at, to mark in the hex view: the
    /// stepper's opcode, the selected tensor.
    pub fn marked(&self) -> Option<(ExtId, Range)> {
        self.side()?.marked()
    }
}

/// Per-extraction view state, kept when another extraction is selected.
#[derive(Debug, Clone, Default)]
pub struct ExtView {
    pub nodes: TreeView<Vec<usize>>,
    /// Hex cursor (offset in the extraction's bytes).
    pub cursor: u64,
    /// Offset of the first hex row shown.
    pub top: u64,
    /// Offset of the first text line shown (a line start).
    pub text_top: u64,
}

/// Results of the current search.
#[derive(Debug, Clone, Default)]
pub struct Search {
    pub query: String,
    pub pane: Option<Pane>,
    pub id: u64,
    pub exts: Vec<ExtId>,
    pub nodes: Vec<Vec<usize>>,
    pub index: usize,
    pub progress: Option<(u64, u64)>,
    pub running: bool,
}

/// Where the panes were drawn last, for mouse hits and page sizes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    pub exts: Rect,
    pub nodes: Rect,
    pub hex: Rect,
    pub inspector: Rect,
    pub status: Rect,
    /// Column of the border between the left and right columns.
    pub split_x: u16,
    /// Bytes per hex row.
    pub bpr: u64,
}

/// The worker's slot for searches.
const SEARCH: &str = "search";

/// A page of an extraction's bytes, read.
struct PageRead {
    ext: ExtId,
    page: u64,
    bytes: Arc<Vec<u8>>,
}

/// A node's children, loaded into the tree.
struct NodesLoaded {
    ext: ExtId,
    path: Vec<usize>,
}

/// Bytes per cached page of the hex and text views.
pub const PAGE: u64 = 4096;

/// Progress and results of a background search.
pub enum SearchEvent {
    Progress {
        id: u64,
        done: u64,
        total: u64,
    },
    /// A byte match (hex search) at this offset.
    Offset {
        id: u64,
        ext: ExtId,
        at: u64,
    },
    /// Tree matches, in tree order.
    Exts {
        id: u64,
        hits: Vec<ExtId>,
    },
    Nodes {
        id: u64,
        ext: ExtId,
        hits: Vec<Vec<usize>>,
    },
    /// The search ended without a (further) match.
    NotFound {
        id: u64,
    },
}

/// A cached page and when it was last used.
type PageEntry = (Arc<Vec<u8>>, u64);

/// Cached pages of extraction bytes.
#[derive(Default)]
pub struct Pages {
    map: HashMap<(ExtId, u64), PageEntry>,
    requested: HashSet<(ExtId, u64)>,
    tick: u64,
}

const MAX_PAGES: usize = 2048;

impl Pages {
    pub fn get(&mut self, ext: ExtId, page: u64) -> Option<Arc<Vec<u8>>> {
        self.tick += 1;
        let t = self.tick;
        self.map.get_mut(&(ext, page)).map(|e| {
            e.1 = t;
            e.0.clone()
        })
    }
    fn put(&mut self, ext: ExtId, page: u64, bytes: Arc<Vec<u8>>) {
        self.requested.remove(&(ext, page));
        self.tick += 1;
        self.map.insert((ext, page), (bytes, self.tick));
        if self.map.len() > MAX_PAGES {
            let mut ticks: Vec<u64> = self.map.values().map(|v| v.1).collect();
            ticks.sort_unstable();
            let cut = ticks[ticks.len() / 2];
            self.map.retain(|_, v| v.1 > cut);
        }
    }
}

/// Tree nodes loaded on request, oldest first, with their child counts.
struct Loaded {
    order: VecDeque<(ExtId, Vec<usize>, usize)>,
    total: usize,
}

/// The explorer.
pub struct App {
    pub session: Arc<Session>,
    pub worker: Worker,
    pub done: Receiver<Done>,
    pub theme: Theme,
    pub focus: Pane,
    pub exts: TreeView<ExtId>,
    pub views: HashMap<ExtId, ExtView>,
    pub pages: Pages,
    pub overlay: Overlay,
    pub panel: Panel,
    pub search: Search,
    pub message: Option<String>,
    pub layout: Layout,
    /// Width of the left column, in percent.
    pub split: u16,
    dragging: Option<Pane>,
    dragging_split: bool,
    pub text_mode: bool,
    pub highlight: Option<Highlighted>,
    highlight_gen: u64,
    highlight_asked: Option<(ExtId, u64, u64)>,
    pub loading: HashSet<(ExtId, Vec<usize>)>,
    loaded: Loaded,
    /// Most node children kept loaded before cold ones are dropped.
    pub node_budget: usize,
    /// Most points the metrics panel keeps for all series at once; past
    /// it, series are read one metric at a time.
    pub metric_budget: usize,
    sorted: HashMap<ExtId, (usize, bool)>,
    pub rate: f64,
    pub rss: u64,
    last_tick: Instant,
    last_done: u64,
    pub quit: bool,
}

impl App {
    pub fn new(session: Arc<Session>, theme: Theme) -> App {
        let (tx, rx) = unbounded();
        let worker = Worker::new(session.clone(), tx);
        let mut exts = TreeView::default();
        exts.selected = Some(0);
        App {
            session,
            worker,
            done: rx,
            theme,
            focus: Pane::Extractions,
            exts,
            views: HashMap::new(),
            pages: Pages::default(),
            overlay: Overlay::None,
            panel: Panel::None,
            search: Search::default(),
            message: None,
            layout: Layout {
                bpr: 16,
                ..Layout::default()
            },
            split: 34,
            dragging: None,
            dragging_split: false,
            text_mode: false,
            highlight: None,
            highlight_gen: 0,
            highlight_asked: None,
            loading: HashSet::new(),
            loaded: Loaded {
                order: VecDeque::new(),
                total: 0,
            },
            node_budget: 200_000,
            metric_budget: crate::offer::metrics::SERIES_BUDGET,
            sorted: HashMap::new(),
            rate: 0.0,
            rss: 0,
            last_tick: Instant::now(),
            last_done: 0,
            quit: false,
        }
    }

    /// The selected extraction.
    pub fn ext(&self) -> ExtId {
        self.exts.selected.unwrap_or(0)
    }

    pub fn view(&mut self) -> &mut ExtView {
        let e = self.ext();
        self.views.entry(e).or_default()
    }

    fn data(&self, ext: ExtId) -> Option<Data> {
        self.session.tree().get(ext).map(|e| e.data())
    }

    pub fn height(&self, pane: Pane) -> usize {
        let r = match pane {
            Pane::Extractions => self.layout.exts,
            Pane::Nodes => self.layout.nodes,
            Pane::Hex => self.layout.hex,
        };
        (r.height.saturating_sub(2) as usize).max(1)
    }

    pub(super) fn say(&mut self, msg: impl Into<String>) {
        self.message = Some(msg.into());
    }

    // ----- input -------------------------------------------------------------

    pub fn on_key(&mut self, k: KeyEvent) {
        if k.kind != ratatui::crossterm::event::KeyEventKind::Press {
            return;
        }
        if let Overlay::Prompt { kind, input } = &mut self.overlay {
            let kind = *kind;
            match k.code {
                KeyCode::Esc => self.overlay = Overlay::None,
                KeyCode::Enter => {
                    let text = input.clone();
                    self.overlay = Overlay::None;
                    match kind {
                        PromptKind::Goto => self.goto(&text),
                        PromptKind::Search => self.start_search(text),
                        PromptKind::Export => self.export(&text),
                    }
                }
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    self.quit = true;
                }
                KeyCode::Char(c) => input.push(c),
                _ => {}
            }
            return;
        }
        let Some(a) = keys::action(k) else { return };
        if self.overlay == Overlay::Help {
            if matches!(a, Action::Help | Action::Cancel | Action::Quit) {
                self.overlay = Overlay::None;
            }
            if k.modifiers.contains(KeyModifiers::CONTROL) && a == Action::Quit {
                self.quit = true;
            }
            return;
        }
        self.message = None;
        self.act(a);
    }

    pub fn act(&mut self, a: Action) {
        match a {
            Action::Quit => self.quit = true,
            Action::Help => self.overlay = Overlay::Help,
            Action::Cancel => {
                if self.search.running {
                    self.worker.stop(SEARCH);
                    self.search.running = false;
                    self.search.progress = None;
                } else {
                    self.close_panel();
                }
            }
            Action::Stepper => self.toggle_stepper(),
            Action::Tensors => self.toggle_tensors(),
            Action::Metrics => self.toggle_metrics(),
            Action::Export => self.ask_export(),
            Action::NextPane => self.cycle(1),
            Action::PrevPane => self.cycle(2),
            Action::Goto => {
                self.overlay = Overlay::Prompt {
                    kind: PromptKind::Goto,
                    input: String::new(),
                }
            }
            Action::Search => {
                self.overlay = Overlay::Prompt {
                    kind: PromptKind::Search,
                    input: String::new(),
                }
            }
            Action::NextMatch => self.next_match(true),
            Action::PrevMatch => self.next_match(false),
            Action::ToggleText => self.toggle_text(),
            _ => match self.focus {
                Pane::Extractions => self.ext_key(a),
                Pane::Nodes if matches!(self.panel, Panel::None) => self.node_key(a),
                Pane::Nodes => self.panel_key(a),
                // The plot covers the hex view: keys still choose the metric.
                Pane::Hex if matches!(self.panel, Panel::Metrics(_)) => self.panel_key(a),
                Pane::Hex => {
                    if self.text_mode {
                        self.text_key(a);
                    } else {
                        self.hex_key(a);
                    }
                }
            },
        }
    }

    /// Closes the stepper, tensor or metrics panel, stopping its work.
    pub fn close_panel(&mut self) {
        if let Some(p) = self.panel.side_mut() {
            p.close(&self.worker);
        }
        self.panel = Panel::None;
    }

    fn cycle(&mut self, by: usize) {
        let order = [Pane::Extractions, Pane::Nodes, Pane::Hex];
        let i = order.iter().position(|p| *p == self.focus).unwrap_or(0);
        self.focus = order[(i + by) % 3];
    }

    fn ext_key(&mut self, a: Action) {
        let h = self.height(Pane::Extractions);
        let session = self.session.clone();
        let t = session.tree();
        let m = Exts(&t);
        let cur = self.exts.cursor(&m);
        let total = self.exts.count(&m, None);
        let before = self.exts.selected;
        match a {
            Action::Up => self.exts.select_row(&m, cur.saturating_sub(1), h),
            Action::Down => self.exts.select_row(&m, cur + 1, h),
            Action::PageUp => self.exts.select_row(&m, cur.saturating_sub(h), h),
            Action::PageDown => self.exts.select_row(&m, cur + h, h),
            Action::Home => self.exts.select_row(&m, 0, h),
            Action::End => self.exts.select_row(&m, total.saturating_sub(1), h),
            Action::Expand | Action::Right | Action::Left => {
                let Some(id) = self.exts.selected else { return };
                let has_kids = !t.exts[id].children.is_empty();
                let open = self.exts.is_expanded(&id);
                match a {
                    Action::Expand if open => self.exts.collapse(&id),
                    Action::Expand | Action::Right if has_kids && !open => {
                        self.exts.expand(&m, &id);
                    }
                    Action::Right if open => self.exts.select_row(&m, cur + 1, h),
                    Action::Left if open => self.exts.collapse(&id),
                    Action::Left => {
                        if let Some(p) = m.parent(&id) {
                            self.exts.reveal(&m, &p, h);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        let changed = self.exts.selected != before;
        drop(t);
        if changed {
            self.on_ext_changed();
        }
    }

    pub(super) fn on_ext_changed(&mut self) {
        self.highlight = None;
        self.highlight_gen += 1;
    }

    fn node_key(&mut self, a: Action) {
        let ext = self.ext();
        let h = self.height(Pane::Nodes);
        let session = self.session.clone();
        let t = session.tree();
        let Some(e) = t.get(ext) else { return };
        let m = Nodes(&e.nodes);
        let view = self.views.entry(ext).or_default();
        let v = &mut view.nodes;
        let total = v.count(&m, None);
        let before = v.selected.clone();
        if before.is_none() && total > 0 {
            // Nothing selected yet: the first key selects the first node.
            v.select_row(&m, 0, h);
            if !matches!(a, Action::Expand | Action::Right | Action::Left) {
                let start = m.get(&[0]).map(|n| n.range.start);
                drop(t);
                if let Some(s) = start {
                    self.set_cursor(s, false);
                }
                return;
            }
        }
        let cur = v.cursor(&m);
        let mut load = None;
        match a {
            Action::Up => v.select_row(&m, cur.saturating_sub(1), h),
            Action::Down => v.select_row(&m, cur + 1, h),
            Action::PageUp => v.select_row(&m, cur.saturating_sub(h), h),
            Action::PageDown => v.select_row(&m, cur + h, h),
            Action::Home => v.select_row(&m, 0, h),
            Action::End => v.select_row(&m, total.saturating_sub(1), h),
            Action::Expand | Action::Right | Action::Left => {
                let Some(path) = v.selected.clone() else {
                    return;
                };
                let Some(n) = m.get(&path) else { return };
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
        let start = after.as_ref().and_then(|p| m.get(p)).map(|n| n.range.start);
        drop(t);
        if let Some(path) = load {
            self.request_load(ext, path);
        }
        if after != before
            && let Some(s) = start
        {
            self.set_cursor(s, false);
        }
    }

    fn request_load(&mut self, ext: ExtId, path: Vec<usize>) {
        if self.loading.insert((ext, path.clone())) {
            self.worker.submit(Job::new(move |session, _| {
                session.load(ext, &path);
                Some(Box::new(NodesLoaded { ext, path }))
            }));
        }
    }

    fn data_len(&self) -> u64 {
        self.session
            .tree()
            .get(self.ext())
            .map_or(0, |e| e.available())
    }

    fn hex_key(&mut self, a: Action) {
        let bpr = self.layout.bpr.max(1);
        let page = self.height(Pane::Hex) as u64 * bpr;
        let len = self.data_len();
        let c = self.view().cursor;
        let to = match a {
            Action::Up => c.saturating_sub(bpr),
            Action::Down => c + bpr,
            Action::Left => c.saturating_sub(1),
            Action::Right => c + 1,
            Action::PageUp => c.saturating_sub(page),
            Action::PageDown => c + page,
            Action::Home => 0,
            Action::End => len.saturating_sub(1),
            _ => return,
        };
        let to = if matches!(a, Action::Down | Action::Right | Action::PageDown) && to >= len {
            len.saturating_sub(1).max(c.min(len))
        } else {
            to
        };
        self.set_cursor(to, true);
    }

    /// Moves the hex cursor; with `follow`, selects the deepest node there.
    pub fn set_cursor(&mut self, offset: u64, follow: bool) {
        let bpr = self.layout.bpr.max(1);
        let rows = self.height(Pane::Hex) as u64;
        let v = self.view();
        v.cursor = offset;
        if offset < v.top {
            v.top = offset - offset % bpr;
        } else if offset >= v.top + rows * bpr {
            v.top = (offset / bpr + 1).saturating_sub(rows) * bpr;
        }
        if follow {
            // In the stepper, moving through the bytes moves through the opcodes.
            let ext = self.ext();
            if let Panel::Stepper(s) = &mut self.panel
                && s.ext == ext
                && s.range.contains(offset)
            {
                let target = crate::view::stepper::Target::Offset(offset);
                s.step_to(target, &self.session, &self.worker);
            } else {
                self.select_node_at(offset);
            }
        }
    }

    /// Selects the deepest loaded node holding `offset`; if it has unloaded
    /// children, asks for them so the selection can go deeper.
    fn select_node_at(&mut self, offset: u64) {
        let ext = self.ext();
        let h = self.height(Pane::Nodes);
        let session = self.session.clone();
        let t = session.tree();
        let Some(e) = t.get(ext) else { return };
        let sorted = self.sorted_nodes(ext, &e.nodes);
        let Some(path) = models::deepest_at(&e.nodes, sorted, offset) else {
            return;
        };
        let m = Nodes(&e.nodes);
        let unloaded = m
            .get(&path)
            .is_some_and(|n| models::expandable(n) == Some(true));
        self.views
            .entry(ext)
            .or_default()
            .nodes
            .reveal(&m, &path, h);
        drop(t);
        if unloaded {
            self.request_load(ext, path);
        }
    }

    /// Whether an extraction's top-level nodes are sorted (cached by count).
    pub fn sorted_nodes(&mut self, ext: ExtId, nodes: &[crate::node::Node]) -> bool {
        match self.sorted.get(&ext) {
            Some(&(n, s)) if n == nodes.len() => s,
            _ => {
                let s = models::is_sorted(nodes);
                self.sorted.insert(ext, (nodes.len(), s));
                s
            }
        }
    }

    fn goto(&mut self, text: &str) {
        let cur = self.view().cursor;
        match keys::parse_offset(text, cur) {
            Some(o) => {
                let len = self.data_len();
                if o >= len && len > 0 {
                    self.say(format!("{o:#x} is past the end ({len:#x} bytes)"));
                }
                self.focus = Pane::Hex;
                self.text_mode = false;
                self.set_cursor(o.min(len.saturating_sub(1)), true);
            }
            None => self.say(format!(
                "not an offset: {text:?} (try 0x1f, 4096, +16, -0x10)"
            )),
        }
    }

    fn toggle_text(&mut self) {
        self.text_mode = !self.text_mode;
        self.focus = Pane::Hex;
        let ext = self.ext();
        if self.text_mode {
            // Start at the line holding the cursor.
            let c = self.view().cursor;
            let from = c.saturating_sub(text::MAX_LINE);
            let start = match self.cached(ext, from, c) {
                Some(b) => text::line_start(&b, from, c),
                None => c,
            };
            self.view().text_top = start;
        } else {
            let top = self.view().text_top;
            self.set_cursor(top, true);
        }
        self.highlight = None;
        self.highlight_gen += 1;
    }

    fn text_key(&mut self, a: Action) {
        let ext = self.ext();
        let len = self.data_len();
        let rows = self.height(Pane::Hex);
        let mut top = self.view().text_top;
        let steps = match a {
            Action::Up | Action::Down => 1,
            Action::PageUp | Action::PageDown => rows.saturating_sub(1).max(1),
            Action::Home => {
                self.set_text_top(0);
                return;
            }
            Action::End => {
                // Back up one page of lines from the end.
                top = len;
                rows.max(1)
            }
            _ => return,
        };
        let down = matches!(a, Action::Down | Action::PageDown);
        for _ in 0..steps {
            let next = if down {
                self.line_after(ext, top, len)
            } else {
                self.line_before(ext, top)
            };
            match next {
                Some(n) => top = n,
                None => break,
            }
        }
        self.set_text_top(top.min(len));
    }

    /// Start of the line after the one at `at`, reading only as far as its
    /// end; `None` at the end of the bytes or while its bytes are loading.
    fn line_after(&mut self, ext: ExtId, at: u64, len: u64) -> Option<u64> {
        let mut from = at;
        while from < len && from - at < text::MAX_LINE {
            let end = (from + PAGE).min(len);
            let b = self.cached(ext, from, end)?;
            if let Some(i) = memchr::memchr(b'\n', &b) {
                let n = from + i as u64 + 1;
                return (n < len).then_some(n);
            }
            from = end;
        }
        (from < len).then_some(from)
    }

    /// Start of the line before the one at `at` (`None` at the top).
    fn line_before(&mut self, ext: ExtId, at: u64) -> Option<u64> {
        if at == 0 {
            return None;
        }
        // The line before ends at `at - 1`; find the newline before that.
        let mut end = at - 1;
        while at - end < text::MAX_LINE {
            let from = end.saturating_sub(PAGE);
            let b = self.cached(ext, from, end)?;
            if let Some(i) = memchr::memrchr(b'\n', &b) {
                return Some(from + i as u64 + 1);
            }
            if from == 0 {
                return Some(0);
            }
            end = from;
        }
        Some(end)
    }

    fn set_text_top(&mut self, top: u64) {
        if self.view().text_top != top {
            self.view().text_top = top;
            self.highlight = None;
            self.highlight_gen += 1;
        }
    }

    /// Bytes `[start, end)` if every page is cached; else asks for the
    /// missing pages and returns `None`.
    pub fn cached(&mut self, ext: ExtId, start: u64, end: u64) -> Option<Vec<u8>> {
        if end <= start {
            return Some(Vec::new());
        }
        let data = self.data(ext)?;
        let end = end.min(data.available());
        let mut out = Vec::with_capacity((end.saturating_sub(start)) as usize);
        let mut ok = true;
        for page in start / PAGE..end.div_ceil(PAGE) {
            match self.page(ext, &data, page) {
                Some(p) => {
                    let p0 = page * PAGE;
                    let s = start.max(p0) - p0;
                    let e = (end.min(p0 + PAGE) - p0).min(p.len() as u64);
                    if s < e {
                        out.extend_from_slice(&p[s as usize..e as usize]);
                    }
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// A cached page, asking the worker for it (or a fresher copy of a page
    /// that was short because the bytes were still arriving).
    pub fn page(&mut self, ext: ExtId, data: &Data, page: u64) -> Option<Arc<Vec<u8>>> {
        let got = self.pages.get(ext, page);
        let stale = got.as_ref().is_some_and(|p| {
            (p.len() as u64) < PAGE && data.available() > page * PAGE + p.len() as u64
        });
        if (got.is_none() || stale) && self.pages.requested.insert((ext, page)) {
            let data = data.clone();
            self.worker.submit(Job::new(move |_, _| {
                let mut buf = vec![0u8; PAGE as usize];
                let n = data.read_at(page * PAGE, &mut buf).unwrap_or(0);
                buf.truncate(n);
                Some(Box::new(PageRead {
                    ext,
                    page,
                    bytes: Arc::new(buf),
                }))
            }));
        }
        got
    }

    // ----- search ------------------------------------------------------------

    fn start_search(&mut self, query: String) {
        if query.is_empty() {
            return;
        }
        self.search = Search {
            query: query.clone(),
            pane: Some(self.focus),
            running: true,
            ..Search::default()
        };
        match self.focus {
            Pane::Extractions => {
                self.search.id = self.search_task(move |s, stop, report, id| {
                    let progress = |done, total| report(SearchEvent::Progress { id, done, total });
                    if let Some(hits) = search::extractions(s, &query, stop, &progress) {
                        report(SearchEvent::Exts { id, hits });
                    }
                });
            }
            Pane::Nodes => {
                let ext = self.ext();
                self.search.id = self.search_task(move |s, stop, report, id| {
                    if let Some(hits) = search::nodes(&s.tree(), ext, &query, stop) {
                        report(SearchEvent::Nodes { id, ext, hits });
                    }
                });
            }
            Pane::Hex => self.search_bytes(true, true),
        }
    }

    /// Searches the extraction's bytes from the cursor, forward or back.
    fn search_bytes(&mut self, forward: bool, include_cursor: bool) {
        let pattern = keys::parse_pattern(&self.search.query);
        if pattern.is_empty() {
            return;
        }
        let ext = self.ext();
        let Some(data) = self.data(ext) else { return };
        let cursor = self.view().cursor;
        let from = if include_cursor {
            cursor
        } else if forward {
            cursor + 1
        } else {
            cursor
        };
        self.search.running = true;
        self.search.id = self.search_task(move |_, stop, report, id| {
            let found = search::bytes(&data, &pattern, from, forward, stop, &|done, total| {
                report(SearchEvent::Progress { id, done, total });
            });
            match found {
                Some(at) => report(SearchEvent::Offset { id, ext, at }),
                None if !stop.load(Ordering::Acquire) => report(SearchEvent::NotFound { id }),
                None => {}
            }
        });
    }

    fn next_match(&mut self, forward: bool) {
        if self.search.query.is_empty() {
            self.say("no search yet: press / to search");
            return;
        }
        match self.search.pane {
            Some(Pane::Hex) => self.search_bytes(forward, false),
            Some(Pane::Extractions) if !self.search.exts.is_empty() => {
                let n = self.search.exts.len();
                self.search.index = step(self.search.index, n, forward);
                let id = self.search.exts[self.search.index];
                self.reveal_ext(id);
            }
            Some(Pane::Nodes) if !self.search.nodes.is_empty() => {
                let n = self.search.nodes.len();
                self.search.index = step(self.search.index, n, forward);
                let path = self.search.nodes[self.search.index].clone();
                self.reveal_node(path);
            }
            _ => self.say(format!("no matches for {:?}", self.search.query)),
        }
    }

    fn reveal_ext(&mut self, id: ExtId) {
        let h = self.height(Pane::Extractions);
        let session = self.session.clone();
        let t = session.tree();
        self.exts.reveal(&Exts(&t), &id, h);
        drop(t);
        self.focus = Pane::Extractions;
        self.on_ext_changed();
    }

    fn reveal_node(&mut self, path: Vec<usize>) {
        let ext = self.ext();
        let h = self.height(Pane::Nodes);
        let session = self.session.clone();
        let t = session.tree();
        let Some(e) = t.get(ext) else { return };
        let m = Nodes(&e.nodes);
        let start = m.get(&path).map(|n| n.range.start);
        self.views
            .entry(ext)
            .or_default()
            .nodes
            .reveal(&m, &path, h);
        drop(t);
        self.focus = Pane::Nodes;
        if let Some(s) = start {
            self.set_cursor(s, false);
        }
    }

    // ----- background results -------------------------------------------------

    /// Takes a result of the worker to the part of the explorer that asked
    /// for it, by its type.
    pub fn on_done(&mut self, d: Done) {
        let d = match d.downcast::<PageRead>() {
            Ok(p) => return self.pages.put(p.ext, p.page, p.bytes),
            Err(d) => d,
        };
        let d = match d.downcast::<NodesLoaded>() {
            Ok(l) => return self.on_loaded(l.ext, l.path),
            Err(d) => d,
        };
        let d = match d.downcast::<Highlighted>() {
            Ok(h) => {
                if h.generation == self.highlight_gen && h.ext == self.ext() {
                    self.highlight = Some(*h);
                }
                return;
            }
            Err(d) => d,
        };
        let d = match d.downcast::<SearchEvent>() {
            Ok(e) => return self.on_search(*e),
            Err(d) => d,
        };
        // The rest belongs to the open panel, if it is still open.
        self.with_panel(|p, cx| p.on_done(d, cx).unwrap_or_default());
    }

    /// Runs `f` on the open side panel, if any, with its context, and does
    /// what it answers.
    fn with_panel(&mut self, f: impl FnOnce(&mut dyn SidePanel, &Cx) -> Reply) {
        let cx = Cx {
            session: &self.session,
            worker: &self.worker,
            rows: self.height(Pane::Nodes),
        };
        if let Some(p) = self.panel.side_mut() {
            let reply = f(p, &cx);
            self.apply(reply);
        }
    }

    fn on_loaded(&mut self, ext: ExtId, path: Vec<usize>) {
        self.loading.remove(&(ext, path.clone()));
        let session = self.session.clone();
        let t = session.tree();
        let Some(e) = t.get(ext) else { return };
        let m = Nodes(&e.nodes);
        let kids = m.get(&path).map_or(0, subtree_size);
        if kids > 0 {
            let v = &mut self.views.entry(ext).or_default().nodes;
            v.expand(&m, &path);
            self.loaded.order.push_back((ext, path, kids));
            self.loaded.total += kids;
        }
        drop(t);
        self.unload_cold();
        // A hex cursor inside may now reach a deeper node.
        if self.focus == Pane::Hex && ext == self.ext() {
            let c = self.view().cursor;
            let h = self.height(Pane::Nodes);
            let t = session.tree();
            if let Some(e) = t.get(ext)
                && let Some(p) = models::deepest_at(&e.nodes, true, c)
                    .or_else(|| models::deepest_at(&e.nodes, false, c))
            {
                let m = Nodes(&e.nodes);
                self.views.entry(ext).or_default().nodes.reveal(&m, &p, h);
            }
        }
    }

    /// Runs a search on its own thread, replacing any running one; returns
    /// its id. `f` gets the session, a stop flag and a way to report.
    fn search_task(
        &self,
        f: impl FnOnce(&Session, &AtomicBool, &dyn Fn(SearchEvent), u64) + Send + 'static,
    ) -> u64 {
        self.worker.spawn(SEARCH, move |s, stop, report, id| {
            f(s, stop, &|e| report(Box::new(e)), id);
        })
    }

    fn on_search(&mut self, e: SearchEvent) {
        let id = match &e {
            SearchEvent::Progress { id, .. }
            | SearchEvent::Offset { id, .. }
            | SearchEvent::Exts { id, .. }
            | SearchEvent::Nodes { id, .. }
            | SearchEvent::NotFound { id } => *id,
        };
        if id != self.search.id {
            return;
        }
        if let SearchEvent::Progress { done, total, .. } = e {
            self.search.progress = Some((done, total));
            return;
        }
        self.search.running = false;
        self.search.progress = None;
        self.search.index = 0;
        let q = self.search.query.clone();
        match e {
            SearchEvent::Progress { .. } => {}
            SearchEvent::Offset { ext, at, .. } => {
                if ext == self.ext() {
                    self.focus = Pane::Hex;
                    self.text_mode = false;
                    self.set_cursor(at, true);
                    self.say(format!("{q:?} found at {at:#x}"));
                }
            }
            SearchEvent::Exts { hits, .. } => {
                self.say(format!("{} extractions match {q:?}", hits.len()));
                if let Some(&first) = hits.first() {
                    self.reveal_ext(first);
                }
                self.search.exts = hits;
            }
            SearchEvent::Nodes { hits, .. } => {
                self.say(format!("{} nodes match {q:?}", hits.len()));
                if let Some(first) = hits.first() {
                    self.reveal_node(first.clone());
                }
                self.search.nodes = hits;
            }
            SearchEvent::NotFound { .. } => self.say(format!("{q:?} not found")),
        }
    }

    /// Drops the children of the least recently loaded nodes that are
    /// collapsed, once more than `node_budget` children are loaded. They are
    /// loaded again from their bytes when expanded.
    fn unload_cold(&mut self) {
        let mut keep = VecDeque::new();
        while self.loaded.total > self.node_budget {
            let Some((ext, path, n)) = self.loaded.order.pop_front() else {
                break;
            };
            let open = self
                .views
                .get(&ext)
                .is_some_and(|v| v.nodes.is_expanded(&path));
            if open {
                keep.push_back((ext, path, n));
                continue;
            }
            self.session.unload(ext, &path);
            self.loaded.total -= n;
        }
        while let Some(x) = keep.pop_back() {
            self.loaded.order.push_front(x);
        }
    }

    /// Children loaded through the explorer and still held.
    pub fn loaded_nodes(&self) -> usize {
        self.loaded.total
    }

    /// Periodic bookkeeping: parse rate and memory for the status bar.
    pub fn tick(&mut self) {
        let dt = self.last_tick.elapsed();
        if dt < Duration::from_millis(500) {
            return;
        }
        let done = self.session.tree().root().progress().done;
        self.rate = (done.saturating_sub(self.last_done)) as f64 / dt.as_secs_f64();
        self.last_done = done;
        self.last_tick = Instant::now();
        // Searches and re-reads free as much as they allocate; give it back.
        crate::engine::release_free_memory();
        self.rss = resident_bytes();
        self.with_panel(|p, cx| {
            p.tick(cx);
            Reply::default()
        });
    }

    // ----- mouse ---------------------------------------------------------------

    pub fn on_mouse(&mut self, m: MouseEvent) {
        let (x, y) = (m.column, m.row);
        let l = self.layout;
        let inside = |r: Rect| x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height;
        let pane_at = if inside(l.exts) {
            Some(Pane::Extractions)
        } else if inside(l.nodes) {
            Some(Pane::Nodes)
        } else if inside(l.hex) {
            Some(Pane::Hex)
        } else {
            None
        };
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if x == l.split_x && y < l.status.y {
                    self.dragging_split = true;
                    return;
                }
                if let Some(p) = pane_at {
                    self.focus = p;
                    self.dragging = Some(p);
                    self.click(p, x, y);
                }
            }
            MouseEventKind::Drag(MouseButton::Left) => {
                if self.dragging_split {
                    let w = l.status.width.max(1);
                    self.split = ((x as u32 * 100 / w as u32) as u16).clamp(15, 85);
                } else if let Some(p) = self.dragging {
                    self.click(p, x, y);
                }
            }
            MouseEventKind::Up(_) => {
                self.dragging = None;
                self.dragging_split = false;
            }
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let down = m.kind == MouseEventKind::ScrollDown;
                let Some(p) = pane_at else { return };
                let old = self.focus;
                self.focus = p;
                let a = if down { Action::Down } else { Action::Up };
                for _ in 0..3 {
                    self.act(a);
                }
                self.focus = old;
            }
            _ => {}
        }
    }

    fn click(&mut self, pane: Pane, x: u16, y: u16) {
        let l = self.layout;
        if pane == Pane::Nodes && y > l.nodes.y && y + 1 < l.nodes.y + l.nodes.height {
            let row = (y - l.nodes.y - 1) as usize;
            match &self.panel {
                Panel::Stepper(_) | Panel::Tensors(_) | Panel::Metrics(_) => {
                    return self.with_panel(|p, cx| p.click(row, cx));
                }
                Panel::None => {}
            }
        }
        if pane == Pane::Hex && matches!(self.panel, Panel::Metrics(_)) {
            // The plot, not bytes.
            return;
        }
        match pane {
            Pane::Extractions | Pane::Nodes => {
                let r = if pane == Pane::Extractions {
                    l.exts
                } else {
                    l.nodes
                };
                if y <= r.y || y >= r.y + r.height - 1 {
                    return;
                }
                let row = (y - r.y - 1) as usize;
                let h = self.height(pane);
                let session = self.session.clone();
                let t = session.tree();
                if pane == Pane::Extractions {
                    let m = Exts(&t);
                    let target = self.exts.offset + row;
                    if target < self.exts.count(&m, None) {
                        let before = self.exts.selected;
                        self.exts.select_row(&m, target, h);
                        if before != self.exts.selected {
                            drop(t);
                            self.on_ext_changed();
                        }
                    }
                } else {
                    let ext = self.ext();
                    let Some(e) = t.get(ext) else { return };
                    let m = Nodes(&e.nodes);
                    let v = &mut self.views.entry(ext).or_default().nodes;
                    let target = v.offset + row;
                    if target < v.count(&m, None) {
                        v.select_row(&m, target, h);
                        let start = v
                            .selected
                            .as_ref()
                            .and_then(|p| m.get(p))
                            .map(|n| n.range.start);
                        drop(t);
                        if let Some(s) = start {
                            self.set_cursor(s, false);
                        }
                    }
                }
            }
            Pane::Hex => {
                if self.text_mode {
                    return;
                }
                if let Some(off) = self.hex_offset_at(x, y) {
                    let len = self.data_len();
                    if off < len {
                        self.set_cursor(off, true);
                    }
                }
            }
        }
    }

    /// Asks for highlighting of the visible text when its bytes are cached.
    pub fn want_highlight(&mut self, ext: ExtId, top: u64, end: u64) {
        if self.theme.mono || self.highlight.is_some() {
            return;
        }
        let key = (ext, top, self.highlight_gen);
        if self.highlight_asked == Some(key) {
            return;
        }
        let from = top.saturating_sub(text::CONTEXT);
        let Some(bytes) = self.cached(ext, from, end) else {
            return;
        };
        // Start the context at a line start.
        let skip = if from == 0 {
            0
        } else {
            memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1)
        };
        let base = (from + skip as u64).min(top);
        let bytes = bytes[(base - from) as usize..].to_vec();
        let name = self
            .session
            .tree()
            .get(ext)
            .map(|e| e.display_name())
            .unwrap_or_default();
        self.highlight_asked = Some(key);
        let light =
            matches!(self.theme.bar.bg, Some(ratatui::style::Color::Rgb(r, _, _)) if r > 128);
        let job = HighlightJob {
            ext,
            generation: self.highlight_gen,
            name,
            theme: text::syntect_theme(light),
            base,
            first: top,
            bytes,
        };
        self.worker
            .submit(Job::new(move |_, _| Some(Box::new(job.run()))));
    }

    /// Opens the stepper on the selected pickle (or the extraction's first),
    /// or closes it.
    fn toggle_stepper(&mut self) {
        if matches!(self.panel, Panel::Stepper(_)) {
            self.panel = Panel::None;
            return;
        }
        let ext = self.ext();
        let selected = self
            .views
            .get(&ext)
            .and_then(|v| v.nodes.selected.as_ref())
            .and_then(|p| p.first().copied());
        let opened = Stepper::open(&self.session.tree(), ext, selected);
        let Some(mut stepper) = opened else {
            self.say("no pickle here: select a .pkl or pickle extraction, then press p");
            return;
        };
        if matches!(self.panel, Panel::Metrics(_)) {
            self.close_panel();
        }
        stepper.step_to(
            crate::view::stepper::Target::Step(0),
            &self.session,
            &self.worker,
        );
        self.panel = Panel::Stepper(Box::new(stepper));
        self.focus = Pane::Nodes;
    }

    /// Opens the tensor table of the selected extraction (or the nearest
    /// one above it that has tensors), or closes it.
    fn toggle_tensors(&mut self) {
        if matches!(self.panel, Panel::Tensors(_)) {
            self.close_panel();
            return;
        }
        let mut ext = self.ext();
        loop {
            if let Some(p) = TensorPanel::open(&self.session, &self.worker, ext) {
                if matches!(self.panel, Panel::Metrics(_)) {
                    self.close_panel();
                }
                self.panel = Panel::Tensors(Box::new(p));
                self.focus = Pane::Nodes;
                return;
            }
            match self.session.tree().get(ext).and_then(|e| e.parent) {
                Some(p) => ext = p,
                None => break,
            }
        }
        self.say("no tensors here: select a safetensors, torch or pickle checkpoint, then press T");
    }

    /// Does what a panel asked for.
    fn apply(&mut self, reply: Reply) {
        if let Some(msg) = reply.say {
            self.say(msg);
        }
        if let Some((ext, offset)) = reply.show {
            self.show_bytes(ext, offset);
        }
        if let Some((ext, offset)) = reply.cursor
            && ext == self.ext()
        {
            self.set_cursor(offset, false);
        }
    }

    /// Shows `offset` of extraction `ext` in the hex view without moving the
    /// focus.
    fn show_bytes(&mut self, ext: ExtId, offset: u64) {
        if ext != self.ext() {
            let h = self.height(Pane::Extractions);
            let session = self.session.clone();
            let t = session.tree();
            self.exts.reveal(&Exts(&t), &ext, h);
            drop(t);
            self.on_ext_changed();
        }
        self.text_mode = false;
        self.set_cursor(offset, false);
    }

    /// Asks where to write the selected tensor as .npy.
    fn ask_export(&mut self) {
        let Panel::Tensors(p) = &self.panel else {
            self.say("export works on a tensor: press T for the tensor table");
            return;
        };
        let Some(name) = p.export_name() else { return };
        self.overlay = Overlay::Prompt {
            kind: PromptKind::Export,
            input: name,
        };
    }

    /// Writes the selected tensor to `path` in the background.
    fn export(&mut self, path: &str) {
        if let Panel::Tensors(p) = &mut self.panel
            && let Err(msg) = p.export(path, &self.session, &self.worker)
        {
            self.say(msg);
        }
    }

    /// Opens the metrics of the selected run log, or closes them.
    fn toggle_metrics(&mut self) {
        if matches!(self.panel, Panel::Metrics(_)) {
            self.close_panel();
            return;
        }
        let found = MetricsPanel::find(&self.session, &self.worker, self.ext(), self.metric_budget);
        match found {
            Some(p) => {
                self.close_panel();
                self.panel = Panel::Metrics(Box::new(p));
                self.focus = Pane::Nodes;
            }
            None => self.say("no W&B run log here: select a .wandb extraction, then press M"),
        }
    }

    /// A key for the open side panel.
    fn panel_key(&mut self, a: Action) {
        self.with_panel(|p, cx| p.on_key(a, cx));
    }

    /// The byte offset under a mouse position in the hex pane.
    fn hex_offset_at(&self, x: u16, y: u16) -> Option<u64> {
        let area = self.layout.hex;
        if y <= area.y || y >= area.y + area.height.saturating_sub(1) {
            return None;
        }
        let ext = self.exts.selected.unwrap_or(0);
        let top = self.views.get(&ext).map_or(0, |v| v.top);
        let len = self.session.tree().get(ext).map_or(0, |e| e.available());
        let grid = super::hexgrid::HexGrid::new(area.x + 1, len, self.layout.bpr);
        let row = (y - area.y - 1) as u64;
        Some(top + row * grid.bpr + grid.byte_at(x)?)
    }

    /// The phase of the whole parse, for the status bar.
    pub fn parsing(&self) -> bool {
        !self.session.is_finished() && self.session.tree().root().phase != Phase::Leaf
    }
}

/// Nodes loaded below `n` (its loaded descendants).
fn subtree_size(n: &crate::node::Node) -> usize {
    n.loaded_children()
        .iter()
        .map(|c| 1 + subtree_size(c))
        .sum()
}

fn step(i: usize, n: usize, forward: bool) -> usize {
    if forward {
        (i + 1) % n
    } else {
        (i + n - 1) % n
    }
}

/// This process's resident memory (Linux), 0 elsewhere.
fn resident_bytes() -> u64 {
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = u64::try_from(page).unwrap_or(4096);
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages.saturating_mul(page))
}
