//! A virtualised tree view: which rows are visible, computed without ever
//! flattening the tree.
//!
//! A node with a million children is one `Vec` in the model; expanding it
//! must not build a million rows. The view only remembers which nodes are
//! expanded. The number of rows under a node is its child count plus the rows
//! of its expanded children, so finding the node at row `r` (and the row of a
//! node) costs O(depth × expanded siblings), whatever the size of the tree,
//! and a frame only materialises the rows on screen. Children appended while a
//! parse goes on just extend the counts.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use crate::keys::Action;

/// The tree a view shows. `None` stands for the invisible root.
pub trait TreeModel {
    /// What names a node, stable while the tree grows (it keys the
    /// expansion state).
    type Id: Clone + Eq + Hash + std::fmt::Debug;
    /// Number of children of `parent` (of the root if `None`).
    fn len(&self, parent: Option<&Self::Id>) -> usize;
    /// The child of `parent` at `index` (below [`TreeModel::len`]).
    fn child(&self, parent: Option<&Self::Id>, index: usize) -> Self::Id;
    /// The parent of `id`, `None` for a child of the root.
    fn parent(&self, id: &Self::Id) -> Option<Self::Id>;
    /// Position of `id` among its parent's children.
    fn index(&self, id: &Self::Id) -> usize;
}

/// Expansion state, cursor and scroll offset of one tree pane.
#[derive(Debug, Clone)]
pub struct TreeView<Id: Clone + Eq + Hash> {
    /// Expanded nodes, by parent, by their index in the parent.
    expanded: HashMap<Option<Id>, BTreeMap<usize, Id>>,
    is_expanded: HashMap<Id, (Option<Id>, usize)>,
    /// The selected node (kept across tree growth).
    pub selected: Option<Id>,
    /// First visible row.
    pub offset: usize,
}

impl<Id: Clone + Eq + Hash + std::fmt::Debug> Default for TreeView<Id> {
    fn default() -> Self {
        TreeView {
            expanded: HashMap::new(),
            is_expanded: HashMap::new(),
            selected: None,
            offset: 0,
        }
    }
}

impl<Id: Clone + Eq + Hash + std::fmt::Debug> TreeView<Id> {
    pub(crate) fn is_expanded(&self, id: &Id) -> bool {
        self.is_expanded.contains_key(id)
    }

    /// The expanded nodes, in no order.
    pub(crate) fn expanded_ids(&self) -> impl Iterator<Item = &Id> {
        self.is_expanded.keys()
    }

    pub(crate) fn expand<M: TreeModel<Id = Id>>(&mut self, m: &M, id: &Id) {
        if self.is_expanded(id) {
            return;
        }
        let parent = m.parent(id);
        let index = m.index(id);
        self.expanded
            .entry(parent.clone())
            .or_default()
            .insert(index, id.clone());
        self.is_expanded.insert(id.clone(), (parent, index));
    }

    /// Collapses `id` and everything expanded below it.
    pub fn collapse(&mut self, id: &Id) {
        let Some((parent, index)) = self.is_expanded.remove(id) else {
            return;
        };
        if let Some(m) = self.expanded.get_mut(&parent) {
            m.remove(&index);
        }
        let mut stack = vec![id.clone()];
        while let Some(x) = stack.pop() {
            if let Some(kids) = self.expanded.remove(&Some(x)) {
                for (_, k) in kids {
                    self.is_expanded.remove(&k);
                    stack.push(k);
                }
            }
        }
    }

    /// Visible rows below `parent` (not counting `parent` itself).
    pub fn count<M: TreeModel<Id = Id>>(&self, m: &M, parent: Option<&Id>) -> usize {
        let mut n = m.len(parent);
        if let Some(kids) = self.expanded.get(&parent.cloned()) {
            for k in kids.values() {
                n += self.count(m, Some(k));
            }
        }
        n
    }

