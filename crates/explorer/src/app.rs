//! The explorer: its panes, and what links them. Each pane owns its state
//! (see [`super::panel`]); the app routes keys, clicks and background
//! results to them and applies what they answer: a node selected moves the
//! hex cursor, a cursor moved selects the node there, a search moves to
//! its match.
//!
//! Everything here runs on the UI thread and only ever takes the shared
//! tree's read lock briefly; bytes, node loads, searches and highlighting
//! come back from the worker as [`Done`] messages. Before each frame,
//! [`App::prepare`] lays the screen out and lets the panes ask for what they
//! will show; drawing ([`super::draw`]) then only reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use super::keys::{self, Action};
pub use super::layout::Pane;
use super::layout::{Layout, Room};
use super::panel::{Component, Cx, Reply, SidePanel};
use super::panes::exts::ExtPane;
use super::panes::hex::{AT_CURSOR, HexPane, Place, Selection};
use super::panes::inspector::Inspector;
use super::panes::metrics::MetricsPanel;
use super::panes::nodes::NodePane;
use super::panes::problems::ProblemsPanel;
use super::panes::stepper::Stepper;
use super::panes::tensors::TensorPanel;
use super::save::{self, Chosen, SaveEvent, Saving};
use super::search::{Found, From, Search, SearchEvent};
use super::theme::Theme;
use super::values::{Values, ValuesDone};
use super::worker::{Done, Payload, To, Worker};
use pparse::data::Range;
use pparse::engine::Session;
use pparse::extraction::ExtId;

/// What covers the screen besides the panes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    /// Nothing.
    None,
    /// The keys (`?`).
    Help,
    /// `y` was pressed: what to copy (`p`, `o` or `v`).
    Copy,
    /// A line of input in the status bar.
    Prompt {
        /// What the input is for.
        kind: PromptKind,
        /// What was typed so far.
        input: String,
    },
}

/// What a prompt asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptKind {
    /// An offset to go to.
    Goto,
    /// What to search for.
    Search,
    /// Where to write the selected tensor as .npy.
    Export,
    /// Where to save the selection (see `App::saving`).
    Save,
}

/// What the Nodes pane shows instead of the node tree.
#[derive(Debug, Clone)]
pub enum Panel {
    /// The node tree.
    None,
    /// The pickle stepper (`p`).
    Stepper(Box<Stepper>),
    /// The tensor table (`T`).
    Tensors(Box<TensorPanel>),
    /// A W&B log's metrics (`M`): their list here, a plot in place of the
    /// hex view.
    Metrics(Box<MetricsPanel>),
    /// A program's diagnostics (`E`), each with its source line and caret.
    Problems(Box<ProblemsPanel>),
}

impl Panel {
    /// The open side panel, if any.
    pub fn side(&self) -> Option<&dyn SidePanel> {
        match self {
            Panel::Stepper(s) => Some(&**s),
            Panel::Tensors(p) => Some(&**p),
            Panel::Metrics(p) => Some(&**p),
            Panel::Problems(p) => Some(&**p),
            Panel::None => None,
        }
    }
    fn side_mut(&mut self) -> Option<&mut dyn SidePanel> {
        match self {
            Panel::Stepper(s) => Some(&mut **s),
            Panel::Tensors(p) => Some(&mut **p),
            Panel::Metrics(p) => Some(&mut **p),
            Panel::Problems(p) => Some(&mut **p),
            Panel::None => None,
        }
    }
    /// The bytes the panel points at, to mark in the hex view: the
    /// stepper's opcode, the selected tensor.
    pub fn marked(&self) -> Option<(ExtId, Range)> {
        self.side()?.marked()
    }
    /// Whether the panel draws in place of the hex view (and takes its keys).
    fn takes_main(&self) -> bool {
        self.side().is_some_and(|p| p.takes_main())
    }
}

/// Parse rate and memory, for the status bar.
pub(super) struct Meter {
    pub(super) rate: f64,
    pub(super) rss: u64,
    last_tick: Instant,
    last_done: u64,
}

/// A mouse drag under way.
#[derive(Default)]
struct Drag {
    pane: Option<Pane>,
    split: bool,
}

