//! The metrics panel (`M`): the numeric metrics of a W&B run log's
//! history, one at a time plotted against its steps.
//!
//! A first pass over the log, on a background task that reports its
//! progress, lists the metric names with their counts and, while they fit
//! in the explorer's `metric_budget` points, keeps every series, so moving through
//! the list is instant. The series of a log too large for that are read
//! again for each metric selected (selecting another stops the read) and the
//! last few are kept. A series longer than `MAX_BUCKETS` values is kept
//! as min/max buckets, so memory stays bounded and the plot keeps every spike.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Widget};

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, SidePanel};
use crate::theme::Theme;
use crate::worker::{Payload, To, Worker};
use pparse::engine::Session;

use pparse::extraction::{ExtId, Tree};
use pparse::name::escape_str;
use pparse::offer::MetricsScan;
use pparse::offer::metrics::{MAX_NAMES, Scan, Series};
use pparse::util::thousands;

/// The worker's slot for reading a log's metrics.
pub(super) const SLOT: &str = "metrics";
/// Series read one at a time that are kept.
const KEEP_READ: usize = 8;

/// A background task's report.
enum Report {
    Progress {
        id: u64,
        done: u64,
        total: u64,
    },
    Scanned {
        id: u64,
        scan: Box<Scan>,
    },
    Series {
        id: u64,
        name: String,
        series: Box<Series>,
    },
}

/// The panel's state.
#[derive(Clone, Debug)]
pub struct MetricsPanel {
    /// The log's extraction and its name.
    pub ext: ExtId,
    /// How its format reads metrics.
    reader: MetricsScan,
    /// Points all series may hold before the first pass gives them up.
    budget: usize,
    name: String,
    /// The running task (reports of others are stale).
    pub id: u64,
    /// The log's bytes were still arriving when the scan started.
    pub partial: bool,
    progress: Option<(u64, u64)>,
    /// The first pass, once done (its series moved to `series`).
    pub scan: Option<Arc<Scan>>,
    selected: usize,
    offset: usize,
    series: HashMap<String, Arc<Series>>,
    /// Series read one at a time, oldest first.
    read: VecDeque<String>,
    /// The metric whose series is being read.
    pub reading: Option<String>,
}

impl MetricsPanel {
    /// The selected metric's name.
    pub fn current(&self) -> Option<&str> {
        let scan = self.scan.as_ref()?;
        scan.names.get(self.selected).map(|(n, _)| n.as_str())
    }

    /// The selected metric's series, once read.
    pub fn current_series(&self) -> Option<&Series> {
        self.series.get(self.current()?).map(|s| &**s)
    }
}

/// The log at or near `id` whose format offers metrics (itself, an
/// ancestor, or the first below it), and its format's scan.
fn find_log(t: &Tree, id: ExtId) -> Option<(ExtId, MetricsScan)> {
    let scan_of = |x: ExtId| {
        t.get(x)
            .and_then(pparse::parsers::format_of)?
            .offers
            .metrics
    };
    let mut at = Some(id);
    while let Some(x) = at {
        if let Some(scan) = scan_of(x) {
            return Some((x, scan));
        }
        at = t.get(x).and_then(|e| e.parent());
    }
    t.subtree(id)
        .into_iter()
        .find_map(|x| Some((x, scan_of(x)?)))
}

impl MetricsPanel {
    /// The metrics of the log at or near `ext` (itself, an ancestor, or the
    /// first below it); `None` if there is none.
    pub fn find(session: &Session, worker: &Worker, ext: ExtId, budget: usize) -> Option<Self> {
        let (ext, reader) = find_log(&session.tree(), ext)?;
        MetricsPanel::open(session, worker, ext, reader, budget, 0)
    }

