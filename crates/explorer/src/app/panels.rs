//! The side panels: opening, closing and what they ask of the app.

use super::*;

impl App {
    /// Opens the stepper on the selected pickle (or the extraction's first),
    /// or closes it.
    pub(super) fn toggle_stepper(&mut self) {
        if matches!(self.panel, Panel::Stepper(_)) {
            self.panel = Panel::None;
            return;
        }
        let mut ext = self.ext();
        // A torch file's root: its data.pkl, as `pparse pickle` takes it.
        let target = pparse::view::stepper::pickle_target(&self.session.tree(), ext);
        if let Some(t) = target.filter(|&t| t != ext) {
            self.exts.reveal(t, &cx!(self, Pane::Extractions));
            self.hex.forget_highlight();
            ext = t;
        }
        let selected = self.nodes.selected(ext).and_then(|p| p.first().copied());
        let opened = Stepper::open(&self.session.tree(), ext, selected);
        let Some(mut stepper) = opened else {
            self.say("no pickle here: select a .pkl or pickle extraction, then press p");
            return;
        };
        if self.panel.takes_main() {
            self.close_panel();
        }
        stepper.step_to(
            pparse::view::stepper::Target::Step(0),
            &self.session,
            &self.worker,
        );
        self.panel = Panel::Stepper(Box::new(stepper));
        self.focus = Pane::Nodes;
    }

    /// Opens the tensor table of the selected extraction (or the nearest
    /// one above it that has tensors), or closes it.
    pub(super) fn toggle_tensors(&mut self) {
        if matches!(self.panel, Panel::Tensors(_)) {
            self.close_panel();
            return;
        }
        let mut ext = self.ext();
        loop {
            if let Some(p) = TensorPanel::open(&self.session, &self.worker, ext) {
                if self.panel.takes_main() {
                    self.close_panel();
                }
                self.panel = Panel::Tensors(Box::new(p));
                self.focus = Pane::Nodes;
                return;
            }
            match self.session.tree().get(ext).and_then(|e| e.parent()) {
                Some(p) => ext = p,
                None => break,
            }
        }
        self.say("no tensors here: select a model or array file (safetensors, torch, ONNX, npy, npz), then press T");
    }

    /// Asks where to write the selected tensor as .npy.
    pub(super) fn ask_export(&mut self) {
        let Panel::Tensors(p) = &self.panel else {
            self.say("export works on a tensor: press T for the tensor table");
            return;
        };
        let name = p.export_name(&self.session.tree());
        if let Some(name) = name {
            self.prompt(PromptKind::Export, name);
        }
    }

    /// Writes the selected tensor to `path` in the background.
    pub(super) fn export(&mut self, path: &str) {
        if let Panel::Tensors(p) = &mut self.panel
            && let Err(msg) = p.export(path, &self.session, &self.worker)
        {
            self.say(msg);
        }
    }

    /// Opens the metrics of the selected run log, or closes them.
    pub(super) fn toggle_metrics(&mut self) {
        if matches!(self.panel, Panel::Metrics(_)) {
            self.close_panel();
            return;
        }
        let found = MetricsPanel::find(&self.session, &self.worker, self.ext(), self.metric_budget);
        match found {
            Some(p) => {
                self.close_panel();
                self.panel = Panel::Metrics(Box::new(p));
                self.focus = Pane::Nodes;
            }
            None => self.say("no W&B run log here: select a .wandb extraction, then press M"),
        }
    }

    /// Runs `filter` over the selected extraction in the query panel.
    pub(super) fn start_query(&mut self, filter: String) {
        self.last_query = filter.clone();
        match QueryPanel::start(&self.session, &self.worker, self.ext(), filter) {
            Ok(p) => {
                self.close_panel();
                self.panel = Panel::Query(Box::new(p));
                self.focus = Pane::Nodes;
            }
            Err(e) => self.say(format!("the filter does not compile: {e}")),
        }
    }

    /// Opens the diagnostics of the selected program text, or closes them.
    pub(super) fn toggle_problems(&mut self) {
        if matches!(self.panel, Panel::Problems(_)) {
            self.close_panel();
            return;
        }
        match ProblemsPanel::find(&self.session, &self.worker, self.ext()) {
            Some(p) => {
                self.close_panel();
                self.panel = Panel::Problems(Box::new(p));
                self.focus = Pane::Nodes;
            }
            None => self.say("no program here: select a printed Paddle program, then press E"),
        }
    }
}
