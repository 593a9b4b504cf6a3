//! GGUF models (llama.cpp): versions 1 to 3, either byte order.
//!
//! A GGUF file is the magic `GGUF`, a u32 version, the tensor and key/value
//! counts (u64; u32 in version 1), the metadata key/values, one info per
//! tensor (name, dimensions, GGML type, offset), padding to the alignment
//! (`general.alignment`, 32 by default) and the tensor data, each tensor at
//! its offset from the start of that data section. Strings are a length and
//! UTF-8 bytes; a big-endian file is told by its version read little-endian
//! (its low 16 bits are zero), as the `gguf` package tells it.
//!
//! Only the header is read to list the tensors, whatever the file's size.
//! Metadata arrays longer than [`INLINE`] items are loaded on expand, in
//! groups of at least [`GROUP`] items. Each tensor's bytes are checked
//! against the file: cut tensors are truncated, overlapping ones and
//! tensors of unknown types corrupt; holes and misaligned offsets are notes.
//!
//! Tensor shapes are listed outermost first, as NumPy shapes: the reverse
//! of the GGUF dimensions (`ne[0]`, the row length, is stored first), which
//! is the shape `GGUFReader` gives a tensor's `data` for the plain types.
//! The tensor-info nodes show the dimensions as the file stores them, as
//! `gguf-dump` prints them.
//!
//! Split models (`name-00001-of-00003.gguf`, with `split.*` keys): the first
//! shard, opened from disk, opens the others beside it as children and lists
//! their tensors with its own; a missing shard is damage.

use std::path::Path;
use std::sync::Arc;

use crate::data::{Data, Range, Source, read_exact_at};
use crate::extraction::{EntryKind, ExtId, Tree};
use crate::name::{Name, escape_bytes, escape_str};
use crate::node::{Node, Value};
use crate::offer::ggml::GgmlType;
use crate::offer::tensor::{Dtype, Tensor, numel, shape_text};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::status::{Damage, Status};

/// GGUF models.
pub(crate) static FORMAT: Format = Format {
    name: "gguf",
    extent: Some(extent),
    sniff,
    parse: |data, _| Box::new(GgufParser::new(data.clone())),
    load,
    offers: Offers {
        tensors: Some(TensorOffer::List(tensors)),
        ..Offers::NONE
    },
};

/// The first four bytes of a GGUF file.
pub(crate) const MAGIC: &[u8] = b"GGUF";

/// Nesting of arrays within arrays read at most.
const MAX_DEPTH: usize = 16;
/// Array items listed with their array; longer arrays load on expand.
pub(crate) const INLINE: u64 = 16;
/// Fewest items per group node of a long array (at most 1000 groups).
pub(crate) const GROUP: u64 = 1000;
/// Bytes of a string value kept for display.
const KEEP: usize = 256;
/// Bytes of a key or tensor name kept.
const MAX_NAME: usize = 4096;
/// Key/values and tensor infos listed at most.
const MAX_ITEMS: u64 = 1_000_000;
/// Dimensions of a tensor accepted (ggml has 4).
const MAX_DIMS: u32 = 8;
/// A length this far past the end is not a cut file but a wrong number.
const PLAUSIBLE: u64 = 1 << 34;
/// The alignment when `general.alignment` does not say.
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;
/// Notes on holes and misaligned tensors made at most.
const MAX_NOTES: usize = 200;
/// Shards of a split model opened at most.
const MAX_SHARDS: u64 = 10_000;

fn sniff(s: &Sniff) -> bool {
    if !s.head.starts_with(MAGIC) {
        return false;
    }
    match s.head.get(4..8) {
        Some(v) => version_of(v.try_into().unwrap_or([0; 4])).is_some(),
        None => true,
    }
}

/// (version, big-endian) from the four version bytes.
fn version_of(b: [u8; 4]) -> Option<(u32, bool)> {
    let le = u32::from_le_bytes(b);
    let (v, be) = if le & 0xffff == 0 {
        (u32::from_be_bytes(b), true)
    } else {
        (le, false)
    };
    (1..=3).contains(&v).then_some((v, be))
}

// ---------------------------------------------------------------------------
// reading
// ---------------------------------------------------------------------------

/// Why reading stopped: where, why, and whether the bytes just ended.
#[derive(Clone, Debug)]
pub(crate) struct FieldError {
    /// Offset of the field that could not be read.
    pub at: u64,
    /// In words.
    pub why: String,
    /// The bytes end before the field does (truncated, not corrupt).
    pub cut: bool,
}

impl FieldError {
    fn damage(&self, end: u64) -> Damage {
        if self.cut {
            Damage::truncated(Range::new(self.at, end.max(self.at)), self.why.clone())
        } else {
            Damage::corrupt(Range::new(self.at, end.max(self.at)), self.why.clone())
        }
    }
}

/// A buffered reader of a GGUF header in either byte order.
struct Rd<'a> {
    src: &'a dyn Source,
    pos: u64,
    end: u64,
    be: bool,
    /// Version 2 and later: u64 counts and lengths (version 1: u32).
    wide: bool,
    buf: Vec<u8>,
    buf_at: u64,
}

impl<'a> Rd<'a> {
    fn new(src: &'a dyn Source, pos: u64, be: bool, wide: bool) -> Rd<'a> {
        Rd {
            src,
            pos,
            end: src.available(),
            be,
            wide,
            buf: Vec::new(),
            buf_at: 0,
        }
    }

    fn cut(&self, what: &str) -> FieldError {
        FieldError {
            at: self.pos,
            why: format!("the file ends inside {what}"),
            cut: true,
        }
    }

    /// The next `n` bytes (`n` small).
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], FieldError> {
        let end = self.pos.checked_add(n as u64).filter(|&e| e <= self.end);
        let Some(end) = end else {
            return Err(self.cut(what));
        };
        // A mapped file is read in place.
        if let Some(all) = self.src.as_slice()
            && let Some(b) = all.get(self.pos as usize..end as usize)
        {
            self.pos = end;
            return Ok(b);
        }
        let have = self.buf_at <= self.pos && end <= self.buf_at + self.buf.len() as u64;
        if !have {
            let len = (n as u64).max(1 << 16).min(self.end - self.pos) as usize;
            self.buf.resize(len, 0);
            if !matches!(read_exact_at(self.src, self.pos, &mut self.buf), Ok(true)) {
                self.buf.clear();
                return Err(self.cut(what));
            }
            self.buf_at = self.pos;
        }
        let at = (self.pos - self.buf_at) as usize;
        self.pos = end;
        Ok(&self.buf[at..at + n])
    }

