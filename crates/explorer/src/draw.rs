//! Drawing the explorer: every pane draws itself from `&self` into the
//! areas [`App::prepare`] laid out; this puts them together with the status
//! bar and the help. Only what is on screen is built, and nothing changes:
//! the app is borrowed immutably.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use super::app::{App, Overlay, PromptKind};
use super::keys::HELP;
use super::layout::Pane;
use super::panel::{self, Component, Look};
use pparse::extraction::Tree;
use pparse::name::escape_str;
use pparse::util::{human, thousands};

/// Draws the whole screen, as prepared by [`App::prepare`].
pub fn draw(app: &App, f: &mut Frame) {
    let area = f.area();
    let l = app.layout;
    let t = app.session.tree();
    let look = |pane: Option<Pane>| Look {
        theme: &app.theme,
        tree: &t,
        focused: pane == Some(app.focus),
    };
    let buf = f.buffer_mut();
    // A zoomed layout leaves the other panes empty: they draw nothing.
    if !l.exts.is_empty() {
        app.exts.draw(&look(Some(Pane::Extractions)), buf, l.exts);
    }
    let side = app.panel.side();
    match side {
        _ if l.nodes.is_empty() => {}
        Some(p) => p.draw(&look(Some(Pane::Nodes)), buf, l.nodes),
        None => app.nodes.draw(&look(Some(Pane::Nodes)), buf, l.nodes),
    }
    let main = look(Some(Pane::Hex));
    if !l.hex.is_empty() && !side.is_some_and(|p| p.draw_main(&main, buf, l.hex)) {
        app.hex.draw(&main, buf, l.hex);
    }
    match side {
        _ if l.inspector.is_empty() => {}
        Some(p) => {
            let (title, lines) = p.inspector(&app.theme, &t, l.inspector.width);
            let inner = panel::frame(&look(None), title.into(), buf, l.inspector);
            let w = inner.width as usize;
            let lines: Vec<Line> = lines.into_iter().map(|l| panel::fit(l, w)).collect();
            Paragraph::new(lines).render(inner, buf);
        }
        None => app.inspector.draw(&look(None), buf, l.inspector),
    }
    status_bar(app, &t, f, l.status);
    if app.overlay == Overlay::Help {
        help(app, f, area);
    }
}

