//! Keys: what each does, pane by pane, and the prompts.

use super::*;

impl App {
    /// A key press.
    pub fn on_key(&mut self, k: KeyEvent) {
        if k.kind != ratatui::crossterm::event::KeyEventKind::Press {
            return;
        }
        if let Overlay::Prompt { kind, input } = &mut self.overlay {
            let kind = *kind;
            match k.code {
                KeyCode::Esc => self.overlay = Overlay::None,
                KeyCode::Enter => {
                    let text = input.clone();
                    self.overlay = Overlay::None;
                    match kind {
                        PromptKind::Goto => self.goto(&text),
                        PromptKind::Search => self.start_search(text),
                        PromptKind::Export => self.export(&text),
                        PromptKind::Save => self.save(&text),
                        PromptKind::Query => self.start_query(text),
                    }
                }
                KeyCode::Backspace => {
                    input.pop();
                }
                // As in a shell: the line is cleared, to type a path anew.
                KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    input.clear();
                }
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    self.quit = true;
                }
                // `gg`, as in vim and less: a `g` that no offset follows
                // goes to the top instead of asking where.
                KeyCode::Char('g') if kind == PromptKind::Goto && input.is_empty() => {
                    self.overlay = Overlay::None;
                    self.act(Action::Home);
                }
                KeyCode::Char(c) => input.push(c),
                _ => {}
            }
            return;
        }
        if self.overlay == Overlay::Copy {
            self.overlay = Overlay::None;
            if let KeyCode::Char(c) = k.code {
                self.copy(c);
            }
            return;
        }
        let Some(a) = keys::action(k) else { return };
        if self.overlay == Overlay::Help {
            match a {
                Action::Help | Action::Cancel | Action::Quit => self.overlay = Overlay::None,
                Action::Up => self.help_top = self.help_top.saturating_sub(1),
                Action::Down => self.help_top += 1,
                Action::PageUp => self.help_top = self.help_top.saturating_sub(self.help_page()),
                Action::PageDown => self.help_top += self.help_page(),
                Action::Home => self.help_top = 0,
                Action::End => self.help_top = usize::MAX / 2,
                _ => {}
            }
            if k.modifiers.contains(KeyModifiers::CONTROL) && a == Action::Quit {
                self.quit = true;
            }
            return;
        }
        self.message = None;
        self.jumped = false;
        self.act(a);
    }

    /// Does what a key asks for.
    pub fn act(&mut self, a: Action) {
        match a {
            Action::Quit => self.quit = true,
            Action::Help => {
                self.help_top = 0;
                self.overlay = Overlay::Help;
            }
            Action::Cancel => {
                let ext = self.ext();
                if !self.hex.drop_mark(ext) && !self.search.cancel(&self.worker) {
                    self.close_panel();
                }
            }
            Action::Mark => self.toggle_mark(),
            Action::Save => self.ask_save(),
            Action::Copy => self.overlay = Overlay::Copy,
            Action::Zoom => self.zoom = !self.zoom,
            Action::Narrower | Action::Wider => {
                let by: i32 = if a == Action::Wider { 5 } else { -5 };
                self.split = (self.split as i32 + by).clamp(15, 85) as u16;
                self.zoom = false;
            }
            Action::Stepper => self.toggle_stepper(),
            Action::Tensors => self.toggle_tensors(),
            Action::Metrics => self.toggle_metrics(),
            Action::Problems => self.toggle_problems(),
            Action::Query => self.prompt(PromptKind::Query, self.last_query.clone()),
            Action::Definition => self.definition(),
            Action::NextUse => self.step_use(true),
            Action::PrevUse => self.step_use(false),
            Action::Export => self.ask_export(),
            Action::NextPane => self.cycle(1),
            Action::PrevPane => self.cycle(2),
            Action::Goto => self.prompt(PromptKind::Goto, String::new()),
            Action::Search => self.prompt(PromptKind::Search, String::new()),
            Action::Folders => {
                self.exts.flip_folders(&cx!(self, Pane::Extractions));
                self.focus = Pane::Extractions;
                let (folders, _) = self.exts.view();
                self.say(
                    if folders {
                        "members by folder"
                    } else {
                        "members as a flat list"
                    }
                    .to_string(),
                );
            }
            Action::Filter => {
                let f = self.exts.next_filter(&cx!(self, Pane::Extractions));
                self.focus = Pane::Extractions;
                self.say(match f {
                    crate::widgets::folders::Filter::All => "all extractions".to_string(),
                    f => format!("{} (d: the next filter)", f.label()),
                });
            }
            Action::NextDamage => self.next_damage(true),
            Action::PrevDamage => self.next_damage(false),
            Action::NextMatch => self.next_match(true),
            Action::PrevMatch => self.next_match(false),
            Action::ToggleText => {
                self.focus = Pane::Hex;
                let r = self.hex.toggle_text(&cx!(self, Pane::Hex));
                self.apply(r);
            }
            _ => {
                let before = self.ext();
                let reply = match self.focus {
                    Pane::Extractions => self.exts.on_key(a, &cx!(self, Pane::Extractions)),
                    Pane::Nodes if matches!(self.panel, Panel::None) => {
                        self.nodes.on_key(a, &cx!(self, Pane::Nodes))
                    }
                    Pane::Nodes => return self.with_panel(|p, cx| p.on_key(a, cx)),
                    // The plot covers the hex view: keys still choose the metric.
                    Pane::Hex if self.panel.takes_main() => {
                        return self.with_panel(|p, cx| p.on_key(a, cx));
                    }
                    Pane::Hex => self.hex.on_key(a, &cx!(self, Pane::Hex)),
                };
                if self.ext() != before {
                    self.hex.forget_highlight();
                }
                self.apply(reply);
            }
        }
    }

    pub(super) fn prompt(&mut self, kind: PromptKind, input: String) {
        self.overlay = Overlay::Prompt { kind, input };
    }

    /// Closes the stepper, tensor or metrics panel, stopping its work.
    pub fn close_panel(&mut self) {
        if let Some(p) = self.panel.side_mut() {
            p.close(&self.worker);
        }
        self.panel = Panel::None;
    }

    pub(super) fn cycle(&mut self, by: usize) {
        let order = [Pane::Extractions, Pane::Nodes, Pane::Hex];
        let i = order.iter().position(|p| *p == self.focus).unwrap_or(0);
        self.focus = order[(i + by) % 3];
    }

    /// Does what a pane asked for.
    pub(super) fn apply(&mut self, reply: Reply) {
        if let Some(msg) = reply.say {
            self.say(msg);
        }
        if let Some((ext, offset)) = reply.show {
            self.show_bytes(ext, offset);
        }
        if let Some((ext, offset)) = reply.cursor
            && ext == self.ext()
        {
            self.hex.set_cursor(offset, &cx!(self, Pane::Hex));
        }
        if let Some(offset) = reply.follow {
            self.follow(offset);
            self.jumped = true;
        }
    }

    /// Moves the hex cursor to `offset` and selects what lies there.
    pub(super) fn set_cursor(&mut self, offset: u64) {
        self.hex.set_cursor(offset, &cx!(self, Pane::Hex));
        self.follow(offset);
    }

    /// The hex cursor moved to `offset`: selects the deepest node there, or
    /// in the stepper, the opcode there.
    pub(super) fn follow(&mut self, offset: u64) {
        let ext = self.ext();
        if let Panel::Stepper(s) = &mut self.panel
            && s.ext == ext
            && s.range.contains(offset)
        {
            let target = pparse::view::stepper::Target::Offset(offset);
            s.step_to(target, &self.session, &self.worker);
        } else {
            self.nodes.select_at(offset, &cx!(self, Pane::Nodes));
        }
    }

    /// Shows `offset` of extraction `ext` in the hex view without moving the
    /// focus.
    pub(super) fn show_bytes(&mut self, ext: ExtId, offset: u64) {
        if ext != self.ext() {
            self.exts.reveal(ext, &cx!(self, Pane::Extractions));
            self.hex.forget_highlight();
        }
        self.hex.show_hex();
        self.hex.set_cursor(offset, &cx!(self, Pane::Hex));
    }

    /// Goes to the next (`forward`) or previous damage: in the hex view,
    /// the damaged span of this extraction starting after (before) the
    /// cursor; elsewhere, the extraction that is not complete after
    /// (before) the selected one in the tree's order, wrapping around.
    pub(super) fn next_damage(&mut self, forward: bool) {
        if self.focus == Pane::Hex {
            let cur = self.place().cursor;
            // A cut is a point at the end: its byte is the last one there.
            let last = self.data_len().saturating_sub(1);
            let starts: Vec<u64> = {
                let t = self.session.tree();
                t.get(self.ext())
                    .map(|e| e.damage.iter().map(|d| d.range.start.min(last)).collect())
                    .unwrap_or_default()
            };
            let next = if forward {
                starts.iter().copied().filter(|&s| s > cur).min()
            } else {
                starts.iter().copied().filter(|&s| s < cur).max()
            };
            match next {
                Some(at) => self.set_cursor(at),
                None => self.say(format!(
                    "no damaged span {} {cur:#x} in this extraction",
                    if forward { "after" } else { "before" }
                )),
            }
            return;
        }
        let found = {
            let t = self.session.tree();
            let order = t.subtree(0);
            let here = order.iter().position(|&x| x == self.ext()).unwrap_or(0);
            let n = order.len();
            (1..n)
                .map(|k| {
                    if forward {
                        (here + k) % n
                    } else {
                        (here + n - k) % n
                    }
                })
                .map(|i| order[i])
                .find(|&x| t.status_of(x) != pparse::status::Status::Complete)
        };
        match found {
            Some(id) => {
                self.exts.reveal(id, &cx!(self, Pane::Extractions));
                self.hex.forget_highlight();
                self.focus = Pane::Extractions;
            }
            None => self.say("nothing else is damaged".to_string()),
        }
    }

    pub(super) fn data_len(&self) -> u64 {
        self.session
            .tree()
            .get(self.ext())
            .map_or(0, |e| e.available())
    }

    pub(super) fn goto(&mut self, text: &str) {
        let cur = self.place().cursor;
        match keys::parse_offset(text, cur) {
            Some(o) => {
                let len = self.data_len();
                if o >= len && len > 0 {
                    self.say(format!("{o:#x} is past the end ({len:#x} bytes)"));
                }
                self.focus = Pane::Hex;
                self.hex.show_hex();
                self.set_cursor(o.min(len.saturating_sub(1)));
            }
            None => self.say(format!(
                "not an offset: {text:?} (try 0x1f, 4096, +16, -0x10)"
            )),
        }
    }
}
