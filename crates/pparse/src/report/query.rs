//! `pparse query`: a jq filter over the extraction tree, run by jaq (a
//! well-kept jq in Rust: its parser, interpreter and standard library;
//! pparse adds its values and one stream).
//!
//! The filter's input `.` is the extraction asked for, as `tree --json`
//! writes it, without `children`. `members` is every extraction below it,
//! depth first in container order, each the same object as `.` is, made
//! when the filter asks for the next one and dropped once it has passed:
//! `members | select(.status != "complete") | .path` keeps nothing of the
//! members it does not print, whatever their number. (jq's own `..` over
//! `tree --json` needs the whole document in memory first.) `nodes` is the
//! node tree of `.`, depth first, as `nodes --json` writes each node
//! (without children, with its `depth`), loaded as the walk reaches it.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Ctx, DataT, Error, Exn, Vars, data};
use jaq_json::Val;

use crate::engine::Session;
use crate::extraction::ExtId;

/// Values the filter runs on, with the session its natives read.
struct Kind;

impl DataT for Kind {
    type V<'a> = Val;
    type Data<'a> = &'a Data<'a>;
}

/// What the natives of a run can reach: the look-up table and the session.
struct Data<'a> {
    lut: &'a jaq_core::Lut<Kind>,
    session: &'a Session,
    top: ExtId,
    /// Member and node objects made so far (see [`Ran::made`]).
    made: std::cell::Cell<u64>,
}

impl<'a> data::HasLut<'a, Kind> for &'a Data<'a> {
    fn lut(&self) -> &'a jaq_core::Lut<Kind> {
        self.lut
    }
}

/// A compiled filter.
pub struct Query {
    filter: jaq_core::Filter<Kind>,
}

/// The natives pparse adds to jq's.
fn natives() -> impl Iterator<Item = jaq_core::native::Fun<Kind>> {
    let members: jaq_core::native::Filter<jaq_core::RunPtr<Kind>> =
        ("members", jaq_core::native::v(0), |cv| {
            let d: &Data = cv.0.data();
            Box::new(Members::new(d))
        });
    let nodes: jaq_core::native::Filter<jaq_core::RunPtr<Kind>> =
        ("nodes", jaq_core::native::v(0), |cv| {
            let d: &Data = cv.0.data();
            Box::new(Nodes::new(d))
        });
    [
        jaq_core::native::run::<Kind>(members),
        jaq_core::native::run::<Kind>(nodes),
    ]
    .into_iter()
}

/// `members`: the extractions below `top`, depth first, one JSON object at
/// a time (the tree is locked only while one is written).
struct Members<'a> {
    data: &'a Data<'a>,
    stack: Vec<ExtId>,
    started: bool,
}

impl<'a> Members<'a> {
    fn new(data: &'a Data<'a>) -> Self {
        Members {
            data,
            stack: Vec::new(),
            started: false,
        }
    }

    /// The next member read from the records of the index the session
    /// was opened from, without its tree: a query over an indexed archive
    /// of any size holds one member and the walk's stack.
    fn next_cataloged(&mut self, cat: &crate::index::Catalog) -> Option<String> {
        if !self.started {
            self.started = true;
            self.stack
                .extend(cat.children_of(self.data.top).into_iter().rev());
        }
        let id = self.stack.pop()?;
        self.stack.extend(cat.children_of(id).into_iter().rev());
        let chain = cat.chain(id).ok()?;
        let path = chain_path(&chain);
        Some(super::tree::extraction_json_of(chain.last()?, &path))
    }
}

/// The PATH of the last of `chain`, an extraction and its ancestors from
/// the root down.
fn chain_path(chain: &[crate::extraction::Extraction]) -> String {
    chain
        .iter()
        .skip(1)
        .map(|e| e.display_name())
        .collect::<Vec<_>>()
        .join("/")
}

/// The session's catalog, when the filter can read members from it (the
/// tree was not built: reading it would build it).
fn catalog_only(session: &Session) -> Option<&crate::index::Catalog> {
    session.catalog().filter(|_| !session.tree_is_built())
}

impl<'a> Iterator for Members<'a> {
    type Item = jaq_core::ValX<'a, Val>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(cat) = catalog_only(self.data.session) {
            let json = self.next_cataloged(cat)?;
            self.data.made.set(self.data.made.get() + 1);
            return Some(
                jaq_json::read::parse_single(json.as_bytes())
                    .map_err(|e| Exn::from(Error::str(format!("{e:?}")))),
            );
        }
        let t = self.data.session.tree();
        if !self.started {
            self.started = true;
            let kids = &t.exts.get(self.data.top)?.children;
            self.stack.extend(kids.iter().rev());
        }
        let id = self.stack.pop()?;
        self.stack.extend(t.exts[id].children.iter().rev());
        let json = super::tree::extraction_json(&t, id);
        drop(t);
        self.data.made.set(self.data.made.get() + 1);
        Some(
            jaq_json::read::parse_single(json.as_bytes())
                .map_err(|e| Exn::from(Error::str(format!("{e:?}")))),
        )
    }
}

/// `nodes`: the node tree of the extraction, depth first, one node at a
/// time. Children not in memory are loaded when the walk reaches them and
/// dropped again once it has left them, so a walk holds one path of the
/// node tree, not the whole of it.
struct Nodes<'a> {
    data: &'a Data<'a>,
    /// Node paths (child indexes from the top-level nodes) to visit, and
    /// `Leave` marks: past them, what the walk loaded is dropped.
    stack: Vec<Step>,
    started: bool,
}

enum Step {
    Visit(Vec<usize>),
    Leave(Vec<usize>),
}

