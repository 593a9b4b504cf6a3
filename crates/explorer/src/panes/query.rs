//! The query panel (`:`): a jq filter, as `pparse query` runs it, over the
//! selected extraction (`.` is it, `members` every extraction below it,
//! `nodes` its node tree), run in the background; its outputs one a line,
//! as they come.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, SidePanel};
use crate::theme::Theme;
use crate::worker::{Payload, To, Worker};
use pparse::engine::Session;
use pparse::extraction::{ExtId, Tree};
use pparse::name::escape_str;
use pparse::report::query::Query;
use pparse::util::thousands;

const SLOT: &str = "query";
/// Lines kept at most: a filter that outputs more is stopped, and says so.
const MAX_LINES: usize = 100_000;
/// Lines sent to the panel at once.
const BATCH: usize = 256;

/// What the run reports.
enum Report {
    Lines {
        id: u64,
        lines: Vec<String>,
    },
    Done {
        id: u64,
        error: Option<String>,
        cut: bool,
    },
}

/// A filter's outputs over one extraction.
#[derive(Debug, Clone)]
pub struct QueryPanel {
    filter: String,
    path: String,
    id: u64,
    lines: Vec<String>,
    done: bool,
    error: Option<String>,
    cut: bool,
    selected: usize,
    offset: usize,
}

impl QueryPanel {
    /// Starts `filter` over `ext`; `Err` when it does not compile, saying
    /// where.
    pub fn start(
        session: &Session,
        worker: &Worker,
        ext: ExtId,
        filter: String,
    ) -> Result<QueryPanel, String> {
        Query::compile(&filter)?;
        let path = session.tree().path_of(ext);
        let code = filter.clone();
        let id = worker.spawn(SLOT, To::Query, move |session, stop, report, id| {
            // Compiled where it runs: a filter stays on its thread.
            let Ok(q) = Query::compile(&code) else {
                return;
            };
            let mut batch = Vec::new();
            let mut n = 0usize;
            let mut cut = false;
            let ran = q.run(session, ext, |line| {
                if stop.load(std::sync::atomic::Ordering::Acquire) {
                    return Err(std::io::Error::other("stopped"));
                }
                if n == MAX_LINES {
                    cut = true;
                    return Err(std::io::Error::other("cut"));
                }
                n += 1;
                batch.push(line.to_string());
                if batch.len() == BATCH {
                    let lines = std::mem::take(&mut batch);
                    report(Box::new(Report::Lines { id, lines }));
                }
                Ok(())
            });
            if stop.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            if !batch.is_empty() {
                report(Box::new(Report::Lines { id, lines: batch }));
            }
            let error = match ran {
                Ok(r) => r.error,
                Err(_) if cut => None,
                Err(e) => Some(e.to_string()),
            };
            report(Box::new(Report::Done { id, error, cut }));
        });
        Ok(QueryPanel {
            filter,
            path,
            id,
            lines: Vec::new(),
            done: false,
            error: None,
            cut: false,
            selected: 0,
            offset: 0,
        })
    }

    /// The outputs so far.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    fn select(&mut self, i: usize, rows: usize) -> Reply {
        self.selected = i;
        panel::scroll_to(&mut self.offset, i, rows.max(1));
        Reply::default()
    }
}

impl Component for QueryPanel {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        let len = self.lines.len();
        if len == 0 {
            return Reply::default();
        }
        match panel::list_target(a, self.selected, len, cx.rows.max(1)) {
            Some(i) => self.select(i, cx.rows),
            None => Reply::default(),
        }
    }

    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        let len = self.lines.len();
        match panel::clicked_item(self.offset, self.selected, len, cx.rows.max(1), at.y, 1) {
            Some(i) => self.select(i, cx.rows),
            None => Reply::default(),
        }
    }

    fn on_done(&mut self, d: Payload, _cx: &Cx) -> Result<Reply, Payload> {
        let r = d.downcast::<Report>()?;
        match *r {
            Report::Lines { id, lines } if id == self.id => self.lines.extend(lines),
            Report::Done { id, error, cut } if id == self.id => {
                self.done = true;
                self.error = error;
                self.cut = cut;
            }
            _ => {}
        }
        Ok(Reply::default())
    }

    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let th = look.theme;
        let inner = panel::frame(look, SidePanel::title(self), buf, area);
        let w = inner.width.saturating_sub(1);
        let x = inner.x + 1;
        // The last row says how the run went.
        let rows = inner.height.saturating_sub(1) as usize;
        let top = panel::first_row(self.offset, self.selected, self.lines.len(), rows.max(1));
        for (i, line) in self.lines.iter().enumerate().skip(top).take(rows) {
            let y = inner.y + (i - top) as u16;
            let base = if i == self.selected {
                th.row_selected
            } else {
                Style::new()
            };
            buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
            panel::put(buf, x, y, w, &escape_str(line), th.text.patch(base));
        }
        let (msg, style) = match (&self.error, self.done) {
            (Some(e), _) => (format!("error: {}", escape_str(e)), th.corrupt),
            (None, false) => ("running…".to_string(), th.dim),
            (None, true) if self.cut => (
                format!("stopped at {} outputs", thousands(MAX_LINES as u64)),
                th.dim,
            ),
            (None, true) if self.lines.is_empty() => ("no output".to_string(), th.dim),
            (None, true) => ("done".to_string(), th.dim),
        };
        if inner.height > 0 {
            panel::put(buf, x, inner.y + inner.height - 1, w, &msg, style);
        }
    }
}

impl SidePanel for QueryPanel {
    fn address(&self) -> To {
        To::Query
    }

    fn title(&self) -> String {
        let at = if self.path.is_empty() {
            String::new()
        } else {
            format!(" on {}", escape_str(&self.path))
        };
        format!(" Query{at} ({}) ", thousands(self.lines.len() as u64))
    }

    fn inspector<'a>(&self, th: &Theme, _tree: &Tree, width: u16) -> (&'static str, Vec<Line<'a>>) {
        let mut lines = vec![Line::from(vec![
            Span::styled("filter   ", th.dim),
            Span::raw(escape_str(&self.filter)),
        ])];
        if let Some(l) = self.lines.get(self.selected) {
            lines.push(Line::from(vec![
                Span::styled("output   ", th.dim),
                Span::raw(format!(
                    "{} of {}",
                    thousands(self.selected as u64 + 1),
                    thousands(self.lines.len() as u64)
                )),
            ]));
            // The whole value, cut into rows of the pane's width.
            let text = escape_str(l);
            let w = usize::from(width.max(16)) - 2;
            let chars: Vec<char> = text.chars().collect();
            for row in chars.chunks(w).take(64) {
                lines.push(Line::from(Span::raw(row.iter().collect::<String>())));
            }
        }
        (" Query ", lines)
    }

    fn close(&mut self, worker: &Worker) {
        worker.stop(SLOT);
    }
}