/// A pane's context: the session, the worker, the rows of `$pane`, the
/// shown extraction. A macro, not a method, so that the borrow of these
/// fields leaves the panes free to be borrowed mutably beside it.
macro_rules! cx {
    ($app:expr, $pane:expr) => {
        Cx {
            session: &$app.session,
            worker: &$app.worker,
            rows: $app.layout.rows($pane),
            ext: $app.exts.selected(),
        }
    };
}

/// The explorer.
pub struct App {
    /// The open file.
    pub session: Arc<Session>,
    /// Background work for the panes.
    pub worker: Worker,
    /// Results of the worker, for [`App::on_done`].
    pub done: Receiver<Done>,
    pub(super) theme: Theme,
    pub(super) focus: Pane,
    pub(super) exts: ExtPane,
    pub(super) nodes: NodePane,
    pub(super) hex: HexPane,
    pub(super) inspector: Inspector,
    pub(super) panel: Panel,
    pub(super) overlay: Overlay,
    /// Results nobody read ([`App::unclaimed_results`]).
    unclaimed: u64,
    pub(super) search: Search,
    /// The value followed with `D`, `u` and `U`.
    values: Values,
    /// A pane moved the cursor and the node tree may still be loading the
    /// node there: select it when it comes (until the next key).
    jumped: bool,
    pub(super) message: Option<String>,
    pub(super) layout: Layout,
    /// Width of the left column, in percent.
    split: u16,
    /// The focused pane has the whole screen.
    zoom: bool,
    /// First line of the help shown (it scrolls on small screens).
    pub(super) help_top: usize,
    /// What the save prompt is for.
    to_save: Option<Chosen>,
    /// A save under way.
    pub(super) saving: Option<Saving>,
    /// Text copied and not yet sent to the terminal (OSC 52).
    clipboard: Option<String>,
    drag: Drag,
    /// Most points the metrics panel keeps for all series at once; past
    /// it, series are read one metric at a time.
    metric_budget: usize,
    pub(super) meter: Meter,
    quit: bool,
}

impl App {
    /// An explorer on `session`.
    pub fn new(session: Arc<Session>, theme: Theme) -> App {
        let (tx, rx) = unbounded();
        let worker = Worker::new(session.clone(), tx);
        App {
            session,
            worker,
            done: rx,
            hex: HexPane::new(&theme),
            theme,
            focus: Pane::Extractions,
            exts: ExtPane::default(),
            nodes: NodePane::default(),
            inspector: Inspector::default(),
            panel: Panel::None,
            overlay: Overlay::None,
            unclaimed: 0,
            search: Search::default(),
            values: Values::default(),
            jumped: false,
            message: None,
            layout: Layout {
                bpr: 16,
                ..Layout::default()
            },
            split: 34,
            zoom: false,
            help_top: 0,
            to_save: None,
            saving: None,
            clipboard: None,
            drag: Drag::default(),
            metric_budget: pparse::offer::metrics::SERIES_BUDGET,
            meter: Meter {
                rate: 0.0,
                rss: 0,
                last_tick: Instant::now(),
                last_done: 0,
            },
            quit: false,
        }
    }

    /// The selected extraction.
    pub fn ext(&self) -> ExtId {
        self.exts.selected()
    }

    /// The colours.
    pub fn theme(&self) -> &Theme {
        &self.theme
    }

    /// The pane with the focus.
    pub fn focus(&self) -> Pane {
        self.focus
    }

    /// Where the panes were laid out for the last frame.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Width of the left column, in percent.
    pub fn split(&self) -> u16 {
        self.split
    }

    /// Where the bytes view stands in the selected extraction.
    pub fn place(&self) -> Place {
        self.hex.place(self.ext())
    }

    /// What covers the panes: a prompt, the help, the copy menu.
    pub fn overlay(&self) -> &Overlay {
        &self.overlay
    }

    /// The status bar's message, if any.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Whether the focused pane has the whole screen (`z`).
    pub fn zoomed(&self) -> bool {
        self.zoom
    }

    /// Text copied for the terminal's clipboard and not sent yet.
    pub fn clipboard(&self) -> Option<&str> {
        self.clipboard.as_deref()
    }

    /// Takes the text to send to the terminal's clipboard (OSC 52).
    pub fn take_clipboard(&mut self) -> Option<String> {
        self.clipboard.take()
    }

    /// The selected node of the selected extraction.
    pub fn selected_node(&self) -> Option<Vec<usize>> {
        self.nodes.selected(self.ext()).cloned()
    }

