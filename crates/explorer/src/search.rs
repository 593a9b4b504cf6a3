//! Searching from the explorer: names and values in a tree pane, bytes or
//! text in the hex pane. The searching itself is [`pparse::view::search`];
//! this runs it in the background, keeps the matches and steps through
//! them with `n` and `N`.

use std::sync::atomic::{AtomicBool, Ordering};

use super::keys;
use super::layout::Pane;
use super::worker::{To, Worker};
use pparse::data::Data;
use pparse::engine::Session;
use pparse::extraction::ExtId;
use pparse::view::search;

/// The worker's slot for searches.
const SLOT: &str = "search";
/// Bytes few enough to count every match of a byte search in.
const COUNT_MAX: u64 = 256 << 20;

/// Progress and results of a background search.
pub enum SearchEvent {
    /// Bytes searched so far, of all.
    Progress {
        /// The search reporting.
        id: u64,
        /// Done so far.
        done: u64,
        /// All there is.
        total: u64,
    },
    /// A byte match (hex search) at this offset.
    Offset {
        /// The search reporting.
        id: u64,
        /// The extraction searched.
        ext: ExtId,
        /// Where the match starts.
        at: u64,
        /// Found only after going on from the other end.
        wrapped: bool,
        /// Which match it is and how many there are, (k, n) from 1, when
        /// the bytes are few enough to count them all.
        rank: Option<(u64, u64)>,
    },
    /// Tree matches, in tree order.
    Exts {
        /// The search reporting.
        id: u64,
        /// The extractions whose name matches.
        hits: Vec<ExtId>,
    },
    /// Node matches, in tree order.
    Nodes {
        /// The search reporting.
        id: u64,
        /// The extraction searched.
        ext: ExtId,
        /// The nodes whose name or value matches.
        hits: Vec<Vec<usize>>,
    },
    /// The search ended without a (further) match.
    NotFound {
        /// The search reporting.
        id: u64,
    },
}

/// Where a search took the user: the app moves there.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// A byte match in the shown extraction.
    Bytes(u64),
    /// An extraction.
    Ext(ExtId),
    /// A node of the shown extraction.
    Node(Vec<usize>),
    /// Nothing to move to.
    Nothing,
}

/// The current search and its matches.
#[derive(Debug, Clone, Default)]
pub struct Search {
    query: String,
    pane: Option<Pane>,
    id: u64,
    exts: Vec<ExtId>,
    nodes: Vec<Vec<usize>>,
    index: usize,
    progress: Option<(u64, u64)>,
    running: bool,
}

/// Where the hex pane stands, for a byte search.
pub struct From {
    /// The shown extraction.
    pub ext: ExtId,
    /// Its bytes.
    pub data: Option<Data>,
    /// The cursor.
    pub cursor: u64,
}

impl Search {
    /// How far a running search is, as (done, total).
    pub fn progress(&self) -> Option<(u64, u64)> {
        self.progress
    }

    /// Starts searching for `query` in `pane`.
    pub fn start(&mut self, query: String, pane: Pane, from: From, worker: &Worker) {
        if query.is_empty() {
            return;
        }
        *self = Search {
            query: query.clone(),
            pane: Some(pane),
            running: true,
            ..Search::default()
        };
        match pane {
            Pane::Extractions => {
                self.id = task(worker, move |s, stop, report, id| {
                    let progress = |done, total| report(SearchEvent::Progress { id, done, total });
                    if let Some(hits) = search::extractions(s, &query, stop, &progress) {
                        report(SearchEvent::Exts { id, hits });
                    }
                });
            }
            Pane::Nodes => {
                let ext = from.ext;
                self.id = task(worker, move |s, stop, report, id| {
                    if let Some(hits) = search::nodes(&s.tree(), ext, &query, stop) {
                        report(SearchEvent::Nodes { id, ext, hits });
                    }
                });
            }
            Pane::Hex => self.bytes(true, true, from, worker),
        }
    }

    /// Stops a running search; whether one was running.
    pub fn cancel(&mut self, worker: &Worker) -> bool {
        if !self.running {
            return false;
        }
        worker.stop(SLOT);
        self.running = false;
        self.progress = None;
        true
    }

    /// Searches the extraction's bytes from the cursor, forward or back.
    fn bytes(&mut self, forward: bool, include_cursor: bool, from: From, worker: &Worker) {
        let pattern = keys::parse_pattern(&self.query);
        if pattern.is_empty() {
            return;
        }
        let Some(data) = from.data else { return };
        let ext = from.ext;
        let start = if include_cursor || !forward {
            from.cursor
        } else {
            from.cursor + 1
        };
        self.running = true;
        self.id = task(worker, move |_, stop, report, id| {
            let progress = |done, total| report(SearchEvent::Progress { id, done, total });
            let mut found = search::bytes(&data, &pattern, start, forward, stop, &progress)
                .map(|at| (at, false));
            if found.is_none() && !stop.load(Ordering::Acquire) {
                // On from the other end, as vim and less do.
                let other = if forward { 0 } else { data.available() };
                found = search::bytes(&data, &pattern, other, forward, stop, &progress)
                    .map(|at| (at, true));
            }
            match found {
                Some((at, wrapped)) => {
                    let rank = (data.available() <= COUNT_MAX)
                        .then(|| search::count(&data, &pattern, at, stop))
                        .flatten()
                        .map(|(n, before)| (before + 1, n));
                    report(SearchEvent::Offset {
                        id,
                        ext,
                        at,
                        wrapped,
                        rank,
                    });
                }
                None if !stop.load(Ordering::Acquire) => report(SearchEvent::NotFound { id }),
                None => {}
            }
        });
    }

