//! Sharded safetensors models: `model.safetensors.index.json`.
//!
//! The index is JSON (`{"metadata": {"total_size": N}, "weight_map":
//! {"tensor": "model-00001-of-00002.safetensors", ...}}`), so its nodes are
//! the JSON parser's. What this format adds: the shards named by the
//! `weight_map` become child extractions — opened from the index's own
//! folder when the index is a file on disk — and are parsed as safetensors in
//! turn. Once they are added, the index reads each shard's header itself and
//! reports what does not agree: missing shards, tensors the map lists but
//! their shard lacks, tensors a shard holds that the map does not list (or
//! places elsewhere), and tensors found in several shards.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use memchr::memmem;

use crate::data::{Data, Range, Source};
use crate::extraction::{EntryKind, ExtId, Tree};
use crate::name::{Name, escape_str};
use crate::node::Node;
use crate::offer::tensor::Tensor;
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Options, Parser, Sniff, Step, StepCx};
use crate::parsers::ml::safetensors::{self, read_layout};
use crate::parsers::serial::json::{self, Config, Event, Kind};
use crate::status::Damage;

/// Sharded safetensors models: the index JSON, its shards as children.
pub(crate) static FORMAT: Format = Format {
    name: "safetensors-index",
    extent: None,
    sniff,
    parse: |data, _| Box::new(IndexParser::new(data.clone())),
    load: |data, node, opts| (json::FORMAT.load)(data, node, opts),
    offers: Offers {
        tensors: Some(TensorOffer::List(tensors)),
        ..Offers::NONE
    },
};

/// Problems of one kind reported one by one before they are summed up.
const MAX_REPORTS: usize = 200;
/// Longest shard file name accepted.
const MAX_SHARD_NAME: usize = 4096;

/// `*.safetensors.index.json`, or JSON with a `"weight_map"` near its start
/// (named `*.index.json`, or starting with `{`).
fn sniff(s: &Sniff) -> bool {
    if !s.kind.has_content() {
        return false;
    }
    let n = s.name.to_ascii_lowercase();
    if n.ends_with(".safetensors.index.json") {
        return true;
    }
    let object = s
        .head
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        == Some(&b'{');
    (n.ends_with(".index.json") || object) && memmem::find(s.head, b"\"weight_map\"").is_some()
}

/// One `weight_map` entry.
pub(crate) struct MapEntry {
    tensor: String,
    pub(crate) shard: String,
    /// `"tensor": "shard"` in the index.
    pub range: Range,
}

/// What the index says.
#[derive(Default)]
pub(crate) struct Index {
    pub(crate) map: Vec<MapEntry>,
    /// The `weight_map` member.
    pub map_range: Option<Range>,
    total_size: Option<u64>,
}

/// The members of the object whose value starts at `value_start`.
fn members(src: &dyn Source, range: Range, value_cap: usize) -> Vec<json::Entry> {
    let mut out = Vec::new();
    let cfg = Config {
        key_cap: 64 * 1024,
        value_cap,
        ..Config::json(0)
    };
    json::scan_range(src, range, cfg, &mut |ev| {
        if let Event::Entry(e) = ev
            && e.key.is_some()
        {
            out.push(e);
        }
    });
    out
}

/// Reads the `weight_map` and `metadata.total_size` of an index (as much of
/// them as parses).
pub(crate) fn read_index(src: &dyn Source) -> Index {
    let mut idx = Index::default();
    let all = Range::new(0, src.available());
    for top in members(src, all, 0) {
        let key = json::unescape(top.key.as_deref().unwrap_or_default());
        let value = Range::new(top.value_start, top.range.end);
        match (key.as_str(), top.kind) {
            ("weight_map", Kind::Object) => {
                idx.map_range = Some(top.range);
                for e in members(src, value, MAX_SHARD_NAME) {
                    if e.kind != Kind::String || e.damage.is_some() || e.scalar_cut {
                        continue;
                    }
                    idx.map.push(MapEntry {
                        tensor: json::unescape(e.key.as_deref().unwrap_or_default()),
                        shard: json::unescape(&e.scalar),
                        range: e.range,
                    });
                }
            }
            ("metadata", Kind::Object) => {
                for e in members(src, value, 64) {
                    if e.kind == Kind::Number && e.key.as_deref() == Some(b"total_size".as_slice())
                    {
                        idx.total_size = std::str::from_utf8(&e.scalar)
                            .ok()
                            .and_then(|s| s.parse().ok());
                    }
                }
            }
            _ => {}
        }
    }
    idx
}

