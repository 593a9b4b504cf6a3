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

use super::follow::{Follow, FollowDone};
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
use super::panes::query::QueryPanel;
use super::panes::stepper::Stepper;
use super::panes::tensors::TensorPanel;
use super::save::{self, Chosen, SaveEvent, Saving};
use super::search::{Found, From, Search, SearchEvent};
use super::theme::Theme;
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
    /// A jq filter to run over the selected extraction.
    Query,
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
    /// A jq filter's outputs (`:`).
    Query(Box<QueryPanel>),
}

impl Panel {
    /// The open side panel, if any.
    pub fn side(&self) -> Option<&dyn SidePanel> {
        match self {
            Panel::Stepper(s) => Some(&**s),
            Panel::Tensors(p) => Some(&**p),
            Panel::Metrics(p) => Some(&**p),
            Panel::Problems(p) => Some(&**p),
            Panel::Query(p) => Some(&**p),
            Panel::None => None,
        }
    }
    fn side_mut(&mut self) -> Option<&mut dyn SidePanel> {
        match self {
            Panel::Stepper(s) => Some(&mut **s),
            Panel::Tensors(p) => Some(&mut **p),
            Panel::Metrics(p) => Some(&mut **p),
            Panel::Problems(p) => Some(&mut **p),
            Panel::Query(p) => Some(&mut **p),
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

// After the macro: the files below use it.
mod input;
mod mouse;
mod output;
mod panels;
mod results;
mod search;

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
    follow: Follow,
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
    /// The last filter run (`:` offers it again).
    pub(super) last_query: String,
    /// Text copied and not yet sent to the terminal (OSC 52).
    clipboard: Option<String>,
    drag: Drag,
    /// Most points the metrics panel keeps for all series at once; past
    /// it, series are read one metric at a time.
    metric_budget: usize,
    pub(super) meter: Meter,
    /// Root causes of the damage found (see `report::tree::Causes`), with
    /// the damage count they were counted at and when.
    pub(super) causes: (usize, usize, Option<Instant>),
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
            follow: Follow::default(),
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
            last_query: String::new(),
            clipboard: None,
            drag: Drag::default(),
            metric_budget: pparse::offer::metrics::SERIES_BUDGET,
            meter: Meter {
                rate: 0.0,
                rss: 0,
                last_tick: Instant::now(),
                last_done: 0,
            },
            causes: (0, 0, None),
            quit: false,
        }
    }

    /// Counts the root causes of the damage found, when more was found:
    /// at most once a second while a parse finds more (a CRC failure can
    /// make a hundred thousand members damaged at once), and at once when
    /// the parse is over, so that the last count is never left unsaid.
    fn count_causes(&mut self) {
        let finished = self.session.is_finished();
        let t = self.session.tree();
        let (seen, _, at) = self.causes;
        let recent = at.is_some_and(|a| a.elapsed() < Duration::from_secs(1));
        if t.damage_count == seen || (recent && !finished) {
            return;
        }
        let damaged = t
            .exts
            .iter()
            .filter(|e| !e.damage.is_empty())
            .map(|e| e.id());
        let roots = pparse::report::tree::Causes::of(&t, damaged).roots();
        self.causes = (t.damage_count, roots, Some(Instant::now()));
    }

    /// The selected extraction.
    pub fn ext(&self) -> ExtId {
        self.exts.selected()
    }

    /// The selected folder of an archive's members, by its path in the
    /// archive, when a folder row is selected.
    pub fn folder(&self) -> Option<&str> {
        self.exts.selected_folder()
    }

    /// Archive members the extraction tree has put in folders so far.
    pub fn folder_work(&self) -> u64 {
        self.exts.placed()
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
        self.count_causes();
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
        let m = crate::widgets::models::Nodes(&e.nodes);
        let node = self.nodes.selected(ext).and_then(|p| m.get(p));
        let s = Selection {
            range: node.map(|n| n.range),
            children: node.map_or(Vec::new(), |n| {
                n.loaded_children().iter().map(|c| c.range).collect()
            }),
        };
        (s, sorted)
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