    fn int<const N: usize>(&mut self, what: &str) -> Result<[u8; N], FieldError> {
        let be = self.be;
        let b = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        if be {
            out.reverse();
        }
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, FieldError> {
        self.int::<4>(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, FieldError> {
        self.int::<8>(what).map(u64::from_le_bytes)
    }

    /// A count or length: u64, u32 in version 1.
    fn len(&mut self, what: &str) -> Result<u64, FieldError> {
        if self.wide {
            self.u64(what)
        } else {
            self.u32(what).map(u64::from)
        }
    }

    fn skip(&mut self, n: u64, what: &str) -> Result<(), FieldError> {
        match self.pos.checked_add(n) {
            Some(e) if e <= self.end => {
                self.pos = e;
                Ok(())
            }
            _ if n > PLAUSIBLE => Err(FieldError {
                at: self.pos,
                why: format!("{what} claims {n} bytes, more than any file holds"),
                cut: false,
            }),
            _ => Err(self.cut(what)),
        }
    }

    /// A string: its length, then up to `keep` of its bytes (the rest
    /// skipped). Returns the bytes kept and the full length.
    fn string(&mut self, keep: usize, what: &str) -> Result<(Vec<u8>, u64), FieldError> {
        let at = self.pos;
        let n = self.len(what)?;
        let left = self.end - self.pos;
        if n > left {
            return Err(if n > PLAUSIBLE {
                FieldError {
                    at,
                    why: format!("{what} has a length of {n} bytes, more than any file holds"),
                    cut: false,
                }
            } else {
                self.cut(what)
            });
        }
        let k = n.min(keep as u64) as usize;
        let kept = self.take(k, what)?.to_vec();
        self.skip(n - k as u64, what)?;
        Ok((kept, n))
    }
}

/// The GGUF value types by id.
const TYPE_NAMES: [&str; 13] = [
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64",
];

/// A value type's name (`uint32`), or `value` for an unknown id.
pub(crate) fn type_name(t: u32) -> &'static str {
    TYPE_NAMES.get(t as usize).copied().unwrap_or("value")
}

/// Kinds of the group nodes of long arrays, one per item type.
const GROUP_KINDS: [&str; 13] = [
    "uint8 items",
    "int8 items",
    "uint16 items",
    "int16 items",
    "uint32 items",
    "int32 items",
    "float32 items",
    "bool items",
    "string items",
    "array items",
    "uint64 items",
    "int64 items",
    "float64 items",
];

/// Bytes of one value of a fixed-size type.
fn fixed_size(t: u32) -> Option<u64> {
    Some(match t {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        _ => return None,
    })
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    /// Unsigned integers.
    U(u64),
    /// Signed integers.
    I(i64),
    /// float32.
    F32(f32),
    /// float64.
    F(f64),
    /// A bool byte (anything but 0 is true; the byte is kept).
    Bool(u8),
    /// The first bytes of a string and its length.
    Str(Vec<u8>, u64),
    /// An array: its item type, its count, where its items are.
    Arr(u32, u64, Range),
}

/// Reads a value of type `t` (arrays: skipping over their items).
fn value(rd: &mut Rd, t: u32, depth: usize, keep: usize) -> Result<Val, FieldError> {
    let at = rd.pos;
    let name = type_name(t);
    Ok(match t {
        0 => Val::U(u64::from(rd.int::<1>(name)?[0])),
        1 => Val::I(i64::from(rd.int::<1>(name)?[0] as i8)),
        2 => Val::U(u64::from(u16::from_le_bytes(rd.int::<2>(name)?))),
        3 => Val::I(i64::from(i16::from_le_bytes(rd.int::<2>(name)?))),
        4 => Val::U(u64::from(rd.u32(name)?)),
        5 => Val::I(i64::from(rd.u32(name)? as i32)),
        6 => Val::F32(f32::from_bits(rd.u32(name)?)),
        7 => Val::Bool(rd.int::<1>(name)?[0]),
        8 => {
            let (b, n) = rd.string(keep, "a string")?;
            Val::Str(b, n)
        }
        9 => {
            if depth >= MAX_DEPTH {
                return Err(FieldError {
                    at,
                    why: format!("arrays nested deeper than {MAX_DEPTH} levels"),
                    cut: false,
                });
            }
            let et = rd.u32("an array's item type")?;
            let count = rd.len("an array's length")?;
            let start = rd.pos;
            skip_items(rd, et, count, depth + 1)?;
            Val::Arr(et, count, Range::new(start, rd.pos))
        }
        10 => Val::U(rd.u64(name)?),
        11 => Val::I(rd.u64(name)? as i64),
        12 => Val::F(f64::from_bits(rd.u64(name)?)),
        _ => {
            return Err(FieldError {
                at,
                why: format!("unknown value type {t}"),
                cut: false,
            });
        }
    })
}

/// Skips `count` items of type `t`.
fn skip_items(rd: &mut Rd, t: u32, count: u64, depth: usize) -> Result<(), FieldError> {
    if let Some(size) = fixed_size(t) {
        let n = count.saturating_mul(size);
        return rd.skip(n, "an array");
    }
    match t {
        8 => {
            // Each string takes at least its length field: the loop ends
            // when the bytes do.
            for _ in 0..count {
                let n = rd.len("a string")?;
                rd.skip(n, "a string")?;
            }
            Ok(())
        }
        9 => {
            for _ in 0..count {
                value(rd, 9, depth, 0)?;
            }
            Ok(())
        }
        _ => Err(FieldError {
            at: rd.pos.saturating_sub(12),
            why: format!("an array of unknown value type {t}"),
            cut: false,
        }),
    }
}

/// One metadata key/value.
#[derive(Clone, Debug)]
pub(crate) struct Kv {
    /// The key (its first `MAX_NAME` bytes).
    pub key: Vec<u8>,
    /// The whole entry.
    pub range: Range,
    /// Its value type.
    pub ty: u32,
    /// Its value.
    pub val: Val,
}

/// One tensor info.
#[derive(Clone, Debug)]
pub(crate) struct Info {
    /// Its name (its first `MAX_NAME` bytes, lossy UTF-8).
    pub name: String,
    /// The whole info.
    pub range: Range,
    /// Dimensions as stored: the row length first.
    pub dims: Vec<u64>,
    /// Its GGML type id.
    pub ty: u32,
    /// Offset of its data from the start of the data section.
    pub offset: u64,
}

impl Info {
    /// Its element type.
    pub(crate) fn dtype(&self) -> Dtype {
        match self.ty {
            0 => Dtype::F32,
            1 => Dtype::F16,
            24 => Dtype::I8,
            25 => Dtype::I16,
            26 => Dtype::I32,
            27 => Dtype::I64,
            28 => Dtype::F64,
            30 => Dtype::BF16,
            t => Dtype::Ggml(GgmlType(t)),
        }
    }

    /// Its shape outermost first (the dimensions reversed).
    pub(crate) fn shape(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }

    /// Bytes of its data, or why they cannot be known.
    pub(crate) fn size(&self) -> Result<u64, String> {
        let t = GgmlType(self.ty);
        let Some((block, _)) = t.block() else {
            return Err(format!(
                "unknown GGML type {}: its size is not known",
                self.ty
            ));
        };
        let Some(n) = numel(&self.dims) else {
            return Err(format!(
                "element count of dims {} overflows",
                shape_text(&self.dims)
            ));
        };
        let row = self.dims.first().copied().unwrap_or(1);
        if !row.is_multiple_of(block) {
            return Err(format!(
                "a row of {row} elements is not a whole number of {}-element {} blocks",
                block,
                t.name()
            ));
        }
        t.bytes_for(n)
            .ok_or_else(|| format!("the size of dims {} overflows", shape_text(&self.dims)))
    }
}

/// What a GGUF header says.
#[derive(Clone, Debug, Default)]
pub(crate) struct GgufHeader {
    /// Version 1, 2 or 3.
    pub version: u32,
    /// Numbers are big-endian.
    pub be: bool,
    /// The counts of the header.
    pub n_tensors: u64,
    /// See `n_tensors`.
    pub n_kv: u64,
    /// The key/values read.
    pub kvs: Vec<Kv>,
    /// The tensor infos read.
    pub infos: Vec<Info>,
    /// The data alignment.
    pub alignment: u64,
    /// Why the alignment is the default although a key sets it.
    pub align_bad: Option<String>,
    /// Where the key/values end (as far as read).
    pub kv_end: u64,
    /// Where the tensor infos end (as far as read).
    pub info_end: u64,
    /// Where the data section starts, when the whole header was read.
    pub data_start: Option<u64>,
    /// Why reading the header stopped early.
    pub bad: Option<FieldError>,
}

impl GgufHeader {
    /// The value of key `k`.
    pub(crate) fn get(&self, k: &str) -> Option<&Val> {
        self.kvs
            .iter()
            .find(|kv| kv.key == k.as_bytes())
            .map(|kv| &kv.val)
    }

    fn uint(&self, k: &str) -> Option<u64> {
        match self.get(k)? {
            Val::U(u) => Some(*u),
            Val::I(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }
}

/// Reads the header of a GGUF file at the start of `src`. `Err` only when
/// the magic or version is not there.
pub(crate) fn read_layout(src: &dyn Source) -> Result<GgufHeader, FieldError> {
    let mut head = [0u8; 8];
    let n = src.available().min(8) as usize;
    if !matches!(read_exact_at(src, 0, &mut head[..n]), Ok(true)) || n < 4 {
        return Err(FieldError {
            at: 0,
            why: "the file ends inside the magic".into(),
            cut: true,
        });
    }
    if &head[..4] != MAGIC {
        return Err(FieldError {
            at: 0,
            why: "not a GGUF file".into(),
            cut: false,
        });
    }
    if n < 8 {
        return Err(FieldError {
            at: 4,
            why: "the file ends inside the version".into(),
            cut: true,
        });
    }
    let vb: [u8; 4] = head[4..8].try_into().unwrap_or([0; 4]);
    let Some((version, be)) = version_of(vb) else {
        return Err(FieldError {
            at: 4,
            why: format!(
                "version {} is not one of GGUF's (1 to 3)",
                u32::from_le_bytes(vb)
            ),
            cut: false,
        });
    };
    let mut lay = GgufHeader {
        version,
        be,
        alignment: DEFAULT_ALIGNMENT,
        ..GgufHeader::default()
    };
    let mut rd = Rd::new(src, 8, be, version >= 2);
    if let Err(b) = read_rest(&mut rd, &mut lay) {
        lay.bad = Some(b);
    }
    Ok(lay)
}

fn read_rest(rd: &mut Rd, lay: &mut GgufHeader) -> Result<(), FieldError> {
    lay.n_tensors = rd.len("the tensor count")?;
    lay.n_kv = rd.len("the key/value count")?;
    lay.kv_end = rd.pos;
    lay.info_end = rd.pos;
    for i in 0..lay.n_kv {
        if i >= MAX_ITEMS {
            return Err(FieldError {
                at: rd.pos,
                why: format!("only the first {MAX_ITEMS} key/values are read"),
                cut: false,
            });
        }
        let start = rd.pos;
        let (key, _) = rd.string(MAX_NAME, "a key")?;
        let ty = rd.u32("a value type")?;
        let val = value(rd, ty, 0, KEEP)?;
        lay.kvs.push(Kv {
            key,
            range: Range::new(start, rd.pos),
            ty,
            val,
        });
        lay.kv_end = rd.pos;
        lay.info_end = rd.pos;
    }
    if let Some(kv) = lay.kvs.iter().find(|kv| kv.key == b"general.alignment") {
        match kv.val {
            Val::U(a) if kv.ty == 4 && a > 0 && a.is_power_of_two() => lay.alignment = a,
            _ => {
                lay.align_bad = Some(format!(
                    "general.alignment is not a power of two as a uint32 ({} {}): the default {DEFAULT_ALIGNMENT} is used",
                    type_name(kv.ty),
                    val_text(&kv.val)
                ));
            }
        }
    }
    for i in 0..lay.n_tensors {
        if i >= MAX_ITEMS {
            return Err(FieldError {
                at: rd.pos,
                why: format!("only the first {MAX_ITEMS} tensor infos are read"),
                cut: false,
            });
        }
        let start = rd.pos;
        let (name, _) = rd.string(MAX_NAME, "a tensor name")?;
        let nd_at = rd.pos;
        let nd = rd.u32("a tensor's dimension count")?;
        if nd > MAX_DIMS {
            return Err(FieldError {
                at: nd_at,
                why: format!("a tensor with {nd} dimensions (at most {MAX_DIMS} are read)"),
                cut: false,
            });
        }
        let mut dims = Vec::with_capacity(nd as usize);
        for _ in 0..nd {
            dims.push(rd.len("a tensor's dimensions")?);
        }
        let ty = rd.u32("a tensor's type")?;
        let offset = rd.u64("a tensor's offset")?;
        lay.infos.push(Info {
            name: String::from_utf8_lossy(&name).into_owned(),
            range: Range::new(start, rd.pos),
            dims,
            ty,
            offset,
        });
        lay.info_end = rd.pos;
    }
    lay.data_start = Some(align_up(rd.pos, lay.alignment).unwrap_or(u64::MAX));
    Ok(())
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    let r = x % a;
    if r == 0 {
        Some(x)
    } else {
        x.checked_add(a - r)
    }
}

/// A value as text for a node.
fn val_text(v: &Val) -> String {
    match v {
        Val::U(u) => u.to_string(),
        Val::I(i) => i.to_string(),
        Val::F32(f) => float_text(f64::from(*f), f.to_string(), format!("{f:e}")),
        Val::F(f) => float_text(*f, f.to_string(), format!("{f:e}")),
        Val::Bool(b) => (*b != 0).to_string(),
        Val::Str(b, n) => string_shown(b, *n),
        Val::Arr(t, n, _) => format!("{n} × {}", type_name(*t)),
    }
}

/// The shortest digits that read back as the value: plain between 1e-5
/// and 1e16, else with an exponent (as Python and numpy print floats).
fn float_text(x: f64, plain: String, exp: String) -> String {
    let a = x.abs();
    if a == 0.0 || !a.is_finite() || (1e-5..1e16).contains(&a) {
        plain
    } else {
        exp
    }
}

fn string_shown(b: &[u8], n: u64) -> String {
    let mut s = escape_bytes(b);
    if (b.len() as u64) < n {
        s.push('…');
    }
    s
}

fn node_value(n: Node, v: &Val) -> Node {
    match v {
        Val::U(u) => n.uint(*u),
        Val::I(i) => n.value(Value::Int(*i)),
        Val::F32(_) | Val::F(_) => n.text(val_text(v)),
        Val::Bool(b) => n.value(Value::Bool(*b != 0)),
        Val::Str(b, len) => n.value(Value::Quoted(string_shown(b, *len).into())),
        Val::Arr(..) => n.text(val_text(v)),
    }
}

// ---------------------------------------------------------------------------
// the tensors' places
// ---------------------------------------------------------------------------

/// Where one tensor's bytes are and what is wrong with them.
#[derive(Clone, Debug)]
pub(crate) struct Placed {
    /// Index in [`GgufHeader::infos`].
    pub index: usize,
    /// Its bytes in the file (empty at the data start when unknown).
    pub range: Range,
    /// Complete, truncated or corrupt.
    pub status: Status,
    /// Why not complete, or a note.
    pub detail: Option<String>,
}

/// Each tensor of `lay` placed in a file of `avail` bytes, in info order;
/// plus notes on the data section (holes, misaligned offsets).
pub(crate) fn place(lay: &GgufHeader, avail: u64, fin: bool) -> (Vec<Placed>, Vec<String>) {
    let mut out = Vec::with_capacity(lay.infos.len());
    let mut notes = Vec::new();
    let start = lay.data_start;
    let mut seen = std::collections::HashMap::new();
    for (i, t) in lay.infos.iter().enumerate() {
        let mut p = Placed {
            index: i,
            range: Range::new(start.unwrap_or(0), start.unwrap_or(0)),
            status: Status::Complete,
            detail: None,
        };
        let Some(ds) = start else {
            p.status = Status::Truncated;
            p.detail = Some("the file ends inside the tensor infos: its data is not there".into());
            out.push(p);
            continue;
        };
        let size = t.size();
        let begin = ds.checked_add(t.offset);
        match (size, begin) {
            (Err(why), _) => {
                p.status = Status::Corrupt;
                p.detail = Some(why);
            }
            (Ok(_), None) => {
                p.status = Status::Corrupt;
                p.detail = Some(format!("offset {} overflows", t.offset));
            }
            (Ok(size), Some(b)) => match b.checked_add(size) {
                None => {
                    p.status = Status::Corrupt;
                    p.detail = Some(format!("offset {} plus {size} bytes overflows", t.offset));
                }
                Some(e) => {
                    p.range = Range::new(b, e);
                    if e > avail && fin {
                        p.status = Status::Truncated;
                        let have = avail.saturating_sub(b);
                        let (block, bytes) = GgmlType(t.ty).block().unwrap_or((1, 1));
                        p.detail = Some(if have == 0 {
                            format!("none of its {size} bytes are there: the file ends before it")
                        } else {
                            format!(
                                "{have} of {size} bytes are there ({} of {} blocks of {block} elements whole)",
                                have / bytes.max(1),
                                size / bytes.max(1)
                            )
                        });
                    }
                    if !t.offset.is_multiple_of(lay.alignment) && notes.len() < MAX_NOTES {
                        notes.push(format!(
                            "tensor '{}' is at offset {}, not a multiple of the alignment {}",
                            escape_str(&t.name),
                            t.offset,
                            lay.alignment
                        ));
                    }
                }
            },
        }
        if let Some(prev) = seen.insert(t.name.clone(), i) {
            p.status = Status::Corrupt;
            p.detail = Some(format!(
                "the name is also tensor {prev}'s{}",
                p.detail.map(|d| format!("; {d}")).unwrap_or_default()
            ));
        }
        out.push(p);
    }
    // Overlaps and holes, in file order.
    let mut order: Vec<usize> = (0..out.len())
        .filter(|&i| !out[i].range.is_empty())
        .collect();
    order.sort_by_key(|&i| (out[i].range.start, out[i].range.end));
    let mut reach: Option<(u64, usize)> = None;
    for &i in &order {
        let r = out[i].range;
        if let Some((end, j)) = reach {
            if r.start < end {
                let other = escape_str(&lay.infos[j].name);
                let me = escape_str(&lay.infos[i].name);
                for (k, name) in [(i, other), (j, me)] {
                    out[k].status = Status::Corrupt;
                    let d = format!("its bytes overlap tensor '{name}'");
                    // One tensor may overlap thousands: its detail names
                    // the first few.
                    out[k].detail = Some(match out[k].detail.take() {
                        Some(x) if x.len() < 1000 && !x.contains(&d) => format!("{x}; {d}"),
                        Some(x) => x,
                        None => d,
                    });
                }
            } else if align_up(end, lay.alignment).is_some_and(|a| r.start > a)
                && notes.len() < MAX_NOTES
            {
                notes.push(format!(
                    "{} bytes between tensor '{}' and tensor '{}' belong to no tensor",
                    r.start - end,
                    escape_str(&lay.infos[j].name),
                    escape_str(&lay.infos[i].name)
                ));
            }
        }
        if reach.is_none_or(|(end, _)| r.end > end) {
            reach = Some((r.end, i));
        }
    }
    (out, notes)
}

/// The end of the last tensor (or of the header).
fn data_end(lay: &GgufHeader, placed: &[Placed]) -> u64 {
    placed
        .iter()
        .map(|p| p.range.end)
        .fold(lay.data_start.unwrap_or(lay.info_end), u64::max)
}

fn extent(data: &Data) -> Option<u64> {
    let src = &**data;
    let lay = read_layout(src).ok()?;
    if lay.bad.is_some() {
        return None;
    }
    let (placed, _) = place(&lay, u64::MAX, false);
    Some(data_end(&lay, &placed))
}

// ---------------------------------------------------------------------------
// the parser
// ---------------------------------------------------------------------------

enum Phase {
    Header,
    Data(Box<GgufHeader>),
    Done,
}

struct GgufParser {
    data: Data,
    phase: Phase,
    /// Bytes available when the header was last found cut (a growing
    /// source is read again only when it has doubled: linear work).
    tried: u64,
}

impl GgufParser {
    fn new(data: Data) -> GgufParser {
        GgufParser {
            data,
            phase: Phase::Header,
            tried: 0,
        }
    }
}

/// The nodes of the fixed header fields.
fn head_nodes(lay: &GgufHeader, out: &mut Vec<Node>) {
    let w = if lay.version >= 2 { 8 } else { 4 };
    out.push(Node::new("magic", "magic", Range::new(0, 4)).value(Value::Bytes(MAGIC.into())));
    out.push(
        Node::new("version", "version", Range::new(4, 8)).text(if lay.be {
            format!("{}, big-endian", lay.version)
        } else {
            lay.version.to_string()
        }),
    );
    if lay.kv_end >= 8 + 2 * w {
        out.push(Node::new("count", "tensor_count", Range::new(8, 8 + w)).uint(lay.n_tensors));
        out.push(Node::new("count", "kv_count", Range::new(8 + w, 8 + 2 * w)).uint(lay.n_kv));
    }
}

/// The node of one key/value.
fn kv_node(src: &dyn Source, lay: &GgufHeader, kv: &Kv) -> Node {
    let n = Node::new(type_name(kv.ty), escape_bytes(&kv.key), kv.range);
    let n = node_value(n, &kv.val);
    match kv.val {
        Val::Arr(t, count, items) => {
            array_children(src, lay.be, lay.version >= 2, n, t, count, items)
        }
        _ => n,
    }
}

/// An array node with its items (short arrays) or lazy (long ones).
fn array_children(
    src: &dyn Source,
    be: bool,
    wide: bool,
    n: Node,
    t: u32,
    count: u64,
    items: Range,
) -> Node {
    if count == 0 {
        return n;
    }
    if count <= INLINE {
        return n.with_children(item_nodes(src, be, wide, t, 0, count, items.start, 0));
    }
    n.lazy()
}

/// Nodes of items `first .. first + count` of type `t`, the first at
/// `at`; array items nested `depth` deep.
#[allow(clippy::too_many_arguments)]
fn item_nodes(
    src: &dyn Source,
    be: bool,
    wide: bool,
    t: u32,
    first: u64,
    count: u64,
    at: u64,
    depth: usize,
) -> Vec<Node> {
    let mut rd = Rd::new(src, at, be, wide);
    let mut out = Vec::new();
    for i in first..first.saturating_add(count) {
        let start = rd.pos;
        let Ok(v) = value(&mut rd, t, depth, KEEP) else {
            break;
        };
        let n = node_value(
            Node::new(type_name(t), format!("[{i}]"), Range::new(start, rd.pos)),
            &v,
        );
        out.push(match v {
            Val::Arr(et, c, items) => array_children(src, be, wide, n, et, c, items),
            _ => n,
        });
    }
    out
}

/// Group nodes of a long array: `[a..b)` each, lazy.
fn group_nodes(src: &dyn Source, be: bool, wide: bool, t: u32, count: u64, at: u64) -> Vec<Node> {
    let per = GROUP.max(count.div_ceil(1000));
    let kind = GROUP_KINDS.get(t as usize).copied().unwrap_or("items");
    let mut rd = Rd::new(src, at, be, wide);
    let mut out = Vec::new();
    let mut i = 0u64;
    while i < count {
        let n = per.min(count - i);
        let start = rd.pos;
        if skip_items(&mut rd, t, n, 1).is_err() {
            break;
        }
        out.push(
            Node::new(kind, format!("[{i}..{})", i + n), Range::new(start, rd.pos))
                .text(format!("{n} × {}", type_name(t)))
                .lazy(),
        );
        i += n;
    }
    out
}

fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    let Ok(lay_head) = head_of(data) else {
        return Vec::new();
    };
    let (be, wide) = lay_head;
    let r = node.range;
    if node.kind == "tensor_info" {
        return info_fields(data, be, wide, r);
    }
    if node.kind == "array" {
        // A key/value (its key first) or an item of an array.
        let mut rd = Rd::new(data, r.start, be, wide);
        let as_kv = rd
            .string(0, "a key")
            .and_then(|_| rd.u32("a value type"))
            .ok()
            .filter(|&t| t == 9)
            .and_then(|_| value(&mut rd, 9, 0, 0).ok())
            .filter(|_| rd.pos == r.end);
        let v = as_kv.or_else(|| {
            let mut rd = Rd::new(data, r.start, be, wide);
            value(&mut rd, 9, 0, 0).ok().filter(|_| rd.pos == r.end)
        });
        let Some(Val::Arr(t, count, items)) = v else {
            return Vec::new();
        };
        if count <= GROUP {
            return item_nodes(data, be, wide, t, 0, count, items.start, 1);
        }
        return group_nodes(data, be, wide, t, count, items.start);
    }
    if let Some(t) = GROUP_KINDS.iter().position(|k| *k == node.kind) {
        let bounds = node
            .name
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(')'))
            .and_then(|s| s.split_once(".."))
            .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
        let Some((a, b)) = bounds else {
            return Vec::new();
        };
        return item_nodes(data, be, wide, t as u32, a, b.saturating_sub(a), r.start, 1);
    }
    Vec::new()
}

/// (big-endian, wide) of the file.
fn head_of(src: &dyn Source) -> Result<(bool, bool), ()> {
    let mut b = [0u8; 8];
    if !matches!(read_exact_at(src, 0, &mut b), Ok(true)) || &b[..4] != MAGIC {
        return Err(());
    }
    let (v, be) = version_of(b[4..8].try_into().map_err(|_| ())?).ok_or(())?;
    Ok((be, v >= 2))
}

/// The node of one tensor info; its fields load on expand (a hostile
/// header holds a million infos).
fn info_node(t: &Info) -> Node {
    let dims: Vec<String> = t.dims.iter().map(u64::to_string).collect();
    Node::new("tensor_info", escape_str(&t.name), t.range)
        .text(format!(
            "{}, dims [{}], offset {}",
            GgmlType(t.ty).name(),
            dims.join(", "),
            t.offset
        ))
        .lazy()
}

/// The fields of the tensor info at `r`, each a node over its bytes.
fn info_fields(src: &dyn Source, be: bool, wide: bool, r: Range) -> Vec<Node> {
    let mut rd = Rd::new(src, r.start, be, wide);
    let mut out = Vec::new();
    let Ok((name, n)) = rd.string(KEEP, "a tensor name") else {
        return out;
    };
    out.push(
        Node::new("string", "name", Range::new(r.start, rd.pos))
            .value(Value::Quoted(string_shown(&name, n).into())),
    );
    let at = rd.pos;
    let Ok(nd) = rd.u32("a tensor's dimension count") else {
        return out;
    };
    out.push(Node::new("uint32", "n_dims", Range::new(at, rd.pos)).uint(u64::from(nd)));
    let at = rd.pos;
    let mut dims = Vec::new();
    for _ in 0..nd.min(MAX_DIMS) {
        let Ok(d) = rd.len("a tensor's dimensions") else {
            return out;
        };
        dims.push(d.to_string());
    }
    out.push(
        Node::new("dims", "dims", Range::new(at, rd.pos)).text(format!("[{}]", dims.join(", "))),
    );
    let at = rd.pos;
    let Ok(ty) = rd.u32("a tensor's type") else {
        return out;
    };
    out.push(
        Node::new("uint32", "type", Range::new(at, rd.pos))
            .text(format!("{} ({ty})", GgmlType(ty).name())),
    );
    let at = rd.pos;
    if let Ok(off) = rd.u64("a tensor's offset") {
        out.push(Node::new("uint64", "offset", Range::new(at, rd.pos)).uint(off));
    }
    out
}

impl Parser for GgufParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        let src = &*self.data;
        let (avail, fin) = src.extent();
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Header => {
                if !fin && avail < self.tried.saturating_mul(2).max(1 << 16) {
                    self.phase = Phase::Header;
                    return Step::Blocked;
                }
                let lay = match read_layout(src) {
                    Ok(l) => l,
                    Err(b) if b.cut && !fin => {
                        self.tried = avail;
                        self.phase = Phase::Header;
                        return Step::Blocked;
                    }
                    Err(b) => {
                        let d = b.damage(avail);
                        cx.push_node(
                            Node::new("header", "header", Range::new(0, avail))
                                .text("unreadable")
                                .damaged(d.clone()),
                        );
                        cx.damage(d);
                        return Step::Done;
                    }
                };
                if lay.bad.as_ref().is_some_and(|b| b.cut) && !fin {
                    self.tried = avail;
                    self.phase = Phase::Header;
                    return Step::Blocked;
                }
                self.header(cx, &lay);
                self.phase = Phase::Data(Box::new(lay));
                Step::Yield
            }
            Phase::Data(lay) => {
                let (placed, notes) = place(&lay, avail, fin);
                let end = data_end(&lay, &placed);
                if !fin && avail < end {
                    cx.progress(avail, Some(end));
                    self.phase = Phase::Data(lay);
                    return Step::Blocked;
                }
                self.data_nodes(cx, &lay, &placed, notes);
                if let Some(file) = cx.file.map(Path::to_path_buf) {
                    self.shards(cx, &lay, &file);
                } else if split_of(&lay).is_some_and(|(no, n)| no == 0 && n > 1) {
                    cx.note("the first shard of a split model; its other shards are opened only beside a file on disk");
                }
                cx.progress(avail, Some(avail));
                Step::Done
            }
            Phase::Done => Step::Done,
        }
    }
}

