//! The mouse: clicks, the wheel and dragging the split.

use super::*;

impl App {
    /// A mouse event.
    pub fn on_mouse(&mut self, m: MouseEvent) {
        let (x, y) = (m.column, m.row);
        let l = self.layout;
        let hit = l.hit(x, y);
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if x == l.split_x && y < l.status.y {
                    self.drag.split = true;
                    return;
                }
                if let Some((p, at)) = hit {
                    self.focus = p;
                    self.drag.pane = Some(p);
                    if let Some(at) = at {
                        self.click(p, at);
                    }
                }
            }
            MouseEventKind::Drag(MouseButton::Left) => {
                if self.drag.split {
                    let w = l.status.width.max(1);
                    self.split = ((x as u32 * 100 / w as u32) as u16).clamp(15, 85);
                } else if let Some((p, Some(at))) = hit
                    && self.drag.pane == Some(p)
                {
                    self.click(p, at);
                }
            }
            MouseEventKind::Up(_) => self.drag = Drag::default(),
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let down = m.kind == MouseEventKind::ScrollDown;
                let Some((p, _)) = hit else { return };
                let old = self.focus;
                self.focus = p;
                let a = if down { Action::Down } else { Action::Up };
                for _ in 0..3 {
                    self.act(a);
                }
                self.focus = old;
            }
            _ => {}
        }
    }

    /// A click at `(x, y)` inside `pane`'s border.
    pub(super) fn click(&mut self, pane: Pane, (x, y): (u16, u16)) {
        let at = Position { x, y };
        let before = self.ext();
        let reply = match pane {
            Pane::Nodes if !matches!(self.panel, Panel::None) => {
                return self.with_panel(|p, cx| p.click(at, cx));
            }
            // The plot, not bytes.
            Pane::Hex if self.panel.takes_main() => return,
            Pane::Extractions => self.exts.click(at, &cx!(self, Pane::Extractions)),
            Pane::Nodes => self.nodes.click(at, &cx!(self, Pane::Nodes)),
            Pane::Hex => self.hex.click(at, &cx!(self, Pane::Hex)),
        };
        if self.ext() != before {
            self.hex.forget_highlight();
        }
        self.apply(reply);
    }
}
