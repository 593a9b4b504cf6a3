//! The extraction tree with an archive's members grouped by folder, and
//! optionally only what is damaged.
//!
//! A tar of a system's `/usr` is 72,000 members named by long paths; as a
//! flat list every row reads `referenc…-311.pyc`. Here each archive whose
//! members have `/` in their names shows folders made from those names
//! (`usr/`, then `lib/` in it), each with its file count, size and how
//! many of its files are damaged, collapsed until opened; a member shows
//! its last name. The grouping of an archive is made when it is first
//! opened, and then grows with the parse: a member found later is added to
//! its folder, and rows keep their places (the view's expansion state is
//! kept by position), so the work is once per member, never a rescan.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pparse::extraction::{EntryKind, ExtId, Tree};
use pparse::status::Status;

use super::treeview::TreeModel;

/// A row of the extraction tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Row {
    /// An extraction.
    Ext(ExtId),
    /// A folder of an archive's members.
    Dir {
        /// The archive.
        of: ExtId,
        /// Its path in the archive (`usr/lib`, no trailing `/`).
        path: Arc<str>,
    },
}

/// Which extractions the tree shows (`d` cycles through them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    /// Everything.
    #[default]
    All,
    /// What is not complete, under the containers that hold it.
    Damaged,
    /// Only `unverified` ones.
    Unverified,
    /// Only cut members (`truncated`).
    Partial,
}

impl Filter {
    /// The next in the cycle.
    pub fn next(self) -> Filter {
        match self {
            Filter::All => Filter::Damaged,
            Filter::Damaged => Filter::Unverified,
            Filter::Unverified => Filter::Partial,
            Filter::Partial => Filter::All,
        }
    }

    /// What the pane's title says of it.
    pub fn label(self) -> &'static str {
        match self {
            Filter::All => "",
            Filter::Damaged => "damaged only",
            Filter::Unverified => "unverified only",
            Filter::Partial => "partial only",
        }
    }

    fn takes(self, s: Status) -> bool {
        match self {
            Filter::All => true,
            Filter::Damaged => s != Status::Complete,
            Filter::Unverified => s == Status::Unverified,
            Filter::Partial => s == Status::Truncated,
        }
    }
}

/// Files, bytes and damaged files below a folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirStats {
    /// Files below it, at any depth.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How many of them are not complete.
    pub damaged: u64,
}

/// One archive's members by folder.
#[derive(Debug, Clone, Default)]
struct Group {
    /// Children of the archive looked at so far (they only grow).
    seen: usize,
    /// The rows in each folder, `""` for the archive's top.
    kids: HashMap<Arc<str>, Vec<Row>>,
    /// Where each folder row is in its folder's list.
    pos: HashMap<Row, usize>,
    /// Where each member's row is in its folder's list, by the member's
    /// place among the archive's children: 4 bytes a member, where a map
    /// would cost ten times that.
    ext_pos: Vec<u32>,
    stats: HashMap<Arc<str>, DirStats>,
    /// The tree's damage count when `damaged` was last counted.
    damage_seen: usize,
}

/// The rows of the extraction tree: folders of the archives opened so far,
/// and the filter's choice. Made ready (`prepare`) before the pane draws
/// or moves, so that reading it never builds anything.
#[derive(Debug, Clone)]
pub struct Rows {
    folders: bool,
    filter: Filter,
    /// With a filter: the extractions shown (matching, or holding one
    /// that matches), as they were when it was chosen.
    keep: Option<Vec<bool>>,
    groups: HashMap<ExtId, Group>,
    /// Archives found to hold no `/` names (shown as they are), by their
    /// child count when looked at.
    flat: HashMap<ExtId, usize>,
    counted: Option<Instant>,
    /// Members put in folders so far, over every archive: each once, as
    /// the parse finds it (a test counts it).
    placed: u64,
}

impl Default for Rows {
    fn default() -> Self {
        Rows {
            folders: true,
            filter: Filter::All,
            keep: None,
            groups: HashMap::new(),
            flat: HashMap::new(),
            counted: None,
            placed: 0,
        }
    }
}

/// A member's path in its archive, as folders are made of it.
fn member_path(t: &Tree, id: ExtId) -> String {
    t.exts[id]
        .name
        .path_form()
        .trim_end_matches('/')
        .to_string()
}

