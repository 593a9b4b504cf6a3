//! Text and JSON output of trees, written as a stream (a listing of a
//! million members is never built in memory as one JSON value).

use std::io::{self, Write};

use crate::extraction::{EntryKind, ExtId, Extraction, Tree};
use crate::name::json::{string as json_str, u64 as json_u64};
use crate::node::{Children, Node, Value};
use crate::status::Status;
use crate::util::thousands;

fn json_value(v: &Value) -> String {
    match v {
        Value::UInt(x) => json_u64(*x),
        Value::Int(x) if x.unsigned_abs() > (1u64 << 53) => format!("\"{x}\""),
        Value::Int(x) => x.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Str(s) | Value::Quoted(s) => json_str(s),
        Value::Sized(..) | Value::Coded(..) => json_str(&v.to_string()),
        Value::Bytes(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            format!("{{\"hex\":\"{hex}\"}}")
        }
    }
}

fn kind_text(e: &Extraction) -> String {
    match &e.kind {
        EntryKind::Symlink(t) => format!("symlink -> {t}"),
        EntryKind::HardLink(t) => format!("hard link -> {t}"),
        EntryKind::Other(what) => what.to_string(),
        EntryKind::Dir => "dir".into(),
        EntryKind::Device => "device".into(),
        EntryKind::Fifo => "fifo".into(),
        _ => String::new(),
    }
}

/// One line per extraction, drawn as a tree. The walk keeps one frame per
/// level (which child comes next), not one entry per member: a million
/// members cost no memory here.
pub fn tree_text(t: &Tree, out: &mut impl Write) -> io::Result<()> {
    // (extraction, index of its next child to print)
    let mut stack: Vec<(ExtId, usize)> = Vec::new();
    let mut lead = String::new();
    write_line(t, 0, "", out)?;
    stack.push((0, 0));
    while let Some(&mut (id, ref mut next)) = stack.last_mut() {
        let kids = &t.exts[id].children;
        if *next >= kids.len() {
            stack.pop();
            // Drop this level's continuation ("│  " or "   ").
            let keep = lead.char_indices().rev().nth(2).map_or(0, |(i, _)| i);
            lead.truncate(keep);
            continue;
        }
        let c = kids[*next];
        *next += 1;
        let last = *next == kids.len();
        let (branch, cont) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        write_line(t, c, &format!("{lead}{branch}"), out)?;
        if !t.exts[c].children.is_empty() {
            lead.push_str(cont);
            stack.push((c, 0));
        }
    }
    Ok(())
}

fn write_line(t: &Tree, id: ExtId, lead: &str, out: &mut impl Write) -> io::Result<()> {
    let e = &t.exts[id];
    let mut line = format!("{lead}{}", e.display_name());
    if let Some(p) = e.parser {
        line.push_str(&format!("  [{p}]"));
    }
    let k = kind_text(e);
    if !k.is_empty() {
        line.push_str(&format!("  {k}"));
    }
    if e.kind.has_content() {
        line.push_str(&format!("  {} B", thousands(e.size())));
    }
    if e.status() != Status::Complete {
        line.push_str(&format!(
            "  {}: {}",
            e.status().as_str().to_uppercase(),
            e.detail().unwrap_or_default()
        ));
    }
    if let Some(first) = e.notes().first() {
        line.push_str(&format!("  note: {first}"));
        if e.notes().len() > 1 {
            line.push_str(&format!(" (+{} more)", e.notes().len() - 1));
        }
    }
    writeln!(out, "{line}")
}

/// The extraction tree as JSON (docs/contract.md shape, plus `kind`, `damage`,
/// `declared_size` and `origin`).
/// The walk keeps one frame per level, not a call: a tree of any depth
/// (an index is untrusted input) cannot overflow the stack here.
pub fn tree_json(t: &Tree, id: ExtId, out: &mut impl Write) -> io::Result<()> {
    // (extraction, index of its next child to write)
    let mut stack: Vec<(ExtId, usize)> = vec![(id, 0)];
    write_ext_open(t, id, out)?;
    while let Some(&mut (x, ref mut next)) = stack.last_mut() {
        let kids = &t.exts[x].children;
        if *next >= kids.len() {
            write!(out, "]}}")?;
            stack.pop();
            continue;
        }
        if *next > 0 {
            write!(out, ",")?;
        }
        let c = kids[*next];
        *next += 1;
        write_ext_open(t, c, out)?;
        stack.push((c, 0));
    }
    writeln!(out)
}

