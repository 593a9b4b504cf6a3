//! Drawing the explorer. Only what is on screen is built: tree rows come
//! from the virtualised views, hex cells are written straight into the
//! buffer.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Direction, Layout as Split, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::app::PAGE;
use super::app::{App, Layout, Overlay, Pane, Panel, PromptKind};
use super::hexgrid::{self, HexGrid};
use super::keys::HELP;
use super::models::{Exts, Nodes};
use super::readings::readings;
use super::text;
use crate::data::{Range, file_offset};
use crate::extraction::{EntryKind, ExtId, Phase};
use crate::name::escape_str;
use crate::node::Children;
use crate::status::Status;
use crate::util::{human, thousands};

/// Draws the whole screen.
pub fn draw(app: &mut App, f: &mut Frame) {
    let area = f.area();
    let rows = Split::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Min(3), Constraint::Length(1)])
        .split(area);
    let cols = Split::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(app.split), Constraint::Min(10)])
        .split(rows[0]);
    let left = Split::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Percentage(40), Constraint::Percentage(60)])
        .split(cols[0]);
    // The stepper's stack and a tensor's statistics need room.
    let insp_h = match app.panel {
        Panel::None => (cols[1].height * 2 / 5).clamp(6.min(cols[1].height), 16),
        // The plot takes the room; its figures need a few lines.
        Panel::Metrics(_) => 6.min(cols[1].height / 2),
        _ => cols[1].height / 2,
    };
    let right = Split::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Min(3), Constraint::Length(insp_h)])
        .split(cols[1]);
    let inner_w = right[0].width.saturating_sub(2) as u64;
    let wide = app
        .session
        .tree()
        .get(app.ext())
        .is_some_and(|e| e.available() > u32::MAX as u64);
    let offw = if wide { 12 } else { 8 };
    let need = |bpr: u64| hexgrid::row_width(offw, bpr);
    let bpr = [32, 16, 8, 4]
        .into_iter()
        .find(|&b| inner_w >= need(b))
        .unwrap_or(4);
    app.layout = Layout {
        exts: left[0],
        nodes: left[1],
        hex: right[0],
        inspector: right[1],
        status: rows[1],
        split_x: cols[1]
            .x
            .saturating_sub(1)
            .max(cols[0].x + cols[0].width.saturating_sub(1)),
        bpr,
    };
    ext_pane(app, f.buffer_mut(), left[0]);
    node_pane(app, f.buffer_mut(), left[1]);
    if let Panel::Metrics(p) = &app.panel {
        super::metrics::draw_chart(
            &app.theme,
            app.focus == Pane::Hex,
            p,
            f.buffer_mut(),
            right[0],
        );
    } else if app.text_mode {
        text_pane(app, f.buffer_mut(), right[0]);
    } else {
        hex_pane(app, f.buffer_mut(), right[0]);
    }
    inspector(app, f, right[1]);
    status_bar(app, f, rows[1]);
    if app.overlay == Overlay::Help {
        help(app, f, area);
    }
}

fn block<'a>(app: &App, pane: Option<Pane>, title: String) -> Block<'a> {
    let focused = pane == Some(app.focus);
    Block::default()
        .borders(Borders::ALL)
        .border_style(if focused {
            app.theme.border_focused
        } else {
            app.theme.border
        })
        .title(Span::styled(title, app.theme.title))
}

/// Writes `s` at (x, y) clipped to `width` columns.
fn put(buf: &mut Buffer, x: u16, y: u16, width: u16, s: &str, style: Style) -> u16 {
    if width == 0 {
        return 0;
    }
    let (end, _) = buf.set_stringn(x, y, s, width as usize, style);
    end - x
}

fn status_style(app: &App, s: Status) -> Style {
    app.theme.status(s)
}

