//! ONNX models: a `onnx.ModelProto` protobuf, browsed field by field.
//!
//! The tree is the protobuf walker's, named by the ONNX schema shipped in
//! `proto/onnx/`: metadata, opset imports, the graph with its inputs,
//! outputs, nodes and attributes (subgraphs of If/Loop/Scan included), and
//! initializers whose `raw_data` stays a range of the file. Nothing is
//! decoded until it is opened, so a model of several GB opens at once.
//!
//! Tensors with `data_location = EXTERNAL` keep their bytes in sibling
//! files named by `external_data`; each such file becomes a child
//! extraction, and the tensor table points into it. A file that is
//! missing, or shorter than a tensor needs, is reported per tensor. A model
//! that is not a file on disk (a member of an archive) opens none: a note
//! says so, and its external tensors are listed as not available.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::data::{Data, Range, Source};
use crate::extraction::{EntryKind, ExtId, Tree};
use crate::name::{Name, escape_str};
use crate::node::Node;
use crate::offer::tensor::{self, Dtype, Encoding, Tensor};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Options, Parser, Sniff, Step, StepCx};
use crate::parsers::serial::protobuf::wire::{Field, Scanner, Wire, read_range, varint};
use crate::parsers::serial::protobuf::{TopLevel, fields, schema};
use crate::status::{Damage, Status};

/// ONNX models (protobuf `ModelProto`).
pub(crate) static FORMAT: Format = Format {
    name: "onnx",
    extent: None,
    sniff,
    parse,
    load,
    offers: Offers {
        tensors: Some(TensorOffer::List(tensors)),
        ..Offers::NONE
    },
};

/// ModelProto field numbers and the wire type each has.
const MODEL_FIELDS: &[(u32, Wire)] = &[
    (1, Wire::Varint),
    (2, Wire::Len),
    (3, Wire::Len),
    (4, Wire::Len),
    (5, Wire::Varint),
    (6, Wire::Len),
    (7, Wire::Len),
    (8, Wire::Len),
    (14, Wire::Len),
    (20, Wire::Len),
    (25, Wire::Len),
    (26, Wire::Len),
];

fn sniff(s: &Sniff) -> bool {
    if s.name.to_ascii_lowercase().ends_with(".onnx") {
        return true;
    }
    // Without the name: an ir_version first, then only ModelProto fields.
    if s.head.first() != Some(&0x08) || s.head.len() < 16 {
        return false;
    }
    let mut n = 0;
    for f in Scanner::new(s.head, Range::new(0, s.head.len() as u64)) {
        match f {
            Ok(f) if MODEL_FIELDS.contains(&(f.number, f.wire)) => n += 1,
            _ => return false,
        }
    }
    n >= 2
}

fn parse(_data: &Data, _: &Options) -> Box<dyn Parser> {
    Box::new(OnnxParser {
        top: TopLevel::new(schema::builtin("onnx.ModelProto")),
        graph: None,
        done_top: false,
    })
}

fn load(data: &dyn Source, node: &Node, opts: &crate::Options) -> Vec<Node> {
    fields::load(data, node, &opts.schemas)
}

struct OnnxParser {
    top: TopLevel,
    /// The payload of the model's `graph` field, once seen.
    graph: Option<Range>,
    done_top: bool,
}

impl Parser for OnnxParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if !self.done_top {
            let mut graph = self.graph;
            let st = self.top.step(cx, |f, _| {
                if f.number == 7 && f.wire == Wire::Len {
                    graph = Some(f.value);
                }
            });
            self.graph = graph;
            if st != Step::Done {
                return st;
            }
            self.done_top = true;
            return Step::Yield;
        }
        external_files(cx);
        Step::Done
    }
}

