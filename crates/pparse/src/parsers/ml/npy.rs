//! NumPy arrays: `.npy` files, and through the zip parser the members of
//! `.npz` archives.
//!
//! A `.npy` file is the magic `\x93NUMPY`, a version (1.0, 2.0 or 3.0), the
//! length of a header (u16 for 1.0, u32 after), the header — a Python dict
//! literal with the keys `descr`, `fortran_order` and `shape`, latin-1 (UTF-8
//! in 3.0), padded with spaces and a newline — and the array's bytes:
//! `prod(shape) × itemsize` of them, or for object arrays a pickle that runs
//! to the end.
//!
//! The header is read by a small literal parser with a depth limit, never
//! evaluated. Every dtype NumPy writes maps to a [`Dtype`]; structured dtypes
//! are records ([`Dtype::Void`]) whose fields are listed as nodes. Fortran
//! order becomes a stride, so values are shown as NumPy shows them. An
//! object array's pickle is a child extraction, read by the pickle parser's
//! VM, which never runs code.
//!
//! Arrays written one after another to one file handle (several
//! `numpy.save` calls, read back by as many `numpy.load` calls) are all
//! listed; bytes after the last that are not an array are kept as
//! `trailing`, where the carver looks for other formats.
//!
//! Tensors are named as `numpy.load` names the members of an `.npz`: the
//! extraction's name without `.npy`, then `[1]`, `[2]`… for the arrays after
//! the first.

use crate::data::{Data, Range, Source, read_exact_at};
use crate::extraction::{EntryKind, ExtId, Tree};
use crate::name::{Name, escape_str};
use crate::node::{Node, Value};
use crate::offer::tensor::{Dtype, Tensor, TimeUnit, numel, shape_text};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::status::{Damage, Status};

/// NumPy `.npy` arrays.
pub(crate) static FORMAT: Format = Format {
    name: "npy",
    extent: Some(extent),
    sniff,
    parse: |data, _| Box::new(NpyParser::new(data.clone())),
    load,
    offers: Offers {
        tensors: Some(TensorOffer::List(tensors)),
        ..Offers::NONE
    },
};

/// The first six bytes of every `.npy` array.
pub(crate) const MAGIC: &[u8] = b"\x93NUMPY";

/// Longest header read. NumPy itself refuses more than 10,000 bytes unless
/// told otherwise; a structured dtype with [`MAX_FIELDS`] fields takes a
/// few hundred KB.
const MAX_HEADER: u64 = 4 << 20;

/// Values in a header literal read at most: each costs about 60 bytes, so
/// a header of 4 MiB of `0,` costs 16 MB, not the 2 GB one value object
/// per item would (a 65 KB deflated `.npz` member can hold such a header).
const MAX_VALUES: usize = 1 << 18;

/// Nesting of the header literal (structured dtypes within structured
/// dtypes) read at most.
const MAX_DEPTH: usize = 32;

/// Arrays in one file listed at most (each costs a few nodes).
const MAX_ARRAYS: usize = 100_000;

/// Fields of a structured dtype listed as nodes at most.
const MAX_FIELDS: usize = 10_000;

fn sniff(s: &Sniff) -> bool {
    s.head.starts_with(MAGIC)
}

// ---------------------------------------------------------------------------
// the header literal
// ---------------------------------------------------------------------------

/// A Python literal from a header, with where it is.
#[derive(Clone, Debug, PartialEq)]
struct Lit {
    v: LitV,
    /// Offsets in the header text (add the header's start for the file).
    at: (usize, usize),
}

