//! The diagnostics panel (`E`): every problem of a program text as a
//! compiler prints it — `line:col error: message`, the source line, a caret
//! under the span — read in the background with progress. The selected one
//! moves the cursor to its bytes and marks them, in the hex or text view.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, SidePanel};
use crate::theme::Theme;
use crate::worker::{Payload, To, Worker};
use pparse::data::Range;
use pparse::engine::Session;
use pparse::extraction::{ExtId, Tree};
use pparse::name::escape_str;
use pparse::offer::program::{Problem, ProgramOffer};
use pparse::util::thousands;

const SLOT: &str = "diagnostics";
/// Rows per problem: its header, its source line, the caret.
const ROWS: usize = 3;

/// What the scan reports.
enum Report {
    Progress { id: u64, done: u64, total: u64 },
    Done { id: u64, problems: Vec<Problem> },
}

/// The diagnostics of one program text.
#[derive(Debug, Clone)]
pub struct ProblemsPanel {
    ext: ExtId,
    name: String,
    id: u64,
    progress: Option<(u64, u64)>,
    problems: Option<Vec<Problem>>,
    selected: usize,
    /// The first problem shown.
    offset: usize,
}

impl ProblemsPanel {
    /// The diagnostics of `ext` or the nearest extraction above it whose
    /// format offers a program; `None` if there is none.
    pub fn find(session: &Session, worker: &Worker, ext: ExtId) -> Option<ProblemsPanel> {
        let (ext, offer, data, name) = {
            let t = session.tree();
            let mut at = Some(ext);
            let mut found = None;
            while let Some(x) = at {
                let e = t.get(x)?;
                if let Some(o) = pparse::parsers::format_of(e).and_then(|f| f.offers.program) {
                    found = Some((x, o, e.data(), e.display_name()));
                    break;
                }
                at = e.parent();
            }
            found?
        };
        let offer: ProgramOffer = offer;
        let id = worker.spawn(SLOT, To::Problems, move |_, stop, report, id| {
            let progress = |done, total| report(Box::new(Report::Progress { id, done, total }));
            if let Some(problems) = (offer.diagnostics)(&*data, stop, &progress) {
                report(Box::new(Report::Done { id, problems }));
            }
        });
        Some(ProblemsPanel {
            ext,
            name,
            id,
            progress: None,
            problems: None,
            selected: 0,
            offset: 0,
        })
    }

    /// The problems read, once the scan is over.
    pub fn problems(&self) -> Option<&[Problem]> {
        self.problems.as_deref()
    }

    fn current(&self) -> Option<&Problem> {
        self.problems.as_ref()?.get(self.selected)
    }

    /// Moves the cursor to the selected problem's bytes.
    fn go(&self) -> Reply {
        let Some(p) = self.current() else {
            return Reply::default();
        };
        if p.line == 0 {
            // Not at a place in the text (a count of errors not listed).
            return Reply::default();
        }
        Reply {
            cursor: Some((self.ext, p.span.start)),
            ..Reply::default()
        }
    }

    fn select(&mut self, i: usize, rows: usize) -> Reply {
        self.selected = i;
        let page = (rows / ROWS).max(1);
        panel::scroll_to(&mut self.offset, i, page);
        self.go()
    }
}

