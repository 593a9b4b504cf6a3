//! What a program text offers: `pparse ir`'s listings (the program in
//! printer form, as JSON or as op counts) with the diagnostics found on the
//! way, and for the explorer its diagnostics, listed with their source
//! lines and carets, and its values, followed from a use to the op that
//! defines it and through every use.

use std::io::{self, Write};
use std::sync::atomic::AtomicBool;

use crate::data::{Range, Source};

/// How a format reads its programs for these views.
#[derive(Clone, Copy)]
pub struct ProgramOffer {
    /// Writes the program or programs in `src` to `out` as [`Show`] says
    /// (`pparse ir`). The whole text is read even when writing fails (the
    /// pipe closed early), so the diagnostics are all there; the first
    /// write error comes second.
    pub write: WritePrograms,
    /// Every diagnostic of the text.
    pub diagnostics: DiagnosticsScan,
    /// The value named at or after `at` on its line (a use or a
    /// definition), with where it is defined and used in its program;
    /// `None` if there is no value there or `stop` is set.
    pub value: fn(src: &dyn Source, at: u64, stop: &AtomicBool) -> Option<ValueLinks>,
}

/// Writes the programs in `src` to `out` as `show` says, and says what it
/// read (see [`ProgramOffer::write`]).
pub type WritePrograms =
    fn(src: &dyn Source, show: Show, out: &mut dyn Write) -> (ProgramsRead, io::Result<()>);

/// What `pparse ir` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// The program in printer form.
    Text,
    /// The program tree as JSON.
    Json,
    /// Op counts per name.
    Stats,
    /// Op counts per name, as JSON.
    StatsJson,
}

/// What reading a program for [`ProgramOffer::write`] found besides what
/// it wrote.
#[derive(Debug, Default)]
pub struct ProgramsRead {
    /// Errors and warnings, at most as many as the format reports.
    pub diagnostics: Vec<Diagnostic>,
    /// Diagnostics past those, counted.
    pub suppressed: usize,
    /// Programs found.
    pub programs: usize,
    /// Whether it was a program saved as JSON (`paddle.jit.save`) rather
    /// than printed: read whole, with no diagnostics.
    pub saved: bool,
}

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The text is wrong here.
    Error,
    /// Suspect, but read.
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// A place in the text: its bytes, 1-based line and column (in
/// characters), and the text of its line for showing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The bytes pointed at (absolute offsets).
    pub span: Range,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in characters.
    pub col: u64,
    /// The line's text (at most a few hundred bytes).
    pub source: String,
    /// Offset of the line's first byte.
    pub line_start: u64,
}

/// A message about the text, at a place, with notes at others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// How bad.
    pub severity: Severity,
    /// Where.
    pub at: Place,
    /// What is wrong.
    pub message: String,
    /// Related places (the first definition of a redefined value).
    pub notes: Vec<(Place, String)>,
}

/// Every diagnostic of the text in `src`, in order; reports progress as
/// (bytes read, bytes); `None` once `stop` is set.
pub type DiagnosticsScan =
    fn(src: &dyn Source, stop: &AtomicBool, progress: &dyn Fn(u64, u64)) -> Option<Vec<Problem>>;

/// One diagnostic, located as a compiler reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// `error`, `warning` or `note`.
    pub severity: &'static str,
    /// What is wrong.
    pub message: String,
    /// The bytes it points at.
    pub span: Range,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in characters.
    pub col: u64,
    /// Its source line (cut if very long).
    pub source: String,
    /// Notes at other places (where a redefined value was first defined).
    pub notes: Vec<(Range, String)>,
}

/// A value and the places it is named, in the program that holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueLinks {
    /// As printed: `%12`, `%arg_0`.
    pub name: String,
    /// The op (or block) that defines it and where the name is written
    /// there; `None` if it is never defined.
    pub def: Option<(Range, Range)>,
    /// Where it is used as an operand, in text order (at most
    /// [`MAX_USES`]).
    pub uses: Vec<Range>,
    /// Uses past [`MAX_USES`], not listed.
    pub more_uses: u64,
}

/// Uses listed per value: enough to step through by hand, bounded for a
/// value that a million ops use.
pub const MAX_USES: usize = 100_000;

impl Problem {
    /// The caret line under [`Problem::source`]: spaces to the column,
    /// then `^` under the span's characters on that line (at least one).
    pub fn caret(&self) -> String {
        let chars = self.source.chars().count();
        let pad = usize::try_from(self.col.saturating_sub(1)).map_or(chars, |p| p.min(chars));
        let room = (chars - pad).max(1);
        let len = usize::try_from(self.span.len()).map_or(1, |l| l.clamp(1, room));
        format!("{}{}", " ".repeat(pad), "^".repeat(len))
    }
}
