//! The search: starting one, and moving to its matches.

use super::*;

impl App {
    pub(super) fn search_from(&self) -> From {
        let ext = self.ext();
        From {
            ext,
            data: self.session.tree().get(ext).map(|e| e.data()),
            cursor: self.place().cursor,
        }
    }

    pub(super) fn start_search(&mut self, query: String) {
        let from = self.search_from();
        self.search.start(query, self.focus, from, &self.worker);
    }

    pub(super) fn next_match(&mut self, forward: bool) {
        let from = self.search_from();
        let (found, say) = self.search.next(forward, from, &self.worker);
        self.go_to_match(found, say);
    }

    pub(super) fn go_to_match(&mut self, found: Found, say: Option<String>) {
        if let Some(msg) = say {
            self.say(msg);
        }
        match found {
            Found::Nothing => {}
            Found::Bytes(at) => {
                self.focus = Pane::Hex;
                self.hex.show_hex();
                self.set_cursor(at);
            }
            Found::Ext(id) => {
                self.exts.reveal(id, &cx!(self, Pane::Extractions));
                self.focus = Pane::Extractions;
                self.hex.forget_highlight();
            }
            Found::Node(path) => {
                let start = self.nodes.reveal(&path, &cx!(self, Pane::Nodes));
                self.focus = Pane::Nodes;
                if let Some(s) = start {
                    self.hex.set_cursor(s, &cx!(self, Pane::Hex));
                }
            }
        }
    }
}
