//! Background results, routed by their address ([`To`]).

use super::*;

impl App {
    /// Takes a result of the worker to the pane that asked for it.
    pub fn on_done(&mut self, d: Done) {
        let Done { to, payload } = d;
        let unclaimed = match to {
            To::Hex => match self.hex.on_done(payload, &cx!(self, Pane::Hex)) {
                Ok(r) => return self.apply(r),
                Err(p) => p,
            },
            To::Nodes => match self.nodes.on_done(payload, &cx!(self, Pane::Nodes)) {
                Ok(r) => {
                    self.apply(r);
                    // A hex cursor inside may now reach a deeper node; so may
                    // a jump (to a definition or a use) that opened its op.
                    if self.focus == Pane::Hex || self.jumped {
                        let c = self.place().cursor;
                        self.nodes.deepen(c, &cx!(self, Pane::Nodes));
                    }
                    return;
                }
                Err(p) => p,
            },
            To::Search => match payload.downcast::<SearchEvent>() {
                Ok(e) => {
                    let (found, say) = self.search.on_event(*e, self.ext());
                    return self.go_to_match(found, say);
                }
                Err(p) => p,
            },
            To::Save => match payload.downcast::<SaveEvent>() {
                Ok(e) => return self.on_save(*e),
                Err(p) => p,
            },
            To::Follow => match payload.downcast::<FollowDone>() {
                Ok(v) => {
                    let r = self.follow.on_done(*v, self.ext());
                    return self.apply(r);
                }
                Err(p) => p,
            },
            To::Stepper | To::Tensors | To::Metrics | To::Problems | To::Query => {
                let cx = cx!(self, Pane::Nodes);
                // A panel closed (or replaced) since: its late results
                // have nobody to go to, as it asked.
                let Some(p) = self.panel.side_mut().filter(|p| p.address() == to) else {
                    return;
                };
                match p.on_done(payload, &cx) {
                    Ok(r) => return self.apply(r),
                    Err(p) => p,
                }
            }
        };
        self.unclaimed(to, unclaimed);
    }

    /// A result of a type its addressee does not read: a bug in whoever
    /// sent it there. Tests (debug builds) stop on it; a user's explorer
    /// counts it and goes on.
    pub(super) fn unclaimed(&mut self, to: To, payload: Payload) {
        self.unclaimed += 1;
        debug_assert!(
            false,
            "a result for {to:?} that it does not read ({:?})",
            (*payload).type_id()
        );
    }

    /// Results of background work nobody read (see [`App::on_done`]): 0
    /// unless the explorer has a bug.
    pub fn unclaimed_results(&self) -> u64 {
        self.unclaimed
    }

    /// Runs `f` on the open side panel, if any, with its context, and does
    /// what it answers.
    pub(super) fn with_panel(&mut self, f: impl FnOnce(&mut dyn SidePanel, &Cx) -> Reply) {
        let cx = cx!(self, Pane::Nodes);
        if let Some(p) = self.panel.side_mut() {
            let reply = f(p, &cx);
            self.apply(reply);
        }
    }

    /// Periodic bookkeeping: parse rate and memory for the status bar.
    pub fn tick(&mut self) {
        let m = &mut self.meter;
        let dt = m.last_tick.elapsed();
        if dt < Duration::from_millis(500) {
            return;
        }
        let done = self.session.tree().root().progress().done;
        m.rate = (done.saturating_sub(m.last_done)) as f64 / dt.as_secs_f64();
        m.last_done = done;
        m.last_tick = Instant::now();
        // Searches and re-reads free as much as they allocate; give it back.
        pparse::engine::release_free_memory();
        m.rss = resident_bytes();
        self.with_panel(|p, cx| {
            p.tick(cx);
            Reply::default()
        });
    }
}