#[derive(Clone, Debug, PartialEq)]
enum LitV {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    /// A list or a tuple (NumPy writes shapes as tuples, fields as lists
    /// of tuples; nothing here tells them apart).
    Seq(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

/// Parses the Python literal of a header: dicts, lists, tuples, strings,
/// integers (with Python 2's `L`), `True`, `False`, `None`.
struct LitParser<'a> {
    s: &'a [u8],
    pos: usize,
    utf8: bool,
    /// Values read so far.
    values: usize,
}

impl LitParser<'_> {
    fn ws(&mut self) {
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_whitespace())
        {
            self.pos += 1;
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, (usize, String)> {
        Err((self.pos, what.to_string()))
    }

    fn value(&mut self, depth: usize) -> Result<Lit, (usize, String)> {
        if depth > MAX_DEPTH {
            return self.fail("nested too deeply");
        }
        self.values += 1;
        if self.values > MAX_VALUES {
            return self.fail(&format!(
                "more than {MAX_VALUES} values in the header, more than pparse reads"
            ));
        }
        self.ws();
        let start = self.pos;
        let v = match self.s.get(self.pos) {
            None => return self.fail("the header ends inside a value"),
            Some(b'{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.s.get(self.pos) == Some(&b'}') {
                        self.pos += 1;
                        break;
                    }
                    let k = self.value(depth + 1)?;
                    self.ws();
                    if self.s.get(self.pos) != Some(&b':') {
                        return self.fail("':' expected after a key");
                    }
                    self.pos += 1;
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    if !self.sep(b'}')? {
                        break;
                    }
                }
                LitV::Dict(items)
            }
            Some(&open @ (b'(' | b'[')) => {
                let close = if open == b'(' { b')' } else { b']' };
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.s.get(self.pos) == Some(&close) {
                        self.pos += 1;
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.sep(close)? {
                        break;
                    }
                }
                LitV::Seq(items)
            }
            Some(&q @ (b'\'' | b'"')) => LitV::Str(self.string(q)?),
            Some(c) if c.is_ascii_digit() || *c == b'-' || *c == b'+' => {
                let neg = *c == b'-';
                if !c.is_ascii_digit() {
                    self.pos += 1;
                }
                let from = self.pos;
                while self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.s[from..self.pos]).unwrap_or("");
                let Ok(n) = digits.parse::<i128>() else {
                    return self.fail("an integer out of range");
                };
                if matches!(self.s.get(self.pos), Some(b'L' | b'l')) {
                    self.pos += 1;
                }
                LitV::Int(if neg { -n } else { n })
            }
            Some(_) => {
                let rest = &self.s[self.pos..];
                let (v, n) = if rest.starts_with(b"True") {
                    (LitV::Bool(true), 4)
                } else if rest.starts_with(b"False") {
                    (LitV::Bool(false), 5)
                } else if rest.starts_with(b"None") {
                    (LitV::None, 4)
                } else {
                    return self.fail("not a Python literal");
                };
                self.pos += n;
                v
            }
        };
        Ok(Lit {
            v,
            at: (start, self.pos),
        })
    }

    /// After an item: true when another may follow, false at `close`.
    fn sep(&mut self, close: u8) -> Result<bool, (usize, String)> {
        self.ws();
        match self.s.get(self.pos) {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(&c) if c == close => {
                self.pos += 1;
                Ok(false)
            }
            None => self.fail("the header ends inside a value"),
            Some(_) => self.fail("',' expected"),
        }
    }

    fn string(&mut self, q: u8) -> Result<String, (usize, String)> {
        self.pos += 1;
        let mut raw: Vec<u8> = Vec::new();
        let mut out = String::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return self.fail("the header ends inside a string");
            };
            self.pos += 1;
            if c == q {
                break;
            }
            if c != b'\\' {
                raw.push(c);
                continue;
            }
            self.flush(&mut raw, &mut out);
            let Some(&e) = self.s.get(self.pos) else {
                return self.fail("the header ends inside a string");
            };
            self.pos += 1;
            let hex = |p: &mut Self, n: usize| -> Result<char, (usize, String)> {
                let h = p.s.get(p.pos..p.pos + n).unwrap_or(&[]);
                let code = std::str::from_utf8(h)
                    .ok()
                    .filter(|h| h.len() == n)
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32);
                p.pos += n;
                code.ok_or((p.pos, "a bad escape in a string".to_string()))
            };
            match e {
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'0' => out.push('\0'),
                b'x' => out.push(hex(self, 2)?),
                b'u' => out.push(hex(self, 4)?),
                b'U' => out.push(hex(self, 8)?),
                b'\\' | b'\'' | b'"' => out.push(char::from(e)),
                _ => {
                    out.push('\\');
                    raw.push(e);
                }
            }
        }
        self.flush(&mut raw, &mut out);
        Ok(out)
    }

    /// Decodes bytes of a string: UTF-8 in format 3.0, latin-1 before.
    fn flush(&self, raw: &mut Vec<u8>, out: &mut String) {
        if self.utf8 {
            out.push_str(&String::from_utf8_lossy(raw));
        } else {
            out.extend(raw.iter().map(|&b| char::from(b)));
        }
        raw.clear();
    }
}