/// The folder part of `path` (`""` at the top).
fn dirname(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// Folders a member is shown under at most: a name with thousands of `/`
/// (an archive is untrusted) makes 32 folders, and the rest of the name
/// stays its own, so the work per member stays a bounded multiple of its
/// name's length.
const MAX_DEPTH: usize = 32;

/// The folder member `path` shows in: its folder part, cut after
/// [`MAX_DEPTH`] names.
fn folder_of(path: &str) -> &str {
    let dir = dirname(path);
    match dir.match_indices('/').nth(MAX_DEPTH - 1) {
        Some((i, _)) => &dir[..i],
        None => dir,
    }
}

/// What member `path` shows as in its folder.
fn shown_name(path: &str) -> &str {
    let folder = folder_of(path);
    if folder.is_empty() {
        path
    } else {
        &path[folder.len() + 1..]
    }
}

impl Rows {
    /// Members put in folders so far (each once, however often the
    /// rows are made ready).
    pub fn placed(&self) -> u64 {
        self.placed
    }

    /// Whether members are grouped by folder (`f` flips it).
    pub fn folders(&self) -> bool {
        self.folders
    }

    /// The filter in force.
    pub fn filter(&self) -> Filter {
        self.filter
    }

    /// Groups by folder or not; the rows are made again.
    pub fn set_folders(&mut self, on: bool) {
        self.folders = on;
        self.groups.clear();
        self.flat.clear();
    }

    /// Shows only what `f` takes, as the tree is now.
    pub fn set_filter(&mut self, t: &Tree, f: Filter) {
        self.filter = f;
        self.groups.clear();
        self.flat.clear();
        self.keep = (f != Filter::All).then(|| {
            let mut keep = pparse::report::tree::with_ancestors(t, |id| f.takes(t.status_of(id)));
            keep[0] = true;
            keep
        });
    }

    fn kept(&self, id: ExtId) -> bool {
        self.keep
            .as_ref()
            .is_none_or(|k| k.get(id).copied().unwrap_or(false))
    }

    /// Makes the rows of extraction `id` ready to be shown (when it is
    /// opened), and brings those already made up to date with the parse.
    pub fn prepare(&mut self, t: &Tree, open: &[ExtId]) {
        for &id in open {
            if !self.groups.contains_key(&id)
                && self.flat.get(&id) != Some(&t.exts[id].children.len())
            {
                self.look_at(t, id);
            }
        }
        let ids: Vec<ExtId> = self.groups.keys().copied().collect();
        for id in ids {
            self.grow(t, id);
        }
        // Damaged files per folder: counted again when damage was found,
        // at most twice a second while a parse finds more.
        let stale = self
            .groups
            .values()
            .any(|g| g.damage_seen != t.damage_count);
        if stale
            && self
                .counted
                .is_none_or(|c| c.elapsed() > Duration::from_millis(500))
        {
            self.counted = Some(Instant::now());
            let ids: Vec<ExtId> = self.groups.keys().copied().collect();
            for id in ids {
                self.count_damage(t, id);
            }
        }
    }

    /// Decides whether `id`'s children are grouped: when a filter is on,
    /// or when folders are and a member's name has a `/`.
    fn look_at(&mut self, t: &Tree, id: ExtId) {
        let kids = &t.exts[id].children;
        let nested = self.folders
            && kids.iter().any(|&c| {
                let name = t.exts[c].name.path_form();
                name.trim_end_matches('/').contains('/') || t.exts[c].kind == EntryKind::Dir
            });
        if nested || self.keep.is_some() {
            self.groups.insert(id, Group::default());
            self.grow(t, id);
            self.count_damage(t, id);
        } else {
            self.flat.insert(id, kids.len());
        }
    }

    /// Adds the children of `id` found since it was last looked at.
    fn grow(&mut self, t: &Tree, id: ExtId) {
        let kids = &t.exts[id].children;
        let from = self.groups.get(&id).map_or(0, |g| g.seen);
        if from >= kids.len() {
            return;
        }
        let folders = self.folders;
        let new: Vec<ExtId> = kids[from..]
            .iter()
            .copied()
            .filter(|&c| self.kept(c))
            .collect();
        self.placed += new.len() as u64;
        let g = self.groups.get_mut(&id).expect("grouped");
        g.seen = kids.len();
        for c in new {
            let e = &t.exts[c];
            if !folders {
                push(g, Arc::from(""), Row::Ext(c), t);
                continue;
            }
            let path = member_path(t, c);
            // Each folder on the way, made where it is first met.
            let mut made = String::new();
            for part in folder_of(&path).split('/').filter(|p| !p.is_empty()) {
                let parent: Arc<str> = Arc::from(made.as_str());
                if !made.is_empty() {
                    made.push('/');
                }
                made.push_str(part);
                let folder: Arc<str> = Arc::from(made.as_str());
                let row = Row::Dir {
                    of: id,
                    path: folder.clone(),
                };
                if !g.pos.contains_key(&row) {
                    push(g, parent, row, t);
                }
            }
            if e.kind == EntryKind::Dir && folder_of(&path).len() == dirname(&path).len() {
                // A directory member is its folder.
                let row = Row::Dir {
                    of: id,
                    path: Arc::from(path.as_str()),
                };
                if !g.pos.contains_key(&row) && !path.is_empty() {
                    push(g, Arc::from(folder_of(&path)), row, t);
                }
                continue;
            }
            push(g, Arc::from(folder_of(&path)), Row::Ext(c), t);
            let mut at = folder_of(&path);
            loop {
                let s = g.stats.entry(Arc::from(at)).or_default();
                s.files += 1;
                s.bytes = s.bytes.saturating_add(e.size());
                if at.is_empty() {
                    break;
                }
                at = dirname(at);
            }
        }
    }

    fn count_damage(&mut self, t: &Tree, id: ExtId) {
        let Some(g) = self.groups.get_mut(&id) else {
            return;
        };
        g.damage_seen = t.damage_count;
        for s in g.stats.values_mut() {
            s.damaged = 0;
        }
        let rows: Vec<ExtId> = g
            .kids
            .values()
            .flatten()
            .filter_map(|r| match r {
                Row::Ext(x) => Some(*x),
                Row::Dir { .. } => None,
            })
            .collect();
        for x in rows {
            if t.status_of(x) == Status::Complete {
                continue;
            }
            let path = member_path(t, x);
            let mut at = folder_of(&path);
            loop {
                if let Some(s) = g.stats.get_mut(at) {
                    s.damaged += 1;
                }
                if at.is_empty() {
                    break;
                }
                at = dirname(at);
            }
        }
    }

    /// What is below folder `path` of archive `of`.
    pub fn stats(&self, of: ExtId, path: &str) -> DirStats {
        self.groups
            .get(&of)
            .and_then(|g| g.stats.get(path))
            .copied()
            .unwrap_or_default()
    }

    /// The row that shows extraction `id` (a directory member is shown
    /// as its folder).
    pub fn row_of(&self, t: &Tree, id: ExtId) -> Row {
        if let Some(p) = t.exts[id].parent()
            && self.groups.contains_key(&p)
            && self.folders
            && t.exts[id].kind == EntryKind::Dir
        {
            let path = member_path(t, id);
            if !path.is_empty() && folder_of(&path).len() == dirname(&path).len() {
                return Row::Dir {
                    of: p,
                    path: Arc::from(path.as_str()),
                };
            }
        }
        Row::Ext(id)
    }

    /// The extraction a row stands for: a folder, its archive's.
    pub fn ext_of(row: &Row) -> ExtId {
        match row {
            Row::Ext(id) => *id,
            Row::Dir { of, .. } => *of,
        }
    }

    /// The name a row shows: a member in a folder by its last name.
    pub fn name(&self, t: &Tree, row: &Row) -> String {
        match row {
            Row::Dir { path, .. } => format!("{}/", path.rsplit('/').next().unwrap_or(path)),
            Row::Ext(id) => {
                let e = &t.exts[*id];
                match e.parent() {
                    Some(p) if self.folders && self.groups.contains_key(&p) => {
                        let path = member_path(t, *id);
                        let base = shown_name(&path);
                        if base.is_empty() {
                            e.display_name()
                        } else {
                            base.to_string()
                        }
                    }
                    _ => e.display_name(),
                }
            }
        }
    }

    /// Whether a row has rows below it.
    pub fn has_children(&self, t: &Tree, row: &Row) -> bool {
        match row {
            Row::Dir { .. } => true,
            Row::Ext(id) => t.exts[*id].children.iter().any(|&c| self.kept(c)),
        }
    }

    /// The model the tree view reads, over `t`.
    pub fn model<'a>(&'a self, t: &'a Tree) -> Model<'a> {
        Model { t, rows: self }
    }
}

fn push(g: &mut Group, folder: Arc<str>, row: Row, t: &Tree) {
    let list = g.kids.entry(folder).or_default();
    let at = list.len();
    match &row {
        Row::Ext(id) => {
            let i = t.position(*id);
            if g.ext_pos.len() <= i {
                g.ext_pos.resize(i + 1, u32::MAX);
            }
            g.ext_pos[i] = u32::try_from(at).unwrap_or(u32::MAX);
        }
        Row::Dir { .. } => {
            g.pos.insert(row.clone(), at);
        }
    }
    list.push(row);
}

impl Group {
    /// Where `row` is in its folder's list.
    fn place(&self, t: &Tree, row: &Row) -> Option<usize> {
        match row {
            Row::Ext(id) => {
                let i = t.position(*id);
                self.ext_pos
                    .get(i)
                    .filter(|&&p| p != u32::MAX)
                    .map(|&p| p as usize)
            }
            Row::Dir { .. } => self.pos.get(row).copied(),
        }
    }
}

/// [`Rows`] over a tree, as the tree view reads it.
pub struct Model<'a> {
    t: &'a Tree,
    rows: &'a Rows,
}

