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
use crate::extraction::Tree;
use crate::name::escape_str;
use crate::util::{human, thousands};

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
    app.exts.draw(&look(Some(Pane::Extractions)), buf, l.exts);
    let side = app.panel.side();
    match side {
        Some(p) => p.draw(&look(Some(Pane::Nodes)), buf, l.nodes),
        None => app.nodes.draw(&look(Some(Pane::Nodes)), buf, l.nodes),
    }
    let main = look(Some(Pane::Hex));
    if !side.is_some_and(|p| p.draw_main(&main, buf, l.hex)) {
        app.hex.draw(&main, buf, l.hex);
    }
    match side {
        Some(p) => {
            let (title, lines) = p.inspector(&app.theme, &t, l.inspector.width);
            let inner = panel::frame(&look(None), title.into(), buf, l.inspector);
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
    if let Overlay::Prompt { kind, input } = &app.overlay {
        let what = match kind {
            PromptKind::Goto => "go to offset (0x1f, 4096, +16, -0x10): ",
            PromptKind::Export => "write the tensor as .npy to: ",
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
    parts.push(Span::raw(format!("│ {} ", root.parser.unwrap_or("raw"))));
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
    parts.push(Span::styled(
        format!("│ {damaged} damaged "),
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
    if let Some(m) = &app.message {
        parts.push(Span::styled(
            format!("│ {} ", escape_str(m)),
            app.theme.title,
        ));
    }
    parts.push(Span::styled("│ ? help  q quit", app.theme.dim));
    f.render_widget(Paragraph::new(Line::from(parts)).style(app.theme.bar), area);
}

fn help(app: &App, f: &mut Frame, area: Rect) {
    let w = 76.min(area.width);
    let h = (HELP.len() as u16 + 4).min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, _, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<16}"), app.theme.title),
                Span::raw(*what),
            ])
        })
        .chain([Line::from(Span::styled(
            " Esc, ? or q closes this help",
            app.theme.dim,
        ))])
        .collect();
    f.render_widget(Clear, r);
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme.border_focused)
        .title(Span::styled(" Keys ", app.theme.title));
    f.render_widget(Paragraph::new(lines).block(b), r);
}