fn ext_pane(app: &mut App, buf: &mut Buffer, area: Rect) {
    let session = app.session.clone();
    let t = session.tree();
    let m = Exts(&t);
    let total = app.exts.count(&m, None);
    let title = format!(" Extractions ({}) ", thousands(t.len() as u64));
    let b = block(app, Some(Pane::Extractions), title);
    let inner = b.inner(area);
    ratatui::widgets::Widget::render(b, area, buf);
    let h = inner.height as usize;
    app.exts.offset = app.exts.offset.min(total.saturating_sub(h.max(1)));
    let cursor = app.exts.cursor(&m);
    if cursor < app.exts.offset || cursor >= app.exts.offset + h {
        app.exts.scroll_to(cursor, h);
    }
    for i in 0..h {
        let row = app.exts.offset + i;
        let Some((id, depth)) = app.exts.at(&m, row) else {
            break;
        };
        let e = &t.exts[id];
        let y = inner.y + i as u16;
        let selected = app.exts.selected == Some(id);
        let base = if selected {
            app.theme.row_selected
        } else {
            Style::new()
        };
        buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
        let mut x = inner.x;
        let mut w = inner.width;
        let indent = "  ".repeat(depth.min(40));
        let marker = if e.children.is_empty() {
            "  "
        } else if app.exts.is_expanded(&id) {
            "▾ "
        } else {
            "▸ "
        };
        for (s, st) in [(indent.as_str(), Style::new()), (marker, app.theme.dim)] {
            let n = put(buf, x, y, w, s, st.patch(base));
            x += n;
            w -= n;
        }
        let status = t.status_of(id);
        let name_style = if status == Status::Complete {
            app.theme.text
        } else {
            status_style(app, status)
        };
        let n = put(buf, x, y, w, &e.display_name(), name_style.patch(base));
        x += n;
        w -= n;
        let mut detail = String::new();
        if let Some(p) = e.parser {
            detail.push_str(&format!("  [{p}]"));
        }
        match &e.kind {
            EntryKind::Dir => detail.push_str("  dir"),
            EntryKind::Symlink(t) => detail.push_str(&format!("  -> {t}")),
            EntryKind::HardLink(t) => detail.push_str(&format!("  link {t}")),
            EntryKind::Other(what) => detail.push_str(&format!("  {what}")),
            _ => detail.push_str(&format!("  {}", human(e.size()))),
        }
        if e.phase == Phase::Parsing || e.phase == Phase::Waiting && !e.is_final() {
            detail.push_str("  …");
        }
        if status != Status::Complete {
            detail.push_str(&format!("  {}", status.as_str()));
        }
        put(buf, x, y, w, &detail, app.theme.dim.patch(base));
    }
}

fn node_pane(app: &mut App, buf: &mut Buffer, area: Rect) {
    let Some(p) = app.panel.side() else {
        return node_tree(app, buf, area);
    };
    let b = block(app, Some(Pane::Nodes), p.title());
    let inner = b.inner(area);
    ratatui::widgets::Widget::render(b, area, buf);
    p.draw(&app.theme, buf, inner);
}

fn node_tree(app: &mut App, buf: &mut Buffer, area: Rect) {
    let ext = app.ext();
    let session = app.session.clone();
    let t = session.tree();
    let Some(e) = t.get(ext) else { return };
    let m = Nodes(&e.nodes);
    let title = format!(" Nodes: {} ", e.display_name());
    let b = block(app, Some(Pane::Nodes), title);
    let inner = b.inner(area);
    ratatui::widgets::Widget::render(b, area, buf);
    let theme = app.theme.clone();
    let loading = &app.loading;
    let v = &mut app.views.entry(ext).or_default().nodes;
    let h = inner.height as usize;
    let total = v.count(&m, None);
    if total == 0 {
        let msg = match e.phase {
            Phase::Leaf => "no parser recognised these bytes (raw data)",
            Phase::Waiting => "waiting for bytes…",
            _ if e.parser.is_some() => "no structure found yet…",
            _ => "",
        };
        put(
            buf,
            inner.x + 1,
            inner.y,
            inner.width.saturating_sub(1),
            msg,
            theme.dim,
        );
        return;
    }
    v.offset = v.offset.min(total.saturating_sub(h.max(1)));
    let cursor = v.cursor(&m);
    if cursor < v.offset || cursor >= v.offset + h {
        v.scroll_to(cursor, h);
    }
    for i in 0..h {
        let Some((path, depth)) = v.at(&m, v.offset + i) else {
            break;
        };
        let Some(n) = m.get(&path) else { break };
        let y = inner.y + i as u16;
        let selected = v.selected.as_ref() == Some(&path);
        let base = if selected {
            theme.row_selected
        } else {
            Style::new()
        };
        buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
        let mut x = inner.x;
        let mut w = inner.width;
        let marker = if loading.contains(&(ext, path.clone())) {
            "⋯ "
        } else {
            match (&n.children, v.is_expanded(&path)) {
                (Children::Leaf, _) => "  ",
                (Children::Loaded(c), _) if c.is_empty() => "  ",
                (_, true) => "▾ ",
                _ => "▸ ",
            }
        };
        let indent = "  ".repeat(depth.min(40));
        for (s, st) in [(indent.as_str(), Style::new()), (marker, theme.dim)] {
            let k = put(buf, x, y, w, s, st.patch(base));
            x += k;
            w -= k;
        }
        let name_style = match n.status() {
            Status::Complete => theme.text,
            s => theme.status(s),
        };
        let k = put(buf, x, y, w, &n.name, name_style.patch(base));
        x += k;
        w -= k;
        let mut detail = format!("  {}", n.kind);
        if let Some(val) = &n.value {
            detail.push_str(&format!("  {val}"));
        }
        if loading.contains(&(ext, path.clone())) {
            detail.push_str("  loading…");
        }
        put(buf, x, y, w, &detail, theme.dim.patch(base));
    }
}