    /// Starts the first pass over the log `ext`, selecting metric
    /// `selected`; `budget` is how many points all series may hold.
    fn open(
        session: &Session,
        worker: &Worker,
        ext: ExtId,
        reader: MetricsScan,
        budget: usize,
        selected: usize,
    ) -> Option<MetricsPanel> {
        let (data, name) = session
            .tree()
            .get(ext)
            .map(|e| (e.data(), e.display_name()))?;
        let partial = !data.is_final();
        let id = worker.spawn(SLOT, To::Metrics, move |_, stop, report, id| {
            let progress = |done, total| report(Box::new(Report::Progress { id, done, total }));
            if let Some(scan) = reader(&*data, None, budget, stop, &progress) {
                report(Box::new(Report::Scanned {
                    id,
                    scan: Box::new(scan),
                }));
            }
        });
        Some(MetricsPanel {
            ext,
            reader,
            budget,
            name,
            id,
            partial,
            progress: None,
            scan: None,
            selected,
            offset: 0,
            series: HashMap::new(),
            read: VecDeque::new(),
            reading: None,
        })
    }

    /// The log read again once the bytes it was read from are complete,
    /// keeping the selection; `None` while there is no need.
    pub fn refreshed(&self, session: &Session, worker: &Worker) -> Option<Self> {
        if !self.partial || self.scan.is_none() {
            return None;
        }
        let fin = session.tree().get(self.ext).is_some_and(|e| e.is_final());
        if !fin {
            return None;
        }
        MetricsPanel::open(
            session,
            worker,
            self.ext,
            self.reader,
            self.budget,
            self.selected,
        )
    }

    /// Moves by a key; `page` is the rows of the list.
    pub fn on_key(&mut self, a: Action, page: usize, session: &Session, worker: &Worker) {
        let n = self.scan.as_ref().map_or(0, |s| s.names.len());
        if n == 0 {
            return;
        }
        let cur = self.selected;
        let Some(to) = panel::list_target(a, cur, n, page) else {
            return;
        };
        if to != cur || a == Action::Expand {
            self.select(to, page, session, worker);
        }
    }

    /// Selects the metric on row `row` of a list of `rows` rows.
    pub fn click(&mut self, row: usize, rows: usize, session: &Session, worker: &Worker) {
        let to = self.top(rows) + row;
        if self.scan.as_ref().is_some_and(|s| to < s.names.len()) {
            self.select(to, rows, session, worker);
        }
    }

    /// Selects metric `i`; reads its series unless it is at hand.
    pub fn select(&mut self, i: usize, page: usize, session: &Session, worker: &Worker) {
        let Some(name) = self
            .scan
            .as_ref()
            .and_then(|s| s.names.get(i))
            .map(|(n, _)| n.clone())
        else {
            return;
        };
        self.selected = i;
        panel::scroll_to(&mut self.offset, i, page);
        if self.series.contains_key(&name) {
            if let Some(k) = self.read.iter().position(|r| *r == name) {
                let r = self.read.remove(k).expect("found");
                self.read.push_back(r);
            }
            if self.reading.take().is_some() {
                worker.stop(SLOT);
                self.progress = None;
            }
            return;
        }
        let Some(data) = session.tree().get(self.ext).map(|e| e.data()) else {
            return;
        };
        let want = name.clone();
        let scan = self.reader;
        self.id = worker.spawn(SLOT, To::Metrics, move |_, stop, report, id| {
            let progress = |done, total| report(Box::new(Report::Progress { id, done, total }));
            if let Some(mut scan) = scan(&*data, Some(&want), 0, stop, &progress) {
                let series = scan.series.remove(&want).unwrap_or_default();
                report(Box::new(Report::Series {
                    id,
                    name: want,
                    series: Box::new(series),
                }));
            }
        });
        self.reading = Some(name);
        self.progress = None;
    }

