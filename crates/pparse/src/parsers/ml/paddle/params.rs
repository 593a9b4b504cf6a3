//! `.pdiparams`: the parameters `paddle.jit.save` writes beside a program,
//! one serialized dense tensor after another (`save_combine`), with no
//! names: they are the program's parameters in sorted order, so the names
//! come from the program beside it (`x.json` for `x.pdiparams`).
//!
//! Each tensor: u32 version (0), u64 LoD level count and per level a u64
//! byte size and that many bytes of offsets, u32 tensor version (0), i32
//! size of a `TensorDesc` protobuf (field 1 data type, field 2 dims) and
//! the desc, then the raw data, little-endian. A cut file keeps every
//! whole tensor; the cut one is listed as truncated.

use std::path::Path;

use super::json_program;
use crate::data::{Data, Range, Source, read_exact_at};
use crate::extraction::{ExtId, Tree};
use crate::node::Node;
use crate::offer::tensor::{Dtype, Tensor, numel, shape_text};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{Format, Parser, Sniff, Step, StepCx};
use crate::parsers::serial::protobuf::wire::varint_in;
use crate::status::{Damage, Status};

/// `.pdiparams` files.
pub static FORMAT: Format = Format {
    name: "pdiparams",
    extent: None,
    sniff,
    parse: |data, _| Box::new(ParamsParser { data: data.clone() }),
    load: |_, _, _| Vec::new(),
    offers: Offers {
        tensors: Some(TensorOffer::List(tensors)),
        ..Offers::NONE
    },
};

/// Most LoD levels a tensor may declare.
const MAX_LOD: u64 = 64;
/// Largest `TensorDesc` read.
const MAX_DESC: u32 = 1 << 16;
/// Most dims a tensor may have.
const MAX_DIMS: usize = 64;
/// Most tensors listed.
const MAX_TENSORS: usize = 1 << 20;

fn sniff(s: &Sniff) -> bool {
    s.name.to_ascii_lowercase().ends_with(".pdiparams")
        && s.head.len() >= 4
        && s.head[..4] == [0, 0, 0, 0]
}

/// One tensor's record, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The whole record.
    pub range: Range,
    /// Where its raw data starts and how long it should be.
    pub data: Range,
    /// Paddle's data type code (`VarType.Type`).
    pub code: i64,
    /// The dtype, if pparse knows the code.
    pub dtype: Option<Dtype>,
    /// Dims.
    pub shape: Vec<u64>,
    /// What is wrong, if anything.
    pub damage: Option<Damage>,
}

/// The dtype of Paddle's `VarType.Type` code.
pub fn dtype_of(code: i64) -> Option<Dtype> {
    Some(match code {
        0 => Dtype::BOOL,
        1 => Dtype::I16,
        2 => Dtype::I32,
        3 => Dtype::I64,
        4 => Dtype::F16,
        5 => Dtype::F32,
        6 => Dtype::F64,
        20 => Dtype::U8,
        21 => Dtype::I8,
        22 => Dtype::BF16,
        23 => Dtype::C64,
        24 => Dtype::C128,
        32 => Dtype::F8_E4M3,
        33 => Dtype::F8_E5M2,
        36 => Dtype::U16,
        37 => Dtype::U32,
        38 => Dtype::U64,
        _ => return None,
    })
}

fn read_exact(src: &dyn Source, at: u64, buf: &mut [u8]) -> bool {
    read_exact_at(src, at, buf).unwrap_or(false)
}

fn u32_at(src: &dyn Source, at: u64) -> Option<u32> {
    let mut b = [0u8; 4];
    read_exact(src, at, &mut b).then(|| u32::from_le_bytes(b))
}

fn u64_at(src: &dyn Source, at: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read_exact(src, at, &mut b).then(|| u64::from_le_bytes(b))
}

/// A protobuf varint at `*i` of `b`, moving `*i` past it.
fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let (v, end) = varint_in(b, *i)?;
    *i = end;
    Some(v)
}

/// The data type and dims of a `TensorDesc`.
fn desc(b: &[u8]) -> Result<(i64, Vec<u64>), String> {
    let mut i = 0;
    let mut code = None;
    let mut dims = Vec::new();
    while i < b.len() {
        let key = varint(b, &mut i).ok_or("a cut field key")?;
        match (key >> 3, key & 7) {
            (1, 0) => code = Some(varint(b, &mut i).ok_or("a cut data type")? as i64),
            (2, 0) => {
                let d = varint(b, &mut i).ok_or("a cut dim")? as i64;
                dims.push(u64::try_from(d).map_err(|_| format!("a negative dim {d}"))?);
            }
            (2, 2) => {
                let n = varint(b, &mut i).ok_or("a cut dims length")? as usize;
                let end = i
                    .checked_add(n)
                    .filter(|&e| e <= b.len())
                    .ok_or("dims past the desc")?;
                while i < end {
                    let d = varint(b, &mut i).ok_or("a cut dim")? as i64;
                    dims.push(u64::try_from(d).map_err(|_| format!("a negative dim {d}"))?);
                }
            }
            (f, w) => return Err(format!("unexpected field {f} (wire type {w})")),
        }
        if dims.len() > MAX_DIMS {
            return Err(format!("more than {MAX_DIMS} dims"));
        }
    }
    Ok((code.ok_or("no data type")?, dims))
}

