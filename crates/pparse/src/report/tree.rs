//! Text and JSON output of trees, written as a stream (a listing of a
//! million members is never built in memory as one JSON value).

use std::collections::HashMap;
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
        Value::Sized(..) | Value::Coded(..) | Value::Decoded(..) => json_str(&v.to_string()),
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

/// Damage many extractions share, said once: for every damage found in an
/// extraction's own bytes (a root cause), how many extractions below it
/// inherit it ([`Tree::root_cause`]). A CRC failure of a gzip stream makes
/// every member of its tar unverified; the tree and the problems on stderr
/// give the reason once, with the count, and each member says whose
/// damage it inherits. `--json` keeps each member's whole chain.
#[derive(Default)]
pub struct Causes {
    inheritors: HashMap<(ExtId, usize), usize>,
    roots: usize,
}

impl Causes {
    /// The root causes of the damage of `ids`, counted: one pass over
    /// their damage, each followed up its chain of parents.
    pub fn of(t: &Tree, ids: impl IntoIterator<Item = ExtId>) -> Causes {
        let mut inheritors: HashMap<(ExtId, usize), usize> = HashMap::new();
        let mut own = 0;
        let mut looked = std::collections::HashSet::new();
        let mut mine = Vec::new();
        for id in ids {
            looked.insert(id);
            mine.clear();
            for k in 0..t.exts[id].damage.len() {
                let root = t.root_cause(id, k);
                if root.0 == id {
                    own += 1;
                } else if !mine.contains(&root) {
                    mine.push(root);
                }
            }
            for &r in &mine {
                *inheritors.entry(r).or_default() += 1;
            }
        }
        // Damage found in its own bytes, and the roots outside `ids`.
        let outside = inheritors
            .keys()
            .filter(|(x, _)| !looked.contains(x))
            .count();
        Causes {
            roots: own + outside,
            inheritors,
        }
    }

    /// How many distinct damages all the damage of the extractions
    /// looked at comes from.
    pub fn roots(&self) -> usize {
        self.roots
    }

    /// How many extractions inherit damage `k` of `id`.
    pub fn inheritors(&self, id: ExtId, k: usize) -> usize {
        self.inheritors.get(&(id, k)).copied().unwrap_or(0)
    }

    /// What is said of damage `k` of `id`: the damage in full, with how
    /// many inherit it; or, for inherited damage, whose it is.
    pub fn say(&self, t: &Tree, id: ExtId, k: usize) -> String {
        let d = &t.exts[id].damage[k];
        let (root, _) = t.root_cause(id, k);
        if root != id {
            let whose = if root == 0 {
                t.exts[0].display_name()
            } else {
                t.path_of(root)
            };
            let at = if d.range.is_empty() {
                format!("{:#x}", d.range.start)
            } else {
                d.range.to_string()
            };
            return format!(
                "{} at {at}: inherits the damage of {whose}",
                d.status.as_str()
            );
        }
        match self.inheritors(id, k) {
            0 => d.to_string(),
            1 => format!("{d} (1 extraction inherits it)"),
            n => format!("{d} ({} extractions inherit it)", thousands(n as u64)),
        }
    }

    /// The detail of a tree line: the worst damage as [`Causes::say`]
    /// gives it, and how many more there are.
    pub fn detail(&self, t: &Tree, id: ExtId) -> Option<String> {
        let e = &t.exts[id];
        let k = (0..e.damage.len()).max_by_key(|&k| e.damage[k].status)?;
        let first = self.say(t, id, k);
        Some(if e.damage.len() > 1 {
            format!("{first} (+{} more)", e.damage.len() - 1)
        } else {
            first
        })
    }
}

/// The extractions that are not complete and the containers on the way
/// to them (`tree --damaged`), one flag per extraction.
pub fn damaged_and_above(t: &Tree) -> Vec<bool> {
    with_ancestors(t, |id| t.exts[id].status() != Status::Complete)
}

/// The extractions `pick` takes and the containers on the way to them,
/// one flag per extraction: each extraction is marked once, so this is
/// linear in the tree whatever its depth.
pub fn with_ancestors(t: &Tree, pick: impl Fn(ExtId) -> bool) -> Vec<bool> {
    let mut keep = vec![false; t.len()];
    for e in &t.exts {
        if keep[e.id()] || !pick(e.id()) {
            continue;
        }
        let mut at = Some(e.id());
        // Each step goes to a parent, and stops at one already marked.
        while let Some(x) = at.filter(|&x| !keep[x]) {
            keep[x] = true;
            at = t.exts[x].parent();
        }
    }
    keep
}

/// One line per extraction, drawn as a tree. The walk keeps one frame per
/// level (which child comes next), not one entry per member: a million
/// members cost no memory here.
pub fn tree_text(t: &Tree, out: &mut impl Write) -> io::Result<()> {
    text_of(t, None, out)
}

/// [`tree_text`] of the extractions `keep` flags (the root always).
pub fn tree_text_only(t: &Tree, keep: &[bool], out: &mut impl Write) -> io::Result<()> {
    text_of(t, Some(keep), out)
}

