//! What a program text offers the explorer: its diagnostics, listed with
//! their source lines and carets, and its values, followed from a use to
//! the op that defines it and through every use.

use std::sync::atomic::AtomicBool;

use crate::data::{Range, Source};

/// How a format reads its programs for these views.
#[derive(Clone, Copy)]
pub struct ProgramOffer {
    /// Every diagnostic of the text.
    pub diagnostics: DiagnosticsScan,
    /// The value named at or after `at` on its line (a use or a
    /// definition), with where it is defined and used in its program;
    /// `None` if there is no value there or `stop` is set.
    pub value: fn(src: &dyn Source, at: u64, stop: &AtomicBool) -> Option<ValueLinks>,
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