/// Where a tensor's values are.
#[derive(Clone, Debug, PartialEq)]
enum Values {
    /// `raw_data`, in the model file.
    Raw(Range),
    /// A typed field (`float_data`, `int64_data` ...): its payload, and
    /// whether its numbers are varints rather than fixed-width.
    Typed(&'static str, Range, bool),
    /// `data_location = EXTERNAL`.
    External {
        location: String,
        offset: u64,
        length: Option<u64>,
    },
    /// No values at all.
    None,
}

/// One tensor found in the model: an initializer or a tensor attribute.
#[derive(Clone, Debug)]
struct Found {
    name: String,
    data_type: i32,
    dims: Vec<u64>,
    bytes: Values,
    /// The TensorProto's own range in the model file.
    range: Range,
    /// A problem found while reading it.
    problem: Option<String>,
}

/// Nesting of subgraphs followed.
const MAX_GRAPH_DEPTH: u32 = 32;

/// Every tensor of the model in `src`: the initializers of the main graph
/// first, then those of subgraphs and the tensors of node attributes
/// (`Constant` values), which get their node's output as name.
fn find_tensors(src: &dyn Source) -> Vec<Found> {
    let mut out = Vec::new();
    let all = Range::new(0, src.available());
    let mut later = Vec::new();
    for f in Scanner::new(src, all).flatten() {
        if f.number == 7 && f.wire == Wire::Len {
            graph_tensors(src, f.value, "", 0, &mut out, &mut later);
        }
    }
    out.extend(later);
    out
}

fn graph_tensors(
    src: &dyn Source,
    graph: Range,
    prefix: &str,
    depth: u32,
    inits: &mut Vec<Found>,
    others: &mut Vec<Found>,
) {
    if depth > MAX_GRAPH_DEPTH {
        return;
    }
    let mut released = graph.start;
    for f in Scanner::new(src, graph).flatten() {
        // The graph is read front to back: the pages behind (a tensor's
        // first page, mapped whole with its large folio) are given back, so
        // listing a model of many GB keeps a small resident set.
        if depth == 0 && f.range.start - released >= crate::data::RELEASE_STEP {
            src.release(released, f.range.start);
            released = f.range.start;
        }
        match (f.number, f.wire) {
            (5, Wire::Len) => {
                let mut t = tensor(src, &f);
                if !prefix.is_empty() {
                    t.name = format!("{prefix}{}", t.name);
                }
                if depth == 0 {
                    inits.push(t);
                } else {
                    others.push(t);
                }
            }
            (1, Wire::Len) => node_tensors(src, f.value, prefix, depth, others),
            _ => {}
        }
    }
}

fn node_tensors(src: &dyn Source, node: Range, prefix: &str, depth: u32, out: &mut Vec<Found>) {
    let mut name = String::new();
    let mut op = String::new();
    let mut output = String::new();
    for f in Scanner::new(src, node).flatten() {
        match (f.number, f.wire) {
            (2, Wire::Len) if output.is_empty() => output = text(src, f.value),
            (3, Wire::Len) => name = text(src, f.value),
            (4, Wire::Len) => op = text(src, f.value),
            (5, Wire::Len) => {
                let mut attr = String::new();
                let who = if !name.is_empty() {
                    name.clone()
                } else {
                    output.clone()
                };
                for a in Scanner::new(src, f.value).flatten() {
                    match (a.number, a.wire) {
                        (1, Wire::Len) => attr = text(src, a.value),
                        (5 | 10, Wire::Len) => {
                            let mut t = tensor(src, &a);
                            if t.name.is_empty() {
                                t.name = if op == "Constant" && !output.is_empty() {
                                    output.clone()
                                } else {
                                    format!("{who}.{attr}")
                                };
                            }
                            t.name = format!("{prefix}{}", t.name);
                            out.push(t);
                        }
                        (6 | 11, Wire::Len) => {
                            let p = format!("{prefix}{who}.{attr}/");
                            let mut inits = Vec::new();
                            graph_tensors(src, a.value, &p, depth + 1, &mut inits, out);
                            out.extend(inits);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

/// Longest name read from a model.
const MAX_NAME: usize = 4096;

fn text(src: &dyn Source, r: Range) -> String {
    String::from_utf8_lossy(&read_range(src, r, MAX_NAME)).into_owned()
}

/// Reads one TensorProto's description, never its values.
fn tensor(src: &dyn Source, field: &Field) -> Found {
    let mut t = Found {
        name: String::new(),
        data_type: 0,
        dims: Vec::new(),
        bytes: Values::None,
        range: field.range,
        problem: None,
    };
    if field.cut {
        t.problem = Some(format!(
            "the tensor is cut off: {} of its {} bytes are here",
            field.value.len(),
            field.int
        ));
    }
    let mut external = false;
    let mut ext: BTreeMap<String, String> = BTreeMap::new();
    let mut scan = Scanner::new(src, field.value);
    for f in scan.by_ref() {
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                let m = schema::builtin("onnx.TensorProto");
                t.problem = Some(fields::wire_damage(&e, field.value.end, m.as_ref()).reason);
                break;
            }
        };
        if f.cut {
            let field = schema::builtin("onnx.TensorProto")
                .and_then(|m| m.get_field(f.number))
                .map_or_else(
                    || format!("field {}", f.number),
                    |fd| format!("{} (field {})", fd.name(), f.number),
                );
            t.problem = Some(format!(
                "the tensor is cut off: {} of {} bytes of {field} are here",
                f.value.len(),
                f.int,
            ));
        }
        match (f.number, f.wire) {
            (1, Wire::Varint) => t.dims.push(f.int),
            (1, Wire::Len) => {
                // dims written packed.
                let v = read_range(src, f.value, 1 << 16);
                let mut p = 0;
                while let Some((d, l)) = varint(&v[p..]).filter(|&(_, l)| l > 0) {
                    t.dims.push(d);
                    p += l;
                }
            }
            (2, Wire::Varint) => t.data_type = f.int as i32,
            (8, Wire::Len) => t.name = text(src, f.value),
            (9, Wire::Len) => t.bytes = Values::Raw(f.value),
            (4, Wire::Len) => t.bytes = Values::Typed("float_data", f.value, false),
            (10, Wire::Len) => t.bytes = Values::Typed("double_data", f.value, false),
            (5, Wire::Len) => t.bytes = Values::Typed("int32_data", f.value, true),
            (7, Wire::Len) => t.bytes = Values::Typed("int64_data", f.value, true),
            (11, Wire::Len) => t.bytes = Values::Typed("uint64_data", f.value, true),
            (6, Wire::Len) => t.bytes = Values::Typed("string_data", f.value, false),
            (13, Wire::Len) => {
                let mut k = String::new();
                let mut v = String::new();
                for e in Scanner::new(src, f.value).flatten() {
                    match (e.number, e.wire) {
                        (1, Wire::Len) => k = text(src, e.value),
                        (2, Wire::Len) => v = text(src, e.value),
                        _ => {}
                    }
                }
                ext.insert(k, v);
            }
            (14, Wire::Varint) => external = f.int == 1,
            _ => {}
        }
    }
    if external {
        let num = |k: &str| ext.get(k).map(|v| v.trim().parse::<u64>());
        match (ext.get("location"), num("offset"), num("length")) {
            (None, _, _) => t.problem = Some("external data without a location".into()),
            (_, Some(Err(_)), _) | (_, _, Some(Err(_))) => {
                t.problem = Some(format!(
                    "external data with an invalid offset or length ({:?}, {:?})",
                    ext.get("offset"),
                    ext.get("length")
                ));
            }
            (Some(loc), off, len) => {
                t.bytes = Values::External {
                    location: loc.clone(),
                    offset: off.and_then(Result::ok).unwrap_or(0),
                    length: len.and_then(Result::ok),
                }
            }
        }
    }
    t
}

/// A location that stays in the model's folder: relative, no `..`.
fn plain_relative(loc: &str) -> bool {
    crate::name::plain_relative(loc, MAX_NAME)
}

/// Opens the external data files the model names, as child extractions,
/// and reports the ones that cannot be.
fn external_files(cx: &mut StepCx) {
    let data = cx.data.clone();
    let found = find_tensors(&*data);
    for t in &found {
        if let Some(why) = dtype(t.data_type).and_then(|dt| size_problem(t, dt)) {
            cx.damage(Damage::corrupt(t.range, why));
        }
    }
    let mut by_file: BTreeMap<String, Vec<&Found>> = BTreeMap::new();
    for t in &found {
        if let Values::External { location, .. } = &t.bytes {
            by_file.entry(location.clone()).or_default().push(t);
        }
    }
    if by_file.is_empty() {
        return;
    }
    let dir = cx.file.and_then(Path::parent).map(Path::to_path_buf);
    for (loc, tensors) in by_file {
        let at = tensors[0].range;
        let shown = escape_str(&loc);
        if !plain_relative(&loc) {
            cx.damage(Damage::corrupt(
                at,
                format!("external data location '{shown}' leaves the model's folder: not opened ({} tensors)", tensors.len()),
            ));
            continue;
        }
        // A model in an archive: its external data is a member beside it,
        // or nowhere; not looked for, so not damage (a note says so).
        let Some(dir) = &dir else {
            cx.note(format!(
                "external data file '{shown}' not opened: the model is not a file on disk ({} tensors)",
                tensors.len()
            ));
            continue;
        };
        let path = dir.join(&loc);
        match cx.open_beside(&path) {
            Ok(src) => {
                let src: Data = Arc::new(src);
                let mut spec = ChildSpec::new(Name::from(loc.as_str()), EntryKind::File, src);
                spec.file = Some(path);
                cx.add_child(spec);
            }
            Err(e) => cx.damage(Damage::truncated(
                at,
                format!(
                    "external data file '{shown}' {} ({e}): {} tensors have no values",
                    if e.kind() == std::io::ErrorKind::NotFound {
                        "is missing"
                    } else {
                        "is not read"
                    },
                    tensors.len()
                ),
            )),
        }
    }
}

/// ONNX data types as dtypes (4- and 2-bit integers as the packed types).
fn dtype(t: i32) -> Option<Dtype> {
    Some(match t {
        1 => Dtype::F32,
        2 => Dtype::U8,
        3 => Dtype::I8,
        4 => Dtype::U16,
        5 => Dtype::I16,
        6 => Dtype::I32,
        7 => Dtype::I64,
        9 => Dtype::BOOL,
        10 => Dtype::F16,
        11 => Dtype::F64,
        12 => Dtype::U32,
        13 => Dtype::U64,
        14 => Dtype::C64,
        15 => Dtype::C128,
        16 => Dtype::BF16,
        17 => Dtype::F8_E4M3,
        18 => Dtype::F8_E4M3FNUZ,
        19 => Dtype::F8_E5M2,
        20 => Dtype::F8_E5M2FNUZ,
        21 => Dtype::U4,
        22 => Dtype::I4,
        23 => Dtype::F4,
        24 => Dtype::F8_E8M0,
        25 => Dtype::U2,
        26 => Dtype::I2,
        27 => Dtype::F6_E2M3,
        28 => Dtype::F6_E3M2,
        _ => return None,
    })
}

/// The ONNX name of a data type.
fn type_name(t: i32) -> String {
    schema::builtin("onnx.TensorProto")
        .and_then(|m| {
            m.parent_pool()
                .get_enum_by_name("onnx.TensorProto.DataType")
        })
        .and_then(|e| e.get_value(t).map(|v| v.name().to_string()))
        .unwrap_or_else(|| format!("data type {t}"))
}

/// Elements of a tensor and the bytes they need (4- and 2-bit integers
/// packed 2 or 4 to a byte, the last byte maybe half used); `None` when the
/// dims overflow.
fn sizes(f: &Found, dt: Dtype) -> (Option<u64>, Option<u64>) {
    let numel = tensor::numel(&f.dims);
    let bits = dt.bits();
    let need = numel
        .and_then(|n| n.checked_mul(bits))
        .map(|b| b.div_ceil(8));
    (numel, need)
}

/// Varint fields read whole to count their values at most: bigger ones
/// are left to the reading of the values (missing elements).
const MAX_COUNTED: u64 = 64 << 20;

/// Why the varints of `field` (at `r`) cannot be the tensor's values: cut
/// off, or not one per element (per packed byte of 4- and 2-bit types), as
/// `onnx.numpy_helper` needs them.
fn varint_problem(
    src: &dyn Source,
    r: Range,
    field: &str,
    f: &Found,
    dt: Dtype,
    numel: Option<u64>,
) -> Option<String> {
    let numel = numel?;
    if r.len() > MAX_COUNTED {
        return None;
    }
    let bytes = read_range(src, r, MAX_COUNTED as usize);
    let values = bytes.iter().filter(|&&b| b & 0x80 == 0).count() as u64;
    if bytes.last().is_some_and(|&b| b & 0x80 != 0) {
        return Some(format!(
            "{field} is cut off inside a varint after {values} values; the tensor is at {:#x}",
            r.start
        ));
    }
    let per_value = match dt.bits() {
        b @ (2 | 4) => 8 / b,
        _ => 1,
    };
    let want = numel.div_ceil(per_value);
    (values != want).then(|| {
        format!(
            "{field} holds {values} values; {} {} needs {want}",
            type_name(f.data_type),
            tensor::shape_text(&f.dims)
        )
    })
}

/// Why a tensor's dims cannot be right, with where the tensor is.
fn size_problem(f: &Found, dt: Dtype) -> Option<String> {
    let why = match sizes(f, dt) {
        (None, _) => tensor::overflow_text(&f.dims),
        (Some(_), None) => format!(
            "the byte size of {} {} overflows",
            type_name(f.data_type),
            tensor::shape_text(&f.dims)
        ),
        _ => return None,
    };
    Some(format!("{why}; the tensor is at {:#x}", f.range.start))
}

/// The tensor table of an ONNX extraction.
pub(crate) fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let found = find_tensors(&*e.data());
    let child = |loc: &str| {
        e.children
            .iter()
            .copied()
            .find(|&c| tree.exts[c].name.raw() == loc.as_bytes())
    };
    let mut out = Vec::new();
    for f in found {
        let Some(dt) = dtype(f.data_type) else {
            continue;
        };
        let (numel, need) = sizes(&f, dt);
        let mut t = Tensor {
            name: f.name.clone(),
            dtype: dt,
            shape: f.dims.clone(),
            stride: None,
            storage_offset: None,
            source: ext,
            offset: 0,
            length: 0,
            status: Status::Complete,
            detail: None,
            big_endian: false,
            encoding: Encoding::Raw,
        };
        let mut problem = f.problem.clone();
        match &f.bytes {
            Values::Raw(r) => {
                t.offset = r.start;
                t.length = r.len();
            }
            Values::Typed(field, r, varints) => {
                t.offset = r.start;
                t.length = r.len();
                if *varints {
                    t.encoding = Encoding::Varints;
                    if let Some(why) = varint_problem(&*e.data(), *r, field, &f, dt, numel) {
                        t.status = Status::Corrupt;
                        problem = Some(why);
                    }
                } else if *field == "string_data" {
                    continue;
                }
            }
            Values::External {
                location,
                offset,
                length,
            } => match child(location) {
                Some(c) => {
                    let size = tree.exts[c].available();
                    t.source = c;
                    t.offset = *offset;
                    t.length = length.unwrap_or(size.saturating_sub(*offset));
                    let end = offset.checked_add(t.length);
                    if end.is_none() {
                        t.status = Status::Corrupt;
                        problem = Some(format!(
                            "external data offset {offset} + length {} overflows",
                            t.length
                        ));
                        t.length = 0;
                    } else if let Some(end) = end.filter(|&e| e > size) {
                        t.status = Status::Truncated;
                        problem = Some(format!(
                            "external file '{}' has {size} bytes; the tensor needs bytes {offset}..{end}",
                            escape_str(location)
                        ));
                    }
                }
                None => {
                    t.status = Status::Truncated;
                    problem = Some(format!(
                        "external data file '{}' is not available",
                        escape_str(location)
                    ));
                }
            },
            Values::None => {
                if numel != Some(0) {
                    t.status = Status::Corrupt;
                    problem.get_or_insert_with(|| {
                        format!(
                            "no values ({} tensor without raw_data or typed data)",
                            type_name(f.data_type)
                        )
                    });
                }
            }
        }
        // Dims whose size overflows say nothing of the values: corrupt.
        if let Some(why) = size_problem(&f, dt) {
            t.status = Status::Corrupt;
            problem = Some(why);
        }
        if let (Values::Raw(_) | Values::External { .. }, Some(need)) = (&f.bytes, need)
            && t.status == Status::Complete
            && problem.is_none()
            && need != t.length
        {
            t.status = Status::Corrupt;
            problem = Some(format!(
                "{} bytes of data for {} elements of {} ({need} bytes)",
                t.length,
                numel.unwrap_or(0),
                type_name(f.data_type)
            ));
        }
        if let Some(p) = problem {
            if t.status == Status::Complete {
                t.status = if f.problem.as_deref().is_some_and(|p| p.contains("cut off")) {
                    Status::Truncated
                } else {
                    Status::Corrupt
                };
            }
            t.detail = Some(p);
        }
        out.push(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_stay_in_the_folder() {
        assert!(plain_relative("model.onnx.data"));
        assert!(plain_relative("weights/a.bin"));
        for bad in ["", "../x", "/etc/passwd", "a/../../b"] {
            assert!(!plain_relative(bad), "{bad}");
        }
    }
}
