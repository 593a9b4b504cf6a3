//! The tensor panel: every tensor of a checkpoint, its bytes in the hex
//! view, its first values, statistics and a histogram, and export to .npy.
//!
//! The table, the statistics and the export each run on a background task
//! (see [`Slot`]); selecting another tensor stops the statistics of the last
//! one, so scrolling through a 1,000-tensor checkpoint never queues work.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::app::{App, Overlay, Pane, Panel, PromptKind};
use super::keys::Action;
use super::models::Exts;

use crate::data::Range;
use crate::extraction::ExtId;
use crate::offer::tensor::{self, Dtype, Tensor};
use crate::status::Status;
use crate::util::{human, thousands};
use crate::view::tensors;
use crate::view::values::{self, Stats, Value};

/// Values shown in the inspector.
const FIRST_VALUES: u64 = 64;
/// Histogram bins.
const BINS: usize = 64;

/// The worker's slots for the table, a tensor's statistics and an export.
pub(super) const TABLE: &str = "table";
pub(super) const STATS: &str = "stats";
const EXPORT: &str = "export";

/// A background task's report.
pub enum Report {
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
    pub index: usize,
    pub id: u64,
    pub values: Option<Vec<String>>,
    pub progress: Option<(u64, u64)>,
    pub stats: Option<Box<Stats>>,
    pub error: Option<String>,
}

/// The panel's state.
#[derive(Clone, Debug)]
pub struct TensorPanel {
    /// The extraction whose table this is.
    pub ext: ExtId,
    pub name: String,
    pub id: u64,
    /// The table was made while the parse was still running.
    pub partial: bool,
    pub tensors: Option<Vec<Tensor>>,
    pub selected: usize,
    pub offset: usize,
    pub detail: Option<Detail>,
    /// A running export: its id and progress.
    pub export: Option<(u64, u64, u64)>,
}

impl TensorPanel {
    pub fn current(&self) -> Option<&Tensor> {
        self.tensors.as_ref()?.get(self.selected)
    }
}

impl App {
    /// Opens the tensor table of the selected extraction (or the nearest
    /// one above it that has tensors), or closes it.
    pub fn toggle_tensors(&mut self) {
        if matches!(self.panel, Panel::Tensors(_)) {
            self.close_panel();
            return;
        }
        let mut ext = self.ext();
        loop {
            if self.open_table(ext) {
                return;
            }
            match self.session.tree().get(ext).and_then(|e| e.parent) {
                Some(p) => ext = p,
                None => break,
            }
        }
        self.say("no tensors here: select a safetensors, torch or pickle checkpoint, then press T");
    }

    /// Starts making the table of `ext`; false if it has no tensors.
    fn open_table(&mut self, ext: ExtId) -> bool {
        let (pending, name) = {
            let t = self.session.tree();
            let Some(p) = tensors::prepare(&t, ext) else {
                return false;
            };
            (p, t.exts[ext].display_name())
        };
        let partial = !self.session.is_finished();
        if matches!(self.panel, Panel::Metrics(_)) {
            self.close_panel();
        }
        let id = self.worker.spawn(TABLE, move |_, _, report, id| {
            let tensors = pending();
            report(Box::new(Report::Table { id, tensors }));
        });
        self.panel = Panel::Tensors(Box::new(TensorPanel {
            ext,
            name,
            id,
            partial,
            tensors: None,
            selected: 0,
            offset: 0,
            detail: None,
            export: None,
        }));
        self.focus = Pane::Nodes;
        true
    }

    /// Makes the table again once the parse that it was made during ends.
    pub fn refresh_tensors(&mut self) {
        let Panel::Tensors(p) = &self.panel else {
            return;
        };
        if p.partial && p.tensors.is_some() && self.session.is_finished() {
            let (ext, selected) = (p.ext, p.selected);
            if self.open_table(ext)
                && let Panel::Tensors(p) = &mut self.panel
            {
                p.selected = selected;
            }
        }
    }

