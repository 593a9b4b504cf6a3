//! The bytes of the shown extraction, as hex or as highlighted text (`t`).
//!
//! Bytes come in pages read by the worker and cached here; a frame shows
//! what is cached and `prepare` asks for the rest, so drawing never reads
//! a file and never waits.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, put};
use crate::theme::Theme;
use crate::widgets::hexgrid::{self, HexGrid};
use crate::widgets::text::{self, HighlightJob, Highlighted};
use crate::worker::{Job, Payload, To};
use pparse::data::{Data, Range};
use pparse::extraction::ExtId;
use pparse::util::thousands;

/// Bytes per cached page.
pub const PAGE: u64 = 4096;
/// Most pages cached; past it the older half is dropped.
const MAX_PAGES: usize = 2048;
/// Bytes the inspector reads at the cursor.
pub const AT_CURSOR: u64 = 32;

/// A page of an extraction's bytes, read by the worker.
struct PageRead {
    ext: ExtId,
    page: u64,
    bytes: Arc<Vec<u8>>,
}

/// A cached page and when it was last used.
type PageEntry = (Arc<Vec<u8>>, u64);

/// Cached pages of extraction bytes.
#[derive(Default)]
struct Pages {
    map: HashMap<(ExtId, u64), PageEntry>,
    requested: HashSet<(ExtId, u64)>,
    tick: u64,
}

impl Pages {
    /// A cached page, marked as just used.
    fn get(&mut self, ext: ExtId, page: u64) -> Option<Arc<Vec<u8>>> {
        self.tick += 1;
        let t = self.tick;
        self.map.get_mut(&(ext, page)).map(|e| {
            e.1 = t;
            e.0.clone()
        })
    }

    fn peek(&self, ext: ExtId, page: u64) -> Option<&Arc<Vec<u8>>> {
        self.map.get(&(ext, page)).map(|e| &e.0)
    }

    fn put(&mut self, ext: ExtId, page: u64, bytes: Arc<Vec<u8>>) {
        self.requested.remove(&(ext, page));
        self.tick += 1;
        self.map.insert((ext, page), (bytes, self.tick));
        if self.map.len() > MAX_PAGES {
            let mut ticks: Vec<u64> = self.map.values().map(|v| v.1).collect();
            ticks.sort_unstable();
            let cut = ticks[ticks.len() / 2];
            self.map.retain(|_, v| v.1 > cut);
        }
    }

    /// Bytes `[start, end)` if every page is cached.
    fn read(&self, ext: ExtId, start: u64, end: u64) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(end.saturating_sub(start) as usize);
        for page in start / PAGE..end.div_ceil(PAGE) {
            let p = self.peek(ext, page)?;
            let p0 = page * PAGE;
            let s = start.max(p0) - p0;
            let e = (end.min(p0 + PAGE) - p0).min(p.len() as u64);
            if s < e {
                out.extend_from_slice(&p[s as usize..e as usize]);
            }
        }
        Some(out)
    }
}

/// Where the view stands in one extraction, kept when another is shown.
#[derive(Debug, Clone, Copy, Default)]
pub struct Place {
    /// The cursor (offset in the extraction's bytes).
    pub cursor: u64,
    /// Offset of the first hex row shown.
    pub top: u64,
    /// Offset of the first text line shown (a line start).
    pub text_top: u64,
    /// Where a byte range marked with `v` starts (it ends at the cursor).
    pub mark: Option<u64>,
}

impl Place {
    /// The marked bytes: from the mark to the cursor, both included.
    pub fn marked(&self) -> Option<Range> {
        let m = self.mark?;
        Some(Range::new(m.min(self.cursor), m.max(self.cursor) + 1))
    }
}

/// What other panes select in the bytes: the selected node and its
/// children, or what a side panel points at.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// The selected bytes.
    pub range: Option<Range>,
    /// Its children, every other one set apart.
    pub children: Vec<Range>,
}

/// Background of the bytes on screen: damage, selection and its children,
/// bytes no node covers.
#[derive(Debug, Clone, Default)]
struct Marks {
    selection: Selection,
    damage: Vec<Range>,
    /// Bytes that could not be known (after deflate damage): shown as `??`.
    unknown: Vec<Range>,
    covered: Vec<Range>,
    parsed: bool,
}