impl GgufParser {
    fn header(&self, cx: &mut StepCx, lay: &GgufHeader) {
        let src = &*self.data;
        let avail = src.available();
        let mut nodes = Vec::new();
        head_nodes(lay, &mut nodes);
        for n in nodes {
            cx.push_node(n);
        }
        let w = if lay.version >= 2 { 8 } else { 4 };
        let kv_start = 8 + 2 * w;
        if lay.kv_end > kv_start || !lay.kvs.is_empty() {
            let kids: Vec<Node> = lay.kvs.iter().map(|kv| kv_node(src, lay, kv)).collect();
            cx.push_node(
                Node::new("metadata", "metadata", Range::new(kv_start, lay.kv_end))
                    .text(format!("{} of {} key/values", lay.kvs.len(), lay.n_kv))
                    .with_children(kids),
            );
        }
        if !lay.infos.is_empty() {
            let kids: Vec<Node> = lay.infos.iter().map(info_node).collect();
            cx.push_node(
                Node::new(
                    "tensor_infos",
                    "tensor_infos",
                    Range::new(lay.kv_end, lay.info_end),
                )
                .text(format!("{} of {} tensors", lay.infos.len(), lay.n_tensors))
                .with_children(kids),
            );
        }
        if let Some(why) = &lay.align_bad {
            cx.note(why.clone());
        }
        if let Some(b) = &lay.bad {
            let at = b.at.min(avail);
            let d = b.damage(avail);
            cx.push_node(
                Node::new("header", "rest of the header", Range::new(at, avail))
                    .text("unreadable")
                    .damaged(d.clone()),
            );
            cx.damage(d);
        }
    }