/// The record at `at`; `None` at the end of the bytes.
pub fn record(src: &dyn Source, at: u64) -> Option<Record> {
    let avail = src.available();
    if at >= avail {
        return None;
    }
    let cut = |what: &str, end: u64| Record {
        range: Range::new(at, end.min(avail)),
        data: Range::new(end.min(avail), end.min(avail)),
        code: -1,
        dtype: None,
        shape: Vec::new(),
        damage: Some(Damage::truncated(
            Range::new(at, avail),
            format!("the bytes end inside the tensor's {what}"),
        )),
    };
    let bad = |why: String, end: u64| Record {
        damage: Some(Damage::corrupt(Range::new(at, end.min(avail)), why)),
        ..cut("", end)
    };
    let Some(version) = u32_at(src, at) else {
        return Some(cut("version", avail));
    };
    if version != 0 {
        return Some(bad(format!("tensor version {version}, not 0"), at + 4));
    }
    let Some(levels) = u64_at(src, at + 4) else {
        return Some(cut("LoD", avail));
    };
    if levels > MAX_LOD {
        return Some(bad(format!("{levels} LoD levels"), at + 12));
    }
    let mut p = at + 12;
    for _ in 0..levels {
        let Some(n) = u64_at(src, p) else {
            return Some(cut("LoD", avail));
        };
        p = match p.checked_add(8).and_then(|q| q.checked_add(n)) {
            Some(q) if q <= avail => q,
            _ => return Some(cut("LoD", avail)),
        };
    }
    let Some(tv) = u32_at(src, p) else {
        return Some(cut("version", avail));
    };
    if tv != 0 {
        return Some(bad(format!("dense tensor version {tv}, not 0"), p + 4));
    }
    let Some(size) = u32_at(src, p + 4) else {
        return Some(cut("desc", avail));
    };
    if size > MAX_DESC || (size as i32) < 0 {
        return Some(bad(format!("a desc of {size} bytes"), p + 8));
    }
    let mut d = vec![0u8; size as usize];
    if !read_exact(src, p + 8, &mut d) {
        return Some(cut("desc", avail));
    }
    let data_at = p + 8 + size as u64;
    let (code, shape) = match desc(&d) {
        Ok(x) => x,
        Err(why) => return Some(bad(format!("its desc: {why}"), data_at)),
    };
    let dtype = dtype_of(code);
    let Some(dt) = dtype else {
        let why = format!("data type {code}, which pparse does not know: the rest cannot be found");
        return Some(bad(why, data_at));
    };
    let len = numel(&shape).and_then(|n| dt.bytes_for(n));
    let Some(len) = len.filter(|l| data_at.checked_add(*l).is_some()) else {
        let why = format!("dims {} overflow", shape_text(&shape));
        return Some(bad(why, data_at));
    };
    let end = data_at + len;
    let damage = (end > avail).then(|| {
        Damage::truncated(
            Range::new(avail, end),
            format!("{} of its {len} data bytes are missing", end - avail),
        )
    });
    Some(Record {
        range: Range::new(at, end),
        data: Range::new(data_at, end),
        code,
        dtype,
        shape,
        damage,
    })
}

/// Every record, up to the end or the first one that cannot be walked past.
pub fn records(src: &dyn Source) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(r) = record(src, at) {
        let stop = r.damage.is_some() || r.range.end <= at;
        at = r.range.end;
        out.push(r);
        if stop || out.len() >= MAX_TENSORS {
            break;
        }
    }
    out
}

/// The parameter names of the program beside a `.pdiparams` file, sorted
/// as Paddle saves them; empty if there is none.
pub fn names_beside(file: Option<&Path>) -> Vec<String> {
    let Some(file) = file else {
        return Vec::new();
    };
    let json = file.with_extension("json");
    json_program::parameter_names(&json).unwrap_or_default()
}

struct ParamsParser {
    data: Data,
}

impl Parser for ParamsParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if !self.data.is_final() {
            return Step::Blocked;
        }
        let names = names_beside(cx.file);
        let recs = records(&*self.data);
        if !names.is_empty() && names.len() != recs.len() {
            cx.note(format!(
                "the program beside it names {} parameters; {} tensors are here",
                names.len(),
                recs.len()
            ));
        }
        for (i, r) in recs.into_iter().enumerate() {
            let name = names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("tensor {i}"));
            let dtype = r.dtype.map_or("?".into(), |d| d.name());
            let mut n = Node::new("tensor", name, r.range)
                .text(format!("{dtype} {}", shape_text(&r.shape)))
                .with_children(vec![
                    Node::new("header", "header", Range::new(r.range.start, r.data.start)),
                    Node::new("data", "data", r.data),
                ]);
            if let Some(d) = r.damage {
                cx.damage(d.clone());
                n = n.damaged(d);
            }
            cx.push_node(n);
        }
        Step::Done
    }
}

/// The tensors of a `.pdiparams` extraction.
pub fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let data = e.data();
    let names = names_beside(e.file());
    records(&*data)
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let dtype = r.dtype?;
            let (status, detail) = match &r.damage {
                Some(d) => (d.status, Some(d.reason.to_string())),
                None => (Status::Complete, None),
            };
            Some(Tensor {
                name: names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("tensor {i}")),
                dtype,
                shape: r.shape,
                stride: None,
                storage_offset: None,
                source: ext,
                offset: r.data.start,
                length: r.data.len(),
                status,
                detail,
                big_endian: false,
                encoding: crate::offer::tensor::Encoding::Raw,
            })
        })
        .collect()
}