impl Marks {
    fn is_unknown(&self, off: u64) -> bool {
        self.unknown.iter().any(|r| r.contains(off))
    }

    fn bg(&self, th: &Theme, off: u64) -> Option<Color> {
        if self.is_unknown(off) {
            return Some(th.unknown);
        }
        if self
            .damage
            .iter()
            .any(|r| r.contains(off) || (r.is_empty() && r.start == off))
        {
            return Some(th.damage);
        }
        if let Some(s) = self.selection.range
            && s.contains(off)
        {
            let children = &self.selection.children;
            return match children.iter().position(|c| c.contains(off)) {
                Some(i) if i % 2 == 1 => Some(th.child),
                _ => Some(th.selection),
            };
        }
        if self.parsed && !self.covered.iter().any(|r| r.contains(off)) {
            return Some(th.unparsed);
        }
        None
    }

    /// In the text view: damage and the selection only (text that no node
    /// covers is the usual case there, not worth a colour).
    fn text_bg(&self, th: &Theme, off: u64) -> Option<Color> {
        self.bg(th, off)
            .filter(|c| *c != th.unparsed || !self.parsed)
    }
}

/// The hex and text pane.
#[derive(Default)]
pub struct HexPane {
    places: HashMap<ExtId, Place>,
    /// The extraction shown at the last `prepare`.
    ext: ExtId,
    pages: Pages,
    /// Showing text instead of hex.
    text: bool,
    /// Bytes per hex row, chosen by the layout.
    bpr: u64,
    marks: Marks,
    highlight: Option<Highlighted>,
    /// Bumped whenever the text shown changes: older highlighting is stale.
    highlight_gen: u64,
    highlight_asked: Option<(ExtId, u64, u64)>,
    /// Light or dark, for the highlighting theme; monochrome asks for none.
    light: bool,
    mono: bool,
    /// The cursor moved while text is shown: bring its line into view at
    /// the next frame (once its bytes are read).
    text_follows: bool,
}

/// Rows kept above and below the cursor when the view follows it.
const TEXT_MARGIN: usize = 3;

impl HexPane {
    /// A pane for a terminal of this theme.
    pub fn new(theme: &Theme) -> HexPane {
        HexPane {
            bpr: 16,
            light: matches!(theme.bar.bg, Some(Color::Rgb(r, _, _)) if r > 128),
            mono: theme.mono,
            ..HexPane::default()
        }
    }

    /// Where the view stands in extraction `ext`.
    pub fn place(&self, ext: ExtId) -> Place {
        self.places.get(&ext).copied().unwrap_or_default()
    }

    /// Whether it shows text.
    pub fn text_mode(&self) -> bool {
        self.text
    }

    /// Whether the text on screen came back highlighted.
    pub fn highlighted(&self) -> bool {
        self.highlight.is_some()
    }

    /// The shown extraction changed: its highlighting is not this one's.
    pub fn forget_highlight(&mut self) {
        self.highlight = None;
        self.highlight_gen += 1;
    }

    /// Moves the cursor of `cx.ext` and scrolls to keep it in view with a
    /// few rows above and below it (as vim's `scrolloff`), so that what a
    /// jump lands on is seen with what surrounds it.
    pub fn set_cursor(&mut self, offset: u64, cx: &Cx) {
        self.place_cursor(offset, cx, TEXT_MARGIN as u64);
    }

    /// Moves the cursor, keeping `margin` rows (at most a quarter of the
    /// pane) between it and the top and bottom, except at the ends.
    fn place_cursor(&mut self, offset: u64, cx: &Cx, margin: u64) {
        let bpr = self.bpr.max(1);
        let rows = (cx.rows as u64).max(1);
        let m = margin.min(rows.saturating_sub(1) / 4);
        let last_row = Self::data_len(cx).saturating_sub(1) / bpr;
        let v = self.places.entry(cx.ext).or_default();
        v.cursor = offset;
        self.text_follows = self.text;
        let row = offset / bpr;
        let mut top_row = v.top / bpr;
        if row < top_row + m {
            top_row = row.saturating_sub(m);
        } else if row + m >= top_row + rows {
            // Not past the point where the last row is at the bottom.
            let lowest = (last_row + 1).saturating_sub(rows).max(top_row);
            top_row = (row + m + 1).saturating_sub(rows).min(lowest);
            if row >= top_row + rows {
                top_row = (row + 1).saturating_sub(rows);
            }
        }
        v.top = top_row * bpr;
    }

