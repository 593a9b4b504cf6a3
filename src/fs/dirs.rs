//! The directories of one container, made once from its members' names:
//! most archives list `train/cat/0001.jpg` as one member and name no
//! `train/` entry, and a file system must list `train` without scanning
//! every member again for each folder it shows.

use std::collections::HashMap;

use crate::extraction::{EntryKind, ExtId, Tree};

/// What a directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    /// A member (a file, or a directory that has an entry of its own).
    Member(ExtId),
    /// A directory only the names of members make: its prefix, ending in
    /// `/`.
    Dir(Box<str>),
}

/// The directories of a container, by prefix ("" for the top, else
/// `a/b/`), each with what it holds in container order.
#[derive(Debug, Default)]
pub(super) struct Dirs {
    map: HashMap<Box<str>, Vec<Item>>,
}

impl Dirs {
    /// The directories of container `c` (its children's names split at
    /// `/`): one pass over the members.
    pub(super) fn build(t: &Tree, c: ExtId) -> Dirs {
        let mut d = Dirs::default();
        d.map.insert("".into(), Vec::new());
        // Where a directory sits in its parent's list, to put its own
        // entry in place of the one its members' names made.
        let mut placed: HashMap<Box<str>, usize> = HashMap::new();
        for &x in &t.exts[c].children {
            let name = t.exts[x].name.display_cow();
            let bare = name.trim_end_matches('/');
            if bare.is_empty() {
                d.push("", Item::Member(x));
                continue;
            }
            // Every directory on the way, made once.
            let mut parent = 0;
            for (i, _) in bare.match_indices('/') {
                let prefix: Box<str> = format!("{}/", &bare[..i]).into();
                if !d.map.contains_key(&prefix) {
                    d.map.insert(prefix.clone(), Vec::new());
                    let at = d.push(&bare[..parent], Item::Dir(prefix.clone()));
                    placed.insert(prefix, at);
                }
                parent = i + 1;
            }
            let dir_of = &bare[..parent];
            let is_dir = t.exts[x].kind == EntryKind::Dir && t.exts[x].children.is_empty();
            if is_dir {
                let prefix: Box<str> = format!("{bare}/").into();
                d.map.entry(prefix.clone()).or_default();
                match placed.get(&prefix) {
                    // Named by members before its entry came: the entry
                    // takes the place.
                    Some(&at) => {
                        if let Some(list) = d.map.get_mut(dir_key(dir_of).as_ref()) {
                            list[at] = Item::Member(x);
                        }
                    }
                    None => {
                        let at = d.push(dir_of, Item::Member(x));
                        placed.insert(prefix, at);
                    }
                }
            } else {
                d.push(dir_of, Item::Member(x));
            }
        }
        d
    }

    /// Adds `item` to directory `dir` (a prefix without its `/`, or "");
    /// returns its place.
    fn push(&mut self, dir: &str, item: Item) -> usize {
        let list = self.map.entry(dir_key(dir)).or_default();
        list.push(item);
        list.len() - 1
    }

    /// What directory `prefix` holds (`prefix` ends in `/`, or is "").
    pub(super) fn items(&self, prefix: &str) -> Option<&[Item]> {
        self.map.get(prefix).map(Vec::as_slice)
    }
}

/// The map key of a directory given without its `/`.
fn dir_key(dir: &str) -> Box<str> {
    if dir.is_empty() {
        "".into()
    } else {
        format!("{}/", dir.trim_end_matches('/')).into()
    }
}