impl Model<'_> {
    fn list(&self, row: &Row) -> Option<&[Row]> {
        let (of, path): (ExtId, &str) = match row {
            Row::Ext(id) => (*id, ""),
            Row::Dir { of, path } => (*of, path),
        };
        let g = self.rows.groups.get(&of)?;
        Some(g.kids.get(path).map_or(&[][..], |v| v.as_slice()))
    }
}

impl TreeModel for Model<'_> {
    type Id = Row;

    fn len(&self, parent: Option<&Row>) -> usize {
        match parent {
            None => 1,
            Some(r) => match self.list(r) {
                Some(l) => l.len(),
                None => match r {
                    Row::Ext(id) => self.t.exts.get(*id).map_or(0, |e| e.children.len()),
                    Row::Dir { .. } => 0,
                },
            },
        }
    }

    fn child(&self, parent: Option<&Row>, index: usize) -> Row {
        match parent {
            None => Row::Ext(0),
            Some(r) => match self.list(r) {
                Some(l) => l[index].clone(),
                None => match r {
                    Row::Ext(id) => Row::Ext(self.t.exts[*id].children[index]),
                    Row::Dir { .. } => Row::Ext(0),
                },
            },
        }
    }

    fn parent(&self, row: &Row) -> Option<Row> {
        match row {
            Row::Dir { of, path } => {
                let up = dirname(path);
                Some(if up.is_empty() {
                    Row::Ext(*of)
                } else {
                    Row::Dir {
                        of: *of,
                        path: Arc::from(up),
                    }
                })
            }
            Row::Ext(id) => {
                let p = self.t.exts.get(*id)?.parent()?;
                if self.rows.folders && self.rows.groups.contains_key(&p) {
                    let path = member_path(self.t, *id);
                    let up = folder_of(&path);
                    if !up.is_empty() {
                        return Some(Row::Dir {
                            of: p,
                            path: Arc::from(up),
                        });
                    }
                }
                Some(Row::Ext(p))
            }
        }
    }

    fn index(&self, row: &Row) -> usize {
        let of = match row {
            Row::Dir { of, .. } => Some(*of),
            Row::Ext(id) => self.t.exts.get(*id).and_then(|e| e.parent()),
        };
        if let Some(g) = of.and_then(|p| self.rows.groups.get(&p))
            && let Some(i) = g.place(self.t, row)
        {
            return i;
        }
        match row {
            Row::Ext(id) => self.t.position(*id),
            Row::Dir { .. } => 0,
        }
    }
}

/// Every archive a view has open, for [`Rows::prepare`].
pub fn open_exts<'a>(rows: impl Iterator<Item = &'a Row>) -> Vec<ExtId> {
    let mut seen = HashSet::new();
    rows.filter_map(|r| match r {
        Row::Ext(id) => Some(*id),
        Row::Dir { .. } => None,
    })
    .filter(|id| seen.insert(*id))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deep_name_makes_at_most_max_depth_folders() {
        assert_eq!(folder_of("a/b/c.txt"), "a/b");
        assert_eq!(shown_name("a/b/c.txt"), "c.txt");
        assert_eq!(folder_of("c.txt"), "");
        assert_eq!(shown_name("c.txt"), "c.txt");
        let deep = "d/".repeat(5000) + "x";
        let folder = folder_of(&deep);
        assert_eq!(folder.split('/').count(), MAX_DEPTH);
        assert!(shown_name(&deep).ends_with("d/x"));
        assert_eq!(folder.len() + 1 + shown_name(&deep).len(), deep.len());
    }
}