    /// The node at visible row `row`, with its depth (0 for top level).
    pub fn at<M: TreeModel<Id = Id>>(&self, m: &M, row: usize) -> Option<(Id, usize)> {
        let mut parent: Option<Id> = None;
        let mut r = row;
        let mut depth = 0;
        'level: loop {
            let len = m.len(parent.as_ref());
            let mut extra = 0;
            if let Some(kids) = self.expanded.get(&parent) {
                for (&ci, cid) in kids {
                    if ci >= len {
                        break;
                    }
                    let pos = ci + extra;
                    if r < pos {
                        return Some((m.child(parent.as_ref(), r - extra), depth));
                    }
                    if r == pos {
                        return Some((cid.clone(), depth));
                    }
                    let sub = self.count(m, Some(cid));
                    if r <= pos + sub {
                        r -= pos + 1;
                        parent = Some(cid.clone());
                        depth += 1;
                        continue 'level;
                    }
                    extra += sub;
                }
            }
            let idx = r - extra;
            return (idx < len).then(|| (m.child(parent.as_ref(), idx), depth));
        }
    }

    /// The visible row of `id`, if all its ancestors are expanded.
    pub fn row_of<M: TreeModel<Id = Id>>(&self, m: &M, id: &Id) -> Option<usize> {
        let mut chain = vec![id.clone()];
        let mut at = id.clone();
        while let Some(p) = m.parent(&at) {
            if !self.is_expanded(&p) {
                return None;
            }
            chain.push(p.clone());
            at = p;
        }
        chain.reverse();
        let mut row = 0;
        let mut parent: Option<Id> = None;
        for (level, x) in chain.iter().enumerate() {
            let i = m.index(x);
            if i >= m.len(parent.as_ref()) {
                return None;
            }
            row += i;
            if let Some(kids) = self.expanded.get(&parent) {
                for (_, k) in kids.range(..i) {
                    row += self.count(m, Some(k));
                }
            }
            if level + 1 < chain.len() {
                row += 1;
            }
            parent = Some(x.clone());
        }
        Some(row)
    }

    /// Row of the selection, falling back to its nearest visible ancestor.
    pub fn cursor<M: TreeModel<Id = Id>>(&self, m: &M) -> usize {
        let Some(mut id) = self.selected.clone() else {
            return 0;
        };
        loop {
            if let Some(r) = self.row_of(m, &id) {
                return r;
            }
            match m.parent(&id) {
                Some(p) => id = p,
                None => return 0,
            }
        }
    }

    /// Moves the selection to row `row` (clamped) and keeps it on screen.
    pub fn select_row<M: TreeModel<Id = Id>>(&mut self, m: &M, row: usize, height: usize) {
        let total = self.count(m, None);
        if total == 0 {
            self.selected = None;
            self.offset = 0;
            return;
        }
        let row = row.min(total - 1);
        self.selected = self.at(m, row).map(|(id, _)| id);
        self.scroll_to(row, height);
    }

    /// Selects `id`, expanding its ancestors, and scrolls to it.
    pub fn reveal<M: TreeModel<Id = Id>>(&mut self, m: &M, id: &Id, height: usize) {
        let mut at = id.clone();
        while let Some(p) = m.parent(&at) {
            self.expand(m, &p);
            at = p;
        }
        self.selected = Some(id.clone());
        if let Some(r) = self.row_of(m, id) {
            self.scroll_to(r, height);
        }
    }

    /// Adjusts the scroll offset so that `row` is visible.
    pub fn scroll_to(&mut self, row: usize, height: usize) {
        let height = height.max(1);
        if row < self.offset {
            self.offset = row;
        } else if row >= self.offset + height {
            self.offset = row + 1 - height;
        }
    }

    /// Moves the selection for a list key in a pane of `height` rows: a
    /// row up or down, a page, the first or last row. `false` for other
    /// keys, which are left to the pane.
    pub fn step<M: TreeModel<Id = Id>>(&mut self, m: &M, a: Action, height: usize) -> bool {
        let cur = self.cursor(m);
        let row = match a {
            Action::Up => cur.saturating_sub(1),
            Action::Down => cur + 1,
            Action::PageUp => cur.saturating_sub(height),
            Action::PageDown => cur + height,
            Action::Home => 0,
            Action::End => self.count(m, None).saturating_sub(1),
            _ => return false,
        };
        self.select_row(m, row, height);
        true
    }

    /// Keeps the offset valid after the tree or the pane changed size.
    pub fn clamp<M: TreeModel<Id = Id>>(&mut self, m: &M, height: usize) {
        let total = self.count(m, None);
        let height = height.max(1);
        self.offset = self.offset.min(total.saturating_sub(height));
        let c = self.cursor(m);
        self.scroll_to(c, height);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model over explicit child lists; ids are node numbers, 0 is unused.
    struct Lists {
        kids: HashMap<Option<u32>, Vec<u32>>,
        parent: HashMap<u32, Option<u32>>,
    }

    impl TreeModel for Lists {
        type Id = u32;
        fn len(&self, p: Option<&u32>) -> usize {
            self.kids.get(&p.copied()).map_or(0, |v| v.len())
        }
        fn child(&self, p: Option<&u32>, i: usize) -> u32 {
            self.kids[&p.copied()][i]
        }
        fn parent(&self, id: &u32) -> Option<u32> {
            self.parent[id]
        }
        fn index(&self, id: &u32) -> usize {
            let p = self.parent[id];
            self.kids[&p].iter().position(|x| x == id).unwrap()
        }
    }

    fn flatten(
        m: &Lists,
        v: &TreeView<u32>,
        p: Option<u32>,
        d: usize,
        out: &mut Vec<(u32, usize)>,
    ) {
        for &c in m.kids.get(&p).into_iter().flatten() {
            out.push((c, d));
            if v.is_expanded(&c) {
                flatten(m, v, Some(c), d + 1, out);
            }
        }
    }

    #[test]
    fn rows_match_a_naive_flattening() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..50 {
            let mut m = Lists {
                kids: HashMap::new(),
                parent: HashMap::new(),
            };
            let mut ids = vec![];
            for id in 1..200u32 {
                let p = if ids.is_empty() || rnd(4) == 0 {
                    None
                } else {
                    Some(ids[rnd(ids.len() as u64) as usize])
                };
                m.kids.entry(p).or_default().push(id);
                m.parent.insert(id, p);
                ids.push(id);
            }
            let mut v = TreeView::default();
            for _ in 0..40 {
                let id = ids[rnd(ids.len() as u64) as usize];
                if rnd(3) == 0 {
                    v.collapse(&id);
                } else {
                    v.expand(&m, &id);
                }
                let mut flat = vec![];
                flatten(&m, &v, None, 0, &mut flat);
                assert_eq!(v.count(&m, None), flat.len());
                for (row, (id, depth)) in flat.iter().enumerate() {
                    assert_eq!(v.at(&m, row), Some((*id, *depth)), "row {row}");
                    assert_eq!(v.row_of(&m, id), Some(row));
                }
                assert_eq!(v.at(&m, flat.len()), None);
            }
        }
    }
}
