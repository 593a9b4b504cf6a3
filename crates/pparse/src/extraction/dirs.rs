//! The directories of one container, made once from its members' names:
//! most archives list `train/cat/0001.jpg` as one member and name no
//! `train/` entry, and a file system must list `train` without scanning
//! every member again for each folder it shows.
//!
//! It also names what each folder lists, once for every front end (the
//! mount, `pparse::fs`, the Python package): a folder can hold two members
//! of one name (a symlink `lnk2`, then a file `lnk2`), or a member and a
//! folder that only other members' names make (a symlink `link`, then
//! `link/x`). Each is listed under a name of its own: in a folder, the
//! members (entries of their own) take their names first, in container
//! order, then the folders made by names; an entry whose name is taken
//! gets `~1`, `~2`, … after it, skipping any name another entry of the
//! folder has. The first member of a name keeps it, as a PATH finds it
//! ([`crate::extraction::Tree::resolve`] tries members in container order).

use std::collections::HashMap;

use crate::extraction::{EntryKind, ExtId, Extraction, Tree};

/// What a directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A member (a file, or a directory that has an entry of its own).
    Member(ExtId),
    /// A directory only the names of members make: its prefix, ending in
    /// `/`.
    Dir(Box<str>),
}

/// The directories of a container, by prefix ("" for the top, else
/// `a/b/`), each with what it holds in container order.
#[derive(Debug, Default)]
pub(crate) struct Dirs {
    map: HashMap<Box<str>, Vec<Item>>,
    /// Members by a hash of their name without a trailing `/`: the first
    /// in container order, or `None` when two names share the hash. A
    /// PATH is then found in a few lookups, not by comparing it with every
    /// member's name (a dataset's tar holds millions).
    by_name: HashMap<u64, Option<ExtId>>,
    /// The names of members listed under another name than their own
    /// last component (a later member of a taken name, `lnk2~1`).
    member_names: HashMap<ExtId, Box<str>>,
    /// The same for folders, by prefix (`a/`), whether a member stands
    /// for the folder or only names make it: the name its parent lists
    /// it under.
    dir_names: HashMap<Box<str>, Box<str>>,
    /// The member that stands for a folder, by prefix (`a/`): a
    /// directory entry of the container.
    dir_members: HashMap<Box<str>, ExtId>,
}

/// The name a folder lists an entry under when it is free: its last
/// component, with `_` before a name no file system can show (empty, `.`,
/// `..`).
fn plain(last: &str) -> String {
    if last.is_empty() || last == "." || last == ".." {
        format!("_{last}")
    } else {
        last.to_string()
    }
}

/// Whether member `e` stands for a folder: a directory entry with nothing
/// parsed inside it.
fn is_dir(e: &Extraction) -> bool {
    e.kind == EntryKind::Dir && e.children.is_empty()
}

