//! Flax/JAX checkpoints: the extension types `flax.serialization`'s
//! `msgpack_serialize` writes, and the tensor table made of them.
//!
//! Flax packs a NumPy or JAX array as ext type 1 whose data is itself
//! MessagePack: an array of three values, the shape (an array of integers),
//! the dtype's name as NumPy spells it (`float32`, `bfloat16`, `bool`) and
//! the array's bytes in C order (a bin). A NumPy scalar is ext type 3 with
//! the same layout and an empty shape; a Python complex is ext type 2 whose
//! data is an array `[real, imag]` of floats. Arrays over flax's
//! `MAX_CHUNK_SIZE` (1 GiB) are written as a map `{"__msgpack_chunked_array__":
//! true, "shape": {"0": d0, …}, "chunks": {"0": chunk, …}}` whose chunks are
//! flat arrays of that dtype, each with its own ext header.
//!
//! Tensors are named by the `/`-joined keys leading to them, as
//! `flax.traverse_util.flatten_dict(…, sep="/")` names a state dict (array
//! elements by their index). A chunked array's chunks are never contiguous
//! (each has its own header), so each chunk is its own one-dimensional
//! tensor, named `<path>/chunks/<i>` as the stored map names it.

use super::wire::{Cursor, Head, Kind, Unreadable, skip};
use crate::data::Range;
use crate::extraction::{ExtId, Tree};
use crate::name::escape_str;
use crate::node::Node;
use crate::offer::tensor::{Dtype, Tensor, TimeUnit, numel, shape_text};
use crate::status::{Damage, Status};

/// Ext type of a flax ndarray.
pub(crate) const NDARRAY: i8 = 1;
/// Ext type of a Python complex.
pub(crate) const COMPLEX: i8 = 2;
/// Ext type of a NumPy scalar.
pub(crate) const NPSCALAR: i8 = 3;
/// The key that marks the map of a chunked array.
pub(crate) const CHUNKED: &str = "__msgpack_chunked_array__";

/// Dimensions of an array read at most.
const MAX_DIMS: u64 = 64;
/// Bytes of a dtype name read at most.
const MAX_DTYPE_NAME: u64 = 64;
/// Bytes of a map key read for a tensor name.
const MAX_KEY: u64 = 1024;
/// Tensors listed at most.
const MAX_TENSORS: usize = 1_000_000;
/// Containers a path is followed through; deeper values are skipped with
/// a counter (msgpack's own unpacker refuses more than 1024 levels).
pub(crate) const MAX_DEPTH: usize = 1024;

/// A NumPy dtype name (`dtype.name`, as flax stores it) as a [`Dtype`].
pub(crate) fn numpy_dtype(name: &str) -> Option<Dtype> {
    // `bytes40`, `str96`, `void32`: the size in bits, whole bytes (code
    // points of 4 bytes for `str`) only.
    let size = |p: &str, per: u32| {
        let bits = name.strip_prefix(p)?.parse::<u32>().ok()?;
        (bits % per == 0).then_some(bits / per)
    };
    let unit =
        |p: &str| TimeUnit::parse(name.strip_prefix(p)?.strip_prefix('[')?.strip_suffix(']')?);
    Some(match name {
        // Where NumPy's spelling means another type than torch's.
        "float" | "double" => Dtype::F64,
        "int" | "long" => Dtype::I64,
        "float128" | "longdouble" => Dtype::F128,
        "complex256" | "clongdouble" => Dtype::C256,
        "float4_e2m1fn" => Dtype::F4,
        "float6_e2m3fn" => Dtype::F6_E2M3,
        "float6_e3m2fn" => Dtype::F6_E3M2,
        // torch's own names, which NumPy does not know.
        "cfloat" | "cdouble" | "chalf" | "complex32" | "qint8" | "quint8" | "qint32"
        | "quint4x2" | "quint2x4" | "float4_e2m1fn_x2" | "bits8" | "bits1x8" | "bits2x4"
        | "bits4x2" | "bits16" => return None,
        _ if name.starts_with("datetime64") => Dtype::Datetime(unit("datetime64")?),
        _ if name.starts_with("timedelta64") => Dtype::Timedelta(unit("timedelta64")?),
        _ if name.starts_with("bytes") => Dtype::Bytes(size("bytes", 8)?),
        _ if name.starts_with("str") => Dtype::Unicode(size("str", 32)?),
        _ if name.starts_with("void") => Dtype::Void(size("void", 8)?),
        _ => crate::parsers::ml::torch::torch_dtype(name)?,
    })
}

