//! The two trees the explorer shows, as [`TreeModel`]s over the shared tree.

use super::treeview::TreeModel;
use pparse::extraction::{ExtId, Tree};
use pparse::node::{Children, Node};

/// The extraction tree; the file itself is the single top row.
pub struct Exts<'a>(pub &'a Tree);

impl TreeModel for Exts<'_> {
    type Id = ExtId;
    fn len(&self, parent: Option<&ExtId>) -> usize {
        match parent {
            None => 1,
            Some(&id) => self.0.exts.get(id).map_or(0, |e| e.children.len()),
        }
    }
    fn child(&self, parent: Option<&ExtId>, index: usize) -> ExtId {
        match parent {
            None => 0,
            Some(&id) => self.0.exts[id].children[index],
        }
    }
    fn parent(&self, id: &ExtId) -> Option<ExtId> {
        self.0.exts.get(*id).and_then(|e| e.parent())
    }
    fn index(&self, id: &ExtId) -> usize {
        self.0.position(*id)
    }
}

/// The node tree of one extraction; a node is named by its index path.
pub struct Nodes<'a>(pub &'a [Node]);

impl Nodes<'_> {
    pub(crate) fn get(&self, path: &[usize]) -> Option<&Node> {
        let (first, rest) = path.split_first()?;
        self.0.get(*first)?.descend(rest)
    }
}

impl TreeModel for Nodes<'_> {
    type Id = Vec<usize>;
    fn len(&self, parent: Option<&Vec<usize>>) -> usize {
        match parent {
            None => self.0.len(),
            Some(p) => self.get(p).map_or(0, |n| n.loaded_children().len()),
        }
    }
    fn child(&self, parent: Option<&Vec<usize>>, index: usize) -> Vec<usize> {
        let mut p = parent.cloned().unwrap_or_default();
        p.push(index);
        p
    }
    fn parent(&self, id: &Vec<usize>) -> Option<Vec<usize>> {
        (id.len() > 1).then(|| id[..id.len() - 1].to_vec())
    }
    fn index(&self, id: &Vec<usize>) -> usize {
        id.last().copied().unwrap_or(0)
    }
}

/// Whether a node can be expanded, and whether that needs a load first.
pub fn expandable(n: &Node) -> Option<bool> {
    match &n.children {
        Children::Leaf => None,
        Children::Unloaded => Some(true),
        Children::Loaded(c) if c.is_empty() => None,
        Children::Loaded(_) => Some(false),
    }
}

/// The deepest loaded node containing `offset`, as a path. Top-level nodes
/// are searched by binary search when they are in offset order (parsers
/// emit them that way), else by a scan.
pub fn deepest_at(nodes: &[Node], sorted: bool, offset: u64) -> Option<Vec<usize>> {
    let top = if sorted {
        let i = nodes.partition_point(|n| n.range.start <= offset);
        // Nodes may nest or overlap a little (padding): look back a few.
        (i.saturating_sub(8)..i)
            .rev()
            .find(|&j| nodes[j].range.contains(offset))
    } else {
        nodes.iter().position(|n| n.range.contains(offset))
    }?;
    let mut path = vec![top];
    let mut n = &nodes[top];
    'down: loop {
        for (i, c) in n.loaded_children().iter().enumerate() {
            if c.range.contains(offset) {
                path.push(i);
                n = c;
                continue 'down;
            }
        }
        return Some(path);
    }
}

/// Whether top-level nodes are in order of their start offsets.
pub fn is_sorted(nodes: &[Node]) -> bool {
    nodes
        .windows(2)
        .all(|w| w[0].range.start <= w[1].range.start)
}