impl Component for ProblemsPanel {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        let len = self.problems.as_ref().map_or(0, Vec::len);
        if len == 0 {
            return Reply::default();
        }
        let page = (cx.rows / ROWS).max(1);
        match panel::list_target(a, self.selected, len, page) {
            Some(i) => self.select(i, cx.rows),
            None => Reply::default(),
        }
    }

    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        let len = self.problems.as_ref().map_or(0, Vec::len);
        let page = (cx.rows / ROWS).max(1);
        match panel::clicked_item(self.offset, self.selected, len, page, at.y, ROWS) {
            Some(i) => self.select(i, cx.rows),
            None => Reply::default(),
        }
    }

    fn on_done(&mut self, d: Payload, cx: &Cx) -> Result<Reply, Payload> {
        let r = d.downcast::<Report>()?;
        match *r {
            Report::Progress { id, done, total } if id == self.id => {
                self.progress = Some((done, total));
            }
            Report::Done { id, problems } if id == self.id => {
                self.progress = None;
                let any = !problems.is_empty();
                self.problems = Some(problems);
                if any {
                    return Ok(self.select(0, cx.rows));
                }
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
        let Some(problems) = &self.problems else {
            let msg = match self.progress {
                Some((d, t)) if t > 0 => format!("reading the program… {}%", d * 100 / t),
                _ => "reading the program…".into(),
            };
            panel::put(buf, x, inner.y, w, &msg, th.dim);
            return;
        };
        if problems.is_empty() {
            panel::put(
                buf,
                x,
                inner.y,
                w,
                "no errors: the program reads cleanly",
                th.dim,
            );
            return;
        }
        let page = (inner.height as usize / ROWS).max(1);
        let top = panel::first_row(self.offset, self.selected, problems.len(), page);
        for (i, p) in problems.iter().enumerate().skip(top).take(page) {
            let y = inner.y + ((i - top) * ROWS) as u16;
            let base = if i == self.selected {
                th.row_selected
            } else {
                Style::new()
            };
            buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
            let sev = if p.severity == "error" {
                th.corrupt
            } else {
                th.dim
            };
            let head = if p.line > 0 {
                format!("{}:{} ", p.line, p.col)
            } else {
                String::new()
            };
            let mut col = panel::put(buf, x, y, w, &head, th.dim.patch(base));
            col += panel::put(
                buf,
                x + col,
                y,
                w.saturating_sub(col),
                p.severity,
                sev.patch(base),
            );
            panel::put(
                buf,
                x + col,
                y,
                w.saturating_sub(col),
                &format!(": {}", escape_str(&p.message)),
                th.text.patch(base),
            );
            if p.line > 0 {
                let source = escape_str(&p.source);
                panel::put(buf, x + 2, y + 1, w.saturating_sub(2), &source, th.text);
                panel::put(buf, x + 2, y + 2, w.saturating_sub(2), &p.caret(), sev);
            }
        }
    }
}

impl SidePanel for ProblemsPanel {
    fn address(&self) -> To {
        To::Problems
    }
    fn title(&self) -> String {
        let n = self.problems.as_ref().map_or(String::new(), |p| {
            format!(" ({})", thousands(p.len() as u64))
        });
        format!(" Diagnostics: {}{n} ", escape_str(&self.name))
    }

    fn inspector<'a>(
        &self,
        th: &Theme,
        _tree: &Tree,
        _width: u16,
    ) -> (&'static str, Vec<Line<'a>>) {
        let Some(p) = self.current() else {
            return (" Diagnostic ", Vec::new());
        };
        let total = self.problems.as_ref().map_or(0, Vec::len);
        let mut lines = vec![
            Line::from(vec![
                Span::styled("problem  ", th.dim),
                Span::raw(format!("{} of {}", self.selected + 1, total)),
            ]),
            Line::from(vec![
                Span::styled(format!("{:<9}", p.severity), th.dim),
                Span::raw(escape_str(&p.message)),
            ]),
        ];
        if p.line > 0 {
            lines.push(Line::from(vec![
                Span::styled("at       ", th.dim),
                Span::raw(format!(
                    "line {}, column {}; bytes {:#x}..{:#x}",
                    p.line, p.col, p.span.start, p.span.end
                )),
            ]));
        }
        for (at, note) in &p.notes {
            lines.push(Line::from(vec![
                Span::styled("note     ", th.dim),
                Span::raw(format!("{} (at {:#x})", escape_str(note), at.start)),
            ]));
        }
        (" Diagnostic ", lines)
    }

    fn marked(&self) -> Option<(ExtId, Range)> {
        let p = self.current().filter(|p| p.line > 0)?;
        let span = if p.span.is_empty() {
            Range::new(p.span.start, p.span.start + 1)
        } else {
            p.span
        };
        Some((self.ext, span))
    }

    fn close(&mut self, worker: &Worker) {
        worker.stop(SLOT);
    }
}
