//! The tensor panel: every tensor of a checkpoint, its bytes in the hex
//! view, its first values, statistics and a histogram, and export to .npy.
//!
//! The table, the statistics and the export each run on a background task
//! in a slot of their own; selecting another tensor stops the statistics of
//! the last one, so scrolling through a 1,000-tensor checkpoint never queues
//! work. The panel owns its state and knows nothing of the app: the app
//! hands it the session, the worker and its pane's size, and applies the
//! [`Reply`] (a message, bytes to show).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, SidePanel};
use crate::theme::Theme;
use crate::worker::{Payload, To, Worker};
use pparse::engine::Session;
use pparse::extraction::Tree;

use pparse::data::Range;
use pparse::extraction::ExtId;
use pparse::offer::tensor::{self, Dtype, Tensor};
use pparse::status::Status;
use pparse::util::{human, thousands};
use pparse::view::tensors;
use pparse::view::values::{self, Element, Stats};

/// Values shown in the inspector.
const FIRST_VALUES: u64 = 64;
/// Histogram bins.
const BINS: usize = 64;

/// The worker's slots for the table, a tensor's statistics and an export.
const TABLE: &str = "table";
const STATS: &str = "stats";
const EXPORT: &str = "export";

/// A background task's report.
enum Report {
    Table {
        id: u64,
        tensors: Vec<Tensor>,
    },
    Values {
        id: u64,
        values: Vec<String>,
    },
    Progress {
        id: u64,
        done: u64,
        total: u64,
    },
    Stats {
        id: u64,
        stats: Box<Stats>,
    },
    Failed {
        id: u64,
        why: String,
    },
    Exported {
        id: u64,
        path: PathBuf,
        result: Result<u64, String>,
    },
}

/// Values and statistics of the selected tensor.
#[derive(Clone, Debug, Default)]
pub struct Detail {
    index: usize,
    id: u64,
    values: Option<Vec<String>>,
    progress: Option<(u64, u64)>,
    stats: Option<Box<Stats>>,
    error: Option<String>,
}

/// The panel's state.
#[derive(Clone, Debug)]
pub struct TensorPanel {
    /// The extraction whose table this is.
    pub ext: ExtId,
    name: String,
    id: u64,
    /// The table was made while the parse was still running.
    pub partial: bool,
    tensors: Option<Vec<Tensor>>,
    selected: usize,
    offset: usize,
    detail: Option<Detail>,
    /// A running export: its id and progress.
    pub export: Option<(u64, u64, u64)>,
}

impl TensorPanel {
    /// The selected tensor.
    pub fn current(&self) -> Option<&Tensor> {
        self.tensors.as_ref()?.get(self.selected)
    }

    /// Starts making the table of `ext`; `None` if it has no tensors.
    pub fn open(session: &Session, worker: &Worker, ext: ExtId) -> Option<TensorPanel> {
        let (pending, name) = {
            let t = session.tree();
            (tensors::prepare(&t, ext)?, t.exts[ext].display_name())
        };
        let id = worker.spawn(TABLE, To::Tensors, move |_, _, report, id| {
            let tensors = pending();
            report(Box::new(Report::Table { id, tensors }));
        });
        Some(TensorPanel {
            ext,
            name,
            id,
            partial: !session.is_finished(),
            tensors: None,
            selected: 0,
            offset: 0,
            detail: None,
            export: None,
        })
    }

    /// The table made again once the parse it was made during is over,
    /// keeping the selection; `None` while there is no need.
    pub fn refreshed(&self, session: &Session, worker: &Worker) -> Option<TensorPanel> {
        if !(self.partial && self.tensors.is_some() && session.is_finished()) {
            return None;
        }
        let mut p = TensorPanel::open(session, worker, self.ext)?;
        p.selected = self.selected;
        Some(p)
    }

    /// Moves by a key; `page` is the rows of the table.
    pub fn on_key(&mut self, a: Action, page: usize, session: &Session, worker: &Worker) -> Reply {
        let n = self.tensors.as_ref().map_or(0, Vec::len);
        if n == 0 {
            return Reply::default();
        }
        let cur = self.selected;
        let Some(to) = panel::list_target(a, cur, n, page) else {
            return Reply::default();
        };
        if to != cur || a == Action::Expand {
            return self.select(to, page, session, worker);
        }
        Reply::default()
    }

