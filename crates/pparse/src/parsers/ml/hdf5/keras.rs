//! Keras weights kept in HDF5, listed by layer.
//!
//! Two layouts:
//! - Keras 2 (`model.save("m.h5")`, `save_weights("w.h5")`): a group (the
//!   root, or `model_weights` in a whole model) whose `layer_names`
//!   attribute lists the layers in order; each layer's group has a
//!   `weight_names` attribute naming its weights, datasets under it
//!   (`dense/kernel:0`). An attribute too large for an object header is
//!   split into `layer_names0`, `layer_names1`, ….
//! - Keras 3 (`model.weights.h5`, alone or in a `.keras` zip): a `layers`
//!   group with a group per layer, whose `vars` group holds its weights
//!   as datasets `0`, `1`, … in order; a layer made of layers has their
//!   groups under its own `layers`.

use crate::data::{Range, Source};
use crate::name::escape_bytes;
use crate::node::Node;
use crate::offer::tensor::shape_text;

use super::dataset::Dataset;
use super::read::{self, Header, ObjectKind, Superblock, msg};

/// Names read from one attribute at most.
const MAX_NAMES: usize = 1_000_000;
/// Layers listed at most.
const MAX_LAYERS: usize = 100_000;
/// Layers nested in layers followed at most.
const MAX_NESTING: usize = 8;

/// Which Keras layout a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// Keras 2: `layer_names` on this group (a header address).
    Legacy(u64),
    /// Keras 3: this `layers` group (a header address).
    Layers(u64),
}

/// The Keras layout of the file whose root group is `root`, if any.
pub(super) fn layout(src: &dyn Source, sb: &Superblock, root: &Header) -> Option<Layout> {
    if has_names(root, sb, b"layer_names") {
        return Some(Layout::Legacy(sb.root));
    }
    let mut problems = Vec::new();
    let members = read::members(src, sb, root, &mut problems);
    let find = |name: &[u8]| members.iter().find(|m| m.name == name)?.header;
    if let Some(at) = find(b"model_weights")
        && let Ok(h) = Header::read(src, sb, at)
        && has_names(&h, sb, b"layer_names")
    {
        return Some(Layout::Legacy(at));
    }
    // Keras 3's: a `layers` group of groups with `vars` (its first few
    // members are looked at).
    let at = find(b"layers")?;
    let h = Header::read(src, sb, at).ok()?;
    if h.kind() != ObjectKind::Group {
        return None;
    }
    let mut ms = read::members(src, sb, &h, &mut problems);
    ms.truncate(8);
    ms.iter()
        .filter_map(|m| Header::read(src, sb, m.header?).ok())
        .any(|l| l.kind() == ObjectKind::Group && member(src, sb, &l, b"vars").is_some())
        .then_some(Layout::Layers(at))
}

/// Whether `h` has the attribute `name` (or its first part, `name0`).
fn has_names(h: &Header, sb: &Superblock, name: &[u8]) -> bool {
    let first = [name, b"0"].concat();
    h.messages
        .iter()
        .filter(|m| m.kind == msg::ATTRIBUTE)
        .filter_map(|m| read::attribute(m, sb).ok())
        .any(|a| a.name == name || a.name == first)
}

/// The strings of attribute `name` of `h`, or of its parts `name0`,
/// `name1`, … when Keras split it.
fn names(src: &dyn Source, sb: &Superblock, h: &Header, name: &[u8]) -> Vec<Vec<u8>> {
    let attrs: Vec<read::Attribute> = h
        .messages
        .iter()
        .filter(|m| m.kind == msg::ATTRIBUTE)
        .filter_map(|m| read::attribute(m, sb).ok())
        .collect();
    let get = |n: &[u8]| {
        let a = attrs.iter().find(|a| a.name == n)?;
        a.strings(src, sb, MAX_NAMES)
    };
    if let Some(v) = get(name) {
        return v;
    }
    let mut out = Vec::new();
    for i in 0.. {
        let part = [name, i.to_string().as_bytes()].concat();
        match get(&part) {
            Some(v) if out.len() + v.len() <= MAX_NAMES => out.extend(v),
            _ => break,
        }
    }
    out
}

/// A member of group `h` by name: its header.
fn member(src: &dyn Source, sb: &Superblock, h: &Header, name: &[u8]) -> Option<(u64, Header)> {
    let mut problems = Vec::new();
    let at = read::members(src, sb, h, &mut problems)
        .into_iter()
        .find(|m| m.name == name)?
        .header?;
    Some((at, Header::read(src, sb, at).ok()?))
}

