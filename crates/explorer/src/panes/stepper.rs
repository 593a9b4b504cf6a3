//! The pickle stepper panel (`p`): the VM's state after any opcode, forward
//! and back. The replay itself is [`pparse::view::stepper`]; this is the
//! panel that asks for steps and draws what comes back. It owns its state
//! and knows nothing of the app: the app hands it the session, the worker
//! and its pane's size, and applies what it returns (where the hex cursor
//! goes).

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, SidePanel};
use crate::theme::Theme;
use crate::worker::{Job, Payload, To, Worker, scratch};
use pparse::data::Range;
use pparse::engine::Session;
use pparse::extraction::{ExtId, Tree};
use pparse::view::stepper::{self, StepCache, StepResult, Target};

/// The stepper's state in the explorer.
#[derive(Clone, Debug)]
pub struct Stepper {
    pub(crate) ext: ExtId,
    pub(crate) range: Range,
    /// Name of the pickle (for the pane title).
    pub name: String,
    /// The step asked for last.
    pub step: usize,
    generation: u64,
    result: Option<StepResult>,
}

impl Stepper {
    /// A stepper on the selected top-level node of `ext` if it is a pickle,
    /// else on its first pickle; `None` if it holds none.
    pub fn open(tree: &Tree, ext: ExtId, selected: Option<usize>) -> Option<Stepper> {
        let e = tree.get(ext)?;
        let is_pickle = |i: &usize| e.nodes.get(*i).is_some_and(|n| n.kind == "pickle");
        let i = selected
            .filter(is_pickle)
            .or_else(|| (0..e.nodes.len()).find(is_pickle))?;
        let n = &e.nodes[i];
        // A pickle still being read ends where the bytes do.
        let end = if n.range.is_empty() {
            e.available()
        } else {
            n.range.end
        };
        Some(Stepper {
            ext,
            range: Range::new(n.range.start, end),
            name: format!("{} {}", e.display_name(), n.name),
            step: 0,
            generation: 0,
            result: None,
        })
    }

    /// Asks the worker for the state at `target`.
    pub fn step_to(&mut self, target: Target, session: &Session, worker: &Worker) {
        let Some(req) = stepper::request(
            &session.tree(),
            self.ext,
            self.range,
            target,
            self.generation + 1,
        ) else {
            return;
        };
        self.generation += 1;
        if let Target::Step(n) = target {
            self.step = n;
        }
        worker.submit(Job::newest_of("step", To::Stepper, move |_, s| {
            let cache = scratch::<StepCache>(s);
            Some(Box::new(req.run(cache)))
        }));
    }

    /// Moves by a key; `page` is the rows of the listing.
    pub fn on_key(&mut self, a: Action, page: usize, session: &Session, worker: &Worker) {
        let total = self.result.as_ref().map_or(usize::MAX, |r| r.total.max(1));
        let cur = self.step;
        let Some(to) = panel::list_target(a, cur, total, page) else {
            return;
        };
        if to != cur {
            self.step_to(Target::Step(to), session, worker);
        }
    }

    /// Takes a result; returns where the hex cursor should go (the current
    /// opcode's extraction and offset) when it is this stepper's newest.
    pub fn on_stepped(&mut self, r: StepResult) -> Option<(ExtId, u64)> {
        if r.generation != self.generation {
            return None;
        }
        self.step = r.step;
        let to = (r.ext, r.op.start);
        self.result = Some(r);
        Some(to)
    }

    /// Selects the opcode on row `row` of a listing of `rows` rows.
    pub fn click(&mut self, row: usize, rows: usize, session: &Session, worker: &Worker) {
        let to = self.first_row(rows) + row;
        if self.result.as_ref().is_some_and(|r| to < r.total) {
            self.step_to(Target::Step(to), session, worker);
        }
    }

    /// The current opcode's bytes, to mark in the hex view.
    pub fn op(&self) -> Option<(ExtId, Range)> {
        self.result.as_ref().map(|r| (self.ext, r.op))
    }

    /// The title of its pane.
    pub fn title(&self) -> String {
        match &self.result {
            Some(r) => format!(
                " Pickle: {}  {}/{} ",
                pparse::name::escape_str(&self.name),
                r.step + 1,
                r.total
            ),
            None => format!(" Pickle: {} ", pparse::name::escape_str(&self.name)),
        }
    }

    /// The opcode on the listing's first row when it has `rows` rows: the
    /// current one is kept in the middle third.
    fn first_row(&self, rows: usize) -> usize {
        self.result.as_ref().map_or(0, |r| {
            let at = r.step - r.first;
            r.first
                + at.saturating_sub(rows / 3)
                    .min(r.listing.len().saturating_sub(rows))
        })
    }
}