    /// Selects the tensor on row `row` of a table of `rows` rows.
    pub fn click(&mut self, row: usize, rows: usize, session: &Session, worker: &Worker) -> Reply {
        let to = self.top(rows) + row;
        if self.tensors.as_ref().is_some_and(|t| to < t.len()) {
            return self.select(to, rows, session, worker);
        }
        Reply::default()
    }

    /// Selects tensor `i`: its bytes are to be shown, and its statistics
    /// start.
    pub fn select(&mut self, i: usize, page: usize, session: &Session, worker: &Worker) -> Reply {
        let Some(t) = self.tensors.as_ref().and_then(|t| t.get(i)).cloned() else {
            return Reply::default();
        };
        self.selected = i;
        panel::scroll_to(&mut self.offset, i, page);
        let show = Some((t.source, t.offset));
        let Some(data) = session.tree().get(t.source).map(|e| e.data()) else {
            return Reply {
                show,
                ..Reply::default()
            };
        };
        let id = worker.spawn(STATS, To::Tensors, move |_, stop, report, id| {
            let send = |r: Report| report(Box::new(r));
            if tensor::numel(&t.shape).is_none() {
                let why = tensor::overflow_text(&t.shape);
                send(Report::Failed { id, why });
                return;
            }
            let n = t.numel().min(FIRST_VALUES) as usize;
            let first = values::values(&t, &*data, 0, n);
            send(Report::Values {
                id,
                values: first.into_iter().map(|v| show_value(v, t.dtype)).collect(),
            });
            let progress = |done, total| send(Report::Progress { id, done, total });
            match values::stats(&t, &*data, BINS, stop, &progress) {
                Ok(s) => send(Report::Stats {
                    id,
                    stats: Box::new(s),
                }),
                Err(e) if !stop.load(Ordering::Acquire) => send(Report::Failed {
                    id,
                    why: e.to_string(),
                }),
                Err(_) => {}
            }
        });
        self.detail = Some(Detail {
            index: i,
            id,
            ..Detail::default()
        });
        Reply {
            show,
            ..Reply::default()
        }
    }

    /// Where to offer writing the selected tensor as .npy: a free name
    /// beside the input, for the export prompt.
    pub fn export_name(&self, tree: &pparse::extraction::Tree) -> Option<String> {
        let t = self.current()?;
        let flat = t.name.replace(['/', '\\'], "_");
        let name =
            pparse::unpack::sanitize_component(flat.as_bytes()).unwrap_or_else(|| "tensor".into());
        Some(crate::save::beside_input(tree, &format!("{name}.npy")))
    }

    /// Writes the selected tensor to `path` (a new file) in the background;
    /// `Err` says why it does not start.
    pub fn export(&mut self, path: &str, session: &Session, worker: &Worker) -> Result<(), String> {
        let Some(t) = self.current().cloned() else {
            return Ok(());
        };
        let path = PathBuf::from(path.trim());
        if path.as_os_str().is_empty() {
            return Ok(());
        }
        // Said back as an absolute path: where to find it is the point.
        let path = crate::save::absolute(&path);
        if path.exists() {
            return Err(format!(
                "{} exists: nothing was written (choose another name)",
                pparse::name::escape_str(&path.display().to_string())
            ));
        }
        let Some(data) = session.tree().get(t.source).map(|e| e.data()) else {
            return Ok(());
        };
        let length = t.length;
        let id = worker.spawn(EXPORT, To::Tensors, move |_, stop, report, id| {
            let progress = |done, total| {
                report(Box::new(Report::Progress { id, done, total }));
            };
            let result = export_npy(&t, &*data, &path, stop, &progress);
            report(Box::new(Report::Exported { id, path, result }));
        });
        self.export = Some((id, 0, length));
        Ok(())
    }