fn text_of(t: &Tree, keep: Option<&[bool]>, out: &mut impl Write) -> io::Result<()> {
    let shown = |x: ExtId| keep.is_none_or(|k| k.get(x).copied().unwrap_or(false));
    // The last child shown, found once a level: it draws `└─`.
    let last_shown = |x: ExtId| t.exts[x].children.iter().rposition(|&c| shown(c));
    let causes = Causes::of(
        t,
        t.exts
            .iter()
            .filter(|e| !e.damage.is_empty())
            .map(|e| e.id()),
    );
    // (extraction, index of its next child to print, index of its last shown)
    let mut stack: Vec<(ExtId, usize, Option<usize>)> = Vec::new();
    let mut lead = String::new();
    write_line(t, &causes, 0, "", out)?;
    stack.push((0, 0, last_shown(0)));
    while let Some(&mut (id, ref mut next, last)) = stack.last_mut() {
        let kids = &t.exts[id].children;
        if last.is_none_or(|l| *next > l) {
            stack.pop();
            // Drop this level's continuation ("│  " or "   ").
            let keep = lead.char_indices().rev().nth(2).map_or(0, |(i, _)| i);
            lead.truncate(keep);
            continue;
        }
        let i = *next;
        let c = kids[i];
        *next += 1;
        if !shown(c) {
            continue;
        }
        let (branch, cont) = if Some(i) == last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        write_line(t, &causes, c, &format!("{lead}{branch}"), out)?;
        let below = last_shown(c);
        if below.is_some() {
            lead.push_str(cont);
            stack.push((c, 0, below));
        }
    }
    Ok(())
}

fn write_line(
    t: &Tree,
    causes: &Causes,
    id: ExtId,
    lead: &str,
    out: &mut impl Write,
) -> io::Result<()> {
    let e = &t.exts[id];
    let mut line = format!("{lead}{}", e.display_name());
    if let Some(p) = e.parser() {
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
            causes
                .detail(t, id)
                .or_else(|| e.detail())
                .unwrap_or_default()
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
    json_of(t, id, None, out)
}

/// [`tree_json`] of the extractions `keep` flags (`id` always).
pub fn tree_json_only(t: &Tree, id: ExtId, keep: &[bool], out: &mut impl Write) -> io::Result<()> {
    json_of(t, id, Some(keep), out)
}

fn json_of(t: &Tree, id: ExtId, keep: Option<&[bool]>, out: &mut impl Write) -> io::Result<()> {
    let shown = |x: ExtId| keep.is_none_or(|k| k.get(x).copied().unwrap_or(false));
    // (extraction, index of its next child to write, children written)
    let mut stack: Vec<(ExtId, usize, usize)> = vec![(id, 0, 0)];
    write_ext_open(t, id, out)?;
    while let Some(&mut (x, ref mut next, ref mut written)) = stack.last_mut() {
        let kids = &t.exts[x].children;
        if *next >= kids.len() {
            write!(out, "]}}")?;
            stack.pop();
            continue;
        }
        let c = kids[*next];
        *next += 1;
        if !shown(c) {
            continue;
        }
        if *written > 0 {
            write!(out, ",")?;
        }
        *written += 1;
        write_ext_open(t, c, out)?;
        stack.push((c, 0, 0));
    }
    writeln!(out)
}

/// One extraction's object up to the opening of its children.
fn write_ext_open(t: &Tree, id: ExtId, out: &mut impl Write) -> io::Result<()> {
    write_ext_fields(t, id, out)?;
    write!(out, ",\"children\":[")
}

/// One extraction as `tree --json` writes it, without its children: what
/// `pparse query` gives its filters.
pub fn extraction_json(t: &Tree, id: ExtId) -> String {
    extraction_json_of(&t.exts[id], &t.path_of(id))
}

/// [`extraction_json`] of `e`, whose PATH is `path`.
pub(crate) fn extraction_json_of(e: &Extraction, path: &str) -> String {
    let mut out = Vec::with_capacity(256);
    // Writing into memory cannot fail.
    let _ = write_ext_fields_of(e, path, &mut out);
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// One extraction's fields, after its opening brace.
fn write_ext_fields(t: &Tree, id: ExtId, out: &mut impl Write) -> io::Result<()> {
    write_ext_fields_of(&t.exts[id], &t.path_of(id), out)
}

/// [`write_ext_fields`] of `e`, whose PATH is `path`.
fn write_ext_fields_of(e: &Extraction, path: &str, out: &mut impl Write) -> io::Result<()> {
    write!(
        out,
        "{{\"name\":{},\"path\":{},\"parser\":{},\"kind\":{},\"size\":{},\"status\":\"{}\"",
        json_str(&e.display_name()),
        json_str(path),
        e.parser().map_or("null".to_string(), json_str),
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
    if let Some(s) = e.declared_size() {
        write!(out, ",\"declared_size\":{}", json_u64(s))?;
    }
    if let Some(o) = e.origin() {
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
    Ok(())
}

/// Nodes as indented lines: name, kind, range, value, status.
/// The first line of `nodes` text output: the extraction itself.
pub fn nodes_text_head(e: &Extraction, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{}  [{}]  {} B",
        e.display_name(),
        e.parser().unwrap_or("no parser"),
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
        e.parser().map_or("null".to_string(), json_str),
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

/// One node as `nodes --json` writes it, without its children, and how
/// deep it is (1: a top-level node): what `pparse query`'s `nodes` gives.
pub fn node_fields_json(n: &Node, depth: usize) -> String {
    let mut out = Vec::with_capacity(128);
    // Writing into memory cannot fail.
    let _ = write_node_fields(n, &mut out);
    let _ = write!(out, ",\"depth\":{depth}}}");
    String::from_utf8(out).unwrap_or_default()
}

/// One node and its loaded children as JSON, `depth` levels.
pub fn node_json(n: &Node, depth: usize, out: &mut impl Write) -> io::Result<()> {
    write_node_fields(n, out)?;
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

/// A node's own fields, after its opening brace.
fn write_node_fields(n: &Node, out: &mut impl Write) -> io::Result<()> {
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
    Ok(())
}