    /// Takes a background task's report.
    fn on_report(&mut self, r: Report, page: usize, session: &Session, worker: &Worker) {
        match r {
            Report::Progress { id, done, total } if id == self.id => {
                self.progress = Some((done, total));
            }
            Report::Scanned { id, scan } if id == self.id => {
                let mut scan = *scan;
                self.progress = None;
                self.series = std::mem::take(&mut scan.series)
                    .into_iter()
                    .map(|(k, v)| (k, Arc::new(v)))
                    .collect();
                let n = scan.names.len();
                self.scan = Some(Arc::new(scan));
                if n > 0 {
                    let i = self.selected.min(n - 1);
                    self.select(i, page, session, worker);
                }
            }
            Report::Series { id, name, series } if id == self.id => {
                self.progress = None;
                self.reading = None;
                self.series.insert(name.clone(), Arc::new(*series));
                self.read.push_back(name);
                while self.read.len() > KEEP_READ {
                    if let Some(old) = self.read.pop_front() {
                        self.series.remove(&old);
                    }
                }
            }
            _ => {}
        }
    }

    /// The title of its pane.
    pub fn title(&self) -> String {
        let n = self
            .scan
            .as_ref()
            .map_or(String::new(), |s| format!(" ({})", s.names.len()));
        format!(" Metrics: {}{n} ", escape_str(&self.name))
    }

    /// The first row shown when the list has `rows` rows: the selection is
    /// kept in view.
    fn top(&self, rows: usize) -> usize {
        let len = self.scan.as_ref().map_or(0, |s| s.names.len());
        panel::first_row(self.offset, self.selected, len, rows)
    }
}

/// A number, short: integers as such, else six significant digits.
pub fn num(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    let a = x.abs();
    if (1e-4..1e6).contains(&a) {
        let digits = (5 - a.log10().floor() as i32).max(0) as usize;
        let s = format!("{x:.digits$}");
        return s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    let s = format!("{x:.5e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let m = m.trim_end_matches('0').trim_end_matches('.');
            format!("{m}e{e}")
        }
        None => s,
    }
}

fn pct(done: u64, total: u64) -> u64 {
    (done.min(total) * 100).checked_div(total).unwrap_or(0)
}

impl Component for MetricsPanel {
    fn on_key(&mut self, a: Action, cx: &Cx) -> Reply {
        MetricsPanel::on_key(self, a, cx.rows, cx.session, cx.worker);
        Reply::default()
    }
    fn click(&mut self, at: Position, cx: &Cx) -> Reply {
        MetricsPanel::click(self, at.y as usize, cx.rows, cx.session, cx.worker);
        Reply::default()
    }
    fn on_done(&mut self, d: Payload, cx: &Cx) -> Result<Reply, Payload> {
        let r = d.downcast::<Report>()?;
        self.on_report(*r, cx.rows, cx.session, cx.worker);
        Ok(Reply::default())
    }
    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let inner = panel::frame(look, self.title(), buf, area);
        draw_list(look.theme, self, buf, inner);
    }
}

impl SidePanel for MetricsPanel {
    fn address(&self) -> To {
        To::Metrics
    }
    fn title(&self) -> String {
        MetricsPanel::title(self)
    }
    fn draw_main(&self, look: &Look, buf: &mut Buffer, area: Rect) -> bool {
        draw_chart(look.theme, look.focused, self, buf, area);
        true
    }
    fn takes_main(&self) -> bool {
        true
    }
    fn inspector<'a>(
        &self,
        th: &Theme,
        _tree: &Tree,
        _width: u16,
    ) -> (&'static str, Vec<Line<'a>>) {
        (" Metric ", detail_lines(th, self))
    }
    fn close(&mut self, worker: &Worker) {
        worker.stop(SLOT);
    }
    fn tick(&mut self, cx: &Cx) {
        if let Some(fresh) = self.refreshed(cx.session, cx.worker) {
            *self = fresh;
        }
    }
}