    /// Marks bytes from the cursor of `ext` on (`v`), or drops the mark;
    /// whether a mark is now set.
    pub fn toggle_mark(&mut self, ext: ExtId) -> bool {
        let v = self.places.entry(ext).or_default();
        v.mark = match v.mark {
            Some(_) => None,
            None => Some(v.cursor),
        };
        v.mark.is_some()
    }

    /// Drops the mark of `ext`; whether there was one.
    pub fn drop_mark(&mut self, ext: ExtId) -> bool {
        self.places
            .get_mut(&ext)
            .is_some_and(|v| v.mark.take().is_some())
    }

    /// Shows hex, not text.
    pub fn show_hex(&mut self) {
        self.text = false;
    }

    /// Switches between hex and text; the text starts at the line holding
    /// the cursor, the hex at the first line shown.
    pub fn toggle_text(&mut self, cx: &Cx) -> Reply {
        self.text = !self.text;
        let ext = cx.ext;
        let mut reply = Reply::default();
        if self.text {
            let c = self.place(ext).cursor;
            let from = c.saturating_sub(text::MAX_LINE);
            let start = match self.cached(cx, from, c) {
                Some(b) => text::line_start(&b, from, c),
                None => c,
            };
            self.places.entry(ext).or_default().text_top = start;
        } else {
            let top = self.place(ext).text_top;
            self.set_cursor(top, cx);
            reply.follow = Some(top);
        }
        self.forget_highlight();
        reply
    }

    /// Bytes `[start, end)` of `cx.ext` if every page is cached; else asks
    /// for the missing pages and returns `None`.
    pub fn cached(&mut self, cx: &Cx, start: u64, end: u64) -> Option<Vec<u8>> {
        if end <= start {
            return Some(Vec::new());
        }
        let data = cx.session.tree().get(cx.ext)?.data();
        let end = end.min(data.available());
        let mut ok = true;
        for page in start / PAGE..end.div_ceil(PAGE) {
            ok &= self.page(cx, &data, page);
        }
        if !ok {
            return None;
        }
        self.pages.read(cx.ext, start, end)
    }

    /// Bytes `[start, end)` of the shown extraction if cached (for drawing).
    pub fn peek(&self, start: u64, end: u64) -> Option<Vec<u8>> {
        self.pages.read(self.ext, start, end)
    }

    /// Whether a page is cached, asking the worker for it (or a fresher
    /// copy of a page that was short because the bytes were still arriving).
    fn page(&mut self, cx: &Cx, data: &Data, page: u64) -> bool {
        let ext = cx.ext;
        let got = self.pages.get(ext, page);
        let stale = got.as_ref().is_some_and(|p| {
            (p.len() as u64) < PAGE && data.available() > page * PAGE + p.len() as u64
        });
        if (got.is_none() || stale) && self.pages.requested.insert((ext, page)) {
            let data = data.clone();
            cx.worker.submit(Job::new(To::Hex, move |_, _| {
                let mut buf = vec![0u8; PAGE as usize];
                let n = data.read_at(page * PAGE, &mut buf).unwrap_or(0);
                buf.truncate(n);
                Some(Box::new(PageRead {
                    ext,
                    page,
                    bytes: Arc::new(buf),
                }))
            }));
        }
        got.is_some()
    }