    /// Whether the bytes are shown as text.
    pub fn text_mode(&self) -> bool {
        self.hex.text_mode()
    }

    /// Whether the text on screen came back highlighted.
    pub fn highlighted(&self) -> bool {
        self.hex.highlighted()
    }

    /// The open side panel.
    pub fn panel(&self) -> &Panel {
        &self.panel
    }

    /// Whether the user asked to quit.
    pub fn quitting(&self) -> bool {
        self.quit
    }

    /// Keeps at most `n` node children loaded before cold ones are dropped.
    pub fn set_node_budget(&mut self, n: usize) {
        self.nodes.budget = n;
    }

    /// Children loaded through the explorer and still held.
    pub fn loaded_nodes(&self) -> usize {
        self.nodes.loaded()
    }

    /// Keeps at most `n` metric points for all series at once.
    pub fn set_metric_budget(&mut self, n: usize) {
        self.metric_budget = n;
    }

    /// Rows inside a pane's border.
    pub fn height(&self, pane: Pane) -> usize {
        self.layout.rows(pane)
    }

    fn say(&mut self, msg: impl Into<String>) {
        self.message = Some(msg.into());
    }

    // ----- before a frame --------------------------------------------------

    /// Lays the screen of size `area` out and lets each pane keep its
    /// selection in view and ask for the bytes it will show. Drawing then
    /// changes nothing.
    pub fn prepare(&mut self, area: Rect) {
        let ext = self.ext();
        let len = self.session.tree().get(ext).map_or(0, |e| e.available());
        let room = match self.panel.side() {
            None => Room::Readings,
            Some(p) if p.takes_main() => Room::Plot,
            Some(_) => Room::Panel,
        };
        let zoom = self.zoom.then_some(self.focus);
        self.layout = Layout::new(area, self.split, room, len, zoom);
        self.exts.prepare(&cx!(self, Pane::Extractions));
        self.nodes.prepare(&cx!(self, Pane::Nodes));
        if !self.panel.takes_main() {
            let (selection, sorted) = self.selection(ext);
            let width = self.layout.hex.width.saturating_sub(2);
            let bpr = self.layout.bpr;
            self.hex
                .prepare(&cx!(self, Pane::Hex), bpr, width, selection, sorted);
        }
        let place = self.hex.place(ext);
        let bytes = self
            .hex
            .peek(place.cursor, (place.cursor + AT_CURSOR).min(len));
        let here = if self.hex.text_mode() {
            place.text_top
        } else {
            place.cursor
        };
        let node = self.nodes.selected(ext).cloned();
        self.inspector
            .prepare(ext, node, (place.cursor, here), bytes);
    }

    /// What to mark in the bytes of `ext`: the side panel's bytes, else the
    /// selected node and its children; and whether its nodes are sorted.
    fn selection(&self, ext: ExtId) -> (Selection, bool) {
        let t = self.session.tree();
        let Some(e) = t.get(ext) else {
            return (Selection::default(), false);
        };
        let sorted = self.nodes.known_sorted(ext, &e.nodes);
        let marked = self.hex.place(ext).marked();
        let side = self.panel.marked().filter(|(x, _)| *x == ext);
        if let Some(r) = marked.or(side.map(|(_, r)| r)) {
            let s = Selection {
                range: Some(r),
                children: Vec::new(),
            };
            return (s, sorted);
        }
        let m = super::models::Nodes(&e.nodes);
        let node = self.nodes.selected(ext).and_then(|p| m.get(p));
        let s = Selection {
            range: node.map(|n| n.range),
            children: node.map_or(Vec::new(), |n| {
                n.loaded_children().iter().map(|c| c.range).collect()
            }),
        };
        (s, sorted)
    }

    // ----- input -------------------------------------------------------------