/// The metric list, drawn in place of the node tree.
fn draw_list(th: &Theme, p: &MetricsPanel, buf: &mut Buffer, inner: Rect) {
    let w = inner.width.saturating_sub(1) as usize;
    let Some(scan) = &p.scan else {
        let msg = match p.progress {
            Some((d, t)) => format!("reading the log… {}%", pct(d, t)),
            None => "reading the log…".into(),
        };
        buf.set_stringn(inner.x + 1, inner.y, msg, w, th.dim);
        return;
    };
    if scan.names.is_empty() {
        let msg = format!(
            "no numeric metrics in {} history records",
            thousands(scan.history)
        );
        buf.set_stringn(inner.x + 1, inner.y, msg, w, th.dim);
        return;
    }
    let h = inner.height as usize;
    let top = p.top(h);
    for (row, (name, count)) in scan.names.iter().enumerate().skip(top).take(h) {
        let y = inner.y + (row - top) as u16;
        let base = if row == p.selected {
            th.row_selected
        } else {
            Style::new()
        };
        buf.set_style(Rect::new(inner.x, y, inner.width, 1), base);
        let (x, _) = buf.set_stringn(inner.x + 1, y, escape_str(name), w, th.text.patch(base));
        let rest = format!("  {}", thousands(*count));
        let left = (inner.x + inner.width).saturating_sub(x) as usize;
        buf.set_stringn(x, y, rest, left, th.dim.patch(base));
    }
}

/// Keeps the lowest and highest point of each of `cols` columns of the
/// x range, so a frame never draws more segments than the chart has dots.
fn thin(points: &[(f64, f64)], cols: usize, x0: f64, x1: f64) -> Vec<(f64, f64)> {
    if points.len() <= cols * 4 || x1 <= x0 {
        return points.to_vec();
    }
    let col = |x: f64| (((x - x0) / (x1 - x0)) * cols as f64) as usize;
    let mut out = Vec::with_capacity(cols * 2 + 2);
    let mut i = 0;
    while i < points.len() {
        let c = col(points[i].0);
        let (mut lo, mut hi) = (points[i], points[i]);
        let mut j = i + 1;
        while j < points.len() && col(points[j].0) == c {
            if points[j].1 < lo.1 {
                lo = points[j];
            }
            if points[j].1 > hi.1 {
                hi = points[j];
            }
            j += 1;
        }
        let (a, b) = if lo.0 <= hi.0 { (lo, hi) } else { (hi, lo) };
        out.push(a);
        if b != a {
            out.push(b);
        }
        i = j;
    }
    out
}

/// The selected metric plotted against its steps, drawn in place of the
/// hex view.
/// The selected metric's plot, drawn in place of the hex view; `focused`
/// when that pane has the focus.
fn draw_chart(th: &Theme, focused: bool, p: &MetricsPanel, buf: &mut Buffer, area: Rect) {
    let name = p.current().map(escape_str).unwrap_or_default();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(if focused {
            th.border_focused
        } else {
            th.border
        })
        .title(Span::styled(
            if name.is_empty() {
                " Plot ".to_string()
            } else {
                format!(" {name} by step ")
            },
            th.title,
        ));
    let inner = block.inner(area);
    let say = |buf: &mut Buffer, msg: String| {
        block.clone().render(area, buf);
        buf.set_stringn(
            inner.x + 1,
            inner.y,
            msg,
            inner.width.saturating_sub(1) as usize,
            th.dim,
        );
    };
    let Some(s) = p.current_series() else {
        let msg = match (&p.scan, p.progress) {
            (None, _) => String::new(),
            (Some(_), Some((d, t))) => format!("reading {name}… {}%", pct(d, t)),
            (Some(_), None) if p.reading.is_some() => format!("reading {name}…"),
            (Some(_), None) => String::new(),
        };
        return say(buf, msg);
    };
    if s.points.is_empty() {
        let msg = format!(
            "no finite values to plot ({} NaN, {} infinite)",
            thousands(s.nan),
            thousands(s.inf)
        );
        return say(buf, msg);
    }
    let (mut x0, mut x1) = (s.points[0].0, s.points[s.points.len() - 1].0);
    if x1 <= x0 {
        (x0, x1) = (x0 - 0.5, x1 + 0.5);
    }
    let (mut y0, mut y1) = (s.min, s.max);
    if y1 <= y0 {
        let pad = (y0.abs() * 0.05).max(0.5);
        (y0, y1) = (y0 - pad, y1 + pad);
    }
    let pts = thin(&s.points, inner.width as usize * 2, x0, x1);
    let data = Dataset::default()
        .marker(Marker::Braille)
        .graph_type(GraphType::Line)
        .style(th.title)
        .data(&pts);
    let labels = |a: f64, b: f64| [num(a), num((a + b) / 2.0), num(b)];
    Chart::new(vec![data])
        .block(block)
        .x_axis(
            Axis::default()
                .title(Span::styled("step", th.dim))
                .style(th.dim)
                .bounds([x0, x1])
                .labels(labels(x0, x1)),
        )
        .y_axis(
            Axis::default()
                .style(th.dim)
                .bounds([y0, y1])
                .labels(labels(y0, y1)),
        )
        .render(area, buf);
}