    pub fn tensor_key(&mut self, a: Action) {
        let h = self.height(Pane::Nodes);
        let Panel::Tensors(p) = &mut self.panel else {
            return;
        };
        let n = p.tensors.as_ref().map_or(0, |t| t.len());
        if n == 0 {
            return;
        }
        let cur = p.selected;
        let to = match a {
            Action::Down | Action::Right => cur + 1,
            Action::Up | Action::Left => cur.saturating_sub(1),
            Action::PageDown => cur + h,
            Action::PageUp => cur.saturating_sub(h),
            Action::Home => 0,
            Action::End => n - 1,
            Action::Expand => cur,
            _ => return,
        }
        .min(n - 1);
        if to != cur || a == Action::Expand {
            self.select_tensor(to);
        }
    }

    /// Selects tensor `i`: shows its bytes and starts its statistics.
    pub fn select_tensor(&mut self, i: usize) {
        let h = self.height(Pane::Nodes);
        let Panel::Tensors(p) = &mut self.panel else {
            return;
        };
        let Some(t) = p.tensors.as_ref().and_then(|t| t.get(i)).cloned() else {
            return;
        };
        p.selected = i;
        if i < p.offset {
            p.offset = i;
        } else if i >= p.offset + h {
            p.offset = i + 1 - h;
        }
        self.show_bytes(t.source, t.offset);
        let Some(data) = self.session.tree().get(t.source).map(|e| e.data()) else {
            return;
        };
        let id = self.worker.spawn(STATS, move |_, stop, report, id| {
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
                values: first.iter().map(|v| show(*v, t.dtype)).collect(),
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
        if let Panel::Tensors(p) = &mut self.panel {
            p.detail = Some(Detail {
                index: i,
                id,
                ..Detail::default()
            });
        }
    }

    /// Shows `offset` of extraction `ext` in the hex view without moving the
    /// focus.
    fn show_bytes(&mut self, ext: ExtId, offset: u64) {
        if ext != self.ext() {
            let h = self.height(Pane::Extractions);
            let session = self.session.clone();
            let t = session.tree();
            self.exts.reveal(&Exts(&t), &ext, h);
            drop(t);
            self.on_ext_changed();
        }
        self.text_mode = false;
        self.set_cursor(offset, false);
    }

    /// Asks where to write the selected tensor as .npy.
    pub fn ask_export(&mut self) {
        let Panel::Tensors(p) = &self.panel else {
            self.say("export works on a tensor: press T for the tensor table");
            return;
        };
        let Some(t) = p.current() else { return };
        let flat = t.name.replace(['/', '\\'], "_");
        let name =
            crate::extract::sanitize_component(flat.as_bytes()).unwrap_or_else(|| "tensor".into());
        self.overlay = Overlay::Prompt {
            kind: PromptKind::Export,
            input: format!("{name}.npy"),
        };
    }

    /// Writes the selected tensor to `path` (a new file) in the background.
    pub fn export(&mut self, path: &str) {
        let Panel::Tensors(p) = &mut self.panel else {
            return;
        };
        let Some(t) = p.current().cloned() else {
            return;
        };
        let path = PathBuf::from(path.trim());
        if path.as_os_str().is_empty() {
            return;
        }
        if path.exists() {
            self.say(format!(
                "{} exists: choose another name",
                crate::name::escape_str(&path.display().to_string())
            ));
            return;
        }
        let Some(data) = self.session.tree().get(t.source).map(|e| e.data()) else {
            return;
        };
        let length = t.length;
        let id = self.worker.spawn(EXPORT, move |_, stop, report, id| {
            let progress = |done, total| {
                report(Box::new(Report::Progress { id, done, total }));
            };
            let result = export_npy(&t, &*data, &path, stop, &progress);
            report(Box::new(Report::Exported { id, path, result }));
        });
        if let Panel::Tensors(p) = &mut self.panel {
            p.export = Some((id, 0, length));
        }
    }

    pub fn on_tensors(&mut self, r: Report) {
        let Panel::Tensors(p) = &mut self.panel else {
            return;
        };
        match r {
            Report::Table { id, tensors } if id == p.id => {
                let n = tensors.len();
                p.tensors = Some(tensors);
                if n > 0 {
                    let i = p.selected.min(n - 1);
                    self.select_tensor(i);
                }
            }
            Report::Exported { id, path, result } if p.export.is_some_and(|e| e.0 == id) => {
                p.export = None;
                let shown = crate::name::escape_str(&path.display().to_string());
                match result {
                    Ok(n) => self.say(format!("wrote {shown} ({})", human(n))),
                    Err(e) => self.say(format!("could not write {shown}: {e}")),
                }
            }
            Report::Progress { id, done, total } => {
                if let Some(e) = &mut p.export
                    && e.0 == id
                {
                    (e.1, e.2) = (done, total);
                } else if let Some(d) = &mut p.detail
                    && d.id == id
                {
                    d.progress = Some((done, total));
                }
            }
            Report::Values { id, values } => {
                if let Some(d) = p.detail.as_mut().filter(|d| d.id == id) {
                    d.values = Some(values);
                }
            }
            Report::Stats { id, stats } => {
                if let Some(d) = p.detail.as_mut().filter(|d| d.id == id) {
                    d.stats = Some(stats);
                    d.progress = None;
                }
            }
            Report::Failed { id, why } => {
                if let Some(d) = p.detail.as_mut().filter(|d| d.id == id) {
                    d.error = Some(why);
                    d.progress = None;
                }
            }
            _ => {}
        }
    }

    /// The selected tensor's bytes, to mark in the hex view.
    pub fn tensor_bytes(&self) -> Option<(ExtId, Range)> {
        match &self.panel {
            Panel::Tensors(p) => p.current().map(|t| {
                (
                    t.source,
                    Range::new(t.offset, t.offset.saturating_add(t.length)),
                )
            }),
            _ => None,
        }
    }
}

/// The tensor table, drawn in place of the node tree.
pub fn draw_table(app: &App, p: &mut TensorPanel, buf: &mut Buffer, inner: Rect) {
    let th = &app.theme;
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
    p.offset = p.offset.min(ts.len().saturating_sub(h));
    if p.selected < p.offset || p.selected >= p.offset + h {
        p.offset = p.selected.saturating_sub(h / 2);
    }
    for (row, t) in ts.iter().enumerate().skip(p.offset).take(h) {
        let y = inner.y + (row - p.offset) as u16;
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
        let name = crate::name::escape_str(&t.name);
        let (x, _) = buf.set_stringn(
            inner.x + 1,
            y,
            &name,
            inner.width.saturating_sub(1) as usize,
            name_style.patch(base),
        );
        let rest = format!("  {} {}", t.dtype.as_str(), shape(&t.shape));
        let w = (inner.x + inner.width).saturating_sub(x) as usize;
        buf.set_stringn(x, y, rest, w, th.dim.patch(base));
    }
}

/// A shape as drawn: the first 16 dimensions (a pickle can spell a million,
/// and rows are drawn every frame).
fn shape(s: &[u64]) -> String {
    tensor::shape_text(s)
}

/// The selected tensor's details, drawn in the inspector.
pub fn detail_lines<'a>(app: &App, p: &TensorPanel, width: u16) -> Vec<Line<'a>> {
    let th = &app.theme;
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
        Span::styled(crate::name::escape_str(&t.name), th.title),
        Span::styled(format!("  {} of {count}", p.selected + 1), th.dim),
    ]));
    let mut layout = format!(
        "{} {}  {} elements",
        t.dtype.as_str(),
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
    let src = app
        .session
        .tree()
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
            crate::name::escape_str(&src)
        )),
    ]));
    let mut st = vec![
        label("status"),
        Span::styled(t.status.as_str(), th.status(t.status)),
    ];
    if let Some(d) = &t.detail {
        st.push(Span::raw(format!(": {}", crate::name::escape_str(d))));
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
        let mut s = v.join(" ");
        if t.numel() > v.len() as u64 {
            s.push_str(" …");
        }
        let s: String = s.chars().take(w.saturating_sub(9) * 2).collect();
        lines.push(Line::from(vec![label("values"), Span::raw(s)]));
    }
    if let Some(e) = &d.error {
        lines.push(Line::from(vec![
            label("error"),
            Span::styled(crate::name::escape_str(e), th.corrupt),
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
        let g = |x: f64| format!("{x:.6}");
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

/// A value as NumPy prints its own dtype: float32 and narrower at float32
/// precision (`0.1`, not the `f64` expansion of it).
fn show(v: Value, dtype: Dtype) -> String {
    match v {
        Value::Float(x) if dtype.bits() <= 32 && x.is_finite() => {
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
    data: &dyn crate::data::Source,
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