/// A flax array (ext 1 or 3): where its parts are.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Array {
    /// Its dimensions.
    pub shape: Vec<u64>,
    /// The shape's bytes.
    pub shape_range: Range,
    /// The dtype's name as stored (escaped).
    pub dtype_name: String,
    /// The dtype name's bytes.
    pub dtype_range: Range,
    /// The dtype, when known.
    pub dtype: Option<Dtype>,
    /// The array's bytes (the bin's payload).
    pub data: Range,
}

impl Array {
    /// `float32 [2, 3]`.
    pub(crate) fn summary(&self) -> String {
        format!("{} {}", self.dtype_name, shape_text(&self.shape))
    }

    /// What is wrong with the array's bytes when `avail` bytes are there:
    /// cut off, or not as many as shape and dtype make.
    pub(crate) fn damage(&self, avail: u64) -> Option<Damage> {
        // A size that overflows is damage, never "no size to check".
        let Some(n) = numel(&self.shape) else {
            return Some(Damage::corrupt(
                self.shape_range,
                crate::offer::tensor::overflow_text(&self.shape),
            ));
        };
        if let Some(d) = self.dtype
            && n.checked_mul(d.bits()).is_none()
        {
            return Some(Damage::corrupt(
                self.shape_range,
                format!(
                    "the byte size of {} {} overflows",
                    self.dtype_name,
                    shape_text(&self.shape)
                ),
            ));
        }
        let want = self.dtype.and_then(|d| d.bytes_for(n));
        if let Some(want) = want
            && want != self.data.len()
        {
            return Some(Damage::corrupt(
                self.data,
                format!(
                    "{} {} takes {want} bytes, the data holds {}",
                    self.dtype_name,
                    shape_text(&self.shape),
                    self.data.len()
                ),
            ));
        }
        (self.data.end > avail).then(|| {
            Damage::truncated(
                Range::new(avail, avail),
                format!(
                    "{} of {} bytes of the array are there",
                    avail.saturating_sub(self.data.start),
                    self.data.len()
                ),
            )
        })
    }
}

fn corrupt(at: u64, reason: &str) -> Unreadable {
    Unreadable {
        at,
        truncated: false,
        reason: reason.into(),
    }
}

/// Reads the `(shape, dtype, data)` triple in an ndarray ext's payload.
/// The data's bytes need not be there (a cut file): only headers are read.
pub(crate) fn read_array(cur: &mut Cursor, payload: Range) -> Result<Array, Unreadable> {
    let end = payload.end;
    let t = cur.head(payload.start, end)?;
    if t.kind != Kind::Array || t.count != 3 {
        return Err(corrupt(t.at, "a flax array is not (shape, dtype, data)"));
    }
    let s = cur.head(t.body(), end)?;
    if s.kind != Kind::Array || s.count > MAX_DIMS {
        return Err(corrupt(s.at, "a flax array's shape is not a short array"));
    }
    let mut shape = Vec::with_capacity(s.count as usize);
    let mut pos = s.body();
    for _ in 0..s.count {
        let d = cur.head(pos, end)?;
        let Kind::UInt(v) = d.kind else {
            return Err(corrupt(d.at, "a dimension is not a non-negative integer"));
        };
        shape.push(v);
        pos = d.body();
    }
    let shape_range = Range::new(s.at, pos);
    let n = cur.head(pos, end)?;
    if !matches!(n.kind, Kind::Str | Kind::Bin) || n.len > MAX_DTYPE_NAME {
        return Err(corrupt(n.at, "a flax array's dtype is not a short string"));
    }
    let raw = cur.get(n.body(), n.len as usize);
    if raw.len() as u64 != n.len {
        return Err(Unreadable {
            at: n.at,
            truncated: true,
            reason: "the bytes end inside a dtype name".into(),
        });
    }
    let text = String::from_utf8_lossy(raw).into_owned();
    let dtype_range = Range::new(n.at, n.body() + n.len);
    let d = cur.head(dtype_range.end, end)?;
    if !matches!(d.kind, Kind::Bin | Kind::Str) {
        return Err(corrupt(d.at, "a flax array's data is not a binary"));
    }
    Ok(Array {
        shape,
        shape_range,
        dtype: numpy_dtype(&text),
        dtype_name: escape_str(&text),
        dtype_range,
        data: Range::new(d.body(), d.body() + d.len),
    })
}

/// A flax complex (ext 2) as `(re+imj)`.
pub(crate) fn read_complex(cur: &mut Cursor, payload: Range) -> Option<String> {
    let t = cur.head(payload.start, payload.end).ok()?;
    if t.kind != Kind::Array || t.count != 2 {
        return None;
    }
    let num = |k: Kind| match k {
        Kind::F64(v) => Some(v),
        Kind::F32(v) => Some(f64::from(v)),
        Kind::UInt(v) => Some(v as f64),
        Kind::Int(v) => Some(v as f64),
        _ => None,
    };
    let re = cur.head(t.body(), payload.end).ok()?;
    let im = cur.head(re.body(), payload.end).ok()?;
    let (r, i) = (num(re.kind)?, num(im.kind)?);
    let sign = if i.is_sign_negative() { '-' } else { '+' };
    Some(format!("({r}{sign}{}j)", i.abs()))
}