    /// Before a frame: takes the layout's row width, works out the marks of
    /// the bytes on screen, and asks for the bytes and highlighting the
    /// frame and the inspector will show.
    pub fn prepare(&mut self, cx: &Cx, bpr: u64, width: u16, selection: Selection, sorted: bool) {
        if self.ext != cx.ext {
            self.ext = cx.ext;
        }
        self.bpr = bpr;
        let place = self.place(cx.ext);
        let rows = cx.rows as u64;
        if self.text {
            // Enough bytes for the screen: lines of up to a few screens each.
            let want = (rows * (width as u64 + 1) * 4).clamp(4096, 1 << 20);
            if self.text_follows {
                self.follow_in_text(cx, want);
            }
            let top = self.place(cx.ext).text_top;
            if let Some(bytes) = self.cached(cx, top, top + want) {
                let shown: usize = bytes
                    .split_inclusive(|&b| b == b'\n')
                    .take(cx.rows)
                    .map(<[u8]>::len)
                    .sum();
                let end = top + shown as u64;
                self.marks = marks(cx, top, end.max(top + 1), selection, sorted);
                self.want_highlight(cx, top, end);
            }
        } else {
            let start = place.top;
            let end = start + rows * bpr;
            self.marks = marks(cx, start, end, selection, sorted);
            self.cached(cx, start, end);
        }
        self.cached(cx, place.cursor, place.cursor + AT_CURSOR);
    }