    /// The next (or previous) match: a tree match at once, a byte match
    /// once the search started here finds it. Returns where to go and what
    /// to say.
    pub fn next(&mut self, forward: bool, from: From, worker: &Worker) -> (Found, Option<String>) {
        if self.query.is_empty() {
            return (
                Found::Nothing,
                Some("no search yet: press / to search".into()),
            );
        }
        match self.pane {
            Some(Pane::Hex) => {
                self.bytes(forward, false, from, worker);
                (Found::Nothing, None)
            }
            Some(Pane::Extractions) if !self.exts.is_empty() => {
                let (i, say) = step(self.index, self.exts.len(), forward);
                self.index = i;
                (Found::Ext(self.exts[i]), Some(say))
            }
            Some(Pane::Nodes) if !self.nodes.is_empty() => {
                let (i, say) = step(self.index, self.nodes.len(), forward);
                self.index = i;
                (Found::Node(self.nodes[i].clone()), Some(say))
            }
            _ => (
                Found::Nothing,
                Some(format!("no matches for {:?}", self.query)),
            ),
        }
    }

    /// News from the background search: where to go and what to say.
    /// `shown` is the extraction on screen (a byte match elsewhere is stale).
    pub fn on_event(&mut self, e: SearchEvent, shown: ExtId) -> (Found, Option<String>) {
        let id = match &e {
            SearchEvent::Progress { id, .. }
            | SearchEvent::Offset { id, .. }
            | SearchEvent::Exts { id, .. }
            | SearchEvent::Nodes { id, .. }
            | SearchEvent::NotFound { id } => *id,
        };
        if id != self.id {
            return (Found::Nothing, None);
        }
        if let SearchEvent::Progress { done, total, .. } = e {
            self.progress = Some((done, total));
            return (Found::Nothing, None);
        }
        self.running = false;
        self.progress = None;
        self.index = 0;
        let q = &self.query;
        match e {
            SearchEvent::Progress { .. } => (Found::Nothing, None),
            SearchEvent::Offset {
                ext,
                at,
                wrapped,
                rank,
                ..
            } if ext == shown => {
                let mut say = format!("{q:?} found at {at:#x}");
                if let Some((k, n)) = rank {
                    say.push_str(&format!(", match {k} of {n}"));
                }
                if wrapped {
                    say.push_str(WRAPPED);
                }
                (Found::Bytes(at), Some(say))
            }
            SearchEvent::Offset { .. } => (Found::Nothing, None),
            SearchEvent::Exts { hits, .. } => {
                let say = ranked(hits.len(), "extractions", q);
                let first = hits.first().copied();
                self.exts = hits;
                (first.map_or(Found::Nothing, Found::Ext), Some(say))
            }
            SearchEvent::Nodes { hits, .. } => {
                let say = ranked(hits.len(), "nodes", q);
                let first = hits.first().cloned();
                self.nodes = hits;
                (first.map_or(Found::Nothing, Found::Node), Some(say))
            }
            SearchEvent::NotFound { .. } => (Found::Nothing, Some(format!("{q:?} not found"))),
        }
    }
}

/// Runs a search on its own thread, replacing any running one; returns
/// its id. `f` gets the session, a stop flag and a way to report.
fn task(
    worker: &Worker,
    f: impl FnOnce(&Session, &AtomicBool, &dyn Fn(SearchEvent), u64) + Send + 'static,
) -> u64 {
    worker.spawn(SLOT, To::Search, move |s, stop, report, id| {
        f(s, stop, &|e| report(Box::new(e)), id);
    })
}

/// What a tree search found: how many, and that the first is shown.
fn ranked(n: usize, what: &str, q: &str) -> String {
    match n {
        0 => format!("no {what} match {q:?}"),
        _ => format!("{n} {what} match {q:?}: match 1 of {n}"),
    }
}

/// Said when a search went on from the other end.
const WRAPPED: &str = " (wrapped around the end)";

/// The match after (or before) the `i`th of `n`, and what to say of it.
fn step(i: usize, n: usize, forward: bool) -> (usize, String) {
    let (next, wrapped) = if forward {
        ((i + 1) % n, i + 1 == n)
    } else {
        ((i + n - 1) % n, i == 0)
    };
    let mut say = format!("match {} of {n}", next + 1);
    if wrapped {
        say.push_str(WRAPPED);
    }
    (next, say)
}