impl<'a> Nodes<'a> {
    fn new(data: &'a Data<'a>) -> Self {
        Nodes {
            data,
            stack: Vec::new(),
            started: false,
        }
    }
}

impl<'a> Iterator for Nodes<'a> {
    type Item = jaq_core::ValX<'a, Val>;

    fn next(&mut self) -> Option<Self::Item> {
        let (session, top) = (self.data.session, self.data.top);
        if !self.started {
            self.started = true;
            // A tree read back from an index holds no nodes: an empty
            // stream would say the extraction has none.
            if session.from_index() {
                return Some(Err(Exn::from(Error::str(
                    "nodes: this session was read from an index, which holds no nodes; open the file without one",
                ))));
            }
            let n = session.tree().exts.get(top)?.nodes.len();
            self.stack
                .extend((0..n).rev().map(|i| Step::Visit(vec![i])));
        }
        loop {
            let path = match self.stack.pop()? {
                Step::Leave(path) => {
                    session.unload(top, &path);
                    continue;
                }
                Step::Visit(path) => path,
            };
            let unloaded = {
                let t = session.tree();
                let node = t.exts[top].nodes[path[0]].descend(&path[1..])?;
                matches!(node.children, crate::node::Children::Unloaded)
            };
            // Loads what the parser left to load on demand; it is dropped
            // again at `Leave`.
            if unloaded && session.load(top, &path) {
                self.stack.push(Step::Leave(path.clone()));
            }
            let t = session.tree();
            let node = t.exts[top].nodes[path[0]].descend(&path[1..])?;
            let json = super::tree::node_fields_json(node, path.len());
            let kids = node.loaded_children().len();
            drop(t);
            // Nested deeper than any parser makes: not walked further.
            if path.len() < 4096 {
                for i in (0..kids).rev() {
                    let mut p = path.clone();
                    p.push(i);
                    self.stack.push(Step::Visit(p));
                }
            }
            self.data.made.set(self.data.made.get() + 1);
            return Some(
                jaq_json::read::parse_single(json.as_bytes())
                    .map_err(|e| Exn::from(Error::str(format!("{e:?}")))),
            );
        }
    }
}

/// Where a filter's text went wrong: its byte offset and what was
/// expected there.
fn at(code: &str, part: &str) -> usize {
    jaq_core::load::span(code, part).start
}

impl Query {
    /// Compiles `code`, a jq filter; `Err` says what is wrong and where
    /// (byte offsets in `code`).
    pub fn compile(code: &str) -> Result<Query, String> {
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs::<Kind>()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs())
            .chain(natives());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errs| {
                let mut out = Vec::new();
                for (_, e) in errs {
                    match e {
                        jaq_core::load::Error::Io(v) => {
                            out.extend(v.into_iter().map(|(_, m)| m));
                        }
                        jaq_core::load::Error::Lex(v) => {
                            out.extend(v.into_iter().map(|(exp, part)| {
                                format!("expected {} at byte {}", exp.as_str(), at(code, part))
                            }));
                        }
                        jaq_core::load::Error::Parse(v) => {
                            out.extend(v.into_iter().map(|(exp, part)| {
                                format!("expected {} at byte {}", exp.as_str(), at(code, part))
                            }));
                        }
                    }
                }
                out.join("; ")
            })?;
        let filter = jaq_core::Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| {
                errs.into_iter()
                    .flat_map(|(_, v)| v)
                    .map(|(name, undef)| {
                        format!(
                            "undefined {} {name} at byte {}",
                            undef.as_str(),
                            at(code, name)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })?;
        Ok(Query { filter })
    }

    /// Runs the filter on extraction `id` of `session` (whose parse is
    /// over: a filter sees the tree as it is), calling `each` with every
    /// output as one line of compact JSON. Stops at the filter's first
    /// error (said in [`Ran::error`]) or at `each`'s (`Err`).
    pub fn run(
        &self,
        session: &Session,
        id: ExtId,
        mut each: impl FnMut(&str) -> std::io::Result<()>,
    ) -> std::io::Result<Ran> {
        let mut ran = Ran::default();
        let input = match catalog_only(session) {
            Some(cat) => cat.chain(id).ok().and_then(|chain| {
                Some(super::tree::extraction_json_of(
                    chain.last()?,
                    &chain_path(&chain),
                ))
            }),
            None => {
                let t = session.tree();
                t.exts
                    .get(id)
                    .is_some()
                    .then(|| super::tree::extraction_json(&t, id))
            }
        };
        let Some(input) = input else {
            ran.error = Some(format!("no extraction {id}"));
            return Ok(ran);
        };
        let input = match jaq_json::read::parse_single(input.as_bytes()) {
            Ok(v) => v,
            Err(e) => {
                ran.error = Some(format!("{e:?}"));
                return Ok(ran);
            }
        };
        let data = Data {
            lut: &self.filter.lut,
            session,
            top: id,
            made: std::cell::Cell::new(0),
        };
        let ctx = Ctx::<Kind>::new(&data, Vars::new([]));
        for out in self.filter.id.run((ctx, input)) {
            match out {
                Ok(v) => {
                    ran.outputs += 1;
                    each(&v.to_string())?;
                }
                Err(e) => {
                    ran.error = Some(match e.get_err() {
                        Ok(err) => err.to_string(),
                        Err(_) => "the filter halted".to_string(),
                    });
                    break;
                }
            }
        }
        ran.made = data.made.get();
        Ok(ran)
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ran {
    /// Values the filter output.
    pub outputs: u64,
    /// Objects `members` and `nodes` made: only as many as the filter
    /// took (`first(members)` makes one).
    pub made: u64,
    /// The filter's error, where it stopped.
    pub error: Option<String>,
}