    /// Asks for highlighting of the visible text when its bytes are cached.
    fn want_highlight(&mut self, cx: &Cx, top: u64, end: u64) {
        let ext = cx.ext;
        if self.mono || self.highlight.is_some() {
            return;
        }
        let key = (ext, top, self.highlight_gen);
        if self.highlight_asked == Some(key) {
            return;
        }
        let from = top.saturating_sub(text::CONTEXT);
        let Some(bytes) = self.cached(cx, from, end) else {
            return;
        };
        // Start the context at a line start.
        let skip = if from == 0 {
            0
        } else {
            memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1)
        };
        let base = (from + skip as u64).min(top);
        let bytes = bytes[(base - from) as usize..].to_vec();
        let name = cx
            .session
            .tree()
            .get(ext)
            .map(|e| e.display_name())
            .unwrap_or_default();
        self.highlight_asked = Some(key);
        let job = HighlightJob {
            ext,
            generation: self.highlight_gen,
            name,
            theme: text::syntect_theme(self.light),
            base,
            first: top,
            bytes,
        };
        cx.worker
            .submit(Job::new(To::Hex, move |_, _| Some(Box::new(job.run()))));
    }

    fn data_len(cx: &Cx) -> u64 {
        cx.session.tree().get(cx.ext).map_or(0, |e| e.available())
    }

    fn hex_key(&mut self, a: Action, cx: &Cx) -> Reply {
        let bpr = self.bpr.max(1);
        let page = cx.rows as u64 * bpr;
        let len = Self::data_len(cx);
        let c = self.place(cx.ext).cursor;
        let to = match a {
            Action::Up => c.saturating_sub(bpr),
            Action::Down => c + bpr,
            Action::Left => c.saturating_sub(1),
            Action::Right => c + 1,
            Action::PageUp => c.saturating_sub(page),
            Action::PageDown => c + page,
            Action::Home => 0,
            Action::End => len.saturating_sub(1),
            _ => return Reply::default(),
        };
        let to = if matches!(a, Action::Down | Action::Right | Action::PageDown) && to >= len {
            len.saturating_sub(1).max(c.min(len))
        } else {
            to
        };
        self.set_cursor(to, cx);
        Reply {
            follow: Some(to),
            ..Reply::default()
        }
    }

    fn text_key(&mut self, a: Action, cx: &Cx) -> Reply {
        let len = Self::data_len(cx);
        let rows = cx.rows;
        let mut top = self.place(cx.ext).text_top;
        let steps = match a {
            Action::Up | Action::Down => 1,
            Action::PageUp | Action::PageDown => rows.saturating_sub(1).max(1),
            Action::Home => {
                self.set_text_top(0, cx);
                return Reply::default();
            }
            Action::End => {
                // Back up one page of lines from the end.
                top = len;
                rows.max(1)
            }
            _ => return Reply::default(),
        };
        let down = matches!(a, Action::Down | Action::PageDown);
        for _ in 0..steps {
            let next = if down {
                self.line_after(cx, top, len)
            } else {
                self.line_before(cx, top)
            };
            match next {
                Some(n) => top = n,
                None => break,
            }
        }
        self.set_text_top(top.min(len), cx);
        Reply::default()
    }

    /// Start of the line after the one at `at`, reading only as far as its
    /// end; `None` at the end of the bytes or while its bytes are loading.
    fn line_after(&mut self, cx: &Cx, at: u64, len: u64) -> Option<u64> {
        let mut from = at;
        while from < len && from - at < text::MAX_LINE {
            let end = (from + PAGE).min(len);
            let b = self.cached(cx, from, end)?;
            if let Some(i) = memchr::memchr(b'\n', &b) {
                let n = from + i as u64 + 1;
                return (n < len).then_some(n);
            }
            from = end;
        }
        (from < len).then_some(from)
    }

    /// Start of the line before the one at `at` (`None` at the top).
    fn line_before(&mut self, cx: &Cx, at: u64) -> Option<u64> {
        if at == 0 {
            return None;
        }
        // The line before ends at `at - 1`; find the newline before that.
        let mut end = at - 1;
        while at - end < text::MAX_LINE {
            let from = end.saturating_sub(PAGE);
            let b = self.cached(cx, from, end)?;
            if let Some(i) = memchr::memrchr(b'\n', &b) {
                return Some(from + i as u64 + 1);
            }
            if from == 0 {
                return Some(0);
            }
            end = from;
        }
        Some(end)
    }

    /// Scrolls the text so the cursor's line is on screen, a few lines
    /// below the top, unless it already is; waits for the bytes if they
    /// are not read yet (the next frame tries again).
    fn follow_in_text(&mut self, cx: &Cx, want: u64) {
        let place = self.place(cx.ext);
        let (c, top) = (place.cursor, place.text_top);
        if c >= top {
            let Some(bytes) = self.cached(cx, top, top + want) else {
                return;
            };
            let shown: usize = bytes
                .split_inclusive(|&b| b == b'\n')
                .take(cx.rows.saturating_sub(TEXT_MARGIN).max(1))
                .map(<[u8]>::len)
                .sum();
            if c < top + shown as u64 {
                self.text_follows = false;
                return;
            }
        }
        let from = c.saturating_sub(text::MAX_LINE);
        let Some(b) = self.cached(cx, from, c) else {
            return;
        };
        // The cursor's line, then back over the margin's lines.
        let mut start = text::line_start(&b, from, c);
        for _ in 0..TEXT_MARGIN.min(cx.rows / 3) {
            if start <= from || start == 0 {
                break;
            }
            start = text::line_start(&b, from, start - 1);
        }
        self.text_follows = false;
        self.set_text_top(start, cx);
    }

    fn set_text_top(&mut self, top: u64, cx: &Cx) {
        let v = self.places.entry(cx.ext).or_default();
        if v.text_top != top {
            v.text_top = top;
            self.forget_highlight();
        }
    }

    fn draw_hex(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let th = look.theme;
        let Some(e) = look.tree.get(self.ext) else {
            return;
        };
        let data = e.data();
        let len = data.available();
        let bpr = self.bpr;
        let v = self.place(self.ext);
        let mark = match v.marked() {
            Some(r) => format!(" marked {r} ({} bytes)", thousands(r.len())),
            None => String::new(),
        };
        let title = format!(
            " {} ({}, {} bytes{}){mark} ",
            e.display_name(),
            data.describe(),
            thousands(len),
            if data.is_final() { "" } else { ", growing" }
        );
        let inner = panel::frame(look, title, buf, area);
        let rows = inner.height as u64;
        let start = v.top;
        let wide = len > u32::MAX as u64;
        let grid = HexGrid::new(inner.x, len, bpr);
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
            put(buf, inner.x, y, inner.width, &off_text, th.offset);
            let page = self.pages.peek(self.ext, row_off / PAGE);
            let next = self.pages.peek(self.ext, row_off / PAGE + 1);
            for i in 0..bpr {
                let off = row_off + i;
                if off >= len {
                    break;
                }
                let p = if off / PAGE == row_off / PAGE {
                    page
                } else {
                    next
                };
                let byte = p.and_then(|b| b.get((off % PAGE) as usize).copied());
                let hx = grid.hex_col(i);
                let ax = grid.text_col(i);
                if hx + 2 > inner.x + inner.width {
                    continue;
                }
                let mut style = match byte {
                    Some(b) => th.byte(b),
                    None => th.dim,
                };
                if let Some(bg) = self.marks.bg(th, off) {
                    style = style.bg(bg);
                }
                if off == v.cursor {
                    style = if th.mono {
                        style.add_modifier(Modifier::REVERSED)
                    } else {
                        style.bg(th.cursor).fg(Color::Black)
                    };
                }
                let (h, a) = match byte {
                    // Not the zero that stands in for it: pparse does not know.
                    Some(_) if self.marks.is_unknown(off) => ("??", '?'),
                    Some(b) => (hex2(b), ascii(b)),
                    None => ("··", '·'),
                };
                buf.set_string(hx, y, h, style);
                if ax < inner.x + inner.width {
                    buf.set_string(ax, y, a.to_string(), style);
                }
            }
            if grid.ascii_x < inner.x + inner.width {
                buf.set_string(grid.ascii_x, y, "│", th.dim);
            }
        }
        if len == 0 {
            put(buf, inner.x, inner.y, inner.width, "(no bytes)", th.dim);
        }
    }

    fn draw_text(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let th = look.theme;
        let Some(e) = look.tree.get(self.ext) else {
            return;
        };
        let len = e.available();
        let top = self.place(self.ext).text_top;
        let title = format!(" {} as text, from {top:#x} ", e.display_name());
        let inner = panel::frame(look, title, buf, area);
        let rows = inner.height as usize;
        let want = (rows as u64 * (inner.width as u64 + 1) * 4).clamp(4096, 1 << 20);
        let Some(bytes) = self.peek(top, (top + want).min(len)) else {
            put(buf, inner.x, inner.y, inner.width, "reading…", th.dim);
            return;
        };
        let hl = self
            .highlight
            .as_ref()
            .filter(|h| h.ext == self.ext && h.first == top);
        let lines = bytes.split_inclusive(|&b| b == b'\n').take(rows);
        let mut off = top;
        for (i, raw) in lines.enumerate() {
            let y = inner.y + i as u16;
            let line_start = off;
            off += raw.len() as u64;
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
                    let line = text::display_line(raw);
                    put(buf, inner.x, y, inner.width, &line, th.text);
                }
            }
            self.paint_marks(
                th,
                buf,
                Rect::new(inner.x, y, inner.width, 1),
                raw,
                line_start,
            );
        }
    }

    /// Gives the selected and damaged bytes of a text line their
    /// background, column by column as [`text::display_line`] lays the
    /// line out (a tab is four columns, an escaped byte as many as its
    /// escape; a wide character counts as one).
    fn paint_marks(&self, th: &Theme, buf: &mut Buffer, row: Rect, raw: &[u8], start: u64) {
        let marked = |a: u64, b: u64| {
            let any = |r: &Range| r.start < b && a < r.end;
            self.marks.damage.iter().any(any)
                || self.marks.selection.range.as_ref().is_some_and(any)
        };
        if !marked(start, start + raw.len() as u64) {
            return;
        }
        let mut col = 0u16;
        let mut off = start;
        let mut paint = |width: u16, at: u64, col: &mut u16| {
            if let Some(bg) = self.marks.text_bg(th, at) {
                let x = row.x.saturating_add(*col);
                let w = width.min(row.width.saturating_sub(*col));
                if w > 0 {
                    buf.set_style(Rect::new(x, row.y, w, 1), Style::new().bg(bg));
                }
            }
            *col = col.saturating_add(width);
        };
        for chunk in raw.utf8_chunks() {
            for c in chunk.valid().chars() {
                let width = match c {
                    '\n' | '\r' => 0,
                    '\t' => 4,
                    c if c.is_control() => {
                        pparse::name::escape_str(&c.to_string()).chars().count() as u16
                    }
                    _ => 1,
                };
                paint(width, off, &mut col);
                off += c.len_utf8() as u64;
            }
            for _ in chunk.invalid() {
                paint(4, off, &mut col);
                off += 1;
            }
            if col >= row.width {
                return;
            }
        }
    }
}

