//! The PIR program `paddle.jit.save` writes as JSON (`x.json` beside
//! `x.pdiparams`), read into the same program tree as printed programs,
//! each op with the byte range of its JSON object.
//!
//! The file is `{"base_code": {"magic": "pir", "version", "trainable"},
//! "program": {"regions": [{"blocks": [{"args", "ops": [...]}]}]}}` with
//! compact keys: an op's name is `"#"` with its dialect as a number (`0`
//! builtin, `1` pd_op, `2` cf, `3` custom op, `4` dist), operands `"I"`,
//! results `"O"` (each `{"%": id, "TT": type}`), attributes `"A"` (each
//! `{"N": name, "AT": {"#": kind, "D": data}}`), result attributes `"OA"`;
//! a parameter op is `"p"` with its attributes as a bare list.

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value as J;
use serde_json::value::RawValue;

use super::ast::{
    Attr, AttrValue, Block, BlockArg, Era, NamedAttr, Op, Operand, Program, Region, Type, TypeKind,
    ValueName, ValueRef,
};
use crate::data::{Data, Range, Source};
use crate::extraction::EntryKind;
use crate::name::Name;
use crate::node::Node;
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::status::Damage;

/// Saved PIR programs (`.json`).
pub static FORMAT: Format = Format {
    name: "pir-json",
    extent: None,
    sniff,
    parse: |data, _| Box::new(JsonParser { data: data.clone() }),
    load,
    offers: Offers {
        tensors: Some(TensorOffer::OfChildren),
        ..Offers::NONE
    },
};

/// Largest program file read (it is read whole).
pub const MAX_FILE: u64 = 512 << 20;
/// Deepest nesting of regions followed.
const MAX_DEPTH: usize = 64;

fn sniff(s: &Sniff) -> bool {
    let h = s.head;
    let has = |n: &[u8]| memchr::memmem::find(h, n).is_some();
    h.first() == Some(&b'{') && has(b"\"base_code\"") && has(b"\"magic\":\"pir\"")
}

#[derive(Deserialize)]
struct FileJ<'a> {
    #[serde(default)]
    base_code: Option<BaseJ>,
    #[serde(borrow)]
    program: RegionsJ<'a>,
}

#[derive(Deserialize)]
struct BaseJ {
    magic: Option<String>,
    version: Option<u64>,
}

#[derive(Deserialize)]
struct RegionsJ<'a> {
    #[serde(borrow, default)]
    regions: Vec<RegionJ<'a>>,
}

#[derive(Deserialize)]
struct RegionJ<'a> {
    #[serde(borrow, default)]
    blocks: Vec<BlockJ<'a>>,
}

#[derive(Deserialize)]
struct BlockJ<'a> {
    #[serde(default)]
    args: Vec<J>,
    #[serde(borrow, default)]
    ops: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct OpJ<'a> {
    #[serde(rename = "#")]
    name: String,
    #[serde(rename = "I", default)]
    inputs: Vec<J>,
    #[serde(rename = "O", default)]
    outputs: J,
    #[serde(rename = "A", default)]
    attrs: J,
    #[serde(rename = "OA", default)]
    result_attrs: J,
    #[serde(borrow, default)]
    regions: Vec<RegionJ<'a>>,
}

/// What a saved program file says about itself, and its program.
pub struct Saved {
    /// `base_code.magic` (`pir`).
    pub magic: Option<String>,
    /// `base_code.version`.
    pub version: Option<u64>,
    /// The program.
    pub program: Program,
}

/// Reads a saved program held in memory.
pub fn read(bytes: &[u8]) -> Result<Saved, String> {
    let f: FileJ = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "not a saved PIR program: {e} (line {}, column {})",
            e.line(),
            e.column()
        )
    })?;
    let base = bytes.as_ptr() as usize;
    let mut cx = Cx { base };
    let block = f
        .program
        .regions
        .first()
        .and_then(|r| r.blocks.first())
        .map(|b| cx.block(b, 0))
        .transpose()?
        .unwrap_or_default();
    let (magic, version) = f.base_code.map_or((None, None), |b| (b.magic, b.version));
    Ok(Saved {
        magic,
        version,
        program: Program {
            span: Range::new(0, bytes.len() as u64),
            block,
            era: Era::Bare,
        },
    })
}

struct Cx {
    base: usize,
}

impl Cx {
    fn range(&self, raw: &RawValue) -> Range {
        let s = raw.get().as_ptr() as usize - self.base;
        Range::new(s as u64, (s + raw.get().len()) as u64)
    }