/// A shard name that stays inside the index's folder.
fn plain_relative(name: &str) -> bool {
    crate::name::plain_relative(name, MAX_SHARD_NAME)
}

fn shown(s: &str) -> String {
    escape_str(&json::shorten(s, 200))
}

/// Counts reports of one kind, listing the first [`MAX_REPORTS`].
struct Reports {
    what: &'static str,
    n: usize,
    out: Vec<Damage>,
    at: Range,
}

impl Reports {
    fn new(what: &'static str, at: Range) -> Reports {
        Reports {
            what,
            n: 0,
            out: Vec::new(),
            at,
        }
    }
    fn push(&mut self, d: Damage) {
        if self.n < MAX_REPORTS {
            self.out.push(d);
        }
        self.n += 1;
    }
    fn finish(mut self, into: &mut Vec<Damage>) {
        into.append(&mut self.out);
        if self.n > MAX_REPORTS {
            into.push(Damage::corrupt(
                self.at,
                format!("{} more {}", self.n - MAX_REPORTS, self.what),
            ));
        }
    }
}

enum Phase {
    Json,
    Shards,
    Done,
}

struct IndexParser {
    data: Data,
    json: Box<dyn Parser>,
    phase: Phase,
}

impl IndexParser {
    fn new(data: Data) -> IndexParser {
        IndexParser {
            json: (json::FORMAT.parse)(&data, &Options::default()),
            data,
            phase: Phase::Json,
        }
    }