impl Component for HexPane {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        if self.text {
            self.text_key(a, cx)
        } else {
            self.hex_key(a, cx)
        }
    }

    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        if self.text {
            return Reply::default();
        }
        let len = Self::data_len(cx);
        let grid = HexGrid::new(0, len, self.bpr);
        let top = self.place(cx.ext).top;
        let Some(col) = grid.byte_at(at.x) else {
            return Reply::default();
        };
        let off = top + at.y as u64 * grid.bpr + col;
        if off >= len {
            return Reply::default();
        }
        // A click shows what was clicked where it is: no scrolling.
        self.place_cursor(off, cx, 0);
        Reply {
            follow: Some(off),
            ..Reply::default()
        }
    }

    fn on_done(&mut self, d: Payload, _cx: &Cx) -> Result<Reply, Payload> {
        let d = match d.downcast::<PageRead>() {
            Ok(p) => {
                self.pages.put(p.ext, p.page, p.bytes);
                return Ok(Reply::default());
            }
            Err(d) => d,
        };
        let h = d.downcast::<Highlighted>()?;
        if h.generation == self.highlight_gen && h.ext == self.ext {
            self.highlight = Some(*h);
        }
        Ok(Reply::default())
    }

    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        if self.text {
            self.draw_text(look, buf, area);
        } else {
            self.draw_hex(look, buf, area);
        }
    }
}

