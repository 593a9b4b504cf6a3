//! Schemas: the message types pparse knows, and the ones users bring.
//!
//! The ONNX and W&B schemas are `.proto` files written for this project from
//! the published field names and numbers (`proto/`); they are compiled into
//! a descriptor pool the first time one is needed, with protox, so no
//! generated code is checked in and a user's `--proto FILE` goes through the
//! very same path at run time.
//!
//! Nodes name their message type in their `kind`, so a lazily loaded node
//! knows how to read its children; [`intern`] turns a type's full name into
//! the `&'static str` a kind needs (the set of names is bounded by the
//! schemas loaded).

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;

use parking_lot::{Mutex, RwLock};
use prost_reflect::{DescriptorPool, MessageDescriptor};
use protox::Compiler;
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

/// The schemas compiled into the binary: (file name, package, source).
const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "onnx.proto",
        "onnx.",
        include_str!("../../../../proto/onnx/onnx.proto"),
    ),
    (
        "wandb.proto",
        "wandb_internal.",
        include_str!("../../../../proto/wandb/wandb.proto"),
    ),
];

struct Builtin;

impl FileResolver for Builtin {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match BUILTIN.iter().find(|(n, _, _)| *n == name) {
            Some((n, _, src)) => File::from_source(n, src),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

fn compile_builtin(name: &str) -> prost_reflect::prost_types::FileDescriptorSet {
    let mut chain = ChainFileResolver::new();
    chain.add(Builtin);
    chain.add(GoogleFileResolver::new());
    let mut c = Compiler::with_file_resolver(chain);
    c.include_imports(true);
    // The builtin files are tested to compile; a failure is a build bug.
    c.open_file(name)
        .unwrap_or_else(|e| panic!("builtin schema {name}: {e}"));
    c.file_descriptor_set()
}

/// The builtin schemas, compiled as they are first needed: constants of
/// the program, shared by every session.
fn builtins() -> &'static RwLock<DescriptorPool> {
    static POOL: OnceLock<RwLock<DescriptorPool>> = OnceLock::new();
    POOL.get_or_init(|| RwLock::new(DescriptorPool::new()))
}

/// Compiles the builtin schema `i` into the pool the first time it is
/// needed: each costs milliseconds, and a command needs one at most.
fn ensure(i: usize) {
    static DONE: [OnceLock<()>; BUILTIN.len()] = [const { OnceLock::new() }; BUILTIN.len()];
    DONE[i].get_or_init(|| {
        let set = compile_builtin(BUILTIN[i].0);
        // The builtin files do not overlap.
        let _ = builtins().write().add_file_descriptor_set(set);
    });
}

/// A message type of the builtin schemas by its full name
/// (`onnx.ModelProto`, `wandb_internal.Record`).
pub(crate) fn builtin(name: &str) -> Option<MessageDescriptor> {
    let i = BUILTIN.iter().position(|b| name.starts_with(b.1))?;
    ensure(i);
    builtins().read().get_message_by_name(name)
}

/// The message types a session knows: the builtin ones and those its
/// user's `.proto` files add ([`Schemas::add_proto_file`]). Part of the
/// session's [`crate::Options`], so two sessions in one process can read
/// with different schemas, and an index records which were loaded.
#[derive(Clone, Debug, Default)]
pub struct Schemas {
    /// The types the user's files declare (and what they import).
    user: Option<DescriptorPool>,
    /// A running SHA-256, as hex, of each set added, in order (empty when
    /// none was).
    digest: String,
}

impl Schemas {
    /// A message type by its full name: a builtin one, or the user's.
    pub fn message(&self, name: &str) -> Option<MessageDescriptor> {
        builtin(name).or_else(|| self.user.as_ref()?.get_message_by_name(name))
    }

    /// Which schemas the user's files added, as a digest of their compiled
    /// descriptors in the order they came (empty when none was): part of
    /// the settings an index is written with (`Options::fingerprint`), so
    /// that one made with one set of `--proto` files is not read with
    /// another (their types decide what a message holds, and so the tree).
    pub fn user_digest(&self) -> &str {
        &self.digest
    }