/// The selected metric's figures, drawn in the inspector.
fn detail_lines<'a>(th: &Theme, p: &MetricsPanel) -> Vec<Line<'a>> {
    let label = |s: &str| Span::styled(format!("{s:<9}"), th.dim);
    let mut lines = Vec::new();
    let Some(scan) = &p.scan else {
        if let Some((d, t)) = p.progress {
            lines.push(Line::from(vec![
                label("log"),
                Span::styled(format!("reading… {}%", pct(d, t)), th.dim),
            ]));
        }
        return lines;
    };
    if let Some(name) = p.current() {
        lines.push(Line::from(vec![
            label("metric"),
            Span::styled(escape_str(name), th.title),
            Span::styled(
                format!("  {} of {}", p.selected + 1, scan.names.len()),
                th.dim,
            ),
        ]));
    }
    if let Some(s) = p.current_series() {
        let bad = s.nan + s.inf > 0;
        let (min, max) = if s.finite() > 0 {
            (num(s.min), num(s.max))
        } else {
            ("-".into(), "-".into())
        };
        lines.push(Line::from(vec![
            label("values"),
            Span::raw(format!(
                "count {}  min {min}  max {max}  last {}  ",
                thousands(s.count),
                num(s.last)
            )),
            Span::styled(
                format!("NaN {}  inf {}", thousands(s.nan), thousands(s.inf)),
                if bad { th.corrupt } else { th.text },
            ),
        ]));
        let mut steps = match s.steps {
            Some((a, b)) => format!("{}..{}", num(a), num(b)),
            None => "none".into(),
        };
        if s.downsampled() {
            steps.push_str(&format!(
                "  ({} points: min and max of every {} values)",
                thousands(s.points.len() as u64),
                thousands(s.width)
            ));
        }
        lines.push(Line::from(vec![label("steps"), Span::raw(steps)]));
    } else if let Some((d, t)) = p.progress {
        lines.push(Line::from(vec![
            label("values"),
            Span::styled(format!("reading… {}%", pct(d, t)), th.dim),
        ]));
    }
    let mut log = format!(
        "{} records, {} history",
        thousands(scan.records),
        thousands(scan.history)
    );
    if scan.damaged > 0 {
        log.push_str(&format!(", {} damaged", thousands(scan.damaged)));
    }
    if scan.unlisted > 0 {
        log.push_str(&format!(
            "; names past {} not listed ({} values)",
            thousands(MAX_NAMES as u64),
            thousands(scan.unlisted)
        ));
    }
    lines.push(Line::from(vec![
        label("log"),
        Span::styled(log, if scan.damaged > 0 { th.corrupt } else { th.dim }),
    ]));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.0 / 120.0), "0.00833333");
        assert_eq!(num(119.0 / 120.0), "0.991667");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(-2.5e-7), "-2.5e-7");
        assert_eq!(num(f64::NAN), "NaN");
        assert_eq!(num(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn thinning_keeps_each_columns_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, (i % 10) as f64)).collect();
        let t = thin(&pts, 100, 0.0, 9_999.0);
        assert!(t.len() <= 202, "{}", t.len());
        assert!(t.iter().any(|p| p.1 == 9.0) && t.iter().any(|p| p.1 == 0.0));
    }
}
