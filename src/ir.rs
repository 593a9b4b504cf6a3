//! `pparse ir`: a printed Paddle program read back, shown in printer form,
//! as JSON or as op counts ([`pparse::report::ir`]), with every error of
//! the file on stderr as a compiler reports it (`file:line:col: error: …`,
//! the line, a caret).

use std::io::{self, Write};
use std::sync::Arc;

use codespan_reporting::diagnostic::{Diagnostic as Report, Label, LabelStyle};
use codespan_reporting::term::{self, Config, DisplayStyle};

use super::common::{Fatal, Input, finish_output, map_file, open, resolve_final, wait};
use pparse::data::Data;
use pparse::extraction::Phase;
use pparse::report::ir::{Diagnostic, Place, Severity, Show};
use pparse::status::Status;

pub(super) fn ir(input: &Input, path: &str, show: Show) -> Result<Status, Fatal> {
    let file = input.file.as_path();
    let (data, label): (Data, String) = if path.is_empty()
        && input.url().is_none()
        && let Ok(src) = map_file(input)
    {
        (Arc::new(src), file.display().to_string())
    } else {
        let session = open(input)?;
        let id = resolve_final(&session, path)?;
        // The bytes must be all there; the program is read here, not by the
        // tree's parse.
        wait(&session, |t| {
            t.exts[id].is_final() && !matches!(t.exts[id].phase, Phase::Waiting)
        });
        let t = session.tree();
        let data = t.exts[id].data();
        (data, t.path_of(id))
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let (read, written) = pparse::report::ir::write(&*data, show, &mut out);
    finish_output(written.and_then(|()| out.flush()))?;
    drop(out);
    if read.saved {
        return Ok(Status::Complete);
    }
    let errors = read
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error);
    let none = format!("{label}: no program found (a line ending in `{{` followed by op lines)");
    if read.programs == 0 && !errors {
        report(&label, &read.diagnostics, read.suppressed);
        return Err(Fatal::Absent(none));
    }
    if read.programs == 0 {
        say!("pparse: {none}");
    }
    report(&label, &read.diagnostics, read.suppressed);
    Ok(if errors || read.programs == 0 {
        Status::Corrupt
    } else {
        Status::Complete
    })
}

/// Writes the diagnostics to stderr: `file:line:col: error: message`, then
/// the line with a caret under the span.
fn report(label: &str, diagnostics: &[Diagnostic], suppressed: usize) {
    let stderr = io::stderr();
    let mut err = stderr.lock();
    let config = Config {
        display_style: DisplayStyle::Rich,
        ..Config::default()
    };
    for d in diagnostics {
        let _ = writeln!(
            err,
            "{label}:{}:{}: {}: {}",
            d.at.line,
            d.at.col,
            d.severity.as_str(),
            pparse::name::escape_str(&d.message)
        );
        if d.at.line == 0 {
            continue;
        }
        let mut labels = vec![label_of(0, &d.at, LabelStyle::Primary, "")];
        let mut files = vec![snippet(label, &d.at)];
        for (i, (at, msg)) in d.notes.iter().enumerate() {
            files.push(snippet(label, at));
            labels.push(label_of(i + 1, at, LabelStyle::Secondary, msg));
        }
        let rep = match d.severity {
            Severity::Error => Report::error(),
            Severity::Warning => Report::warning(),
        }
        .with_labels(labels);
        let files = Files(files);
        let mut buf = codespan_reporting::term::termcolor::NoColor::new(Vec::new());
        if term::emit_to_write_style(&mut buf, &config, &files, &rep).is_ok() {
            // The first line repeats the severity: the compiler-style line
            // above says it with the place.
            let text = String::from_utf8_lossy(buf.get_ref());
            for line in text.lines().skip(1) {
                let _ = writeln!(err, "{line}");
            }
        }
    }
    if suppressed > 0 {
        let _ = writeln!(err, "{label}: {suppressed} more errors not shown");
    }
}

/// The one line a place is on, shown as its own small file whose line
/// numbers are the real ones.
struct Snippet {
    name: String,
    line: u64,
    source: String,
}

fn snippet(label: &str, at: &Place) -> Snippet {
    Snippet {
        name: label.to_string(),
        line: at.line,
        source: pparse::name::escape_str(&at.source),
    }
}

fn label_of(file: usize, at: &Place, style: LabelStyle, msg: &str) -> Label<usize> {
    // Columns within the escaped line: the caret under the token.
    let start = at.span.start.saturating_sub(at.line_start) as usize;
    let len = (at.span.end.saturating_sub(at.span.start) as usize).max(1);
    let start = start.min(at.source.len());
    let end = (start + len).min(at.source.len()).max(start);
    Label::new(style, file, start..end).with_message(msg)
}

/// The snippets as codespan's files.
struct Files(Vec<Snippet>);

impl<'a> codespan_reporting::files::Files<'a> for Files {
    type FileId = usize;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: usize) -> Result<&'a str, codespan_reporting::files::Error> {
        Ok(&self.get(id)?.name)
    }
    fn source(&'a self, id: usize) -> Result<&'a str, codespan_reporting::files::Error> {
        Ok(&self.get(id)?.source)
    }
    fn line_index(
        &'a self,
        id: usize,
        _byte: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        Ok(self.get(id)?.line.saturating_sub(1) as usize)
    }
    fn line_range(
        &'a self,
        id: usize,
        _line: usize,
    ) -> Result<std::ops::Range<usize>, codespan_reporting::files::Error> {
        Ok(0..self.get(id)?.source.len())
    }
}

impl Files {
    fn get(&self, id: usize) -> Result<&Snippet, codespan_reporting::files::Error> {
        self.0
            .get(id)
            .ok_or(codespan_reporting::files::Error::FileMissing)
    }
}
