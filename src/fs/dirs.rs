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
    /// Members by a hash of their name without a trailing `/`: the first
    /// in container order, or `None` when two names share the hash. A
    /// PATH is then found in a few lookups, not by comparing it with every
    /// member's name (a dataset's tar holds millions).
    by_name: HashMap<u64, Option<ExtId>>,
}

/// The hash [`Dirs::named`] looks names up by.
fn name_hash(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
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
            let name = t.exts[x].name.path_form();
            let bare = name.trim_end_matches('/');
            d.by_name
                .entry(name_hash(bare))
                .and_modify(|v| *v = None)
                .or_insert(Some(x));
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

    /// The member named `bare` (no trailing `/`): `Ok(None)` if there is
    /// none, `Err(())` if the hash cannot tell (two names share it: look
    /// the slow way).
    pub(super) fn named(&self, t: &Tree, bare: &str) -> Result<Option<ExtId>, ()> {
        match self.by_name.get(&name_hash(bare)) {
            None => Ok(None),
            Some(None) => Err(()),
            Some(Some(x)) => {
                let name = t.exts[*x].name.path_form();
                if name.trim_end_matches('/') == bare {
                    Ok(Some(*x))
                } else {
                    Ok(None)
                }
            }
        }
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
