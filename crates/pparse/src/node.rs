//! Nodes: the parsed structure of one extraction.
//!
//! A parser's scan produces the top-level nodes of its extraction (one per
//! gzip member, tar entry, zip record). Their children are usually
//! [`Children::Unloaded`]: the parser's `load` function rebuilds them from the
//! node's [`Range`] on demand, and [`Node::unload`] drops them again. So a
//! node tree costs memory only for what someone looks at, and any subtree can
//! be thrown away and re-read from the bytes.

use std::fmt;

use thin_vec::ThinVec;

use crate::data::Range;
use crate::status::{Damage, Status};

/// A scalar value shown with a node.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An unsigned integer.
    UInt(u64),
    /// A signed integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// Text, already escaped for display (see [`crate::name`]).
    Str(Box<str>),
    /// A string read from the file, escaped for display and ending in `…`
    /// when only its start is kept: shown in double quotes, written to
    /// JSON as the string itself (quotes in the value would be quoted
    /// twice there).
    Quoted(Box<str>),
    /// A short byte string (previews, magic numbers).
    Bytes(Box<[u8]>),
    /// "`what`, `n` bytes" (a member's type and size), kept without an
    /// allocation: an archive has one per member, ten million of them.
    Sized(&'static str, u64),
    /// "`how`, `from` → `to` bytes" (a zip entry's method and sizes),
    /// kept without an allocation for the same reason.
    Coded(&'static str, u64, u64),
    /// "decoded `start`..`end` (`n` bytes)": where a compressed member's
    /// output lies in its decoded stream, kept without an allocation (a
    /// tar of small `.gz` files has one per file).
    Decoded(u64, u64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::UInt(v) => write!(f, "{v}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(s) => f.write_str(s),
            Value::Quoted(s) => write!(f, "\"{s}\""),
            Value::Bytes(b) => {
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                Ok(())
            }
            Value::Sized(what, n) => write!(f, "{what}, {n} bytes"),
            Value::Coded(how, from, to) => write!(f, "{how}, {from} → {to} bytes"),
            Value::Decoded(start, end) => write!(
                f,
                "decoded {start:#x}..{end:#x} ({} bytes)",
                end.saturating_sub(*start)
            ),
        }
    }
}

/// The children of a node.
#[derive(Clone, Debug, Default)]
pub enum Children {
    /// No children, ever.
    #[default]
    Leaf,
    /// Children exist but are not in memory; the parser can load them.
    Unloaded,
    /// Children in memory.
    Loaded(ThinVec<Node>),
}

/// One element of a parsed structure.
#[derive(Clone, Debug)]
pub struct Node {
    /// Parser-defined kind; the parser's `load` dispatches on it.
    pub kind: &'static str,
    /// Display name (escaped).
    pub name: Box<str>,
    /// Bytes of the extraction this node covers.
    pub range: Range,
    /// What it holds, shown beside its name.
    pub value: Option<Value>,
    /// Set when this node is truncated or corrupt.
    pub damage: Option<Box<Damage>>,
    /// Its children: none, not loaded, or loaded.
    pub children: Children,
}

impl Node {
    /// A leaf node of `kind` named `name` covering `range`.
    pub fn new(kind: &'static str, name: impl Into<Box<str>>, range: Range) -> Node {
        Node {
            kind,
            name: name.into(),
            range,
            value: None,
            damage: None,
            children: Children::Leaf,
        }
    }
    /// With a value.
    pub fn value(mut self, v: Value) -> Node {
        self.value = Some(v);
        self
    }
    /// With an unsigned integer value.
    pub fn uint(self, v: u64) -> Node {
        self.value(Value::UInt(v))
    }
    /// With a text value (escaped for display by the caller).
    pub fn text(self, s: impl Into<Box<str>>) -> Node {
        self.value(Value::Str(s.into()))
    }
    /// Marks the node as having children that `load` can produce.
    pub fn lazy(mut self) -> Node {
        self.children = Children::Unloaded;
        self
    }
    /// With these children, loaded.
    pub fn with_children(mut self, children: Vec<Node>) -> Node {
        self.children = Children::Loaded(children.into());
        self
    }
    /// Marked truncated or corrupt.
    pub fn damaged(mut self, d: Damage) -> Node {
        self.damage = Some(Box::new(d));
        self
    }
    /// Its status: complete unless marked.
    pub fn status(&self) -> Status {
        self.damage.as_ref().map_or(Status::Complete, |d| d.status)
    }
    /// Drops loaded children of a node that can load them again.
    pub fn unload(&mut self) {
        if matches!(self.children, Children::Loaded(_)) {
            self.children = Children::Unloaded;
        }
    }
    /// Its children in memory (none when not loaded).
    pub fn loaded_children(&self) -> &[Node] {
        match &self.children {
            Children::Loaded(c) => c,
            _ => &[],
        }
    }
    /// Follows a path of child indices; `None` if it leaves the loaded tree.
    pub fn descend(&self, path: &[usize]) -> Option<&Node> {
        let mut n = self;
        for &i in path {
            n = n.loaded_children().get(i)?;
        }
        Some(n)
    }
    /// The node at `path` below this one (child indexes), mutable.
    pub fn descend_mut(&mut self, path: &[usize]) -> Option<&mut Node> {
        let mut n = self;
        for &i in path {
            n = match &mut n.children {
                Children::Loaded(c) => c.get_mut(i)?,
                _ => return None,
            };
        }
        Some(n)
    }
}