/// Background of a byte: cursor, damage, selection and its children,
/// bytes no node covers.
struct Marks {
    selected: Option<Range>,
    children: Vec<Range>,
    damage: Vec<Range>,
    covered: Vec<Range>,
    parsed: bool,
}

impl Marks {
    fn bg(&self, app: &App, off: u64) -> Option<ratatui::style::Color> {
        if self
            .damage
            .iter()
            .any(|r| r.contains(off) || (r.is_empty() && r.start == off))
        {
            return Some(app.theme.damage);
        }
        if let Some(s) = self.selected
            && s.contains(off)
        {
            // Every other child is set apart.
            return match self.children.iter().position(|c| c.contains(off)) {
                Some(i) if i % 2 == 1 => Some(app.theme.child),
                _ => Some(app.theme.selection),
            };
        }
        if self.parsed && !self.covered.iter().any(|r| r.contains(off)) {
            return Some(app.theme.unparsed);
        }
        None
    }
}

/// What is marked in `[start, end)` of the selected extraction.
fn marks(app: &mut App, start: u64, end: u64) -> Marks {
    let ext = app.ext();
    let session = app.session.clone();
    let t = session.tree();
    let e = &t.exts[ext];
    let window = Range::new(start, end);
    let sel_path = app.views.get(&ext).and_then(|v| v.nodes.selected.clone());
    let m = Nodes(&e.nodes);
    let sel = sel_path.as_ref().and_then(|p| m.get(p));
    let mut damage: Vec<Range> = e
        .damage
        .iter()
        .map(|d| d.range)
        .filter(|r| r.overlaps(&window) || (r.is_empty() && window.contains(r.start)))
        .collect();
    let sorted = app.sorted_nodes(ext, &e.nodes);
    let lo = if sorted {
        e.nodes
            .partition_point(|n| n.range.end <= start)
            .saturating_sub(1)
    } else {
        0
    };
    let mut covered = Vec::new();
    for n in &e.nodes[lo..] {
        if sorted && n.range.start >= end {
            break;
        }
        if n.range.overlaps(&window) {
            covered.push(n.range);
            if let Some(d) = &n.damage {
                damage.push(if d.range.is_empty() { n.range } else { d.range });
            }
            for c in n.loaded_children() {
                if let Some(d) = &c.damage {
                    damage.push(if d.range.is_empty() { c.range } else { d.range });
                }
            }
        }
    }
    // The stepper's opcode or the selected tensor, else the selected node.
    let panel = app.panel.marked().filter(|(x, _)| *x == ext);
    if let Some((_, r)) = panel {
        return Marks {
            selected: Some(r),
            children: Vec::new(),
            damage,
            covered,
            parsed: e.parser.is_some() && !e.nodes.is_empty(),
        };
    }
    Marks {
        selected: sel.map(|n| n.range),
        children: sel.map_or(Vec::new(), |n| {
            n.loaded_children().iter().map(|c| c.range).collect()
        }),
        damage,
        covered,
        parsed: e.parser.is_some() && !e.nodes.is_empty(),
    }
}

