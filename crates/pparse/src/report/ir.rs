//! `pparse ir`'s output: the programs in a file shown in printer form, as
//! JSON or as op counts, with the diagnostics found on the way (the CLI
//! prints them as a compiler does). The listing is the program format's
//! own, reached through its offer
//! ([`crate::offer::program::ProgramOffer::write`]).

use std::io::{self, Write};

use crate::data::Source;
use crate::offer::program::ProgramOffer;
pub use crate::offer::program::{Diagnostic, Place, ProgramsRead, Severity, Show};

/// The offer of the format `pparse ir` reads every file as (see
/// [`crate::parsers::PROGRAM_TEXT`]).
fn offer() -> ProgramOffer {
    crate::parsers::PROGRAM_TEXT
        .offers
        .program
        .expect("the program text format offers programs")
}

/// Writes the program or programs in `data` to `out` as `show` says. The
/// whole text is read even when writing fails (the pipe closed early), so
/// the diagnostics are all there; the first write error comes second.
pub fn write(
    data: &dyn Source,
    show: Show,
    out: &mut impl Write,
) -> (ProgramsRead, io::Result<()>) {
    (offer().write)(data, show, out)
}

/// `ir --json` of the program or programs in `data` (printed, or saved by
/// `paddle.jit.save`), written to `out`.
pub fn json(data: &dyn Source, out: &mut impl Write) -> io::Result<()> {
    write(data, Show::Json, out).1
}