/// One extraction's object up to the opening of its children.
fn write_ext_open(t: &Tree, id: ExtId, out: &mut impl Write) -> io::Result<()> {
    let e = &t.exts[id];
    write!(
        out,
        "{{\"name\":{},\"path\":{},\"parser\":{},\"kind\":{},\"size\":{},\"status\":\"{}\"",
        json_str(&e.display_name()),
        json_str(&t.path_of(id)),
        e.parser.map_or("null".to_string(), json_str),
        json_str(e.kind.as_str()),
        json_u64(e.size()),
        e.status().as_str()
    )?;
    if let Some(d) = e.detail() {
        write!(out, ",\"detail\":{}", json_str(&d))?;
    }
    if !e.notes().is_empty() {
        let notes: Vec<String> = e.notes().iter().map(|n| json_str(n)).collect();
        write!(out, ",\"notes\":[{}]", notes.join(","))?;
    }
    if let Some(s) = e.declared_size {
        write!(out, ",\"declared_size\":{}", json_u64(s))?;
    }
    if let Some(o) = e.origin {
        write!(
            out,
            ",\"origin\":{{\"start\":{},\"end\":{}}}",
            json_u64(o.start),
            json_u64(o.end)
        )?;
    }
    match &e.kind {
        EntryKind::Symlink(target) | EntryKind::HardLink(target) => {
            write!(out, ",\"target\":{}", json_str(target))?;
        }
        EntryKind::Other(what) => write!(out, ",\"what\":{}", json_str(what))?,
        _ => {}
    }
    if !e.damage.is_empty() {
        write!(out, ",\"damage\":[")?;
        for (i, d) in e.damage.iter().enumerate() {
            if i > 0 {
                write!(out, ",")?;
            }
            write!(
                out,
                "{{\"status\":\"{}\",\"start\":{},\"end\":{},\"reason\":{}",
                d.status.as_str(),
                json_u64(d.range.start),
                json_u64(d.range.end),
                json_str(&d.reason)
            )?;
            if d.unknown {
                write!(out, ",\"unknown\":true")?;
            }
            write!(out, "}}")?;
        }
        write!(out, "]")?;
    }
    write!(out, ",\"children\":[")
}

/// Nodes as indented lines: name, kind, range, value, status.
/// The first line of `nodes` text output: the extraction itself.
pub fn nodes_text_head(e: &Extraction, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{}  [{}]  {} B",
        e.display_name(),
        e.parser.unwrap_or("no parser"),
        thousands(e.size())
    )
}

/// One node and its loaded children, `depth` levels.
pub fn node_text(n: &Node, indent: usize, depth: usize, out: &mut impl Write) -> io::Result<()> {
    if depth == 0 {
        return Ok(());
    }
    // Names and values come from the file: whatever a parser escaped or
    // not, nothing reaches the terminal as a control character.
    let esc = crate::name::escape_str;
    let mut line = format!(
        "{}{}  {}  {:#x}..{:#x}",
        "  ".repeat(indent),
        esc(&n.name),
        n.kind,
        n.range.start,
        n.range.end
    );
    if let Some(v) = &n.value {
        line.push_str(&format!("  = {}", esc(&v.to_string())));
    }
    if let Some(d) = &n.damage {
        line.push_str(&format!(
            "  {}: {}",
            d.status.as_str().to_uppercase(),
            esc(&d.reason)
        ));
    }
    if matches!(n.children, Children::Unloaded) || (depth == 1 && !n.loaded_children().is_empty()) {
        line.push_str("  …");
    }
    writeln!(out, "{line}")?;
    for c in n.loaded_children() {
        node_text(c, indent + 1, depth - 1, out)?;
    }
    Ok(())
}

/// `nodes --json`: the extraction as the root node, its loaded nodes as
/// the root's children (docs/contract.md shape, plus `detail` and `more`).
pub fn nodes_json(t: &Tree, id: ExtId, depth: usize, out: &mut impl Write) -> io::Result<()> {
    nodes_json_open(t, id, out)?;
    for (i, n) in t.exts[id].nodes.iter().enumerate() {
        if i > 0 {
            write!(out, ",")?;
        }
        node_json(n, depth, out)?;
    }
    nodes_json_close(out)
}

/// The root node of `nodes --json` up to the opening of its children: the
/// command writes them one at a time.
pub fn nodes_json_open(t: &Tree, id: ExtId, out: &mut impl Write) -> io::Result<()> {
    let e = &t.exts[id];
    write!(
        out,
        "{{\"name\":{},\"kind\":\"extraction\",\"parser\":{},\"start\":0,\"end\":{},\"status\":\"{}\"",
        json_str(&e.display_name()),
        e.parser.map_or("null".to_string(), json_str),
        json_u64(e.size()),
        e.status().as_str()
    )?;
    if let Some(d) = e.detail() {
        write!(out, ",\"detail\":{}", json_str(&d))?;
    }
    write!(out, ",\"children\":[")
}

/// Closes what [`nodes_json_open`] opened.
pub fn nodes_json_close(out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "]}}")
}

/// One node and its loaded children as JSON, `depth` levels.
pub fn node_json(n: &Node, depth: usize, out: &mut impl Write) -> io::Result<()> {
    write!(
        out,
        "{{\"name\":{},\"kind\":{},\"start\":{},\"end\":{}",
        json_str(&n.name),
        json_str(n.kind),
        json_u64(n.range.start),
        json_u64(n.range.end)
    )?;
    if let Some(v) = &n.value {
        write!(out, ",\"value\":{}", json_value(v))?;
    }
    if let Some(d) = &n.damage {
        write!(
            out,
            ",\"status\":\"{}\",\"detail\":{}",
            d.status.as_str(),
            json_str(&d.reason)
        )?;
    }
    let kids = n.loaded_children();
    let more = matches!(n.children, Children::Unloaded) || (depth <= 1 && !kids.is_empty());
    if more {
        write!(out, ",\"more\":true")?;
    }
    write!(out, ",\"children\":[")?;
    if depth > 1 {
        for (i, c) in kids.iter().enumerate() {
            if i > 0 {
                write!(out, ",")?;
            }
            node_json(c, depth - 1, out)?;
        }
    }
    write!(out, "]}}")
}