    fn block(&mut self, b: &BlockJ, depth: usize) -> Result<Block, String> {
        if depth > MAX_DEPTH {
            return Err(format!("regions nested deeper than {MAX_DEPTH}"));
        }
        let mut ops = Vec::with_capacity(b.ops.len());
        for raw in &b.ops {
            ops.push(self.op(raw, depth)?);
        }
        let span = match (b.ops.first(), b.ops.last()) {
            (Some(f), Some(l)) => Range::new(self.range(f).start, self.range(l).end),
            _ => Range::default(),
        };
        let args = b
            .args
            .iter()
            .filter_map(|a| a.get("%").and_then(J::as_i64))
            .map(|id| BlockArg {
                value: ValueRef {
                    name: value_name(id),
                    span,
                },
                attrs: Vec::new(),
            })
            .collect();
        Ok(Block {
            span,
            args,
            kwargs: Vec::new(),
            ops,
        })
    }

    fn op(&mut self, raw: &RawValue, depth: usize) -> Result<Op, String> {
        let span = self.range(raw);
        let j: OpJ = serde_json::from_str(raw.get())
            .map_err(|e| format!("an op at byte {}: {e}", span.start))?;
        let value = |id: i64| ValueRef {
            name: value_name(id),
            span,
        };
        let operands = j
            .inputs
            .iter()
            .map(|i| Operand {
                label: None,
                value: value(i.get("%").and_then(J::as_i64).unwrap_or(0)),
            })
            .collect();
        let outs: Vec<&J> = match &j.outputs {
            J::Array(a) => a.iter().collect(),
            J::Object(_) => vec![&j.outputs],
            _ => Vec::new(),
        };
        let results = outs
            .iter()
            .map(|o| value(o.get("%").and_then(J::as_i64).unwrap_or(0)))
            .collect();
        let result_types = outs
            .iter()
            .map(|o| Type {
                span,
                kind: o.get("TT").map_or(TypeKind::Null, |t| type_kind(t, 0)),
            })
            .collect();
        let attr = |value: AttrValue| Attr {
            tag: None,
            value,
            span,
        };
        let named = |key: &str, value: AttrValue| NamedAttr {
            key: super::ast::intern(key),
            key_span: span,
            attr: attr(value),
        };
        let mut attrs = Vec::new();
        let name = if j.name == "p" {
            // A parameter: [is_distributed, is_parameter, need_clip, name]
            // and results' [persistable, stop_gradient, trainable].
            let list = j.attrs.as_array().cloned().unwrap_or_default();
            let flag = |v: Option<&J>| AttrValue::Bool(v.and_then(J::as_i64).unwrap_or(0) != 0);
            attrs.push(named("is_distributed", flag(list.first())));
            attrs.push(named("is_parameter", flag(list.get(1))));
            attrs.push(named("need_clip", flag(list.get(2))));
            if let Some(n) = list.get(3).and_then(J::as_str) {
                attrs.push(named("parameter_name", AttrValue::Str(n.into())));
            }
            let oa = j.result_attrs.as_array().cloned().unwrap_or_default();
            attrs.push(named("persistable", flag(oa.first())));
            attrs.push(named("stop_gradient", flag(oa.get(1))));
            attrs.push(named("trainable", flag(oa.get(2))));
            "builtin.parameter".to_string()
        } else {
            for a in j.attrs.as_array().into_iter().flatten() {
                let key = a.get("N").and_then(J::as_str).unwrap_or("?");
                let v = a.get("AT").map_or(AttrValue::Null, |t| attr_value(t, 0));
                attrs.push(named(key, v));
            }
            for a in j.result_attrs.as_array().into_iter().flatten() {
                let key = a.get("N").and_then(J::as_str).unwrap_or("?");
                let v = a.get("AT").map_or(AttrValue::Null, |t| attr_value(t, 0));
                attrs.push(named(key, v));
            }
            op_name(&j.name)
        };
        let mut regions = Vec::new();
        for r in &j.regions {
            let mut blocks = Vec::new();
            for b in &r.blocks {
                blocks.push(self.block(b, depth + 1)?);
            }
            regions.push(Region { blocks });
        }
        Ok(Op {
            span,
            results,
            name,
            name_span: span,
            id: None,
            operands,
            attrs,
            operand_types: Vec::new(),
            result_types,
            inferred: false,
            regions,
        })
    }
}

fn value_name(id: i64) -> ValueName {
    match u64::try_from(id) {
        Ok(0) | Err(_) => ValueName::Null,
        Ok(n) => ValueName::Result(n),
    }
}

/// `1.matmul` as `pd_op.matmul`.
fn op_name(compact: &str) -> String {
    match compact.split_once('.') {
        Some((d, rest)) => format!("{}.{rest}", dialect(d)),
        None => compact.to_string(),
    }
}