fn hex_pane(app: &mut App, buf: &mut Buffer, area: Rect) {
    let ext = app.ext();
    let (data, name, describe) = {
        let t = app.session.tree();
        let e = &t.exts[ext];
        (e.data(), e.display_name(), e.data().describe())
    };
    let len = data.available();
    let bpr = app.layout.bpr;
    let v = app.views.entry(ext).or_default().clone();
    let title = format!(
        " {name} ({describe}, {} bytes{}) ",
        thousands(len),
        if data.is_final() { "" } else { ", growing" }
    );
    let b = block(app, Some(Pane::Hex), title);
    let inner = b.inner(area);
    ratatui::widgets::Widget::render(b, area, buf);
    let rows = inner.height as u64;
    let start = v.top;
    let end = (start + rows * bpr).min(len);
    let marks = marks(app, start, end);
    let wide = len > u32::MAX as u64;
    let grid = HexGrid::new(inner.x, len, bpr);
    let mut page_cache: Option<(u64, std::sync::Arc<Vec<u8>>)> = None;
    for r in 0..rows {
        let row_off = start + r * bpr;
        if row_off >= len && !(len == 0 && r == 0) {
            break;
        }
        let y = inner.y + r as u16;
        let off_text = if wide {
            format!("{row_off:012x}")
        } else {
            format!("{row_off:08x}")
        };
        put(buf, inner.x, y, inner.width, &off_text, app.theme.offset);
        let ascii_x = grid.ascii_x;
        for i in 0..bpr {
            let off = row_off + i;
            if off >= len {
                break;
            }
            let page = off / PAGE;
            if page_cache.as_ref().is_none_or(|(p, _)| *p != page) {
                page_cache = app.page(ext, &data, page).map(|b| (page, b));
            }
            let byte = page_cache
                .as_ref()
                .filter(|(p, _)| *p == page)
                .and_then(|(_, b)| b.get((off - page * PAGE) as usize).copied());
            let hx = grid.hex_col(i);
            let ax = grid.text_col(i);
            if hx + 2 > inner.x + inner.width {
                continue;
            }
            let mut style = match byte {
                Some(b) => app.theme.byte(b),
                None => app.theme.dim,
            };
            if let Some(bg) = marks.bg(app, off) {
                style = style.bg(bg);
            }
            if off == v.cursor {
                style = if app.theme.mono {
                    style.add_modifier(Modifier::REVERSED)
                } else {
                    style.bg(app.theme.cursor).fg(ratatui::style::Color::Black)
                };
            }
            let (h, a) = match byte {
                Some(b) => (hex2(b), ascii(b)),
                None => ("··", '·'),
            };
            buf.set_string(hx, y, h, style);
            if ax < inner.x + inner.width {
                buf.set_string(ax, y, a.to_string(), style);
            }
        }
        if ascii_x < inner.x + inner.width {
            buf.set_string(ascii_x, y, "│", app.theme.dim);
        }
    }
    if len == 0 {
        put(
            buf,
            inner.x,
            inner.y,
            inner.width,
            "(no bytes)",
            app.theme.dim,
        );
    }
}

/// `00`..`ff`, so a frame does not format every byte.
static HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [DIGITS[i >> 4], DIGITS[i & 15]];
        i += 1;
    }
    t
};

fn hex2(b: u8) -> &'static str {
    std::str::from_utf8(&HEX_PAIRS[b as usize]).unwrap_or("??")
}

fn ascii(b: u8) -> char {
    match b {
        0 => '⋄',
        b' ' | b'\t' | b'\n' | b'\r' => '_',
        0x21..=0x7e => b as char,
        0x01..=0x7f => '•',
        _ => '×',
    }
}

fn text_pane(app: &mut App, buf: &mut Buffer, area: Rect) {
    let ext = app.ext();
    let (len, name) = {
        let t = app.session.tree();
        let e = &t.exts[ext];
        (e.available(), e.display_name())
    };
    let top = app.view().text_top;
    let b = block(
        app,
        Some(Pane::Hex),
        format!(" {name} as text, from {top:#x} "),
    );
    let inner = b.inner(area);
    ratatui::widgets::Widget::render(b, area, buf);
    let rows = inner.height as usize;
    // Enough bytes for the screen: rows lines of up to a few screens each.
    let want = (rows as u64 * (inner.width as u64 + 1) * 4).clamp(4096, 1 << 20);
    let end = (top + want).min(len);
    let Some(bytes) = app.cached(ext, top, end) else {
        put(
            buf,
            inner.x,
            inner.y,
            inner.width,
            "reading…",
            app.theme.dim,
        );
        return;
    };
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').take(rows).collect();
    let shown: usize = lines.iter().map(|l| l.len()).sum();
    app.want_highlight(ext, top, top + shown as u64);
    let hl = app
        .highlight
        .as_ref()
        .filter(|h| h.ext == ext && h.first == top);
    for (i, raw) in lines.iter().enumerate() {
        let y = inner.y + i as u16;
        match hl.and_then(|h| h.lines.get(i)) {
            Some(runs) if raw.len() <= text::LONG_LINE => {
                let mut x = inner.x;
                let mut w = inner.width;
                for (st, s) in runs {
                    let n = put(buf, x, y, w, s, *st);
                    x += n;
                    w -= n;
                    if w == 0 {
                        break;
                    }
                }
            }
            _ => {
                put(
                    buf,
                    inner.x,
                    y,
                    inner.width,
                    &text::display_line(raw),
                    app.theme.text,
                );
            }
        }
    }
}