    /// Takes a background task's report.
    fn on_report(&mut self, r: Report, page: usize, session: &Session, worker: &Worker) -> Reply {
        match r {
            Report::Table { id, tensors } if id == self.id => {
                let n = tensors.len();
                self.tensors = Some(tensors);
                if n > 0 {
                    let i = self.selected.min(n - 1);
                    return self.select(i, page, session, worker);
                }
            }
            Report::Exported { id, path, result } if self.export.is_some_and(|e| e.0 == id) => {
                self.export = None;
                let shown = pparse::name::escape_str(&path.display().to_string());
                let say = match result {
                    Ok(n) => format!("wrote {shown} ({})", human(n)),
                    Err(e) => format!("could not write {shown}: {e}"),
                };
                return Reply {
                    say: Some(say),
                    ..Reply::default()
                };
            }
            Report::Progress { id, done, total } => {
                if let Some(e) = &mut self.export
                    && e.0 == id
                {
                    (e.1, e.2) = (done, total);
                } else if let Some(d) = &mut self.detail
                    && d.id == id
                {
                    d.progress = Some((done, total));
                }
            }
            Report::Values { id, values } => {
                if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
                    d.values = Some(values);
                }
            }
            Report::Stats { id, stats } => {
                if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
                    d.stats = Some(stats);
                    d.progress = None;
                }
            }
            Report::Failed { id, why } => {
                if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
                    d.error = Some(why);
                    d.progress = None;
                }
            }
            _ => {}
        }
        Reply::default()
    }

    /// The selected tensor's bytes, to mark in the hex view.
    pub fn bytes(&self) -> Option<(ExtId, Range)> {
        self.current().map(|t| {
            (
                t.source,
                Range::new(t.offset, t.offset.saturating_add(t.length)),
            )
        })
    }

    /// The title of its pane.
    pub fn title(&self) -> String {
        let n = self
            .tensors
            .as_ref()
            .map_or(String::new(), |t| format!(" ({})", t.len()));
        format!(" Tensors: {}{n} ", pparse::name::escape_str(&self.name))
    }

    /// The first row shown when the table has `rows` rows: the selection is
    /// kept in view.
    fn top(&self, rows: usize) -> usize {
        let len = self.tensors.as_ref().map_or(0, Vec::len);
        panel::first_row(self.offset, self.selected, len, rows)
    }
}

impl Component for TensorPanel {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        TensorPanel::on_key(self, a, cx.rows, cx.session, cx.worker)
    }
    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        TensorPanel::click(self, at.y as usize, cx.rows, cx.session, cx.worker)
    }
    fn on_done(&mut self, d: Payload, cx: &Cx) -> Result<Reply, Payload> {
        let r = d.downcast::<Report>()?;
        Ok(self.on_report(*r, cx.rows, cx.session, cx.worker))
    }
    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let inner = panel::frame(look, self.title(), buf, area);
        draw_table(look.theme, self, buf, inner);
    }
}

impl SidePanel for TensorPanel {
    fn address(&self) -> To {
        To::Tensors
    }
    fn title(&self) -> String {
        TensorPanel::title(self)
    }
    fn inspector<'a>(&self, th: &Theme, tree: &Tree, width: u16) -> (&'static str, Vec<Line<'a>>) {
        (" Tensor ", detail_lines(th, tree, self, width))
    }
    fn marked(&self) -> Option<(ExtId, Range)> {
        self.bytes()
    }
    fn close(&mut self, worker: &Worker) {
        worker.stop(TABLE);
        worker.stop(STATS);
    }
    fn tick(&mut self, cx: &Cx) {
        if let Some(fresh) = self.refreshed(cx.session, cx.worker) {
            *self = fresh;
        }
    }
}

/// The tensor table, drawn in place of the node tree.
fn draw_table(th: &Theme, p: &TensorPanel, buf: &mut Buffer, inner: Rect) {
    let Some(ts) = &p.tensors else {
        buf.set_stringn(
            inner.x + 1,
            inner.y,
            "reading the tensor table…",
            inner.width as usize,
            th.dim,
        );
        return;
    };
    if ts.is_empty() {
        buf.set_stringn(
            inner.x + 1,
            inner.y,
            "no tensors",
            inner.width as usize,
            th.dim,
        );
        return;
    }
    let h = inner.height as usize;
    let top = p.top(h);
    for (row, t) in ts.iter().enumerate().skip(top).take(h) {
        let y = inner.y + (row - top) as u16;
        let base = if row == p.selected {
            th.row_selected
        } else {
            Style::new()
        };
        buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
        let name_style = match t.status {
            Status::Complete => th.text,
            s => th.status(s),
        };
        let name = pparse::name::escape_str(&t.name);
        let rest = format!("  {} {}", t.dtype.name(), shape(&t.shape));
        // In words too: without colour (NO_COLOR) this is the mark.
        let tags: Vec<(String, Style)> = match t.status {
            Status::Complete => Vec::new(),
            s => vec![(format!("  [{}]", s.as_str()), th.status(s).patch(base))],
        };
        crate::panel::put_row(
            buf,
            (inner.x + 1, y, inner.width.saturating_sub(1)),
            (&name, name_style.patch(base)),
            &tags,
            (&rest, th.dim.patch(base)),
        );
    }
}

