//! The pickle stepper panel (`p`): the VM's state after any opcode, forward
//! and back. The replay itself is [`crate::view::stepper`]; this is the
//! panel that asks for steps and draws what comes back.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::app::{App, Pane, Panel};
use super::keys::Action;
use super::worker::Job;
use crate::data::Range;
use crate::extraction::ExtId;
use crate::view::stepper::{StepCache, StepRequest, StepResult, Target};

/// The stepper's state in the explorer.
#[derive(Clone, Debug)]
pub struct Stepper {
    pub ext: ExtId,
    pub range: Range,
    /// Name of the pickle (for the pane title).
    pub name: String,
    /// The step asked for last.
    pub step: usize,
    pub generation: u64,
    pub result: Option<StepResult>,
    /// The opcode on the listing's first row, as last drawn.
    pub first_row: usize,
}

impl App {
    /// Opens the stepper on the selected pickle (or the extraction's first),
    /// or closes it.
    pub fn toggle_stepper(&mut self) {
        if matches!(self.panel, Panel::Stepper(_)) {
            self.panel = Panel::None;
            return;
        }
        let ext = self.ext();
        let found = {
            let t = self.session.tree();
            let Some(e) = t.get(ext) else { return };
            let sel = self
                .views
                .get(&ext)
                .and_then(|v| v.nodes.selected.as_ref())
                .and_then(|p| p.first().copied());
            let is_pickle = |i: &usize| e.nodes.get(*i).is_some_and(|n| n.kind == "pickle");
            sel.filter(is_pickle)
                .or_else(|| (0..e.nodes.len()).find(is_pickle))
                .map(|i| {
                    let n = &e.nodes[i];
                    // A pickle still being read ends where the bytes do.
                    let end = if n.range.is_empty() {
                        e.available()
                    } else {
                        n.range.end
                    };
                    (
                        Range::new(n.range.start, end),
                        format!("{} {}", e.display_name(), n.name),
                    )
                })
        };
        let Some((range, name)) = found else {
            self.say("no pickle here: select a .pkl or pickle extraction, then press p");
            return;
        };
        if matches!(self.panel, Panel::Metrics(_)) {
            self.close_panel();
        }
        self.panel = Panel::Stepper(Box::new(Stepper {
            ext,
            range,
            name,
            step: 0,
            generation: 0,
            result: None,
            first_row: 0,
        }));
        self.focus = Pane::Nodes;
        self.step_to(Target::Step(0));
    }

    /// Asks the worker for the state at `target`.
    pub fn step_to(&mut self, target: Target) {
        let Panel::Stepper(s) = &mut self.panel else {
            return;
        };
        let Some(data) = self.session.tree().get(s.ext).map(|e| e.data()) else {
            return;
        };
        s.generation += 1;
        if let Target::Step(n) = target {
            s.step = n;
        }
        let req = StepRequest {
            ext: s.ext,
            data,
            range: s.range,
            target,
            generation: s.generation,
        };
        self.worker
            .submit(Job::newest_of("step", move |_, scratch| {
                let cache = super::worker::scratch::<StepCache>(scratch);
                Some(Box::new(req.run(cache)))
            }));
    }

    pub fn stepper_key(&mut self, a: Action) {
        let Panel::Stepper(s) = &self.panel else {
            return;
        };
        let page = self.height(Pane::Nodes);
        let total = s.result.as_ref().map_or(usize::MAX, |r| r.total.max(1));
        let cur = s.step;
        let to = match a {
            Action::Down | Action::Right => cur + 1,
            Action::Up | Action::Left => cur.saturating_sub(1),
            Action::PageDown => cur + page,
            Action::PageUp => cur.saturating_sub(page),
            Action::Home => 0,
            Action::End => usize::MAX,
            _ => return,
        };
        let to = to.min(total - 1);
        if to != cur {
            self.step_to(Target::Step(to));
        }
    }

    pub fn on_stepped(&mut self, r: StepResult) {
        let Panel::Stepper(s) = &mut self.panel else {
            return;
        };
        if r.generation != s.generation {
            return;
        }
        s.step = r.step;
        let (ext, start) = (r.ext, r.op.start);
        s.result = Some(r);
        if ext == self.ext() {
            self.set_cursor(start, false);
        }
    }

    /// The current opcode's bytes, to mark in the hex view.
    pub fn stepper_op(&self) -> Option<(ExtId, Range)> {
        match &self.panel {
            Panel::Stepper(s) => s.result.as_ref().map(|r| (s.ext, r.op)),
            _ => None,
        }
    }
}

/// The opcode listing, drawn in place of the node tree.
pub fn draw_listing(app: &App, s: &mut Stepper, buf: &mut Buffer, area: Rect) {
    let th = &app.theme;
    let inner = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
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
    // Keep the current opcode in the middle third.
    let at = r.step - r.first;
    let top = at
        .saturating_sub(rows / 3)
        .min(r.listing.len().saturating_sub(rows));
    s.first_row = r.first + top;
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
        let text = crate::name::escape_str(text);
        let s = format!("{pos:>8x} {text}");
        let (end, _) = buf.set_stringn(inner.x, y, &s, inner.width as usize, style);
        if idx == r.step && end < inner.x + inner.width {
            let pad = (inner.x + inner.width - end) as usize;
            buf.set_stringn(end, y, " ".repeat(pad), pad, style);
        }
    }
}

/// The machine's state, drawn in the inspector.
pub fn state_lines<'a>(app: &App, s: &Stepper, width: u16) -> Vec<Line<'a>> {
    let th = &app.theme;
    let w = width.saturating_sub(4) as usize;
    let clip = |t: &str| -> String { crate::name::escape_str(t).chars().take(w).collect() };
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
        for (len, top) in r.meta.iter().rev() {
            let shown = top.join(", ");
            lines.push(Line::from(Span::raw(clip(&format!("  [{len}] {shown}")))));
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
