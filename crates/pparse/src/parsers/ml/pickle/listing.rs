//! `pparse pickle`'s listings, offered through
//! [`crate::offer::pickle::PickleOffer`]: like `python -m pickletools`
//! (with the VM's stack and memo after each opcode for `--trace`), or one
//! JSON object per opcode; and the offer's other parts, the opcodes one by
//! one and the imports.

use std::io::{self, Write};

use super::dis::Dis;
use super::ops::{self, Op};
use super::read::{self, End, VM_LIMIT};
use super::text;
use super::vm::Vm;
use crate::data::{Range, Source};
use crate::offer::pickle::{ListStyle, ListingWork, OpError, Opcode, PickleOffer, Verdict};

/// What pickles offer (see [`PickleOffer`]).
pub(crate) const OFFER: PickleOffer = PickleOffer {
    list_json: |data, ranges, mut out| list_json(data, ranges, &mut out),
    list_text: |data, ranges, style, mut out| list_text(data, ranges, style, &mut out),
    imports,
    opcode,
    step: super::step::step,
};

fn imports(data: &dyn Source, r: Range) -> Vec<(String, Verdict)> {
    let (vm, _, _) = read::run(data, r.start, r.end.max(r.start + 1), VM_LIMIT);
    read::globals(&vm).into_iter().collect()
}

fn opcode(data: &dyn Source, pos: u64, end: u64, scratch: &mut Vec<u8>) -> Result<Opcode, OpError> {
    let op = ops::decode(data, pos, end, scratch)?;
    Ok(Opcode {
        pos: op.pos,
        len: op.len,
        name: op.name(),
        arg: op.arg,
    })
}

/// [`read::scan`] over `r` with a writer: stops at the first write error
/// and returns it.
fn scan_writing(
    data: &dyn Source,
    r: Range,
    mut each: impl FnMut(&Op) -> io::Result<()>,
) -> io::Result<End> {
    let mut err = None;
    let end = read::scan(data, r.start, r.end.max(r.start + 1), |op| match each(op) {
        Ok(()) => true,
        Err(e) => {
            err = Some(e);
            false
        }
    });
    err.map_or(Ok(end), Err)
}

/// The opcodes of the pickles at `ranges` in `data`, one JSON object
/// each (`pparse pickle --json`).
fn list_json(data: &dyn Source, ranges: &[Range], out: &mut impl Write) -> io::Result<()> {
    write!(out, "[")?;
    let mut first = true;
    for r in ranges {
        scan_writing(data, *r, |op| {
            let sep = if first { "" } else { "," };
            first = false;
            write!(
                out,
                "{sep}\n{{\"pos\":{},\"op\":\"{}\",\"arg\":",
                op.pos,
                op.name()
            )?;
            text::write_arg_json(op, data, &mut *out)?;
            out.write_all(b"}")
        })?;
    }
    writeln!(out, "\n]")
}

/// Longest argument printed in full (pickletools prints all of it; a
/// longer one ends with `…`).
const TEXT_ARG_LIMIT: usize = 16 << 20;

/// The opcode byte as pickletools shows it (`repr(code)` without quotes),
/// padded to 4 columns.
fn code_repr(c: u8, out: &mut String) {
    use std::fmt::Write;
    if (0x20..0x7f).contains(&c) && c != b'\\' && c != b'\'' {
        out.push(c as char);
        out.push_str("   ");
    } else {
        let _ = write!(out, "\\x{c:02x}");
    }
}

/// Stack items, metastack frames' items and memo entries shown per step
/// of `--trace`, and the longest rendering of one of them: the state
/// printed after an opcode is bounded, so the trace of a pickle grows
/// linearly with it (a stack of a million items is not printed a million
/// times).
const TRACE_ITEMS: usize = 8;
const TRACE_REPR: usize = 120;

/// The VM's state after an opcode, as `--trace` prints it: the top
/// [`TRACE_ITEMS`] of the stack, the number of metastack frames and the top
/// of the innermost one, the highest memo keys.
fn trace_state(vm: &Vm) -> String {
    use std::fmt::Write;
    let items = |ids: &[u32], out: &mut String| {
        out.push('[');
        let skip = ids.len().saturating_sub(TRACE_ITEMS);
        if skip > 0 {
            let _ = write!(out, "… {skip} more, ");
        }
        for (i, &x) in ids[skip..].iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&vm.repr(x, TRACE_REPR));
        }
        out.push(']');
    };
    let mut out = String::from("       stack: ");
    items(&vm.stack, &mut out);
    out.push_str("\n       metastack: [");
    if let Some(inner) = vm.meta.last() {
        if vm.meta.len() > 1 {
            let _ = write!(out, "… {} more frames, ", vm.meta.len() - 1);
        }
        items(inner, &mut out);
    }
    out.push_str("]\n       memo: {");
    if vm.memo.len() > TRACE_ITEMS {
        let _ = write!(out, "… {} earlier, ", vm.memo.len() - TRACE_ITEMS);
    }
    let memo: Vec<_> = vm.memo.iter().rev().take(TRACE_ITEMS).collect();
    for (i, (k, v)) in memo.into_iter().rev().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{k}: {}", vm.repr(*v, 80));
    }
    out.push_str("}\n");
    out
}