    fn data_nodes(&self, cx: &mut StepCx, lay: &GgufHeader, placed: &[Placed], notes: Vec<String>) {
        let src = &*self.data;
        let avail = src.available();
        let Some(ds) = lay.data_start else {
            return;
        };
        if ds > lay.info_end {
            let r = Range::new(lay.info_end, ds);
            let mut n = Node::new("padding", "padding", r).text(format!("to {}", lay.alignment));
            if ds > avail {
                n = n.damaged(Damage::truncated(
                    Range::new(avail, avail),
                    "the file ends inside the padding",
                ));
            }
            cx.push_node(n);
        }
        let mut order: Vec<&Placed> = placed.iter().collect();
        order.sort_by_key(|p| (p.range.is_empty(), p.range.start, p.index));
        let end = data_end(lay, placed);
        let mut kids = Vec::new();
        // The first cut tensor and the first corrupt ones are damage each;
        // the rest are counted (a cut 70 GB model has hundreds after the cut).
        let (mut cut, mut bad) = (0u64, 0u64);
        for p in order {
            let t = &lay.infos[p.index];
            let mut n = Node::new("tensor", escape_str(&t.name), p.range).text(format!(
                "{} {}, {} bytes",
                GgmlType(t.ty).name(),
                shape_text(&t.shape()),
                p.range.len()
            ));
            if p.status != Status::Complete {
                let why = p.detail.clone().unwrap_or_default();
                let why = format!("tensor '{}': {why}", escape_str(&t.name));
                let d = if p.status == Status::Truncated {
                    Damage::truncated(
                        Range::new(avail.max(p.range.start), avail.max(p.range.start)),
                        why,
                    )
                } else {
                    Damage::corrupt(p.range, why)
                };
                let count = if p.status == Status::Truncated {
                    &mut cut
                } else {
                    &mut bad
                };
                *count += 1;
                if *count == 1 || (p.status == Status::Corrupt && *count <= 200) {
                    cx.damage(d.clone());
                }
                n = n.damaged(d);
            }
            kids.push(n);
        }
        if cut > 1 {
            cx.damage(Damage::truncated(
                Range::new(avail, avail),
                format!("{} more tensors are cut off or missing", cut - 1),
            ));
        }
        if bad > 200 {
            cx.damage(Damage::corrupt(
                Range::new(ds, end.max(ds)),
                format!("{} more tensors are corrupt", bad - 200),
            ));
        }
        if !kids.is_empty() || end > ds {
            cx.push_node(
                Node::new("data", "data", Range::new(ds, end.max(ds)))
                    .text(format!(
                        "{} tensors, alignment {}",
                        kids.len(),
                        lay.alignment
                    ))
                    .with_children(kids),
            );
        }
        let padded = align_up(end, lay.alignment).unwrap_or(end);
        if avail > end && avail <= padded {
            // The writer pads the last tensor to the alignment too.
            cx.push_node(
                Node::new("padding", "padding", Range::new(end, avail))
                    .text(format!("to {}", lay.alignment)),
            );
        } else if avail > end {
            let r = Range::new(end, avail);
            cx.push_node(Node::new("trailing", "trailing bytes", r).uint(r.len()));
            cx.note(format!(
                "{} bytes after the last tensor belong to no tensor",
                r.len()
            ));
        }
        for n in notes {
            cx.note(n);
        }
    }