// ---------------------------------------------------------------------------
// dtypes
// ---------------------------------------------------------------------------

/// What an array holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Elem {
    /// One element type, big-endian or not.
    Plain(Dtype, bool),
    /// Records of `size` bytes with these fields.
    Record(u64, Vec<Field>),
    /// Python objects, pickled.
    Object,
}

/// One field of a structured dtype.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Field {
    /// Its name (empty for NumPy's padding fields), its title if any.
    pub name: String,
    /// Its dtype as the header writes it (a nested record as `{…}`).
    pub descr: String,
    /// Bytes from the start of the record.
    pub offset: u64,
    /// Bytes it takes, its sub-array shape included.
    pub size: u64,
    /// Its sub-array shape (empty for a scalar field).
    pub shape: Vec<u64>,
}

impl Elem {
    /// Bytes per element (records: per record); `None` for objects.
    pub(crate) fn itemsize(&self) -> Option<u64> {
        match self {
            Elem::Plain(d, _) => d.bytes_for(1),
            Elem::Record(n, _) => Some(*n),
            Elem::Object => None,
        }
    }

    /// The dtype tensors of this element have.
    fn dtype(&self) -> Option<(Dtype, bool)> {
        match self {
            Elem::Plain(d, be) => Some((*d, *be)),
            Elem::Record(n, _) => Some((Dtype::Void(u32::try_from(*n).ok()?), false)),
            Elem::Object => None,
        }
    }
}

/// A descr string (`<f4`, `|S5`, `>M8[ns]`) as a dtype.
pub(crate) fn parse_descr(s: &str) -> Result<Elem, String> {
    let bad = || format!("unknown dtype {:?}", shorten(s));
    let (order, rest) = match s.as_bytes().first() {
        Some(b'<' | b'=' | b'|') => ('<', &s[1..]),
        Some(b'>') => ('>', &s[1..]),
        _ => ('<', s),
    };
    let be = order == '>';
    let mut chars = rest.chars();
    let kind = chars.next().ok_or_else(bad)?;
    let tail = chars.as_str();
    if kind == 'O' {
        return Ok(Elem::Object);
    }
    if kind == 'M' || kind == 'm' {
        let unit = tail
            .strip_prefix("8[")
            .and_then(|u| u.strip_suffix(']'))
            .and_then(TimeUnit::parse)
            .ok_or_else(bad)?;
        let d = if kind == 'M' {
            Dtype::Datetime(unit)
        } else {
            Dtype::Timedelta(unit)
        };
        return Ok(Elem::Plain(d, be));
    }
    if kind == '?' && tail.is_empty() {
        return Ok(Elem::Plain(Dtype::BOOL, false));
    }
    let n: u32 = tail.parse().map_err(|_| bad())?;
    let d = match (kind, n) {
        ('b', 1) => Dtype::BOOL,
        ('i', 1) => Dtype::I8,
        ('i', 2) => Dtype::I16,
        ('i', 4) => Dtype::I32,
        ('i', 8) => Dtype::I64,
        ('u', 1) => Dtype::U8,
        ('u', 2) => Dtype::U16,
        ('u', 4) => Dtype::U32,
        ('u', 8) => Dtype::U64,
        ('f', 2) => Dtype::F16,
        ('f', 4) => Dtype::F32,
        ('f', 8) => Dtype::F64,
        ('f', 16) => Dtype::F128,
        ('c', 8) => Dtype::C64,
        ('c', 16) => Dtype::C128,
        ('c', 32) => Dtype::C256,
        ('S' | 'a', n) => Dtype::Bytes(n),
        ('U', n) => Dtype::Unicode(n),
        ('V', n) => Dtype::Void(n),
        _ => return Err(bad()),
    };
    Ok(Elem::Plain(d, be))
}

/// A shape tuple as dimensions.
fn shape_of(l: &Lit) -> Result<Vec<u64>, String> {
    let LitV::Seq(items) = &l.v else {
        return Err("the shape is not a tuple".into());
    };
    items
        .iter()
        .map(|d| match d.v {
            LitV::Int(n) => u64::try_from(n).map_err(|_| format!("a dimension of {n}")),
            _ => Err("a dimension is not an integer".into()),
        })
        .collect()
}

