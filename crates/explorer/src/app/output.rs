//! Getting bytes out: saving to a file and copying to the clipboard.

use super::*;

impl App {
    /// Lines the help scrolls by a page.
    pub(super) fn help_page(&self) -> usize {
        (self.layout.status.y as usize).saturating_sub(5).max(1)
    }

    /// Marks bytes from the cursor (`v`), or drops the mark.
    pub(super) fn toggle_mark(&mut self) {
        if self.panel.takes_main() {
            return;
        }
        self.focus = Pane::Hex;
        self.hex.show_hex();
        if self.hex.toggle_mark(self.ext()) {
            self.say("marking: move to extend, s saves, y v copies, v or Esc drops the mark");
        }
    }

    /// The bytes `s` saves: the marked bytes, else what a side panel points
    /// at or the selected node (unless the extraction tree has the focus),
    /// else the whole extraction.
    pub(super) fn save_target(&self) -> Option<Chosen> {
        let ext = self.ext();
        let t = self.session.tree();
        let len = t.get(ext)?.available();
        let range = match self.focus {
            Pane::Extractions => None,
            _ => self.selection(ext).0.range,
        }
        .unwrap_or(Range::new(0, len));
        Some(Chosen {
            ext,
            range,
            name: save::file_name(&t, ext, range),
        })
    }

    /// Asks where to save the selection, offering a new name beside the input.
    pub(super) fn ask_save(&mut self) {
        let Some(c) = self.save_target() else { return };
        if c.range.is_empty() {
            self.say("nothing to save: the selection holds no bytes");
            return;
        }
        let path = save::beside_input(&self.session.tree(), &c.name);
        self.to_save = Some(c);
        self.prompt(PromptKind::Save, path);
    }

    /// Saves what [`App::ask_save`] chose to `path`, in the background.
    pub(super) fn save(&mut self, path: &str) {
        let Some(c) = self.to_save.take() else { return };
        let t = self.session.tree();
        let Some(data) = t.get(c.ext).map(|e| e.data()) else {
            return;
        };
        let note = save::damage_note(&t, c.ext, c.range);
        drop(t);
        match save::start(&self.worker, data, c.range, path, note) {
            Ok(s) => self.saving = Some(s),
            Err(msg) => self.say(msg),
        }
    }

    /// A save's progress or end.
    pub(super) fn on_save(&mut self, e: SaveEvent) {
        match e {
            SaveEvent::Progress { id, done } => {
                if let Some(s) = self.saving.as_mut().filter(|s| s.id == id) {
                    s.done = done;
                }
            }
            SaveEvent::Finished {
                id,
                path,
                result,
                note,
            } if self.saving.is_some_and(|s| s.id == id) => {
                self.saving = None;
                let shown = pparse::name::escape_str(&path.display().to_string());
                let msg = match result {
                    Ok(n) => {
                        let mut m = format!("wrote {shown} ({})", pparse::util::human(n));
                        if let Some(note) = note {
                            m.push_str(&format!("; {note}"));
                        }
                        m
                    }
                    Err(e) => format!("could not write {shown}: {e}"),
                };
                self.say(msg);
            }
            SaveEvent::Finished { .. } => {}
        }
    }

    /// Copies what `key` names after `y`: `p` the PATH of the selected
    /// extraction, `o` the offset (the hex cursor, else the selection's
    /// start), `v` the value (the marked bytes as hex, else the selected
    /// node's value).
    pub(super) fn copy(&mut self, key: char) {
        let ext = self.ext();
        let t = self.session.tree();
        let (what, text) = match key {
            'p' => ("PATH", t.path_of(ext)),
            'o' => {
                let at = match self.focus {
                    Pane::Hex => Some(self.place().cursor),
                    _ => self.selection(ext).0.range.map(|r| r.start),
                };
                ("offset", format!("{:#x}", at.unwrap_or(0)))
            }
            'v' => match self.copied_value(&t) {
                Ok(v) => ("value", v),
                Err(why) => {
                    drop(t);
                    return self.say(why);
                }
            },
            _ => {
                drop(t);
                return self.say("nothing copied: y then p (PATH), o (offset) or v (value)");
            }
        };
        drop(t);
        let shown = pparse::name::escape_str(&text);
        let shown = crate::panel::cut_middle(&shown, 60);
        self.say(format!("copied the {what} (OSC 52): {shown}"));
        self.clipboard = Some(text);
    }

    /// The value `y v` copies: marked bytes as hex, else the selected node's
    /// value.
    pub(super) fn copied_value(&self, t: &pparse::extraction::Tree) -> Result<String, String> {
        let ext = self.ext();
        let e = t.get(ext).ok_or("nothing selected")?;
        if let Some(r) = self.place().marked() {
            let n = r.len().min(e.available().saturating_sub(r.start));
            if n * 3 > save::MAX_COPY as u64 {
                return Err(format!(
                    "{} bytes are too many to copy: s saves them to a file",
                    pparse::util::thousands(r.len())
                ));
            }
            let mut buf = vec![0u8; n as usize];
            let got = pparse::data::read_exact_at(&*e.data(), r.start, &mut buf)
                .map_err(|err| format!("could not read the bytes: {err}"))?;
            if !got {
                return Err("the marked bytes are not all there".into());
            }
            let hex: Vec<String> = buf.iter().map(|b| format!("{b:02x}")).collect();
            return Ok(hex.join(" "));
        }
        let m = crate::widgets::models::Nodes(&e.nodes);
        let node = self.nodes.selected(ext).and_then(|p| m.get(p));
        match node.and_then(|n| n.value.as_ref()) {
            Some(v) => Ok(v.to_string()),
            None => {
                Err("no value to copy: select a node with a value, or mark bytes with v".into())
            }
        }
    }

    /// Where the value to follow is named: the selected node's first byte
    /// in the node tree, else the cursor.
    pub(super) fn value_at(&self) -> u64 {
        let ext = self.ext();
        if self.focus == Pane::Nodes && matches!(self.panel, Panel::None) {
            let t = self.session.tree();
            if let Some(e) = t.get(ext) {
                let m = crate::widgets::models::Nodes(&e.nodes);
                if let Some(n) = self.nodes.selected(ext).and_then(|p| m.get(p)) {
                    return n.range.start;
                }
            }
        }
        self.place().cursor
    }

    /// Goes to the op that defines the value selected (`D`).
    pub(super) fn definition(&mut self) {
        let (at, cursor) = (self.value_at(), self.place().cursor);
        let r = self
            .follow
            .definition(self.ext(), at, cursor, &self.session, &self.worker);
        self.apply(r);
    }

    /// Goes to the next or previous use of the value selected (`u`, `U`).
    pub(super) fn step_use(&mut self, forward: bool) {
        let (at, cursor) = (self.value_at(), self.place().cursor);
        let r = self
            .follow
            .step(self.ext(), at, cursor, forward, &self.session, &self.worker);
        self.apply(r);
    }
}