fn dialect(id: &str) -> &str {
    match id {
        "0" => "builtin",
        "1" => "pd_op",
        "2" => "cf",
        "3" => "custom_op",
        "4" => "dist",
        other => other,
    }
}

/// `t_f32` as `f32`, `t_ui8` as `u8`, `t_bool` as `b`.
fn scalar(kind: &str) -> String {
    let k = kind.strip_prefix("t_").unwrap_or(kind);
    match k {
        "bool" => "b".into(),
        k if k.starts_with("ui") => format!("u{}", &k[2..]),
        k => k.into(),
    }
}

fn type_kind(t: &J, depth: usize) -> TypeKind {
    if depth > MAX_DEPTH {
        return TypeKind::Opaque;
    }
    let Some(id) = t.get("#").and_then(J::as_str) else {
        return if t.as_str() == Some("NULL") {
            TypeKind::Null
        } else {
            TypeKind::Opaque
        };
    };
    let (d, kind) = id.split_once('.').unwrap_or(("", id));
    let data = t.get("D");
    match kind {
        "t_dtensor" => {
            let Some(a) = data.and_then(J::as_array) else {
                return TypeKind::Opaque;
            };
            let dtype = a
                .first()
                .map_or(TypeKind::Opaque, |e| type_kind(e, depth + 1));
            let TypeKind::Scalar(dtype) = dtype else {
                return TypeKind::Opaque;
            };
            let dims = a
                .get(1)
                .and_then(J::as_array)
                .map(|v| v.iter().filter_map(J::as_i64).collect())
                .unwrap_or_default();
            TypeKind::Tensor {
                dialect: if d == "0" { "builtin" } else { "pd_op" },
                name: "tensor".into(),
                dims,
                dtype,
            }
        }
        "t_vec" => TypeKind::Vec(
            data.and_then(J::as_array)
                .map(|v| {
                    v.iter()
                        .map(|e| Type {
                            span: Range::default(),
                            kind: type_kind(e, depth + 1),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        ),
        k if k.starts_with("t_") && data.is_none() => {
            TypeKind::Scalar(super::ast::intern(&scalar(k)))
        }
        _ => TypeKind::Opaque,
    }
}

fn attr_value(a: &J, depth: usize) -> AttrValue {
    if depth > MAX_DEPTH {
        return AttrValue::Opaque;
    }
    let Some(id) = a.get("#").and_then(J::as_str) else {
        return AttrValue::Null;
    };
    let kind = id.split_once('.').map_or(id, |(_, k)| k);
    let data = a.get("D");
    match kind {
        "a_bool" => data
            .and_then(J::as_bool)
            .map_or(AttrValue::Opaque, AttrValue::Bool),
        "a_i32" | "a_i64" | "a_index" => data
            .and_then(J::as_i64)
            .map_or(AttrValue::Opaque, AttrValue::Int),
        "a_f32" | "a_f64" => match (data.and_then(J::as_f64), a.get("VD").and_then(J::as_str)) {
            (Some(f), _) => AttrValue::Float(f),
            (None, Some(s)) => s.parse().map_or(AttrValue::Opaque, AttrValue::Float),
            _ => AttrValue::Opaque,
        },
        "a_str" => data
            .and_then(J::as_str)
            .map_or(AttrValue::Opaque, |s| AttrValue::Str(s.into())),
        "a_array" => AttrValue::Array(
            data.and_then(J::as_array)
                .map(|v| {
                    v.iter()
                        .map(|e| Attr {
                            tag: None,
                            value: attr_value(e, depth + 1),
                            span: Range::default(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        ),
        "a_dtype" | "a_layout" => data.and_then(J::as_str).map_or(AttrValue::Opaque, |s| {
            AttrValue::Word(super::ast::intern(s))
        }),
        "a_intarray" => AttrValue::Array(
            data.and_then(J::as_array)
                .map(|v| {
                    v.iter()
                        .filter_map(J::as_i64)
                        .map(|i| Attr {
                            tag: None,
                            value: AttrValue::Int(i),
                            span: Range::default(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        ),
        "a_place" => {
            let v = data.and_then(J::as_array);
            let kind = v.and_then(|v| v.first()).and_then(J::as_i64).unwrap_or(-1);
            let dev = v.and_then(|v| v.get(1)).and_then(J::as_i64).unwrap_or(0);
            let name = match kind {
                0 => "undefined",
                1 => "cpu",
                2 => "gpu",
                3 => "gpu_pinned",
                4 => "xpu",
                6 => "ipu",
                7 => "custom",
                _ => "?",
            };
            AttrValue::Place(format!("{name}:{dev}").into())
        }
        _ => AttrValue::Opaque,
    }
}

/// The names of a saved program's parameters, sorted as `.pdiparams`
/// stores them; `None` if the file is not a saved program.
pub fn parameter_names(path: &Path) -> Option<Vec<String>> {
    use std::io::Read;
    // Only a regular file: a FIFO or a device there must not hang or fill.
    let file = crate::data::open_regular(path).ok()?;
    if file.metadata().ok()?.len() > MAX_FILE {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE).read_to_end(&mut bytes).ok()?;
    let saved = read(&bytes).ok()?;
    let mut names: Vec<String> = saved
        .program
        .block
        .ops
        .iter()
        .filter(|o| o.name.as_str() == "builtin.parameter")
        .filter_map(|o| {
            o.attrs.iter().find_map(|a| match (&*a.key, &a.attr.value) {
                ("parameter_name", AttrValue::Str(s)) => Some(s.to_string()),
                _ => None,
            })
        })
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

/// Reads a source whole, if it is small enough.
pub fn whole(src: &dyn Source) -> Result<Vec<u8>, String> {
    let len = src.available();
    if len > MAX_FILE {
        return Err(format!(
            "a program of {len} bytes: more than {MAX_FILE} are not read"
        ));
    }
    let mut buf = vec![0u8; len as usize];
    let got = src.read_at(0, &mut buf).map_err(|e| e.to_string())?;
    buf.truncate(got);
    Ok(buf)
}

struct JsonParser {
    data: Data,
}

impl Parser for JsonParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if !self.data.is_final() {
            return Step::Blocked;
        }
        let bytes = match whole(&*self.data) {
            Ok(b) => b,
            Err(why) => {
                cx.damage(Damage::corrupt(Range::new(0, self.data.available()), why));
                return Step::Done;
            }
        };
        match read(&bytes) {
            Ok(saved) => {
                let p = &saved.program;
                let mut n = Node::new("program", "program", p.span).text(format!(
                    "{} ops, magic {}, version {}",
                    p.block.ops.len(),
                    saved.magic.as_deref().unwrap_or("?"),
                    saved.version.map_or("?".into(), |v| v.to_string())
                ));
                n = n.with_children(p.block.ops.iter().map(super::nodes::op_node).collect());
                cx.push_node(n);
            }
            Err(why) => {
                let d = if why.contains("EOF") {
                    Damage::truncated(Range::new(bytes.len() as u64, bytes.len() as u64), why)
                } else {
                    Damage::corrupt(Range::new(0, bytes.len() as u64), why)
                };
                cx.damage(d);
            }
        }
        // The parameters beside it.
        if let Some(file) = cx.file {
            let params = file.with_extension("pdiparams");
            match cx.open_beside(&params) {
                Ok(src) => {
                    let name = params
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let src: Data = Arc::new(src);
                    let mut spec = ChildSpec::new(Name::from(name.as_str()), EntryKind::File, src);
                    spec.file = Some(params);
                    cx.add_child(spec);
                }
                // No parameters beside it is a program alone; parameters
                // that cannot be read (a FIFO, a device) are said.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => cx.note(format!("its parameters are not read: {e}")),
            }
        }
        Step::Done
    }
}

/// An op's parts, read again from its JSON object.
fn load(src: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    if node.kind != "op" || node.range.len() > MAX_FILE {
        return Vec::new();
    }
    let mut buf = vec![0u8; node.range.len() as usize];
    let got = src.read_at(node.range.start, &mut buf).unwrap_or(0);
    buf.truncate(got);
    let Ok(raw) = serde_json::from_slice::<&RawValue>(&buf) else {
        return Vec::new();
    };
    let mut cx = Cx {
        base: buf.as_ptr() as usize,
    };
    match cx.op(raw, 0) {
        Ok(mut op) => {
            shift(&mut op, node.range.start);
            super::nodes::op_parts(&op)
        }
        Err(_) => Vec::new(),
    }
}

/// Moves an op read from a slice to the offsets of the whole file.
fn shift(op: &mut Op, by: u64) {
    let mv = |r: &mut Range| *r = Range::new(r.start + by, r.end + by);
    mv(&mut op.span);
    mv(&mut op.name_span);
    for v in &mut op.results {
        mv(&mut v.span);
    }
    for o in &mut op.operands {
        mv(&mut o.value.span);
    }
    for a in &mut op.attrs {
        mv(&mut a.key_span);
        mv(&mut a.attr.span);
    }
    for t in &mut op.result_types {
        mv(&mut t.span);
    }
    for r in &mut op.regions {
        for b in &mut r.blocks {
            mv(&mut b.span);
            for o in &mut b.ops {
                shift(o, by);
            }
        }
    }
}
