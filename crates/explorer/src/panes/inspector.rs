//! The inspector: the selected node (or extraction) with its range, status
//! and value, where the cursor is in the file, and the bytes at the cursor
//! read as numbers, both byte orders.

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::keys::Action;
use crate::panel::{self, Component, Cx, Look, Reply, cut_middle};
use crate::readings::readings;
use crate::widgets::models::Nodes;
use pparse::data::file_offset;
use pparse::extraction::ExtId;
use pparse::name::escape_str;
use pparse::util::thousands;

/// The inspector pane: what it shows is handed to it before each frame.
#[derive(Debug, Clone, Default)]
pub struct Inspector {
    ext: ExtId,
    node: Option<Vec<usize>>,
    /// The hex cursor, and the offset shown as "cursor" (the first text
    /// line in text mode).
    cursor: u64,
    here: u64,
    /// The bytes at the cursor, once read.
    bytes: Option<Vec<u8>>,
}

impl Inspector {
    /// What the next frame shows: extraction `ext`, its selected node, the
    /// cursor and the offset shown for it, and the bytes there if cached.
    pub fn prepare(
        &mut self,
        ext: ExtId,
        node: Option<Vec<usize>>,
        (cursor, here): (u64, u64),
        bytes: Option<Vec<u8>>,
    ) {
        *self = Inspector {
            ext,
            node,
            cursor,
            here,
            bytes,
        };
    }

    fn lines<'a>(&self, look: &Look, width: u16) -> Vec<Line<'a>> {
        let th = look.theme;
        let t = look.tree;
        let mut lines: Vec<Line> = Vec::new();
        let Some(e) = t.get(self.ext) else {
            return lines;
        };
        let label = |s: &str| Span::styled(format!("{s:<9}"), th.dim);
        let m = Nodes(&e.nodes);
        match self.node.as_ref().and_then(|p| m.get(p)) {
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
                let mut s = vec![label("status"), Span::styled(st.as_str(), th.status(st))];
                if let Some(d) = &n.damage {
                    s.push(Span::raw(format!(": {}", d.reason)));
                }
                lines.push(Line::from(s));
                if let Some(val) = &n.value {
                    lines.push(Line::from(vec![label("value"), Span::raw(val.to_string())]));
                }
            }
            None => {
                let st = t.status_of(self.ext);
                lines.push(Line::from(vec![
                    label("extract"),
                    Span::styled(e.display_name(), th.title),
                    Span::styled(format!("  {}", e.kind.as_str()), th.dim),
                ]));
                let mut s = vec![label("status"), Span::styled(st.as_str(), th.status(st))];
                let worst = (0..e.damage.len()).max_by_key(|&k| e.damage[k].status);
                let cause = worst.map(|k| (k, t.root_cause(self.ext, k)));
                match cause {
                    // Inherited: what this member's bytes lie in, then the
                    // cause once, not the chain between.
                    Some((_, (root, j))) if root != self.ext => {
                        // As `pparse tree` says it: whose damage it is.
                        let said = pparse::report::tree::Causes::default().detail(t, self.ext);
                        s.push(Span::raw(format!(": {}", said.unwrap_or_default())));
                        lines.push(Line::from(s));
                        lines.push(Line::from(vec![
                            label("cause"),
                            Span::raw(t.exts[root].damage[j].to_string()),
                        ]));
                    }
                    _ => {
                        if let Some(d) = e.detail() {
                            s.push(Span::raw(format!(": {d}")));
                        }
                        lines.push(Line::from(s));
                    }
                }
                if self.ext != 0 {
                    // What `pparse cat FILE PATH` takes.
                    let path = escape_str(&t.path_of(self.ext));
                    let room = (width as usize).saturating_sub(9);
                    lines.push(Line::from(vec![
                        label("path"),
                        Span::raw(cut_middle(&path, room)),
                    ]));
                }
                for note in e.notes().iter().take(3) {
                    lines.push(Line::from(vec![label("note"), Span::raw(note.to_string())]));
                }
            }
        }
        let (phys, exact) = file_offset(&e.data(), self.cursor);
        let here = self.here;
        lines.push(Line::from(vec![
            label("cursor"),
            Span::raw(format!("{here:#x} ({here})")),
            Span::styled(
                if self.ext == 0 {
                    String::new()
                } else if exact {
                    format!("  file offset {phys:#x}")
                } else {
                    format!("  decoded; from file bytes near {phys:#x}")
                },
                th.dim,
            ),
        ]));
        if let Some(bytes) = &self.bytes {
            let rs = readings(bytes);
            let half = rs.len().div_ceil(2);
            let w = (width.saturating_sub(2) as usize / 2).saturating_sub(10);
            for i in 0..half {
                let mut spans = Vec::new();
                for r in [rs.get(i), rs.get(i + half)].into_iter().flatten() {
                    spans.push(Span::styled(format!("{:<8}", r.label), th.dim));
                    let val = match &r.be {
                        Some(be) => format!("{} | {}", r.le, be),
                        None => r.le.clone(),
                    };
                    let val = escape_str(&val);
                    let val = if val.chars().count() > w {
                        let kept: String = val.chars().take(w.saturating_sub(1)).collect();
                        format!("{kept}…")
                    } else {
                        val
                    };
                    spans.push(Span::raw(format!("{val:<w$}  ")));
                }
                lines.push(Line::from(spans));
            }
        }
        lines
    }
}

impl Component for Inspector {
    fn on_key(&mut self, _a: Action, _cx: &Cx) -> Reply {
        Reply::default()
    }

    fn click(&mut self, _at: Position, _cx: &Cx) -> Reply {
        Reply::default()
    }

    fn draw(&self, look: &Look, buf: &mut Buffer, area: Rect) {
        let inner = panel::frame(look, " Inspector (le | be) ".into(), buf, area);
        let w = inner.width as usize;
        let lines: Vec<Line> = self
            .lines(look, area.width)
            .into_iter()
            .map(|l| panel::fit(l, w))
            .collect();
        Paragraph::new(lines).render(inner, buf);
    }
}

#[cfg(test)]
mod tests {
    use crate::panel::cut_middle;

    #[test]
    fn long_paths_lose_their_middle() {
        assert_eq!(cut_middle("a/b/c.txt", 20), "a/b/c.txt");
        assert_eq!(cut_middle("abcdefghij", 5), "ab…ij");
        assert_eq!(cut_middle("abcdefghij", 6), "ab…hij");
    }
}