/// A shape as drawn: the first 16 dimensions (a pickle can spell a million,
/// and rows are drawn every frame).
fn shape(s: &[u64]) -> String {
    tensor::shape_text(s)
}

/// The selected tensor's details, drawn in the inspector.
fn detail_lines<'a>(th: &Theme, tree: &Tree, p: &TensorPanel, width: u16) -> Vec<Line<'a>> {
    let w = width.saturating_sub(2) as usize;
    let mut lines = Vec::new();
    let label = |s: &str| Span::styled(format!("{s:<9}"), th.dim);
    let Some(t) = p.current() else {
        if let Some(ts) = &p.tensors {
            lines.push(Line::from(format!("{} tensors", ts.len())));
        }
        return lines;
    };
    let count = p.tensors.as_ref().map_or(0, |t| t.len());
    lines.push(Line::from(vec![
        label("tensor"),
        Span::styled(pparse::name::escape_str(&t.name), th.title),
        Span::styled(format!("  {} of {count}", p.selected + 1), th.dim),
    ]));
    let mut layout = format!(
        "{} {}  {} elements",
        t.dtype.name(),
        shape(&t.shape),
        tensor::numel(&t.shape).map_or("too many".into(), thousands)
    );
    if let Some(s) = &t.stride {
        layout.push_str(&format!("  stride {}", shape(s)));
    }
    if let Some(o) = t.storage_offset.filter(|&o| o > 0) {
        layout.push_str(&format!("  storage offset {o}"));
    }
    if t.big_endian {
        layout.push_str("  big-endian");
    }
    lines.push(Line::from(vec![label("layout"), Span::raw(layout)]));
    let src = tree
        .get(t.source)
        .map(|e| e.display_name())
        .unwrap_or_default();
    lines.push(Line::from(vec![
        label("bytes"),
        Span::raw(format!(
            "{:#x}..{:#x} ({}) in {}",
            t.offset,
            t.offset.saturating_add(t.length),
            human(t.length),
            pparse::name::escape_str(&src)
        )),
    ]));
    let mut st = vec![
        label("status"),
        Span::styled(t.status.as_str(), th.status(t.status)),
    ];
    if let Some(d) = &t.detail {
        st.push(Span::raw(format!(": {}", pparse::name::escape_str(d))));
    }
    lines.push(Line::from(st));
    if let Some((_, done, total)) = p.export {
        lines.push(Line::from(vec![
            label("export"),
            Span::raw(format!("{} of {}", human(done), human(total))),
        ]));
    }
    let Some(d) = p.detail.as_ref().filter(|d| d.index == p.selected) else {
        return lines;
    };
    if let Some(v) = &d.values {
        // No value readable (the bytes are missing): a dash, not a blank.
        let mut s = if v.is_empty() && t.numel() > 0 {
            MISSING.to_string()
        } else {
            v.join(" ")
        };
        if t.numel() > v.len() as u64 && !v.is_empty() {
            s.push_str(" …");
        }
        let s: String = s.chars().take(w.saturating_sub(9) * 2).collect();
        lines.push(Line::from(vec![label("values"), Span::raw(s)]));
    }
    if let Some(e) = &d.error {
        lines.push(Line::from(vec![
            label("error"),
            Span::styled(pparse::name::escape_str(e), th.corrupt),
        ]));
    }
    if let Some((done, total)) = d.progress {
        let pct = (u128::from(done) * 100)
            .checked_div(u128::from(total))
            .unwrap_or(0);
        lines.push(Line::from(vec![
            label("stats"),
            Span::styled(format!("reading… {pct}%"), th.dim),
        ]));
    }
    if let Some(s) = &d.stats {
        // Without a finite value there is no range or moment to show.
        let g = |x: f64| {
            if s.count == 0 {
                MISSING.to_string()
            } else {
                format!("{x:.6}")
            }
        };
        lines.push(Line::from(vec![
            label("range"),
            Span::raw(format!("min {}  max {}", g(s.min), g(s.max))),
        ]));
        lines.push(Line::from(vec![
            label("moments"),
            Span::raw(format!("mean {}  std {}", g(s.mean), g(s.std))),
        ]));
        let mut counts = format!("{} finite", thousands(s.count));
        for (n, what) in [(s.nan, "NaN"), (s.inf, "infinite"), (s.missing, "missing")] {
            if n > 0 {
                counts.push_str(&format!("  {} {what}", thousands(n)));
            }
        }
        let bad = s.nan + s.inf + s.missing > 0;
        lines.push(Line::from(vec![
            label("count"),
            Span::styled(counts, if bad { th.corrupt } else { th.text }),
        ]));
        if s.count > 0 {
            let bar = sparkline(&s.hist, w.saturating_sub(9));
            lines.push(Line::from(vec![
                label("histo"),
                Span::styled(bar, th.title),
            ]));
        }
    }
    lines
}