    /// Opens the other shards of a split model beside the first one.
    fn shards(&self, cx: &mut StepCx, lay: &GgufHeader, file: &Path) {
        let Some((no, count)) = split_of(lay) else {
            return;
        };
        let fname = file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        if no != 0 {
            cx.push_node(Node::new("split", "split", Range::default()).text(format!(
                "shard {} of {count} of a split model (the first shard opens them all)",
                no + 1
            )));
            return;
        }
        let Some(names) = shard_names(&fname) else {
            cx.note(format!(
                "the first of {count} shards of a split model, but its name does not end in -00001-of-{count:05}.gguf: the others are not looked for"
            ));
            return;
        };
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut kids = Vec::new();
        let mut tensors = lay.infos.len() as u64;
        for (k, name) in names.iter().enumerate().skip(1) {
            let path = dir.join(name);
            match cx.open_beside(&path) {
                Ok(s) => {
                    let s: Data = Arc::new(s);
                    let held = read_layout(&*s).map(|l| l.infos.len()).unwrap_or(0);
                    tensors += held as u64;
                    kids.push(
                        Node::new("shard", escape_str(name), Range::default())
                            .text(format!("shard {} of {count}, {held} tensors", k + 1)),
                    );
                    let mut spec = ChildSpec::new(Name::from(name.as_str()), EntryKind::File, s);
                    spec.file = Some(path);
                    cx.add_child(spec);
                }
                Err(e) => {
                    let missing = e.kind() == std::io::ErrorKind::NotFound;
                    let (what, why) = if missing {
                        ("missing", "is missing")
                    } else {
                        ("not read", "is not read")
                    };
                    kids.push(Node::new("shard", escape_str(name), Range::default()).text(what));
                    cx.damage(Damage::truncated(
                        Range::default(),
                        format!(
                            "shard {} of {count} of the split model, '{}', {why} ({e})",
                            k + 1,
                            escape_str(name)
                        ),
                    ));
                }
            }
        }
        let want = lay.uint("split.tensors.count");
        let mut text = format!("{count} shards, {tensors} tensors");
        if let Some(w) = want {
            text.push_str(&format!("; split.tensors.count says {w}"));
            if w != tensors
                && kids
                    .iter()
                    .all(|k| k.value != Some(Value::Str("missing".into())))
            {
                cx.damage(Damage::corrupt(
                    Range::default(),
                    format!("the shards hold {tensors} tensors, split.tensors.count says {w}"),
                ));
            }
        }
        cx.push_node(
            Node::new("shards", "shards", Range::default())
                .text(text)
                .with_children(kids),
        );
    }
}