fn status_bar(app: &App, t: &Tree, f: &mut Frame, area: Rect) {
    if app.overlay == Overlay::Copy {
        let line = Line::from(vec![
            Span::styled(" copy: ", app.theme.title),
            Span::raw("p the PATH · o the offset · v the value · Esc nothing"),
        ]);
        f.render_widget(Paragraph::new(line).style(app.theme.bar), area);
        return;
    }
    if let Overlay::Prompt { kind, input } = &app.overlay {
        let what = match kind {
            PromptKind::Goto => "go to offset (0x1f, 4096, +16, -0x10): ",
            PromptKind::Export => "write the tensor as .npy to (a new file): ",
            PromptKind::Save => "save to (a new file; Ctrl-U clears): ",
            PromptKind::Query => "jq filter (. the selection, members, nodes; Ctrl-U clears): ",
            PromptKind::Search => match app.focus {
                Pane::Hex => "search bytes (1f 8b) or text: ",
                _ => "search names and values: ",
            },
        };
        let line = Line::from(vec![
            Span::styled(what, app.theme.title),
            Span::raw(escape_str(input)),
            Span::styled("█", app.theme.dim),
        ]);
        f.render_widget(Paragraph::new(line).style(app.theme.bar), area);
        return;
    }
    let root = t.root();
    let mut parts: Vec<Span> = vec![Span::styled(
        format!(" {} ", root.display_name()),
        app.theme.title,
    )];
    parts.push(Span::raw(format!("│ {} ", root.parser().unwrap_or("raw"))));
    let p = root.progress();
    let total = p.total.unwrap_or(root.size()).max(1);
    if app.session.is_finished() {
        parts.push(Span::raw("│ parsed "));
    } else {
        parts.push(Span::raw(format!(
            "│ parsing {:.0}% {}/s ",
            p.done as f64 * 100.0 / total as f64,
            human(app.meter.rate as u64)
        )));
    }
    parts.push(Span::raw(format!(
        "│ {} extractions ",
        thousands(t.len() as u64)
    )));
    if app.meter.rss > 0 {
        parts.push(Span::raw(format!("│ mem {} ", human(app.meter.rss))));
    }
    let damaged = t.damage_count;
    // Damage many members inherit from one cause says so.
    let causes = match app.causes {
        (seen, n, _) if seen == damaged && n > 0 && n < damaged => {
            format!(", {n} cause{}", if n == 1 { "" } else { "s" })
        }
        _ => String::new(),
    };
    parts.push(Span::styled(
        format!("│ {damaged} damaged{causes} "),
        if damaged > 0 {
            app.theme.corrupt
        } else {
            app.theme.complete
        },
    ));
    if let Some((done, total)) = app.search.progress() {
        parts.push(Span::raw(format!(
            "│ searching {:.0}% ",
            done as f64 * 100.0 / total.max(1) as f64
        )));
    }
    if let Some(s) = app.saving {
        parts.push(Span::raw(format!(
            "│ saving {:.0}% ",
            s.done as f64 * 100.0 / s.total.max(1) as f64
        )));
    }
    // What the user just did is answered, and the way to the help is
    // never cut: the figures before them give way first.
    let hint = Span::styled("│ ? help  q quit", app.theme.dim);
    let message = app
        .message
        .as_ref()
        .map(|m| Span::styled(format!("│ {} ", escape_str(m)), app.theme.title));
    let width = area.width as usize;
    let hint_w = hint.content.chars().count();
    let message_w = message.as_ref().map_or(0, |m| m.content.chars().count());
    let mut line = if hint_w + message_w < width {
        panel::fit(Line::from(parts), width - hint_w - message_w)
    } else {
        Line::default()
    };
    if let Some(m) = message {
        let room = width.saturating_sub(hint_w + line.width());
        line.spans.extend(panel::fit(Line::from(m), room).spans);
    }
    line.spans.push(hint);
    let line = panel::fit(line, width);
    f.render_widget(Paragraph::new(line).style(app.theme.bar), area);
}

/// The lines of the help in `width` columns: each key with what it does,
/// wrapped under it rather than cut.
pub fn help_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let key_w = 17usize;
    let text_w = (width as usize).saturating_sub(key_w + 1).max(10);
    let mut lines = Vec::new();
    for (k, _, what) in HELP {
        let mut rows: Vec<String> = Vec::new();
        let mut cur = String::new();
        for word in what.split(' ') {
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > text_w {
                rows.push(std::mem::take(&mut cur));
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        rows.push(cur);
        for (i, r) in rows.into_iter().enumerate() {
            let key = if i == 0 { *k } else { "" };
            lines.push(Line::from(vec![
                Span::styled(format!(" {key:<16}"), app.theme.title),
                Span::raw(r),
            ]));
        }
    }
    lines
}

fn help(app: &App, f: &mut Frame, area: Rect) {
    let w = 80.min(area.width);
    let lines = help_lines(app, w.saturating_sub(2));
    let h = (lines.len() as u16 + 3)
        .min(area.height.saturating_sub(1))
        .max(3);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height.saturating_sub(1) - h) / 2,
        w,
        h,
    );
    // One row for the footer, the rest for keys.
    let rows = (h as usize).saturating_sub(3).max(1);
    let top = app.help_top.min(lines.len().saturating_sub(rows));
    let end = (top + rows).min(lines.len());
    let more = if lines.len() > rows {
        format!(
            " lines {}–{} of {} · ↑ ↓ PgUp PgDn scroll · Esc closes",
            top + 1,
            end,
            lines.len()
        )
    } else {
        " Esc, ? or q closes this help".into()
    };
    let mut shown: Vec<Line> = lines[top..end].to_vec();
    shown.push(panel::fit(
        Line::from(Span::styled(more, app.theme.dim)),
        w.saturating_sub(2) as usize,
    ));
    f.render_widget(Clear, r);
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme.border_focused)
        .title(Span::styled(" Keys ", app.theme.title));
    f.render_widget(Paragraph::new(shown).block(b), r);
}