impl Component for Stepper {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        Stepper::on_key(self, a, cx.rows, cx.session, cx.worker);
        Reply::default()
    }
    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        Stepper::click(self, at.y as usize, cx.rows, cx.session, cx.worker);
        Reply::default()
    }
    fn on_done(&mut self, d: Payload, _cx: &Cx) -> Result<Reply, Payload> {
        let r = d.downcast::<StepResult>()?;
        Ok(Reply {
            cursor: self.on_stepped(*r),
            ..Reply::default()
        })
    }
    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let inner = panel::frame(look, self.title(), buf, area);
        draw_listing(look.theme, self, buf, inner);
    }
}

impl SidePanel for Stepper {
    fn address(&self) -> To {
        To::Stepper
    }
    fn title(&self) -> String {
        Stepper::title(self)
    }
    fn inspector<'a>(&self, th: &Theme, _tree: &Tree, width: u16) -> (&'static str, Vec<Line<'a>>) {
        (" Pickle VM (never executes) ", state_lines(th, self, width))
    }
    fn marked(&self) -> Option<(ExtId, Range)> {
        self.op()
    }
}

/// The opcode listing, drawn in place of the node tree.
fn draw_listing(th: &Theme, s: &Stepper, buf: &mut Buffer, inner: Rect) {
    let Some(r) = &s.result else {
        buf.set_stringn(inner.x, inner.y, "stepping…", inner.width as usize, th.dim);
        return;
    };
    if r.total == 0 {
        let msg = r.end.as_deref().unwrap_or("no opcodes");
        buf.set_stringn(inner.x, inner.y, msg, inner.width as usize, th.corrupt);
        return;
    }
    let rows = inner.height as usize;
    let top = s.first_row(rows) - r.first;
    for (row, (i, (pos, text))) in r
        .listing
        .iter()
        .enumerate()
        .skip(top)
        .take(rows)
        .enumerate()
    {
        let y = inner.y + row as u16;
        let idx = r.first + i;
        let style = if idx == r.step {
            th.row_selected
        } else if idx > r.step {
            th.dim
        } else {
            ratatui::style::Style::default()
        };
        let text = pparse::name::escape_str(text);
        let s = format!("{pos:>8x} {text}");
        let (end, _) = buf.set_stringn(inner.x, y, &s, inner.width as usize, style);
        if idx == r.step && end < inner.x + inner.width {
            let pad = (inner.x + inner.width - end) as usize;
            buf.set_stringn(end, y, " ".repeat(pad), pad, style);
        }
    }
}

/// The machine's state, drawn in the inspector.
fn state_lines<'a>(th: &Theme, s: &Stepper, width: u16) -> Vec<Line<'a>> {
    let w = width.saturating_sub(4) as usize;
    let clip = |t: &str| -> String { pparse::name::escape_str(t).chars().take(w).collect() };
    let mut lines = Vec::new();
    let Some(r) = &s.result else {
        return lines;
    };
    let label = |t: String| Span::styled(t, th.title);
    lines.push(Line::from(vec![
        label(format!("opcode {} of {}", r.step + 1, r.total)),
        Span::styled(format!("  at {:#x}..{:#x}", r.op.start, r.op.end), th.dim),
    ]));
    if let Some(e) = &r.end {
        lines.push(Line::from(Span::styled(clip(e), th.corrupt)));
    }
    for p in r.problems.iter().rev().take(3) {
        lines.push(Line::from(Span::styled(clip(p), th.corrupt)));
    }
    lines.push(Line::from(label(format!("stack ({}, top first)", r.depth))));
    let hidden = r.depth - r.stack.len();
    for (i, x) in r.stack.iter().enumerate().rev() {
        let n = hidden + i;
        lines.push(Line::from(vec![
            Span::styled(format!("{n:>4} "), th.dim),
            Span::raw(clip(x)),
        ]));
    }
    if hidden > 0 {
        lines.push(Line::from(Span::styled(
            format!("     … {hidden} below"),
            th.dim,
        )));
    }
    if !r.meta.is_empty() {
        lines.push(Line::from(label(format!("metastack ({})", r.meta.len()))));
        // Each level is the stack a MARK set aside, innermost first: say
        // so, since a bare `[2]` reads as an index.
        for (k, (len, top)) in r.meta.iter().rev().enumerate() {
            let items = if *len == 1 { "item" } else { "items" };
            let shown = if top.is_empty() {
                String::new()
            } else {
                format!(", top: {}", top.join(", "))
            };
            let line = format!("  under MARK {}: {len} {items}{shown}", k + 1);
            lines.push(Line::from(Span::raw(clip(&line))));
        }
    }
    lines.push(Line::from(label(format!("memo ({})", r.memo_len))));
    for (k, v) in &r.memo {
        lines.push(Line::from(vec![
            Span::styled(format!("{k:>6}: "), th.dim),
            Span::raw(clip(v)),
        ]));
    }
    lines
}