/// What the summary line of the listing says.
pub(super) fn summary(src: &dyn Source, sb: &Superblock, layout: Layout) -> String {
    match layout {
        Layout::Legacy(at) => {
            let n = Header::read(src, sb, at)
                .map(|h| names(src, sb, &h, b"layer_names").len())
                .unwrap_or(0);
            format!("Keras 2 weights, {n} layers")
        }
        Layout::Layers(_) => "Keras 3 weights, by layer".to_string(),
    }
}

/// The layers, each with its weights in order: a node per weight over
/// its values, saying its type and shape.
pub(super) fn layers(src: &dyn Source, sb: &Superblock, layout: Layout) -> Vec<Node> {
    match layout {
        Layout::Legacy(at) => legacy(src, sb, at),
        Layout::Layers(at) => {
            let mut out = Vec::new();
            if let Ok(h) = Header::read(src, sb, at) {
                layers3(src, sb, &h, "", 0, &mut out);
            }
            out
        }
    }
}

fn legacy(src: &dyn Source, sb: &Superblock, at: u64) -> Vec<Node> {
    let Ok(base) = Header::read(src, sb, at) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for layer in names(src, sb, &base, b"layer_names")
        .iter()
        .take(MAX_LAYERS)
    {
        let shown = escape_bytes(layer);
        let Some((_, h)) = member(src, sb, &base, layer) else {
            out.push(Node::new("layer", shown, base.range).text("no group for this layer"));
            continue;
        };
        let mut weights = Vec::new();
        for w in names(src, sb, &h, b"weight_names") {
            // A weight's name is its path under the layer's group.
            let mut g = h.clone();
            let mut found = None;
            for part in w.split(|&b| b == b'/') {
                match member(src, sb, &g, part) {
                    Some((_, next)) => g = next,
                    None => {
                        found = None;
                        break;
                    }
                }
                found = Some(());
            }
            weights.push(match found {
                Some(()) => weight(sb, &w, &g),
                None => Node::new("weight", escape_bytes(&w), h.range).text("missing"),
            });
        }
        let text = match weights.len() {
            0 => "no weights".to_string(),
            1 => "1 weight".to_string(),
            n => format!("{n} weights"),
        };
        out.push(
            Node::new("layer", shown, h.range)
                .text(text)
                .with_children(weights),
        );
    }
    out
}

/// Keras 3: every group under `layers` (`h`) is a layer; its `vars` are
/// its weights, and its own `layers` are nested layers.
fn layers3(
    src: &dyn Source,
    sb: &Superblock,
    h: &Header,
    prefix: &str,
    depth: usize,
    out: &mut Vec<Node>,
) {
    let mut problems = Vec::new();
    let mut ms = read::members(src, sb, h, &mut problems);
    ms.sort_by(|a, b| a.name.cmp(&b.name));
    for m in ms {
        if out.len() >= MAX_LAYERS {
            return;
        }
        let Some(lh) = m.header.and_then(|at| Header::read(src, sb, at).ok()) else {
            continue;
        };
        if lh.kind() != ObjectKind::Group {
            continue;
        }
        let name = format!("{prefix}{}", String::from_utf8_lossy(&m.name));
        let mut weights = Vec::new();
        if let Some((_, vars)) = member(src, sb, &lh, b"vars") {
            let mut vs = read::members(src, sb, &vars, &mut problems);
            // `0`, `1`, …, `10`: in the order of their numbers.
            vs.sort_by_key(|v| {
                let n = std::str::from_utf8(&v.name)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                (n.is_none(), n, v.name.clone())
            });
            for v in vs {
                if let Some(vh) = v.header.and_then(|at| Header::read(src, sb, at).ok()) {
                    weights.push(weight(sb, &v.name, &vh));
                }
            }
        }
        let text = match weights.len() {
            0 => "no weights".to_string(),
            1 => "1 weight".to_string(),
            n => format!("{n} weights"),
        };
        out.push(
            Node::new("layer", crate::name::escape_str(&name), lh.range)
                .text(text)
                .with_children(weights),
        );
        if depth < MAX_NESTING
            && let Some((_, inner)) = member(src, sb, &lh, b"layers")
        {
            layers3(src, sb, &inner, &format!("{name}/"), depth + 1, out);
        }
    }
}

/// A weight's node: over its values when they are in one range, else over
/// its header; its type and shape.
fn weight(sb: &Superblock, name: &[u8], h: &Header) -> Node {
    let d = Dataset::of(sb, h);
    let t = d.dtype.as_ref().map_or("?".into(), |t| t.text());
    let shape = d.shape().map_or("?".into(), |s| shape_text(&s));
    let range = d.range().unwrap_or(h.range);
    let range = Range::new(range.start, range.end.max(range.start));
    Node::new("weight", escape_bytes(name), range).text(format!("{t} {shape}"))
}