    /// A key press.
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
                        PromptKind::Save => self.save(&text),
                    }
                }
                KeyCode::Backspace => {
                    input.pop();
                }
                // As in a shell: the line is cleared, to type a path anew.
                KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    input.clear();
                }
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    self.quit = true;
                }
                KeyCode::Char(c) => input.push(c),
                _ => {}
            }
            return;
        }
        if self.overlay == Overlay::Copy {
            self.overlay = Overlay::None;
            if let KeyCode::Char(c) = k.code {
                self.copy(c);
            }
            return;
        }
        let Some(a) = keys::action(k) else { return };
        if self.overlay == Overlay::Help {
            match a {
                Action::Help | Action::Cancel | Action::Quit => self.overlay = Overlay::None,
                Action::Up => self.help_top = self.help_top.saturating_sub(1),
                Action::Down => self.help_top += 1,
                Action::PageUp => self.help_top = self.help_top.saturating_sub(self.help_page()),
                Action::PageDown => self.help_top += self.help_page(),
                Action::Home => self.help_top = 0,
                Action::End => self.help_top = usize::MAX / 2,
                _ => {}
            }
            if k.modifiers.contains(KeyModifiers::CONTROL) && a == Action::Quit {
                self.quit = true;
            }
            return;
        }
        self.message = None;
        self.jumped = false;
        self.act(a);
    }

    /// Does what a key asks for.
    pub fn act(&mut self, a: Action) {
        match a {
            Action::Quit => self.quit = true,
            Action::Help => {
                self.help_top = 0;
                self.overlay = Overlay::Help;
            }
            Action::Cancel => {
                let ext = self.ext();
                if !self.hex.drop_mark(ext) && !self.search.cancel(&self.worker) {
                    self.close_panel();
                }
            }
            Action::Mark => self.toggle_mark(),
            Action::Save => self.ask_save(),
            Action::Copy => self.overlay = Overlay::Copy,
            Action::Zoom => self.zoom = !self.zoom,
            Action::Narrower | Action::Wider => {
                let by: i32 = if a == Action::Wider { 5 } else { -5 };
                self.split = (self.split as i32 + by).clamp(15, 85) as u16;
                self.zoom = false;
            }
            Action::Stepper => self.toggle_stepper(),
            Action::Tensors => self.toggle_tensors(),
            Action::Metrics => self.toggle_metrics(),
            Action::Problems => self.toggle_problems(),
            Action::Definition => self.definition(),
            Action::NextUse => self.step_use(true),
            Action::PrevUse => self.step_use(false),
            Action::Export => self.ask_export(),
            Action::NextPane => self.cycle(1),
            Action::PrevPane => self.cycle(2),
            Action::Goto => self.prompt(PromptKind::Goto, String::new()),
            Action::Search => self.prompt(PromptKind::Search, String::new()),
            Action::NextMatch => self.next_match(true),
            Action::PrevMatch => self.next_match(false),
            Action::ToggleText => {
                self.focus = Pane::Hex;
                let r = self.hex.toggle_text(&cx!(self, Pane::Hex));
                self.apply(r);
            }
            _ => {
                let before = self.ext();
                let reply = match self.focus {
                    Pane::Extractions => self.exts.on_key(a, &cx!(self, Pane::Extractions)),
                    Pane::Nodes if matches!(self.panel, Panel::None) => {
                        self.nodes.on_key(a, &cx!(self, Pane::Nodes))
                    }
                    Pane::Nodes => return self.with_panel(|p, cx| p.on_key(a, cx)),
                    // The plot covers the hex view: keys still choose the metric.
                    Pane::Hex if self.panel.takes_main() => {
                        return self.with_panel(|p, cx| p.on_key(a, cx));
                    }
                    Pane::Hex => self.hex.on_key(a, &cx!(self, Pane::Hex)),
                };
                if self.ext() != before {
                    self.hex.forget_highlight();
                }
                self.apply(reply);
            }
        }
    }

    fn prompt(&mut self, kind: PromptKind, input: String) {
        self.overlay = Overlay::Prompt { kind, input };
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

    /// Does what a pane asked for.
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
            self.hex.set_cursor(offset, &cx!(self, Pane::Hex));
        }
        if let Some(offset) = reply.follow {
            self.follow(offset);
            self.jumped = true;
        }
    }

    /// Moves the hex cursor to `offset` and selects what lies there.
    fn set_cursor(&mut self, offset: u64) {
        self.hex.set_cursor(offset, &cx!(self, Pane::Hex));
        self.follow(offset);
    }

    /// The hex cursor moved to `offset`: selects the deepest node there, or
    /// in the stepper, the opcode there.
    fn follow(&mut self, offset: u64) {
        let ext = self.ext();
        if let Panel::Stepper(s) = &mut self.panel
            && s.ext == ext
            && s.range.contains(offset)
        {
            let target = pparse::view::stepper::Target::Offset(offset);
            s.step_to(target, &self.session, &self.worker);
        } else {
            self.nodes.select_at(offset, &cx!(self, Pane::Nodes));
        }
    }

    /// Shows `offset` of extraction `ext` in the hex view without moving the
    /// focus.
    fn show_bytes(&mut self, ext: ExtId, offset: u64) {
        if ext != self.ext() {
            self.exts.reveal(ext, &cx!(self, Pane::Extractions));
            self.hex.forget_highlight();
        }
        self.hex.show_hex();
        self.hex.set_cursor(offset, &cx!(self, Pane::Hex));
    }

    fn data_len(&self) -> u64 {
        self.session
            .tree()
            .get(self.ext())
            .map_or(0, |e| e.available())
    }

    fn goto(&mut self, text: &str) {
        let cur = self.place().cursor;
        match keys::parse_offset(text, cur) {
            Some(o) => {
                let len = self.data_len();
                if o >= len && len > 0 {
                    self.say(format!("{o:#x} is past the end ({len:#x} bytes)"));
                }
                self.focus = Pane::Hex;
                self.hex.show_hex();
                self.set_cursor(o.min(len.saturating_sub(1)));
            }
            None => self.say(format!(
                "not an offset: {text:?} (try 0x1f, 4096, +16, -0x10)"
            )),
        }
    }

    // ----- search ------------------------------------------------------------

    fn search_from(&self) -> From {
        let ext = self.ext();
        From {
            ext,
            data: self.session.tree().get(ext).map(|e| e.data()),
            cursor: self.place().cursor,
        }
    }

    fn start_search(&mut self, query: String) {
        let from = self.search_from();
        self.search.start(query, self.focus, from, &self.worker);
    }

    fn next_match(&mut self, forward: bool) {
        let from = self.search_from();
        let (found, say) = self.search.next(forward, from, &self.worker);
        self.go_to_match(found, say);
    }

    fn go_to_match(&mut self, found: Found, say: Option<String>) {
        if let Some(msg) = say {
            self.say(msg);
        }
        match found {
            Found::Nothing => {}
            Found::Bytes(at) => {
                self.focus = Pane::Hex;
                self.hex.show_hex();
                self.set_cursor(at);
            }
            Found::Ext(id) => {
                self.exts.reveal(id, &cx!(self, Pane::Extractions));
                self.focus = Pane::Extractions;
                self.hex.forget_highlight();
            }
            Found::Node(path) => {
                let start = self.nodes.reveal(&path, &cx!(self, Pane::Nodes));
                self.focus = Pane::Nodes;
                if let Some(s) = start {
                    self.hex.set_cursor(s, &cx!(self, Pane::Hex));
                }
            }
        }
    }

    // ----- background results -------------------------------------------------

    /// Takes a result of the worker to the pane that asked for it.
    pub fn on_done(&mut self, d: Done) {
        let Done { to, payload } = d;
        let unclaimed = match to {
            To::Hex => match self.hex.on_done(payload, &cx!(self, Pane::Hex)) {
                Ok(r) => return self.apply(r),
                Err(p) => p,
            },
            To::Nodes => match self.nodes.on_done(payload, &cx!(self, Pane::Nodes)) {
                Ok(r) => {
                    self.apply(r);
                    // A hex cursor inside may now reach a deeper node; so may
                    // a jump (to a definition or a use) that opened its op.
                    if self.focus == Pane::Hex || self.jumped {
                        let c = self.place().cursor;
                        self.nodes.deepen(c, &cx!(self, Pane::Nodes));
                    }
                    return;
                }
                Err(p) => p,
            },
            To::Search => match payload.downcast::<SearchEvent>() {
                Ok(e) => {
                    let (found, say) = self.search.on_event(*e, self.ext());
                    return self.go_to_match(found, say);
                }
                Err(p) => p,
            },
            To::Save => match payload.downcast::<SaveEvent>() {
                Ok(e) => return self.on_save(*e),
                Err(p) => p,
            },
            To::Values => match payload.downcast::<ValuesDone>() {
                Ok(v) => {
                    let r = self.values.on_done(*v, self.ext());
                    return self.apply(r);
                }
                Err(p) => p,
            },
            To::Stepper | To::Tensors | To::Metrics | To::Problems => {
                let cx = cx!(self, Pane::Nodes);
                // A panel closed (or replaced) since: its late results
                // have nobody to go to, as it asked.
                let Some(p) = self.panel.side_mut().filter(|p| p.address() == to) else {
                    return;
                };
                match p.on_done(payload, &cx) {
                    Ok(r) => return self.apply(r),
                    Err(p) => p,
                }
            }
        };
        self.unclaimed(to, unclaimed);
    }

    /// A result of a type its addressee does not read: a bug in whoever
    /// sent it there. Tests (debug builds) stop on it; a user's explorer
    /// counts it and goes on.
    fn unclaimed(&mut self, to: To, payload: Payload) {
        self.unclaimed += 1;
        debug_assert!(
            false,
            "a result for {to:?} that it does not read ({:?})",
            (*payload).type_id()
        );
    }

    /// Results of background work nobody read (see [`App::on_done`]): 0
    /// unless the explorer has a bug.
    pub fn unclaimed_results(&self) -> u64 {
        self.unclaimed
    }

    /// Runs `f` on the open side panel, if any, with its context, and does
    /// what it answers.
    fn with_panel(&mut self, f: impl FnOnce(&mut dyn SidePanel, &Cx) -> Reply) {
        let cx = cx!(self, Pane::Nodes);
        if let Some(p) = self.panel.side_mut() {
            let reply = f(p, &cx);
            self.apply(reply);
        }
    }

    /// Periodic bookkeeping: parse rate and memory for the status bar.
    pub fn tick(&mut self) {
        let m = &mut self.meter;
        let dt = m.last_tick.elapsed();
        if dt < Duration::from_millis(500) {
            return;
        }
        let done = self.session.tree().root().progress().done;
        m.rate = (done.saturating_sub(m.last_done)) as f64 / dt.as_secs_f64();
        m.last_done = done;
        m.last_tick = Instant::now();
        // Searches and re-reads free as much as they allocate; give it back.
        pparse::engine::release_free_memory();
        m.rss = resident_bytes();
        self.with_panel(|p, cx| {
            p.tick(cx);
            Reply::default()
        });
    }

    // ----- mouse ---------------------------------------------------------------

    /// A mouse event.
    pub fn on_mouse(&mut self, m: MouseEvent) {
        let (x, y) = (m.column, m.row);
        let l = self.layout;
        let hit = l.hit(x, y);
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if x == l.split_x && y < l.status.y {
                    self.drag.split = true;
                    return;
                }
                if let Some((p, at)) = hit {
                    self.focus = p;
                    self.drag.pane = Some(p);
                    if let Some(at) = at {
                        self.click(p, at);
                    }
                }
            }
            MouseEventKind::Drag(MouseButton::Left) => {
                if self.drag.split {
                    let w = l.status.width.max(1);
                    self.split = ((x as u32 * 100 / w as u32) as u16).clamp(15, 85);
                } else if let Some((p, Some(at))) = hit
                    && self.drag.pane == Some(p)
                {
                    self.click(p, at);
                }
            }
            MouseEventKind::Up(_) => self.drag = Drag::default(),
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let down = m.kind == MouseEventKind::ScrollDown;
                let Some((p, _)) = hit else { return };
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

    /// A click at `(x, y)` inside `pane`'s border.
    fn click(&mut self, pane: Pane, (x, y): (u16, u16)) {
        let at = Position { x, y };
        let before = self.ext();
        let reply = match pane {
            Pane::Nodes if !matches!(self.panel, Panel::None) => {
                return self.with_panel(|p, cx| p.click(at, cx));
            }
            // The plot, not bytes.
            Pane::Hex if self.panel.takes_main() => return,
            Pane::Extractions => self.exts.click(at, &cx!(self, Pane::Extractions)),
            Pane::Nodes => self.nodes.click(at, &cx!(self, Pane::Nodes)),
            Pane::Hex => self.hex.click(at, &cx!(self, Pane::Hex)),
        };
        if self.ext() != before {
            self.hex.forget_highlight();
        }
        self.apply(reply);
    }

    // ----- side panels ---------------------------------------------------------

    /// Opens the stepper on the selected pickle (or the extraction's first),
    /// or closes it.
    fn toggle_stepper(&mut self) {
        if matches!(self.panel, Panel::Stepper(_)) {
            self.panel = Panel::None;
            return;
        }
        let mut ext = self.ext();
        // A torch file's root: its data.pkl, as `pparse pickle` takes it.
        let target = pparse::view::stepper::pickle_target(&self.session.tree(), ext);
        if let Some(t) = target.filter(|&t| t != ext) {
            self.exts.reveal(t, &cx!(self, Pane::Extractions));
            self.hex.forget_highlight();
            ext = t;
        }
        let selected = self.nodes.selected(ext).and_then(|p| p.first().copied());
        let opened = Stepper::open(&self.session.tree(), ext, selected);
        let Some(mut stepper) = opened else {
            self.say("no pickle here: select a .pkl or pickle extraction, then press p");
            return;
        };
        if self.panel.takes_main() {
            self.close_panel();
        }
        stepper.step_to(
            pparse::view::stepper::Target::Step(0),
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
                if self.panel.takes_main() {
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
        self.say("no tensors here: select a model or array file (safetensors, torch, ONNX, npy, npz), then press T");
    }

    /// Asks where to write the selected tensor as .npy.
    fn ask_export(&mut self) {
        let Panel::Tensors(p) = &self.panel else {
            self.say("export works on a tensor: press T for the tensor table");
            return;
        };
        let name = p.export_name(&self.session.tree());
        if let Some(name) = name {
            self.prompt(PromptKind::Export, name);
        }
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

    /// Opens the diagnostics of the selected program text, or closes them.
    fn toggle_problems(&mut self) {
        if matches!(self.panel, Panel::Problems(_)) {
            self.close_panel();
            return;
        }
        match ProblemsPanel::find(&self.session, &self.worker, self.ext()) {
            Some(p) => {
                self.close_panel();
                self.panel = Panel::Problems(Box::new(p));
                self.focus = Pane::Nodes;
            }
            None => self.say("no program here: select a printed Paddle program, then press E"),
        }
    }

    // ----- getting bytes out ----------------------------------------------------

    /// Lines the help scrolls by a page.
    fn help_page(&self) -> usize {
        (self.layout.status.y as usize).saturating_sub(5).max(1)
    }

    /// Marks bytes from the cursor (`v`), or drops the mark.
    fn toggle_mark(&mut self) {
        if self.panel.takes_main() {
            return;
        }
        self.focus = Pane::Hex;
        self.hex.show_hex();
        if self.hex.toggle_mark(self.ext()) {
            self.say("marking: move to extend, s saves, y v copies, v or Esc drops the mark");
        }
    }

    /// The bytes `s` saves: the marked bytes, else what a side panel points
    /// at or the selected node (unless the extraction tree has the focus),
    /// else the whole extraction.
    fn save_target(&self) -> Option<Chosen> {
        let ext = self.ext();
        let t = self.session.tree();
        let len = t.get(ext)?.available();
        let range = match self.focus {
            Pane::Extractions => None,
            _ => self.selection(ext).0.range,
        }
        .unwrap_or(Range::new(0, len));
        Some(Chosen {
            ext,
            range,
            name: save::file_name(&t, ext, range),
        })
    }

    /// Asks where to save the selection, offering a new name beside the input.
    fn ask_save(&mut self) {
        let Some(c) = self.save_target() else { return };
        if c.range.is_empty() {
            self.say("nothing to save: the selection holds no bytes");
            return;
        }
        let path = save::beside_input(&self.session.tree(), &c.name);
        self.to_save = Some(c);
        self.prompt(PromptKind::Save, path);
    }

    /// Saves what [`App::ask_save`] chose to `path`, in the background.
    fn save(&mut self, path: &str) {
        let Some(c) = self.to_save.take() else { return };
        let t = self.session.tree();
        let Some(data) = t.get(c.ext).map(|e| e.data()) else {
            return;
        };
        let note = save::damage_note(&t, c.ext, c.range);
        drop(t);
        match save::start(&self.worker, data, c.range, path, note) {
            Ok(s) => self.saving = Some(s),
            Err(msg) => self.say(msg),
        }
    }

    /// A save's progress or end.
    fn on_save(&mut self, e: SaveEvent) {
        match e {
            SaveEvent::Progress { id, done } => {
                if let Some(s) = self.saving.as_mut().filter(|s| s.id == id) {
                    s.done = done;
                }
            }
            SaveEvent::Finished {
                id,
                path,
                result,
                note,
            } if self.saving.is_some_and(|s| s.id == id) => {
                self.saving = None;
                let shown = pparse::name::escape_str(&path.display().to_string());
                let msg = match result {
                    Ok(n) => {
                        let mut m = format!("wrote {shown} ({})", pparse::util::human(n));
                        if let Some(note) = note {
                            m.push_str(&format!("; {note}"));
                        }
                        m
                    }
                    Err(e) => format!("could not write {shown}: {e}"),
                };
                self.say(msg);
            }
            SaveEvent::Finished { .. } => {}
        }
    }

    /// Copies what `key` names after `y`: `p` the PATH of the selected
    /// extraction, `o` the offset (the hex cursor, else the selection's
    /// start), `v` the value (the marked bytes as hex, else the selected
    /// node's value).
    fn copy(&mut self, key: char) {
        let ext = self.ext();
        let t = self.session.tree();
        let (what, text) = match key {
            'p' => ("PATH", t.path_of(ext)),
            'o' => {
                let at = match self.focus {
                    Pane::Hex => Some(self.place().cursor),
                    _ => self.selection(ext).0.range.map(|r| r.start),
                };
                ("offset", format!("{:#x}", at.unwrap_or(0)))
            }
            'v' => match self.copied_value(&t) {
                Ok(v) => ("value", v),
                Err(why) => {
                    drop(t);
                    return self.say(why);
                }
            },
            _ => {
                drop(t);
                return self.say("nothing copied: y then p (PATH), o (offset) or v (value)");
            }
        };
        drop(t);
        let shown = pparse::name::escape_str(&text);
        let shown = super::panel::cut_middle(&shown, 60);
        self.say(format!("copied the {what} (OSC 52): {shown}"));
        self.clipboard = Some(text);
    }

    /// The value `y v` copies: marked bytes as hex, else the selected node's
    /// value.
    fn copied_value(&self, t: &pparse::extraction::Tree) -> Result<String, String> {
        let ext = self.ext();
        let e = t.get(ext).ok_or("nothing selected")?;
        if let Some(r) = self.place().marked() {
            let n = r.len().min(e.available().saturating_sub(r.start));
            if n * 3 > save::MAX_COPY as u64 {
                return Err(format!(
                    "{} bytes are too many to copy: s saves them to a file",
                    pparse::util::thousands(r.len())
                ));
            }
            let mut buf = vec![0u8; n as usize];
            let got = pparse::data::read_exact_at(&*e.data(), r.start, &mut buf)
                .map_err(|err| format!("could not read the bytes: {err}"))?;
            if !got {
                return Err("the marked bytes are not all there".into());
            }
            let hex: Vec<String> = buf.iter().map(|b| format!("{b:02x}")).collect();
            return Ok(hex.join(" "));
        }
        let m = super::models::Nodes(&e.nodes);
        let node = self.nodes.selected(ext).and_then(|p| m.get(p));
        match node.and_then(|n| n.value.as_ref()) {
            Some(v) => Ok(v.to_string()),
            None => {
                Err("no value to copy: select a node with a value, or mark bytes with v".into())
            }
        }
    }

    /// Where the value to follow is named: the selected node's first byte
    /// in the node tree, else the cursor.
    fn value_at(&self) -> u64 {
        let ext = self.ext();
        if self.focus == Pane::Nodes && matches!(self.panel, Panel::None) {
            let t = self.session.tree();
            if let Some(e) = t.get(ext) {
                let m = super::models::Nodes(&e.nodes);
                if let Some(n) = self.nodes.selected(ext).and_then(|p| m.get(p)) {
                    return n.range.start;
                }
            }
        }
        self.place().cursor
    }

    /// Goes to the op that defines the value selected (`D`).
    fn definition(&mut self) {
        let (at, cursor) = (self.value_at(), self.place().cursor);
        let r = self
            .values
            .definition(self.ext(), at, cursor, &self.session, &self.worker);
        self.apply(r);
    }

    /// Goes to the next or previous use of the value selected (`u`, `U`).
    fn step_use(&mut self, forward: bool) {
        let (at, cursor) = (self.value_at(), self.place().cursor);
        let r = self
            .values
            .step(self.ext(), at, cursor, forward, &self.session, &self.worker);
        self.apply(r);
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