/// Whether the GGUF file in `src` is the first shard of a split model (and
/// so opens the others when opened from disk).
pub(crate) fn opens_shards(src: &dyn Source) -> bool {
    read_layout(src)
        .ok()
        .and_then(|l| split_of(&l))
        .is_some_and(|(no, _)| no == 0)
}

/// (shard index from 0, shard count) of a split model's shard.
fn split_of(lay: &GgufHeader) -> Option<(u64, u64)> {
    let count = lay.uint("split.count")?;
    let no = lay.uint("split.no")?;
    (count > 1 && no < count).then_some((no, count))
}

/// The names of all shards of a split model given its first shard's name
/// (`x-00001-of-00003.gguf`), or `None` when it is not named so.
pub(crate) fn shard_names(first: &str) -> Option<Vec<String>> {
    let stem = first.strip_suffix(".gguf")?;
    let (rest, of) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    if no != "00001" || of.is_empty() || !of.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let count: u64 = of.parse().ok()?;
    if !(2..=MAX_SHARDS).contains(&count) {
        return None;
    }
    let width = of.len();
    Some(
        (1..=count)
            .map(|k| format!("{prefix}-{k:05}-of-{count:0width$}.gguf"))
            .collect(),
    )
}

// ---------------------------------------------------------------------------
// the tensor table
// ---------------------------------------------------------------------------