/// The last component of `bare` (a name or prefix without its `/`).
fn last_of(bare: &str) -> &str {
    bare.rsplit('/').next().unwrap_or(bare)
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
    pub(crate) fn build(t: &Tree, c: ExtId) -> Dirs {
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
            let is_dir = is_dir(&t.exts[x]);
            if is_dir {
                let prefix: Box<str> = format!("{bare}/").into();
                d.map.entry(prefix.clone()).or_default();
                d.dir_members.insert(prefix.clone(), x);
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
        if d.may_clash() {
            d.name_taken(t);
        }
        d
    }

    /// Whether [`Dirs::build`]`(t, c)` renames an entry ([`Dirs::renames`]),
    /// found with 16 bytes a member instead of the whole map: an index
    /// records only this bit for each container, and most containers
    /// rename nothing. It asks what [`Dirs::may_clash`] asks, of the
    /// members' name hashes sorted; only a container where two entries
    /// may share a name is built in full.
    pub(crate) fn renames_in(t: &Tree, c: ExtId) -> bool {
        let kids = &t.exts[c].children;
        let mut hashes: Vec<(u64, ExtId)> = kids
            .iter()
            .map(|&x| {
                let name = t.exts[x].name.path_form();
                (name_hash(name.trim_end_matches('/')), x)
            })
            .collect();
        hashes.sort_unstable();
        let shared = hashes.windows(2).any(|w| w[0].0 == w[1].0);
        // A folder its members' names make (`a/` for `a/x`) clashes with a
        // member named `a` unless that member is the folder's own entry.
        let folder_clash = || {
            kids.iter().any(|&x| {
                let name = t.exts[x].name.path_form();
                let bare = name.trim_end_matches('/');
                bare.match_indices('/').any(|(i, _)| {
                    let prefix = &bare[..i];
                    let trimmed = prefix.trim_end_matches('/');
                    if trimmed.is_empty() {
                        return false;
                    }
                    let Ok(k) = hashes.binary_search_by_key(&name_hash(trimmed), |h| h.0) else {
                        return false;
                    };
                    let m = &t.exts[hashes[k].1];
                    let own = m.name.path_form();
                    !(is_dir(m) && own.trim_end_matches('/') == prefix)
                })
            })
        };
        (shared || folder_clash()) && Dirs::build(t, c).renames()
    }

    /// Whether two entries of a folder may share a name: two members of
    /// one name (or of one hash), or a folder made by names that a member
    /// other than its own directory entry is named. Most containers have
    /// none, and their names are not looked at again.
    fn may_clash(&self) -> bool {
        self.by_name.values().any(Option::is_none)
            || self.map.keys().any(|p| {
                let bare = p.trim_end_matches('/');
                !bare.is_empty()
                    && match self.by_name.get(&name_hash(bare)) {
                        None => false,
                        Some(None) => true,
                        Some(Some(x)) => self.dir_members.get(p) != Some(x),
                    }
            })
    }

    /// The name `item` is listed under when free, and the prefix of the
    /// folder it stands for (if it is one).
    fn base_of(t: &Tree, item: &Item) -> (String, Option<Box<str>>) {
        match item {
            Item::Member(x) => {
                let e = &t.exts[*x];
                let name = e.name.path_form();
                let bare = name.trim_end_matches('/');
                let dir = (is_dir(e) && !bare.is_empty()).then(|| format!("{bare}/").into());
                (plain(last_of(bare)), dir)
            }
            Item::Dir(p) => (plain(last_of(p.trim_end_matches('/'))), Some(p.clone())),
        }
    }

    /// Gives every entry whose name another one of its folder took first a
    /// name of its own (see the module docs).
    fn name_taken(&mut self, t: &Tree) {
        let mut member_names = HashMap::new();
        let mut dir_names = HashMap::new();
        for items in self.map.values() {
            let bases: Vec<(String, Option<Box<str>>)> =
                items.iter().map(|i| Dirs::base_of(t, i)).collect();
            // Members first, then folders made by names, each in order.
            let order = (0..items.len())
                .filter(|&i| matches!(items[i], Item::Member(_)))
                .chain((0..items.len()).filter(|&i| matches!(items[i], Item::Dir(_))));
            let order: Vec<usize> = order.collect();
            let mut first: HashMap<&str, usize> = HashMap::new();
            let mut later = Vec::new();
            for &i in &order {
                let b = bases[i].0.as_str();
                match first.get(b) {
                    Some(_) => later.push(i),
                    None => {
                        first.insert(b, i);
                    }
                }
            }
            let raw = |i: usize| match &items[i] {
                Item::Member(x) => {
                    let name = t.exts[*x].name.path_form();
                    last_of(name.trim_end_matches('/')) != bases[i].0
                }
                Item::Dir(p) => last_of(p.trim_end_matches('/')) != bases[i].0,
            };
            let mut taken: std::collections::HashSet<String> =
                bases.iter().map(|b| b.0.clone()).collect();
            let mut next: HashMap<&str, usize> = HashMap::new();
            let mut named: Vec<(usize, String)> = order
                .iter()
                .filter(|&&i| first.get(bases[i].0.as_str()) == Some(&i) && raw(i))
                .map(|&i| (i, bases[i].0.clone()))
                .collect();
            for i in later {
                let base = bases[i].0.as_str();
                let n = next.entry(base).or_insert(0);
                let name = loop {
                    *n += 1;
                    let cand = format!("{base}~{n}");
                    if taken.insert(cand.clone()) {
                        break cand;
                    }
                };
                named.push((i, name));
            }
            for (i, name) in named {
                let name: Box<str> = name.into();
                if let Item::Member(x) = &items[i] {
                    member_names.insert(*x, name.clone());
                }
                if let Some(p) = &bases[i].1 {
                    dir_names.insert(p.clone(), name);
                }
            }
        }
        self.member_names = member_names;
        self.dir_names = dir_names;
    }

    /// The name folder listing `item` shows it under.
    pub(crate) fn listed_name(&self, t: &Tree, item: &Item) -> String {
        let given = match item {
            Item::Member(x) => self.member_names.get(x),
            Item::Dir(p) => self.dir_names.get(p),
        };
        match given {
            Some(n) => n.to_string(),
            None => Dirs::base_of(t, item).0,
        }
    }

    /// The directory entry that stands for folder `prefix` (ending in
    /// `/`), if the container has one.
    pub(crate) fn dir_member(&self, prefix: &str) -> Option<ExtId> {
        self.dir_members.get(prefix).copied()
    }

    /// Whether some entry is listed under another name than its own.
    pub(crate) fn renames(&self) -> bool {
        !self.member_names.is_empty() || !self.dir_names.is_empty()
    }

    /// `bare`, a path inside the container (a member's name without its
    /// trailing `/`, or a folder's prefix without it), spelled with the
    /// names the folders on its way list: `link~1/x` for `link/x` when a
    /// member `link` took `link`. `member` is the member `bare` names, if
    /// it names one.
    pub(crate) fn spell(&self, bare: &str, member: Option<ExtId>) -> String {
        let mut out = String::with_capacity(bare.len() + 4);
        let mut start = 0;
        for (i, _) in bare.match_indices('/') {
            let prefix = &bare[..=i];
            match self.dir_names.get(prefix) {
                Some(n) => out.push_str(n),
                None => out.push_str(&bare[start..i]),
            }
            out.push('/');
            start = i + 1;
        }
        let own = member.and_then(|x| self.member_names.get(&x)).or_else(|| {
            (member.is_none())
                .then(|| self.dir_names.get(format!("{bare}/").as_str()))
                .flatten()
        });
        match own {
            Some(n) => out.push_str(n),
            None => out.push_str(&bare[start..]),
        }
        out
    }

    /// The entry folder `prefix` lists under `name` (see
    /// [`Dirs::listed_name`]).
    pub(crate) fn listed(&self, t: &Tree, prefix: &str, name: &str) -> Option<&Item> {
        self.items(prefix)?
            .iter()
            .find(|i| self.listed_name(t, i) == name)
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
    pub(crate) fn named(&self, t: &Tree, bare: &str) -> Result<Option<ExtId>, ()> {
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
    pub(crate) fn items(&self, prefix: &str) -> Option<&[Item]> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Data, MemSource};
    use crate::extraction::{Form, Meta, Phase};
    use crate::name::Name;
    use thin_vec::ThinVec;

    fn ext(id: ExtId, name: &str, kind: EntryKind, bytes: &Data) -> Extraction {
        Extraction::new(
            id,
            (id > 0).then_some(0),
            u32::from(id > 0),
            crate::extraction::Parts {
                name: Name::new(name.as_bytes()),
                kind,
                bytes: bytes.clone(),
                form: Form::Own,
                origin: None,
                declared_size: None,
                damage: ThinVec::new(),
                extra: None,
                phase: Phase::Leaf,
                meta: Meta::default(),
            },
        )
    }

    /// A container of the members `names` (a name ending in `/` is a
    /// directory entry).
    fn tree_of(names: &[&str]) -> Tree {
        let bytes: Data = std::sync::Arc::new(MemSource::new(Vec::new()));
        let mut t = Tree::default();
        t.exts.push(ext(0, "root", EntryKind::Root, &bytes));
        for (i, n) in names.iter().enumerate() {
            let kind = if n.ends_with('/') {
                EntryKind::Dir
            } else {
                EntryKind::File
            };
            t.exts.push(ext(i + 1, n, kind, &bytes));
            t.exts[0].children.push(i + 1);
        }
        t
    }

    /// The quick answer is the full build's, on every kind of clash and
    /// on names that only look alike.
    #[test]
    fn the_quick_rename_check_agrees_with_the_full_build() {
        let cases: &[&[&str]] = &[
            &["a/x", "a/y", "b"],
            &["a/", "a/x"],
            &["a/x", "a/"],
            &["a", "a/x"],
            &["a/x", "a"],
            &["lnk2", "lnk2"],
            &["a//x", "a/"],
            &["a//x", "a"],
            &["/x", "x"],
            &["", "a"],
            &["", ""],
            &["./x", "."],
            &["a/b/c", "a/b", "a/"],
            &["a/b/c", "a/", "a/b/"],
            &["a/.."],
            &["x/", "x/"],
            &["x/", "x"],
        ];
        for names in cases {
            let t = tree_of(names);
            assert_eq!(
                Dirs::renames_in(&t, 0),
                Dirs::build(&t, 0).renames(),
                "{names:?}"
            );
        }
        assert!(Dirs::renames_in(&tree_of(&["a", "a/x"]), 0));
        assert!(!Dirs::renames_in(&tree_of(&["a/", "a/x"]), 0));
    }
}