    /// Adds the shards as children and checks them against the map.
    fn shards(&mut self, cx: &mut StepCx) {
        let idx = read_index(&*self.data);
        let at = idx.map_range.unwrap_or_default();
        let mut by_shard: BTreeMap<&str, Vec<&MapEntry>> = BTreeMap::new();
        for e in &idx.map {
            by_shard.entry(&e.shard).or_default().push(e);
        }
        let Some(dir) = cx.file.and_then(Path::parent).map(Path::to_path_buf) else {
            cx.push_node(Node::new("shards", "shards", at).text(format!(
                "{} shard files named; not opened (the index is not a file on disk)",
                by_shard.len()
            )));
            return;
        };
        let mut damage = Vec::new();
        let mut shard_nodes = Vec::new();
        let mut holder: HashMap<String, String> = HashMap::new();
        let mut missing = Reports::new("tensors missing from their shards", at);
        let mut unlisted =
            Reports::new("tensors that weight_map does not place in their shard", at);
        let mut dups = Reports::new("tensors found in several shards", at);
        let map: HashMap<&str, &str> = idx
            .map
            .iter()
            .map(|e| (e.tensor.as_str(), e.shard.as_str()))
            .collect();
        let mut total: u64 = 0;
        let mut all_open = true;
        for (&shard, entries) in &by_shard {
            if !plain_relative(shard) {
                damage.push(Damage::corrupt(
                    entries[0].range,
                    format!(
                        "weight_map names shard '{}', which is not a plain relative path: not opened",
                        shown(shard)
                    ),
                ));
                all_open = false;
                continue;
            }
            let path = dir.join(shard);
            let src: Data = match cx.open_beside(&path) {
                Ok(s) => Arc::new(s),
                Err(e) => {
                    damage.push(Damage::truncated(
                        at,
                        format!(
                            "shard '{}' {} ({e}): {} tensors of weight_map are in it",
                            shown(shard),
                            if e.kind() == std::io::ErrorKind::NotFound {
                                "is missing"
                            } else {
                                "is not read"
                            },
                            entries.len()
                        ),
                    ));
                    shard_nodes.push(Node::new("shard", shown(shard), at).text("missing"));
                    all_open = false;
                    continue;
                }
            };
            let lay = read_layout(&*src);
            let mut spec = ChildSpec::new(Name::from(shard), EntryKind::File, src);
            spec.file = Some(path);
            cx.add_child(spec);
            shard_nodes.push(Node::new("shard", shown(shard), at).text(format!(
                "{} tensors listed, {} held",
                entries.len(),
                lay.tensors.len()
            )));
            let held: HashMap<&str, ()> =
                lay.tensors.iter().map(|t| (t.name.as_str(), ())).collect();
            for e in entries {
                if !held.contains_key(e.tensor.as_str()) {
                    missing.push(Damage::corrupt(
                        e.range,
                        format!(
                            "tensor '{}' is listed in weight_map for '{}', but that shard does not hold it",
                            shown(&e.tensor),
                            shown(shard)
                        ),
                    ));
                }
            }
            for t in &lay.tensors {
                total = total.saturating_add(t.len());
                match map.get(t.name.as_str()) {
                    None => unlisted.push(Damage::corrupt(
                        at,
                        format!(
                            "shard '{}' holds tensor '{}', which weight_map does not list",
                            shown(shard),
                            shown(&t.name)
                        ),
                    )),
                    Some(&s) if s != shard => unlisted.push(Damage::corrupt(
                        at,
                        format!(
                            "shard '{}' holds tensor '{}', which weight_map places in '{}'",
                            shown(shard),
                            shown(&t.name),
                            shown(s)
                        ),
                    )),
                    _ => {}
                }
                if let Some(prev) = holder.insert(t.name.clone(), shard.to_string())
                    && prev != shard
                {
                    dups.push(Damage::corrupt(
                        at,
                        format!(
                            "tensor '{}' is in shards '{}' and '{}'",
                            shown(&t.name),
                            shown(&prev),
                            shown(shard)
                        ),
                    ));
                }
            }
        }
        missing.finish(&mut damage);
        unlisted.finish(&mut damage);
        dups.finish(&mut damage);
        let sizes = match idx.total_size {
            Some(ts) if all_open && ts != total => {
                format!("; metadata.total_size is {ts}, the tensors hold {total} bytes")
            }
            Some(_) if all_open => {
                format!("; {total} bytes of tensors, as metadata.total_size says")
            }
            _ => String::new(),
        };
        cx.push_node(
            Node::new("shards", "shards", at)
                .text(format!(
                    "{} shard files, {} tensors in weight_map{sizes}",
                    by_shard.len(),
                    idx.map.len()
                ))
                .with_children(shard_nodes),
        );
        for d in damage {
            cx.damage(d);
        }
    }
}

impl Parser for IndexParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        match self.phase {
            Phase::Json => match self.json.step(cx) {
                Step::Done => {
                    self.phase = Phase::Shards;
                    Step::Yield
                }
                s => s,
            },
            Phase::Shards => {
                self.shards(cx);
                self.phase = Phase::Done;
                Step::Done
            }
            Phase::Done => Step::Done,
        }
    }
}

/// The tensors of every shard of an index, each checked against the map.
pub(crate) fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let idx = read_index(&*e.data());
    let map: HashMap<&str, &str> = idx
        .map
        .iter()
        .map(|e| (e.tensor.as_str(), e.shard.as_str()))
        .collect();
    let mut out = Vec::new();
    for &c in &e.children {
        if tree.exts[c].parser() != Some("safetensors") {
            continue;
        }
        let shard = String::from_utf8_lossy(tree.exts[c].name.raw()).into_owned();
        for mut t in safetensors::tensors(tree, c) {
            let note = match map.get(t.name.as_str()) {
                None => Some("not listed in weight_map".to_string()),
                Some(&s) if s != shard => Some(format!("weight_map places it in '{}'", shown(s))),
                _ => None,
            };
            if let Some(n) = note {
                t.detail = Some(match t.detail {
                    Some(d) => format!("{d}; {n}"),
                    None => n,
                });
            }
            out.push(t);
        }
    }
    out
}