/// What stands for a value or statistic that cannot be had.
const MISSING: &str = "—";

/// A value as NumPy prints its own dtype: float32 and narrower at float32
/// precision (`0.1`, not the `f64` expansion of it).
fn show_value(v: Element, dtype: Dtype) -> String {
    match v {
        Element::Float(x) if dtype.bits() <= 32 && x.is_finite() => {
            let f = x as f32;
            let a = f.abs();
            if a == 0.0 || (1e-4..1e16).contains(&a) {
                let s = format!("{f}");
                if s.contains('.') { s } else { format!("{s}.0") }
            } else {
                // Rust writes `1e-5`; Python and NumPy `1e-05`.
                let s = format!("{f:e}");
                let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
                let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
                format!("{m}e{sign}{digits:0>2}")
            }
        }
        v => v.display(),
    }
}

/// Writes a new .npy file at `path`, reporting bytes written; a partial
/// file is removed when the write fails or is stopped.
fn export_npy(
    t: &Tensor,
    data: &dyn pparse::data::Source,
    path: &std::path::Path,
    stop: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> Result<u64, String> {
    struct Counting<'a, W> {
        out: W,
        written: u64,
        total: u64,
        stop: &'a AtomicBool,
        progress: &'a dyn Fn(u64, u64),
    }
    impl<W: std::io::Write> std::io::Write for Counting<'_, W> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.stop.load(Ordering::Relaxed) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "export stopped",
                ));
            }
            let n = self.out.write(b)?;
            let before = self.written >> 24;
            self.written += n as u64;
            if self.written >> 24 != before {
                (self.progress)(self.written, self.total);
            }
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.out.flush()
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    let mut out = Counting {
        out: std::io::BufWriter::with_capacity(1 << 20, file),
        written: 0,
        total: t.length,
        stop,
        progress,
    };
    let r = values::write_npy(t, data, &mut out).and_then(|_| std::io::Write::flush(&mut out));
    match r {
        Ok(()) => Ok(out.written),
        Err(e) => {
            drop(out);
            let _ = std::fs::remove_file(path);
            Err(e.to_string())
        }
    }
}

/// Bins drawn as a line of block characters `width` wide.
pub fn sparkline(bins: &[u64], width: usize) -> String {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    if bins.is_empty() || width == 0 {
        return String::new();
    }
    // Merge bins into at most `width` columns.
    let per = bins.len().div_ceil(width);
    let cols: Vec<u64> = bins.chunks(per).map(|c| c.iter().sum()).collect();
    let max = cols.iter().copied().max().unwrap_or(0).max(1);
    cols.iter()
        .map(|&c| {
            // Any non-empty bin shows at least the lowest bar.
            let level = if c == 0 {
                0
            } else {
                1 + (u128::from(c) * 7 / u128::from(max)) as usize
            };
            BARS[level.min(8)]
        })
        .collect()
}