/// Open MARKs that indent a line of the listing, at most.
const MAX_INDENT: usize = 32;

/// A listing like `python -m pickletools` of the pickles at `ranges` in
/// `data`, one after the other; each range's damage, if any, is said where
/// its listing stops.
fn list_text(
    data: &dyn Source,
    ranges: &[(Range, Option<String>)],
    style: ListStyle,
    out: &mut impl Write,
) -> io::Result<ListingWork> {
    let trace = style.trace;
    let mut work = ListingWork::default();
    for (i, (r, damage)) in ranges.iter().enumerate() {
        if ranges.len() > 1 {
            writeln!(
                out,
                "{}==> pickle #{i} at {:#x} <==",
                if i > 0 { "\n" } else { "" },
                r.start
            )?;
        }
        let mut vm = Vm::new(if trace { VM_LIMIT } else { 0 });
        let mut dis = Dis::default();
        let mut problems_seen = 0;
        let mut complained = false;
        let mut line = String::with_capacity(256);
        let mut scratch = Vec::new();
        let end = scan_writing(data, *r, |op: &Op| {
            use std::fmt::Write;
            line.clear();
            // pickletools' column, or the same width in hex.
            let _ = if style.decimal {
                write!(line, "{:5}: ", op.pos)
            } else {
                write!(line, "{:#7x}: ", op.pos)
            };
            code_repr(op.info.code, &mut line);
            line.push(' ');
            // pickletools indents by open MARKs; past MAX_INDENT the indent
            // stays, or nested MARKs would make the listing quadratic.
            for _ in 0..dis.depth().min(MAX_INDENT) {
                line.push_str("    ");
            }
            line.push_str(op.name());
            let notes = dis.step(op);
            let name_end = line.len();
            let pad = 10usize.saturating_sub(op.name().len());
            for _ in 0..pad {
                line.push(' ');
            }
            line.push(' ');
            let had_arg = text::arg_repr_into(op, data, TEXT_ARG_LIMIT, &mut line, &mut scratch);
            if !had_arg {
                line.pop();
            }
            if let Some(m) = &notes.mark {
                line.push(' ');
                let _ = write!(line, "{m}");
            }
            if !had_arg && notes.mark.is_none() {
                line.truncate(name_end);
            }
            // pickletools stops at its first complaint; we say it and go on.
            if let Some(e) = notes.error
                && !complained
            {
                complained = true;
                line.push_str(&format!("\n!!! {e}"));
            }
            line.push('\n');
            out.write_all(line.as_bytes())?;
            work.opcodes += 1;
            if trace {
                vm.step(op, data);
                let mut block = trace_state(&vm);
                for p in &vm.problems[problems_seen..] {
                    block.push_str(&format!("       !!! {}\n", p.message));
                }
                problems_seen = vm.problems.len();
                out.write_all(block.as_bytes())?;
            }
            Ok(())
        })?;
        match end {
            End::Stop(_) => {
                writeln!(out, "highest protocol among opcodes = {}", dis.max_proto)?;
                if let Some(e) = dis.finish().filter(|_| !complained) {
                    writeln!(out, "!!! {e}")?;
                }
            }
            // The parse knows more than a scan of the pickle's range.
            End::Short { .. } | End::Invalid { .. } if damage.is_some() => {
                writeln!(out, "!!! {}", damage.as_deref().unwrap_or_default())?;
            }
            End::Short { at, why } => {
                writeln!(out, "!!! pickle cut off at {}: {why}", style.pos(at))?;
            }
            End::Invalid { at, why } => writeln!(out, "!!! {why} at {}", style.pos(at))?,
            End::Halted(_) => {}
        }
        work.visited += dis.work + vm.repr_visits();
    }
    if ranges.is_empty() {
        writeln!(out, "(no pickle found)")?;
    }
    Ok(work)
}