    /// Compiles a user's `.proto` file (imports are looked up beside it,
    /// and the well-known `google/protobuf/*` files are built in) and adds
    /// its types. Returns the full names of the messages it declares. A
    /// type the builtin schemas or an earlier file declare is refused.
    pub fn add_proto_file(&mut self, path: &Path) -> Result<Vec<String>, String> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut c = Compiler::new([dir]).map_err(|e| format!("{}: {e}", path.display()))?;
        c.include_imports(true);
        c.open_file(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let set = c.file_descriptor_set();
        let own = c
            .files()
            .filter(|f| !f.is_import())
            .map(|f| f.name().to_string())
            .collect::<Vec<_>>();
        let digest = {
            use prost_reflect::prost::Message;
            use sha2::Digest;
            let mut h = sha2::Sha256::new();
            h.update(self.digest.as_bytes());
            h.update(set.encode_to_vec());
            let d = h.finalize();
            d.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        let mut pool = self.user.clone().unwrap_or_default();
        pool.add_file_descriptor_set(set)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut names = Vec::new();
        for f in pool.files() {
            if own.iter().any(|n| n == f.name()) {
                names.extend(f.messages().map(|m| m.full_name().to_string()));
            }
        }
        if let Some(n) = names.iter().find(|n| builtin(n).is_some()) {
            return Err(format!(
                "{}: '{n}' is already defined by the builtin schemas",
                path.display()
            ));
        }
        self.user = Some(pool);
        self.digest = digest;
        Ok(names)
    }

    /// Checks a message type name for `--message`; returns the name to put
    /// in [`crate::Options::message`], or why it is unknown.
    pub fn check_message(&self, name: &str) -> Result<String, String> {
        let name = name.trim_start_matches('.');
        if self.message(name).is_some() {
            return Ok(name.to_string());
        }
        (0..BUILTIN.len()).for_each(ensure);
        let builtin = builtins().read().clone();
        let known: Vec<String> = builtin
            .all_messages()
            .chain(self.user.iter().flat_map(|p| p.all_messages()))
            .map(|m| m.full_name().to_string())
            .filter(|n| n.ends_with(&format!(".{name}")) || n == name)
            .collect();
        Err(if known.is_empty() {
            format!("no message type named '{name}' in the schemas loaded")
        } else {
            format!(
                "no message type named '{name}'; did you mean {}?",
                known.join(", ")
            )
        })
    }
}

/// A `&'static str` for a type name, so it can be a node's kind.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut g = NAMES.lock();
    let set = g.get_or_insert_with(HashSet::new);
    if let Some(&s) = set.get(name) {
        return s;
    }
    let s: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index is keyed by the schemas loaded: each `--proto` file added
    /// changes the settings it is written with, so one made with one
    /// schema set is not read with another.
    #[test]
    fn the_schemas_loaded_are_part_of_an_index_s_settings() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let a = write(
            "a.proto",
            "syntax = \"proto3\";\npackage ta;\nmessage M { bytes a = 1; }\n",
        );
        let b = write(
            "b.proto",
            "syntax = \"proto3\";\npackage tb;\nmessage M { M b = 1; }\n",
        );
        let mut opts = crate::parsers::api::Options::default();
        let before = opts.fingerprint();
        assert_eq!(
            opts.schemas.add_proto_file(&a).unwrap(),
            vec!["ta.M".to_string()]
        );
        let with_a = opts.fingerprint();
        opts.schemas.add_proto_file(&b).unwrap();
        let with_b = opts.fingerprint();
        assert!(
            before != with_a && with_a != with_b,
            "{before} / {with_a} / {with_b}"
        );
        assert!(with_b.contains(opts.schemas.user_digest()));
        // The schemas are the session's, not the process's: options made
        // afresh know none of them.
        let fresh = crate::parsers::api::Options::default();
        assert_eq!(fresh.fingerprint(), before);
        assert!(fresh.schemas.message("ta.M").is_none());
        assert!(opts.schemas.message("ta.M").is_some());
        // A type the builtin schemas declare is not declared again.
        let c = write(
            "c.proto",
            "syntax = \"proto3\";\npackage onnx;\nmessage ModelProto { bytes a = 1; }\n",
        );
        assert!(opts.schemas.add_proto_file(&c).is_err());
        assert_eq!(opts.fingerprint(), with_b);
    }

    #[test]
    fn builtin_schemas_compile() {
        for m in [
            "onnx.ModelProto",
            "onnx.TensorProto",
            "wandb_internal.Record",
            "wandb_internal.HistoryRecord",
        ] {
            assert!(builtin(m).is_some(), "{m}");
        }
        let t = builtin("onnx.TensorProto").unwrap();
        assert_eq!(t.get_field(9).unwrap().name(), "raw_data");
        assert!(std::ptr::eq(intern("a.B"), intern("a.B")));
    }
}