/// The payload of an ext value.
fn payload(h: &Head) -> Range {
    Range::new(h.body(), h.body() + h.len)
}

/// Kind and text of a node for a flax ext (1, 2, 3), `None` for others or
/// when the payload is not flax's.
pub(crate) fn ext_summary(cur: &mut Cursor, h: &Head) -> Option<(&'static str, String)> {
    match h.kind {
        Kind::Ext(NDARRAY) => {
            let a = read_array(cur, payload(h)).ok()?;
            Some(("ndarray", a.summary()))
        }
        Kind::Ext(NPSCALAR) => {
            let a = read_array(cur, payload(h)).ok()?;
            Some(("npscalar", format!("{} scalar", a.dtype_name)))
        }
        Kind::Ext(COMPLEX) => Some(("complex", read_complex(cur, payload(h))?)),
        _ => None,
    }
}

/// The children of an ndarray or npscalar node whose ext header is `h`:
/// its shape, dtype and data.
pub(crate) fn array_nodes(cur: &mut Cursor, h: &Head) -> Vec<Node> {
    let Ok(a) = read_array(cur, payload(h)) else {
        return Vec::new();
    };
    let avail = cur.source().available();
    let mut data = Node::new("data", "data", a.data).text(format!("{} bytes", a.data.len()));
    if let Some(d) = a.damage(avail) {
        data = data.damaged(d);
    }
    let dtype = match a.dtype {
        Some(d) if d.name() != a.dtype_name => format!("{} ({})", a.dtype_name, d.name()),
        Some(_) => a.dtype_name.clone(),
        None => format!("{} (unknown)", a.dtype_name),
    };
    vec![
        Node::new("shape", "shape", a.shape_range).text(shape_text(&a.shape)),
        Node::new("dtype", "dtype", a.dtype_range).text(dtype),
        data,
    ]
}

/// A map key as a path component: strings as they are, numbers written
/// out, anything else by its kind.
pub(crate) fn key_text(cur: &mut Cursor, h: &Head) -> String {
    match h.kind {
        Kind::Str | Kind::Bin => {
            let raw = cur.get(h.body(), h.len.min(MAX_KEY) as usize);
            let mut s = String::from_utf8_lossy(raw).into_owned();
            if h.len > MAX_KEY {
                s.push('…');
            }
            s
        }
        Kind::UInt(v) => v.to_string(),
        Kind::Int(v) => v.to_string(),
        Kind::Bool(b) => if b { "True" } else { "False" }.into(),
        Kind::Nil => "None".into(),
        Kind::F32(v) => v.to_string(),
        Kind::F64(v) => v.to_string(),
        k => format!("({})", k.name()),
    }
}

/// Bytes of a tensor's name kept whole: deeper paths keep their start
/// and end around the offset of their data, which makes them unique. Each
/// tensor owns its name, so without this a file of deep maps with long
/// keys and many tiny arrays makes names (and `tensors --json`) thousands
/// of times its size.
const MAX_NAME: usize = 4096;

/// Bytes of names a file's tensors may take in all: a fixed allowance and
/// this many times the file's size. Past it, names keep 64 bytes at each
/// end: a file of many tiny arrays under long paths (each name a few KiB
/// for an array of ten bytes) makes names a bounded multiple of its size.
const NAME_BYTES_PER_BYTE: u64 = 8;
const NAME_ALLOWANCE: u64 = 1 << 20;

/// `path` as a tensor's name, shortened past [`MAX_NAME`] bytes, or past
/// 128 once `budget` (bytes of names left) is spent.
fn tensor_name(path: &str, data_at: u64, budget: &mut u64) -> String {
    let most = if *budget >= path.len().min(MAX_NAME) as u64 {
        MAX_NAME
    } else {
        128
    };
    let name = if path.len() <= most {
        path.to_string()
    } else {
        let mut head = most / 4;
        while !path.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = path.len() - most / 2;
        while !path.is_char_boundary(tail) {
            tail += 1;
        }
        format!(
            "{}…({} bytes, data at {data_at:#x})…{}",
            &path[..head],
            tail - head,
            &path[tail..]
        )
    };
    *budget = budget.saturating_sub(name.len() as u64);
    name
}

/// One container being walked for paths.
struct Frame {
    /// Values left in it.
    left: u64,
    /// Whether it is a map (keys at even positions).
    map: bool,
    /// Values read from it.
    read: u64,
    /// Length of the path before it.
    path_len: usize,
    /// The key of the value about to be read (maps).
    key: String,
}