/// The tensors of a GGUF file, and those of its other shards when it is the
/// first of a split model.
pub(crate) fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let mut out = own_tensors(&*e.data(), ext);
    for &c in &e.children {
        if tree.exts[c].parser() == Some("gguf") {
            out.extend(own_tensors(&*tree.exts[c].data(), c));
        }
    }
    out
}

fn own_tensors(src: &dyn Source, ext: ExtId) -> Vec<Tensor> {
    let Ok(lay) = read_layout(src) else {
        return Vec::new();
    };
    let (placed, _) = place(&lay, src.available(), src.is_final());
    placed
        .into_iter()
        .map(|p| {
            let t = &lay.infos[p.index];
            Tensor {
                name: t.name.clone(),
                dtype: t.dtype(),
                shape: t.shape(),
                stride: None,
                storage_offset: None,
                source: ext,
                offset: p.range.start,
                length: p.range.len(),
                status: p.status,
                detail: p.detail,
                big_endian: lay.be,
                encoding: crate::offer::tensor::Encoding::Raw,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn s(out: &mut Vec<u8>, x: &str) {
        out.extend((x.len() as u64).to_le_bytes());
        out.extend(x.as_bytes());
    }

    /// A small v3 file: one kv of each shape, two F32 tensors.
    fn file() -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend(3u64.to_le_bytes());
        s(&mut b, "general.name");
        b.extend(8u32.to_le_bytes());
        s(&mut b, "tiny");
        s(&mut b, "a");
        b.extend(9u32.to_le_bytes());
        b.extend(9u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        for n in [1u32, 2] {
            b.extend(4u32.to_le_bytes());
            b.extend(u64::from(n).to_le_bytes());
            for k in 0..n {
                b.extend(k.to_le_bytes());
            }
        }
        s(&mut b, "general.alignment");
        b.extend(4u32.to_le_bytes());
        b.extend(64u32.to_le_bytes());
        for (name, off) in [("x", 0u64), ("y", 64)] {
            s(&mut b, name);
            b.extend(2u32.to_le_bytes());
            b.extend(4u64.to_le_bytes());
            b.extend(2u64.to_le_bytes());
            b.extend(0u32.to_le_bytes());
            b.extend(off.to_le_bytes());
        }
        while !b.len().is_multiple_of(64) {
            b.push(0);
        }
        // x: 8 floats and padding to 64; y: 8 floats.
        b.extend((0..8).flat_map(|i| (i as f32).to_le_bytes()));
        b.extend([0u8; 32]);
        b.extend((0..8).flat_map(|i| (-(i as f32)).to_le_bytes()));
        b
    }

    #[test]
    fn layout() {
        let b = file();
        let lay = read_layout(&MemSource::new(b.clone())).unwrap();
        assert!(lay.bad.is_none(), "{:?}", lay.bad);
        assert_eq!(lay.alignment, 64);
        assert_eq!(lay.kvs.len(), 3);
        assert_eq!(lay.infos[1].shape(), vec![2, 4]);
        let (p, notes) = place(&lay, b.len() as u64, true);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(p[1].range.end, b.len() as u64);
        assert!(p.iter().all(|p| p.status == Status::Complete));
        // Cut in the second tensor.
        let (p, _) = place(&lay, b.len() as u64 - 1, true);
        assert_eq!(p[0].status, Status::Complete);
        assert_eq!(p[1].status, Status::Truncated);
        // Cut anywhere: never a panic.
        for cut in 0..b.len() {
            let src = MemSource::new(b[..cut].to_vec());
            if let Ok(lay) = read_layout(&src) {
                let _ = place(&lay, cut as u64, true);
            }
        }
    }

    #[test]
    fn shard_name_patterns() {
        let n = shard_names("m-00001-of-00003.gguf").unwrap();
        assert_eq!(n[2], "m-00003-of-00003.gguf");
        assert!(shard_names("m-00002-of-00003.gguf").is_none());
        assert!(shard_names("m.gguf").is_none());
    }
}