/// Bytes per hex row that fit in a pane `inner_w` columns wide, for bytes
/// of length `len`.
pub fn fitting_bpr(inner_w: u64, len: u64) -> u64 {
    let offw = hexgrid::offset_width(len);
    [32, 24, 16, 8, 4]
        .into_iter()
        .find(|&b| inner_w >= hexgrid::row_width(offw, b))
        .unwrap_or(4)
}

/// The bytes of a node to mark for its damage at `d`: the range itself,
/// or for a point (a cut, where invalid data was found) the one byte there
/// (the node's last when the point is its end): the bytes before it are
/// intact, a cut member's header too.
fn damaged_bytes(d: Range, node: Range) -> Range {
    if !d.is_empty() {
        return d;
    }
    let at = if d.start >= node.end {
        node.end.saturating_sub(1).max(node.start)
    } else {
        d.start.max(node.start)
    };
    Range::new(at, (at + 1).min(node.end.max(at)))
}

/// What is marked in `[start, end)` of the shown extraction.
fn marks(cx: &Cx, start: u64, end: u64, selection: Selection, sorted: bool) -> Marks {
    let t = cx.session.tree();
    let Some(e) = t.get(cx.ext) else {
        return Marks::default();
    };
    let window = Range::new(start, end);
    let mut damage: Vec<Range> = e
        .damage
        .iter()
        .filter(|d| !d.unknown)
        .map(|d| d.range)
        .filter(|r| r.overlaps(&window) || (r.is_empty() && window.contains(r.start)))
        .collect();
    let unknown: Vec<Range> = e
        .damage
        .iter()
        .filter(|d| d.unknown && d.range.overlaps(&window))
        .map(|d| d.range)
        .collect();
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
                damage.push(damaged_bytes(d.range, n.range));
            }
            for c in n.loaded_children() {
                if let Some(d) = &c.damage {
                    damage.push(damaged_bytes(d.range, c.range));
                }
            }
        }
    }
    Marks {
        selection,
        damage,
        unknown,
        covered,
        parsed: e.parser().is_some() && !e.nodes.is_empty(),
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

#[cfg(test)]
mod tests {
    #[test]
    fn hex_table() {
        assert_eq!(super::hex2(0), "00");
        assert_eq!(super::hex2(0xab), "ab");
        assert_eq!(super::hex2(255), "ff");
    }

    /// A member cut at its end marks its last byte, not its intact header;
    /// invalid data found at a point marks that byte; a range is a range.
    #[test]
    fn damage_marks_only_the_bytes_at_the_damage() {
        use super::{Range, damaged_bytes};
        let node = Range::new(0, 700);
        assert_eq!(
            damaged_bytes(Range::new(700, 700), node),
            Range::new(699, 700)
        );
        assert_eq!(
            damaged_bytes(Range::new(300, 300), node),
            Range::new(300, 301)
        );
        assert_eq!(damaged_bytes(Range::new(10, 40), node), Range::new(10, 40));
        let empty = Range::new(5, 5);
        assert!(damaged_bytes(Range::new(5, 5), empty).is_empty());
    }
}