/// A descr (a string or a list of fields) as an element.
fn elem_of(l: &Lit, depth: usize) -> Result<Elem, String> {
    if depth > MAX_DEPTH {
        return Err("structured dtype nested too deeply".into());
    }
    match &l.v {
        LitV::Str(s) => parse_descr(s),
        LitV::Seq(items) => {
            let mut fields = Vec::new();
            let mut offset = 0u64;
            let mut object = false;
            for item in items {
                let LitV::Seq(parts) = &item.v else {
                    return Err("a field is not a tuple".into());
                };
                let (name, descr, shape) = match parts.as_slice() {
                    [n, d] => (n, d, Vec::new()),
                    [n, d, s] => (n, d, shape_of(s)?),
                    _ => return Err("a field is not (name, dtype[, shape])".into()),
                };
                let name = match &name.v {
                    LitV::Str(s) => s.clone(),
                    // (title, name)
                    LitV::Seq(tn) => match tn.as_slice() {
                        [t, n] => match (&t.v, &n.v) {
                            (LitV::Str(t), LitV::Str(n)) => format!("{n} ({t})"),
                            _ => return Err("a field's title is not a string".into()),
                        },
                        _ => return Err("a field's name is not a string".into()),
                    },
                    _ => return Err("a field's name is not a string".into()),
                };
                let inner = elem_of(descr, depth + 1)?;
                let text = match &descr.v {
                    LitV::Str(s) => s.clone(),
                    _ => "{…}".into(),
                };
                let Some(item_size) = inner.itemsize() else {
                    object = true;
                    continue;
                };
                let size = numel(&shape)
                    .and_then(|n| n.checked_mul(item_size))
                    .ok_or_else(|| format!("field {name:?} is too large"))?;
                if fields.len() < MAX_FIELDS {
                    fields.push(Field {
                        name,
                        descr: text,
                        offset,
                        size,
                        shape,
                    });
                }
                offset = offset
                    .checked_add(size)
                    .ok_or("the record size overflows")?;
            }
            if object {
                return Ok(Elem::Object);
            }
            Ok(Elem::Record(offset, fields))
        }
        _ => Err("the descr is neither a string nor a list of fields".into()),
    }
}

fn shorten(s: &str) -> String {
    crate::parsers::serial::json::shorten(s, 60)
}

// ---------------------------------------------------------------------------
// one array
// ---------------------------------------------------------------------------

/// One array's header, read.
#[derive(Clone, Debug)]
pub(crate) struct Header {
    /// Where its magic is.
    pub start: u64,
    /// Format version (major, minor).
    pub version: (u8, u8),
    /// The header text's bytes (after the length field).
    pub text: Range,
    /// What it holds.
    pub elem: Elem,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran: bool,
    /// Dimensions, outermost first.
    pub shape: Vec<u64>,
    /// Where `descr`, `fortran_order` and `shape` sit (their values).
    keys: Vec<(String, Range)>,
}

impl Header {
    /// Where the array's bytes start.
    pub(crate) fn data_start(&self) -> u64 {
        self.text.end
    }

    /// The array's bytes: `None` when their size overflows, to the end of
    /// the bytes (`end`) for objects.
    pub(crate) fn data(&self, end: u64) -> Option<Range> {
        let start = self.data_start();
        match self.elem.itemsize() {
            None => Some(Range::new(start, end.max(start))),
            Some(size) => {
                let n = numel(&self.shape)?.checked_mul(size)?;
                Some(Range::new(start, start.checked_add(n)?))
            }
        }
    }

    /// Strides in elements for Fortran order; `None` for C order.
    fn stride(&self) -> Option<Vec<u64>> {
        if !self.fortran || self.shape.len() < 2 {
            return None;
        }
        let mut s = Vec::with_capacity(self.shape.len());
        let mut acc = 1u64;
        for &d in &self.shape {
            s.push(acc);
            acc = acc.saturating_mul(d);
        }
        Some(s)
    }

    /// What the data node says: dtype, shape, order, size.
    fn summary(&self, data: Range) -> String {
        let what = match &self.elem {
            Elem::Plain(d, be) => {
                let order = if *be { " big-endian" } else { "" };
                format!("{}{order}", d.name())
            }
            Elem::Record(n, f) => format!("records of {n} bytes, {} fields", f.len()),
            Elem::Object => "Python objects (a pickle)".into(),
        };
        let order = if self.fortran { ", Fortran order" } else { "" };
        if matches!(self.elem, Elem::Object) {
            return format!("{what}, {} bytes", data.len());
        }
        format!(
            "{what} {}{order}, {} bytes",
            shape_text(&self.shape),
            data.len()
        )
    }
}