fn inspector(app: &mut App, f: &mut Frame, area: Rect) {
    let Some(p) = app.panel.side() else {
        return byte_inspector(app, f, area);
    };
    let (title, lines) = p.inspector(&app.theme, &app.session.tree(), area.width);
    let b = block(app, None, title.into());
    f.render_widget(Paragraph::new(lines).block(b), area);
}

fn byte_inspector(app: &mut App, f: &mut Frame, area: Rect) {
    let ext = app.ext();
    let session = app.session.clone();
    let t = session.tree();
    let e = &t.exts[ext];
    let v = app.views.get(&ext).cloned().unwrap_or_default();
    let th = app.theme.clone();
    let th = &th;
    let mut lines: Vec<Line> = Vec::new();
    let label = |s: &str| Span::styled(format!("{s:<9}"), th.dim);
    let m = Nodes(&e.nodes);
    match v.nodes.selected.as_ref().and_then(|p| m.get(p)) {
        Some(n) => {
            lines.push(Line::from(vec![
                label("node"),
                Span::styled(n.name.to_string(), th.title),
                Span::styled(format!("  {}", n.kind), th.dim),
            ]));
            lines.push(Line::from(vec![
                label("range"),
                Span::raw(format!(
                    "{:#x}..{:#x} ({} bytes)",
                    n.range.start,
                    n.range.end,
                    thousands(n.range.len())
                )),
            ]));
            let st = n.status();
            let mut s = vec![
                label("status"),
                Span::styled(st.as_str(), status_style(app, st)),
            ];
            if let Some(d) = &n.damage {
                s.push(Span::raw(format!(": {}", d.reason)));
            }
            lines.push(Line::from(s));
            if let Some(val) = &n.value {
                lines.push(Line::from(vec![label("value"), Span::raw(val.to_string())]));
            }
        }
        None => {
            let st = t.status_of(ext);
            lines.push(Line::from(vec![
                label("extract"),
                Span::styled(e.display_name(), th.title),
                Span::styled(format!("  {}", e.kind.as_str()), th.dim),
            ]));
            let mut s = vec![
                label("status"),
                Span::styled(st.as_str(), status_style(app, st)),
            ];
            if let Some(d) = e.detail() {
                s.push(Span::raw(format!(": {d}")));
            }
            lines.push(Line::from(s));
            for note in e.notes().iter().take(3) {
                lines.push(Line::from(vec![label("note"), Span::raw(note.to_string())]));
            }
        }
    }
    drop(t);
    let c = v.cursor;
    let data = e_data(app, ext);
    let (phys, exact) = file_offset(&data, c);
    let here = if app.text_mode { v.text_top } else { c };
    lines.push(Line::from(vec![
        label("cursor"),
        Span::raw(format!("{here:#x} ({here})")),
        Span::styled(
            if ext == 0 {
                String::new()
            } else if exact {
                format!("  file offset {phys:#x}")
            } else {
                format!("  decoded; from file bytes near {phys:#x}")
            },
            th.dim,
        ),
    ]));
    if let Some(bytes) = app.cached(ext, c, c + 32) {
        let rs = readings(&bytes);
        let half = rs.len().div_ceil(2);
        for i in 0..half {
            let mut spans = Vec::new();
            for r in [rs.get(i), rs.get(i + half)].into_iter().flatten() {
                spans.push(Span::styled(format!("{:<8}", r.label), th.dim));
                let val = match &r.be {
                    Some(be) => format!("{} | {}", r.le, be),
                    None => r.le.clone(),
                };
                let w = (area.width.saturating_sub(2) as usize / 2).saturating_sub(10);
                let val: String = escape_str(&val).chars().take(w).collect();
                spans.push(Span::raw(format!("{val:<w$}  ")));
            }
            lines.push(Line::from(spans));
        }
    }
    let b = block(app, None, " Inspector (le | be) ".into());
    f.render_widget(Paragraph::new(lines).block(b), area);
}

fn e_data(app: &App, ext: ExtId) -> crate::data::Data {
    app.session.tree().exts[ext].data()
}

fn status_bar(app: &mut App, f: &mut Frame, area: Rect) {
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
    let t = app.session.tree();
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
            human(app.rate as u64)
        )));
    }
    parts.push(Span::raw(format!(
        "│ {} extractions ",
        thousands(t.len() as u64)
    )));
    if app.rss > 0 {
        parts.push(Span::raw(format!("│ mem {} ", human(app.rss))));
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
    drop(t);
    if let Some((done, total)) = app.search.progress {
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

#[cfg(test)]
mod tests {
    #[test]
    fn hex_table() {
        assert_eq!(super::hex2(0), "00");
        assert_eq!(super::hex2(0xab), "ab");
        assert_eq!(super::hex2(255), "ff");
    }
}