/// Every flax array of a MessagePack extraction as a tensor, named by its
/// path (see the module docs).
pub(crate) fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let data = e.data();
    let src = &*data;
    let avail = src.available();
    let mut cur = Cursor::new(src);
    let mut out = Vec::new();
    let mut pos = 0u64;
    let mut top = 0u64;
    let mut budget = avail
        .saturating_mul(NAME_BYTES_PER_BYTE)
        .saturating_add(NAME_ALLOWANCE);
    while pos < avail && out.len() < MAX_TENSORS {
        let prefix = if top == 0 {
            String::new()
        } else {
            format!("[{top}]")
        };
        match walk(&mut cur, pos, &prefix, ext, &mut out, &mut budget) {
            Some(end) if end > pos => pos = end,
            _ => break,
        }
        top += 1;
    }
    out
}

/// Walks the value at `pos`, adding its arrays' tensors to `out`; where it
/// ends, `None` when its bytes end or are wrong first.
fn walk(
    cur: &mut Cursor,
    mut pos: u64,
    prefix: &str,
    ext: ExtId,
    out: &mut Vec<Tensor>,
    budget: &mut u64,
) -> Option<u64> {
    let avail = cur.source().available();
    let mut path = prefix.to_string();
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        if let Some(f) = stack.last()
            && f.left == 0
        {
            path.truncate(f.path_len);
            stack.pop();
            if stack.is_empty() {
                return Some(pos);
            }
            continue;
        }
        if out.len() >= MAX_TENSORS {
            return None;
        }
        // Nothing is checked against the end here: a cut file still lists
        // the arrays whose headers are there.
        let h = cur.head(pos, u64::MAX).ok()?;
        let name_len = path.len();
        if let Some(f) = stack.last_mut() {
            f.left -= 1;
            f.read += 1;
            if f.map && f.read % 2 == 1 {
                f.key = key_text(cur, &h);
                pos = skip(cur, pos, u64::MAX).ok()?;
                continue;
            }
            let comp = if f.map {
                std::mem::take(&mut f.key)
            } else {
                (f.read - 1).to_string()
            };
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(&escape_str(&comp));
        }
        match h.kind {
            Kind::Map | Kind::Array if h.count > 0 && stack.len() < MAX_DEPTH => {
                stack.push(Frame {
                    left: h.count,
                    map: h.kind == Kind::Map,
                    read: 0,
                    path_len: name_len,
                    key: String::new(),
                });
                pos = h.body();
                continue;
            }
            Kind::Ext(NDARRAY | NPSCALAR) => {
                if let Ok(a) = read_array(cur, payload(&h))
                    && let Some(dtype) = a.dtype
                {
                    let name = if path.is_empty() {
                        "value".to_string()
                    } else {
                        tensor_name(&path, a.data.start, budget)
                    };
                    let (status, detail) = match a.damage(avail) {
                        Some(d) => (d.status, Some(d.reason)),
                        None => (Status::Complete, None),
                    };
                    out.push(Tensor {
                        name,
                        dtype,
                        shape: a.shape,
                        stride: None,
                        storage_offset: None,
                        source: ext,
                        offset: a.data.start,
                        length: a.data.len(),
                        status,
                        detail,
                        big_endian: false,
                        encoding: crate::offer::tensor::Encoding::Raw,
                    });
                }
                pos = h.body().checked_add(h.len)?;
            }
            Kind::Map | Kind::Array => pos = skip(cur, pos, u64::MAX).ok()?,
            _ => pos = h.body().checked_add(h.len)?,
        }
        path.truncate(name_len);
        if stack.is_empty() {
            return Some(pos);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_dtype_names() {
        for (name, d) in [
            ("float32", Dtype::F32),
            ("bfloat16", Dtype::BF16),
            ("bool", Dtype::BOOL),
            ("int8", Dtype::I8),
            ("complex64", Dtype::C64),
            ("float8_e4m3fn", Dtype::F8_E4M3),
            ("float4_e2m1fn", Dtype::F4),
            ("float128", Dtype::F128),
            ("float", Dtype::F64),
            ("int", Dtype::I64),
            ("bytes40", Dtype::Bytes(5)),
            ("str96", Dtype::Unicode(3)),
            ("void32", Dtype::Void(4)),
        ] {
            assert_eq!(numpy_dtype(name), Some(d), "{name}");
        }
        assert_eq!(
            numpy_dtype("datetime64[10ms]").map(|d| d.name().to_string()),
            Some("M8[10ms]".into())
        );
        for bad in ["cfloat", "object", "", "bytes", "str7", "datetime64[x]"] {
            assert_eq!(numpy_dtype(bad), None, "{bad}");
        }
    }
}