/// Why a header could not be read: truncated (the bytes end) or corrupt.
#[derive(Debug)]
pub(crate) struct HeaderError {
    /// The status and where and why.
    pub damage: Damage,
    /// How far the header's fields were read (magic, version, length).
    pub read: u64,
}

/// Reads the array header at `at`.
pub(crate) fn read_header(src: &dyn Source, at: u64) -> Result<Header, HeaderError> {
    let avail = src.available();
    let cut = |range: Range, why: String, read: u64| HeaderError {
        damage: Damage::truncated(range, why),
        read,
    };
    let corrupt = |range: Range, why: String, read: u64| HeaderError {
        damage: Damage::corrupt(range, why),
        read,
    };
    let mut fixed = [0u8; 12];
    let n = (avail.saturating_sub(at)).min(12) as usize;
    if !matches!(read_exact_at(src, at, &mut fixed[..n]), Ok(true)) {
        return Err(corrupt(Range::new(at, at), "unreadable".into(), 0));
    }
    let have = &fixed[..n];
    let magic_have = have.len().min(6);
    if have[..magic_have] != MAGIC[..magic_have] {
        return Err(corrupt(
            Range::new(at, at + magic_have as u64),
            "not the magic \\x93NUMPY".into(),
            0,
        ));
    }
    if have.len() < 8 {
        return Err(cut(
            Range::new(avail, avail),
            "the file ends in the array's magic and version".into(),
            have.len() as u64,
        ));
    }
    let version = (have[6], have[7]);
    let len_bytes: u64 = match version.0 {
        1 => 2,
        2 | 3 => 4,
        _ => {
            return Err(corrupt(
                Range::new(at + 6, at + 8),
                format!("unknown format version {}.{}", version.0, version.1),
                6,
            ));
        }
    };
    let text_start = at + 8 + len_bytes;
    if (have.len() as u64) < 8 + len_bytes {
        return Err(cut(
            Range::new(avail, avail),
            "the file ends in the header's length".into(),
            8,
        ));
    }
    let hlen = if len_bytes == 2 {
        u64::from(u16::from_le_bytes([have[8], have[9]]))
    } else {
        u64::from(u32::from_le_bytes([have[8], have[9], have[10], have[11]]))
    };
    let read = 8 + len_bytes;
    if hlen > MAX_HEADER {
        return Err(corrupt(
            Range::new(at + 8, text_start),
            format!("a header of {hlen} bytes, more than pparse reads ({MAX_HEADER})"),
            read,
        ));
    }
    let text = Range::new(text_start, text_start + hlen);
    if text.end > avail {
        return Err(cut(
            Range::new(avail, avail),
            format!(
                "the header is cut off: {} of its {hlen} bytes are there",
                avail.saturating_sub(text_start)
            ),
            read,
        ));
    }
    let mut buf = vec![0u8; hlen as usize];
    if !matches!(read_exact_at(src, text_start, &mut buf), Ok(true)) {
        return Err(corrupt(text, "the header is unreadable".into(), read));
    }
    let mut p = LitParser {
        s: &buf,
        pos: 0,
        utf8: version.0 >= 3,
        values: 0,
    };
    let bad_at = |pos: usize, why: String| HeaderError {
        damage: Damage::corrupt(
            Range::new(text_start + pos as u64, text_start + pos as u64),
            format!("header: {why} at {:#x}", text_start + pos as u64),
        ),
        read,
    };
    let dict = p.value(0).map_err(|(pos, why)| bad_at(pos, why))?;
    let LitV::Dict(items) = dict.v else {
        return Err(bad_at(0, "not a dict".into()));
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    let mut keys = Vec::new();
    for (k, v) in &items {
        let LitV::Str(key) = &k.v else {
            return Err(bad_at(k.at.0, "a key is not a string".into()));
        };
        let r = Range::new(text_start + v.at.0 as u64, text_start + v.at.1 as u64);
        keys.push((key.clone(), r));
        match key.as_str() {
            "descr" => descr = Some(v),
            "fortran_order" => fortran = Some(v),
            "shape" => shape = Some(v),
            _ => {}
        }
    }
    let (Some(descr), Some(fortran), Some(shape)) = (descr, fortran, shape) else {
        return Err(bad_at(
            0,
            "the header lacks one of descr, fortran_order, shape".into(),
        ));
    };
    let elem = elem_of(descr, 0).map_err(|why| bad_at(descr.at.0, why))?;
    let LitV::Bool(fortran) = fortran.v else {
        return Err(bad_at(fortran.at.0, "fortran_order is not a bool".into()));
    };
    let shape = shape_of(shape).map_err(|why| bad_at(shape.at.0, why))?;
    Ok(Header {
        start: at,
        version,
        text,
        elem,
        fortran,
        shape,
        keys,
    })
}

/// How far an array starting at 0 of `data` reaches: its header and its
/// bytes (object arrays: to the end).
fn extent(data: &Data) -> Option<u64> {
    let src = &**data;
    let h = read_header(src, 0).ok()?;
    h.data(src.available()).map(|r| r.end)
}

// ---------------------------------------------------------------------------
// the parser
// ---------------------------------------------------------------------------

struct NpyParser {
    data: Data,
    /// Where the next array starts.
    at: u64,
    /// Arrays read so far.
    index: usize,
}

impl NpyParser {
    fn new(data: Data) -> NpyParser {
        NpyParser {
            data,
            at: 0,
            index: 0,
        }
    }
}

/// The tensor name of array `index` of extraction `name`.
fn array_name(name: &str, index: usize) -> String {
    let base = name.strip_suffix(".npy").unwrap_or(name);
    if index == 0 {
        base.to_string()
    } else {
        format!("{base}[{index}]")
    }
}

/// The nodes of one array: its header fields and its data.
fn array_nodes(h: &Header, data: Range, avail: u64, fin: bool) -> Vec<Node> {
    let at = h.start;
    let mut out = vec![
        Node::new("magic", "magic", Range::new(at, at + 6)).value(Value::Bytes(MAGIC.into())),
        Node::new("version", "version", Range::new(at + 6, at + 8))
            .text(format!("{}.{}", h.version.0, h.version.1)),
        Node::new("u64", "header length", Range::new(at + 8, h.text.start)).uint(h.text.len()),
        Node::new("header", "header", h.text)
            .text(format!("{} keys", h.keys.len()))
            .lazy(),
    ];
    let mut d = Node::new("data", "data", data).text(h.summary(data));
    if let Some(damage) = data_damage(h, data, avail, fin) {
        d = d.damaged(damage);
    }
    out.push(d);
    out
}

/// What is wrong with an array's bytes: cut off, or (objects) nothing.
fn data_damage(h: &Header, data: Range, avail: u64, fin: bool) -> Option<Damage> {
    if data.end <= avail || !fin || matches!(h.elem, Elem::Object) {
        return None;
    }
    let have = avail.saturating_sub(data.start);
    let detail = match h.elem.itemsize() {
        Some(size) if size > 0 => format!(
            "{have} of {} bytes are there ({} of {} elements whole)",
            data.len(),
            have / size,
            numel(&h.shape).unwrap_or(0)
        ),
        _ => format!("{have} of {} bytes are there", data.len()),
    };
    Some(Damage::truncated(Range::new(avail, avail), detail))
}

impl Parser for NpyParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        let src = &*self.data;
        let (avail, fin) = src.extent();
        let mut done = 0;
        loop {
            if self.at >= avail && fin {
                cx.progress(avail, Some(avail));
                return Step::Done;
            }
            let h = match read_header(src, self.at) {
                Ok(h) => h,
                Err(bad) if !fin && bad.damage.status == Status::Truncated => {
                    return Step::Blocked;
                }
                Err(bad) => {
                    if self.index == 0 {
                        // Not even the first header: the fields read, then
                        // the damage.
                        let at = self.at;
                        if bad.read >= 8 {
                            cx.push_node(
                                Node::new("magic", "magic", Range::new(at, at + 6))
                                    .value(Value::Bytes(MAGIC.into())),
                            );
                            cx.push_node(Node::new(
                                "version",
                                "version",
                                Range::new(at + 6, at + 8),
                            ));
                        }
                        let rest = Range::new(at + bad.read.min(8), avail);
                        cx.push_node(
                            Node::new("header", "header", rest)
                                .text("unreadable")
                                .damaged(bad.damage.clone()),
                        );
                        cx.damage(bad.damage);
                    } else {
                        // After an array: what follows is not another one.
                        let r = Range::new(self.at, avail);
                        cx.push_node(Node::new("trailing", "trailing bytes", r).uint(r.len()));
                        cx.note(format!(
                            "{} bytes after the last array are not another array",
                            r.len()
                        ));
                    }
                    cx.progress(avail, Some(avail));
                    return Step::Done;
                }
            };
            let Some(data) = h.data(if fin { avail } else { u64::MAX }) else {
                let d = Damage::corrupt(
                    h.text,
                    format!("the size of shape {} overflows", shape_text(&h.shape)),
                );
                cx.push_node(Node::new("header", "header", h.text).damaged(d.clone()));
                cx.damage(d);
                return Step::Done;
            };
            let data = if matches!(h.elem, Elem::Object) {
                Range::new(data.start, avail.max(data.start))
            } else {
                data
            };
            if !fin && (data.end > avail || matches!(h.elem, Elem::Object)) {
                cx.progress(avail, None);
                return Step::Blocked;
            }
            let nodes = array_nodes(&h, data, avail, fin);
            if let Some(d) = nodes.last().and_then(|n| n.damage.clone()) {
                cx.damage(*d);
            }
            if self.index == 0 {
                for n in nodes {
                    cx.push_node(n);
                }
            } else {
                cx.push_node(
                    Node::new(
                        "array",
                        escape_str(&array_name(cx.name, self.index)),
                        Range::new(h.start, data.end.min(avail)),
                    )
                    .text(h.summary(data))
                    .with_children(nodes),
                );
            }
            if matches!(h.elem, Elem::Object) {
                // The pickle runs to the end: the pickle parser reads it.
                // Named after the array's file alone: a member `d/x.npy`
                // holds `x.pkl`, as the file `x.npy` does.
                let file = cx.name.rsplit('/').next().unwrap_or(cx.name);
                let name = format!("{}.pkl", array_name(file, self.index));
                cx.add_child(ChildSpec::window(
                    Name::from(name.as_str()),
                    EntryKind::File,
                    &self.data,
                    data,
                ));
                cx.progress(avail, Some(avail));
                return Step::Done;
            }
            self.index += 1;
            self.at = data.end;
            if data.end >= avail {
                cx.progress(avail, Some(avail));
                return Step::Done;
            }
            if self.index >= MAX_ARRAYS {
                let r = Range::new(self.at, avail);
                cx.push_node(Node::new("trailing", "trailing bytes", r).uint(r.len()));
                cx.note(format!("only the first {MAX_ARRAYS} arrays are listed"));
                return Step::Done;
            }
            done += 1;
            if done >= 1024 {
                cx.progress(self.at, Some(avail));
                return Step::Yield;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// loading and the tensor table
// ---------------------------------------------------------------------------

fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    if node.kind != "header" {
        return Vec::new();
    }
    let start = node.range.start.saturating_sub(12);
    // The header's magic is 10 or 12 bytes before its text.
    let h = [node.range.start.saturating_sub(10), start]
        .into_iter()
        .filter_map(|at| read_header(data, at).ok())
        .find(|h| h.text == node.range);
    let Some(h) = h else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, r) in &h.keys {
        let mut n = Node::new("key", escape_str(key), *r);
        n = match key.as_str() {
            "descr" => match &h.elem {
                Elem::Record(size, fields) => n
                    .text(format!("{} fields, {size} bytes a record", fields.len()))
                    .with_children(field_nodes(fields, *r)),
                Elem::Plain(d, be) => n.text(format!(
                    "{}{}",
                    d.name(),
                    if *be { ", big-endian" } else { "" }
                )),
                Elem::Object => n.text("object (a pickle)"),
            },
            "fortran_order" => n.value(Value::Bool(h.fortran)),
            "shape" => n.text(shape_text(&h.shape)),
            _ => n.text("unused by NumPy"),
        };
        out.push(n);
    }
    out
}

/// A node per field of a record, all pointing at the descr's text.
fn field_nodes(fields: &[Field], r: Range) -> Vec<Node> {
    fields
        .iter()
        .map(|f| {
            let name = if f.name.is_empty() {
                "(padding)".to_string()
            } else {
                escape_str(&f.name)
            };
            let shape = if f.shape.is_empty() {
                String::new()
            } else {
                format!(" {}", shape_text(&f.shape))
            };
            Node::new("field", name, r).text(format!(
                "{}{shape} at +{}, {} bytes",
                escape_str(&f.descr),
                f.offset,
                f.size
            ))
        })
        .collect()
}

/// Every array of a `.npy` extraction as a tensor (object arrays excepted:
/// they are pickles).
pub(crate) fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let src = &*e.data();
    let (avail, fin) = src.extent();
    let name = e.name.to_string();
    let name = if e.parent().is_none() {
        std::path::Path::new(&name)
            .file_name()
            .map_or(name.clone(), |f| f.to_string_lossy().into_owned())
    } else {
        name
    };
    let mut out = Vec::new();
    let mut at = 0u64;
    while out.len() < MAX_ARRAYS && at < avail {
        let Ok(h) = read_header(src, at) else {
            break;
        };
        let Some(data) = h.data(avail) else {
            break;
        };
        let Some((dtype, big_endian)) = h.elem.dtype() else {
            break;
        };
        let (status, detail) = match data_damage(&h, data, avail, fin) {
            Some(d) => (d.status, Some(d.reason)),
            None => (Status::Complete, None),
        };
        out.push(Tensor {
            name: array_name(&name, out.len()),
            dtype,
            shape: h.shape.clone(),
            stride: h.stride(),
            storage_offset: None,
            source: ext,
            offset: data.start,
            length: data.len(),
            status,
            detail,
            big_endian,
            encoding: crate::offer::tensor::Encoding::Raw,
        });
        at = data.end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn header(dict: &str, version: u8) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend([version, 0]);
        let len_bytes = if version == 1 { 2 } else { 4 };
        let total = 8 + len_bytes + dict.len() + 1;
        let pad = (64 - total % 64) % 64;
        let hlen = dict.len() + pad + 1;
        if version == 1 {
            out.extend((hlen as u16).to_le_bytes());
        } else {
            out.extend((hlen as u32).to_le_bytes());
        }
        out.extend(dict.as_bytes());
        out.extend(std::iter::repeat_n(b' ', pad));
        out.push(b'\n');
        out
    }

    #[test]
    fn headers() {
        let b = header(
            "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }",
            1,
        );
        let src = MemSource::new(b.clone());
        let h = read_header(&src, 0).unwrap();
        assert_eq!(h.elem, Elem::Plain(Dtype::F64, true));
        assert!(h.fortran);
        assert_eq!(h.shape, vec![2, 3]);
        assert_eq!(h.data_start() as usize, b.len());
        assert_eq!(h.stride(), Some(vec![1, 2]));
        let b = header(
            "{'descr': [('x', '<i4'), (('t', 'y'), '>f8', (2,)), ('', '|V3')], 'fortran_order': False, 'shape': (5L,), }",
            2,
        );
        let h = read_header(&MemSource::new(b), 0).unwrap();
        let Elem::Record(size, fields) = &h.elem else {
            panic!("{:?}", h.elem)
        };
        assert_eq!(*size, 4 + 16 + 3);
        assert_eq!(fields[1].name, "y (t)");
        assert_eq!(fields[1].offset, 4);
        assert_eq!(h.shape, vec![5]);
        let b = header(
            "{'descr': '<U2', 'fortran_order': False, 'shape': (), 'x': '\\u4e2d中'}",
            3,
        );
        let h = read_header(&MemSource::new(b), 0).unwrap();
        assert_eq!(h.elem, Elem::Plain(Dtype::Unicode(2), false));
        assert_eq!(h.keys[3].0, "x");
    }

    #[test]
    fn bad_headers_say_where() {
        for (dict, want) in [
            ("{'descr': '<f4', 'shape': (1,)}", "lacks"),
            (
                "{'descr': '<q9', 'fortran_order': False, 'shape': ()}",
                "unknown dtype",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                "dimension",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,",
                "ends inside",
            ),
            ("__import__('os')", "not a Python literal"),
        ] {
            let e = read_header(&MemSource::new(header(dict, 1)), 0).unwrap_err();
            assert!(
                e.damage.reason.contains(want),
                "{dict}: {}",
                e.damage.reason
            );
        }
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let e = read_header(&MemSource::new(header(&deep, 1)), 0).unwrap_err();
        assert!(e.damage.reason.contains("deeply"), "{}", e.damage.reason);
    }
}
