//! The program tree of a Paddle PIR program: ops with their results,
//! operands, attributes, types and nested regions, each with the exact byte
//! range it was read from. Printed programs (`print(program)`) and saved
//! ones (`paddle.jit.save`'s `.json`) are read into these same types.

use std::borrow::Cow;

use crate::data::Range;

/// A short name from the text: borrowed for the words printed over and over
/// (types, dtypes, attribute keys; see [`intern`]), owned otherwise, so a
/// program of millions of ops does not allocate each.
pub type Word = Cow<'static, str>;

/// A tensor type's dims: inline up to four, the rank of nearly every
/// tensor, so the types of millions of ops do not allocate for them.
pub type Dims = smallvec::SmallVec<[i64; 4]>;

/// Words printed on nearly every line.
const COMMON: &[&str] = &[
    "NCHW",
    "NHWC",
    "approximate",
    "axis",
    "b",
    "begin_norm_axis",
    "bf16",
    "bfloat16",
    "bias",
    "bias_after_scale",
    "bool",
    "c128",
    "c64",
    "col",
    "cpu_tensor",
    "data_format",
    "dtype",
    "epsilon",
    "f16",
    "f32",
    "f64",
    "float16",
    "float32",
    "float64",
    "gpu_tensor",
    "i16",
    "i32",
    "i64",
    "i8",
    "index",
    "int32",
    "int64",
    "int8",
    "is_distributed",
    "is_parameter",
    "keepdim",
    "kernel_key",
    "kernel_name",
    "name",
    "need_clip",
    "op_name",
    "origin_id",
    "parameter_name",
    "persistable",
    "place",
    "scale",
    "selectedrows",
    "shape",
    "stop_gradient",
    "struct_name",
    "tensor",
    "tensor_array",
    "trainable",
    "transpose_x",
    "transpose_y",
    "u8",
    "uint8",
    "undefined_tensor",
    "value",
];

/// Slots of the open-addressing table over [`COMMON`]: a power of two,
/// several times its length, so a lookup mostly probes one slot.
const SLOTS: usize = 512;

/// The length and three bytes: enough to tell the common words apart
/// (probing settles the rest) without reading every byte.
const fn slot_hash(s: &[u8]) -> usize {
    let n = s.len();
    if n == 0 {
        return 0;
    }
    let mut h = (n as u32).wrapping_mul(0x9E37_79B9);
    h = (h ^ s[0] as u32).wrapping_mul(0x0100_0193);
    h = (h ^ s[n / 2] as u32).wrapping_mul(0x0100_0193);
    h = (h ^ s[n - 1] as u32).wrapping_mul(0x0100_0193);
    (h ^ (h >> 15)) as usize & (SLOTS - 1)
}

/// `COMMON`'s index + 1 by hash slot (0: empty), built at compile time.
/// Interning runs for every type, dtype and attribute key of every op, so
/// it is one hash and one comparison rather than a binary search of string
/// comparisons.
static COMMON_SLOTS: [u8; SLOTS] = {
    assert!(COMMON.len() < 255);
    let mut t = [0u8; SLOTS];
    let mut i = 0;
    while i < COMMON.len() {
        let mut h = slot_hash(COMMON[i].as_bytes());
        while t[h] != 0 {
            h = (h + 1) & (SLOTS - 1);
        }
        t[h] = (i + 1) as u8;
        i += 1;
    }
    t
};

/// `s` as a [`Word`], borrowed if it is a common one.
pub fn intern(s: &str) -> Word {
    let mut h = slot_hash(s.as_bytes());
    loop {
        match COMMON_SLOTS[h] {
            0 => return Cow::Owned(s.to_string()),
            i => {
                let w = COMMON[usize::from(i) - 1];
                if w.len() == s.len() && w == s {
                    return Cow::Borrowed(w);
                }
                h = (h + 1) & (SLOTS - 1);
            }
        }
    }
}

/// A value's name as the printer gives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueName {
    /// An op result, `%12`.
    Result(u64),
    /// A block argument, `%arg_0`.
    Arg(u64),
    /// A keyword argument, `%kwarg_name`.
    Kwarg(Box<str>),
    /// `<<NULL VALUE>>`: an operand with no value.
    Null,
}

impl ValueName {
    /// The name printed as `%s` (`s` without the `%`): `12`, `arg_0`,
    /// `kwarg_x`; `None` if it is none of these.
    pub fn parse(s: &str) -> Option<ValueName> {
        // Most names are op results: digits only.
        if let Some(n) = digits(s.as_bytes()) {
            return Some(ValueName::Result(n));
        }
        if let Some(n) = s.strip_prefix("arg_").and_then(|n| n.parse().ok()) {
            Some(ValueName::Arg(n))
        } else if let Some(k) = s.strip_prefix("kwarg_") {
            Some(ValueName::Kwarg(k.into()))
        } else {
            s.parse().ok().map(ValueName::Result)
        }
    }
}

/// `s` as a decimal `u64`, if it is one (no sign, no overflow).
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut n = 0u64;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    Some(n)
}

impl std::fmt::Display for ValueName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueName::Result(n) => write!(f, "%{n}"),
            ValueName::Arg(n) => write!(f, "%arg_{n}"),
            ValueName::Kwarg(s) => write!(f, "%kwarg_{s}"),
            ValueName::Null => f.write_str("<<NULL VALUE>>"),
        }
    }
}

/// A value where it is written: its name and its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueRef {
    /// The name.
    pub name: ValueName,
    /// Where it is written.
    pub span: Range,
}

/// An operand: a value, labelled in `pd_op.while`'s `(cond=…, inputs=…)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    /// `cond` or `inputs` for a while op's operands, else none.
    pub label: Option<Box<str>>,
    /// The value used.
    pub value: ValueRef,
}

/// A type, as its dialect understood it.
#[derive(Debug, Clone, PartialEq)]
pub struct Type {
    /// Where it is written.
    pub span: Range,
    /// What it is.
    pub kind: TypeKind,
}

impl std::fmt::Display for Type {
    /// In printer form (3.x spelling): `tensor<2x3xf32>`, `vec[f32,i64]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            TypeKind::Scalar(s) => f.write_str(s),
            TypeKind::Tensor {
                name, dims, dtype, ..
            } => {
                write!(f, "{name}<")?;
                for d in dims {
                    write!(f, "{d}x")?;
                }
                write!(f, "{dtype}>")
            }
            TypeKind::Vec(items) => {
                f.write_str("vec[")?;
                for (i, t) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str("]")
            }
            TypeKind::Null => f.write_str("<<NULL TYPE>>"),
            TypeKind::Opaque => f.write_str("(opaque)"),
        }
    }
}

/// The kinds of types the dialects know; anything else is kept opaque.
#[derive(Debug, Clone, PartialEq)]
pub enum TypeKind {
    /// A builtin scalar: `f32`, `i64`, `b`, `bf16`, `index`, …
    Scalar(Word),
    /// A tensor-like type with dims and an element type: `tensor<2x3xf32>`,
    /// `builtin.tensor<…>`, `pd_op.selectedrows<…>`, `cpu_tensor<…>`.
    Tensor {
        /// The dialect that named it (`builtin`, `pd_op`, `kernel`).
        dialect: &'static str,
        /// Its name without the dialect prefix (`tensor`, `cpu_tensor`).
        name: Word,
        /// Dimensions; -1 is dynamic.
        dims: Dims,
        /// The element type (`f32`).
        dtype: Word,
    },
    /// `vec[T,T,…]`.
    Vec(Vec<Type>),
    /// `<<NULL TYPE>>`.
    Null,
    /// A type no dialect took: its text is its span.
    Opaque,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number (also `inf`, `-inf`, `nan`); its printed
    /// text, which is lossy (six digits), is its span.
    Float(f64),
    /// A string.
    Str(Box<str>),
    /// `[a,b,…]`.
    Array(Vec<Attr>),
    /// `Place(cpu)`, `Place(gpu:0)`: what is inside the parentheses.
    Place(Box<str>),
    /// A kernel key, `<backend:CPU|layout:NCHW|dtype:float32>`, as pairs.
    KernelKey(Vec<(Box<str>, Box<str>)>),
    /// A bare word: a data type (`float32`), a layout (`NCHW`), …
    Word(Word),
    /// `<#AttrNull>`.
    Null,
    /// A form no dialect took, or `<#AttrNotImplemented>`: its text is its
    /// span.
    Opaque,
}

/// An attribute value with its optional `(Tag)` (printers up to 3.0) and
/// its bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    /// The tag, as written: `Float`, `Int32`, `pd_op.DataType`, `Array`.
    pub tag: Option<Box<str>>,
    /// The value.
    pub value: AttrValue,
    /// Where it is written, tag included.
    pub span: Range,
}

/// A named attribute of an op, `key:value`.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedAttr {
    /// The key.
    pub key: Word,
    /// Where the key is written.
    pub key_span: Range,
    /// The value.
    pub attr: Attr,
}

/// A block argument, `%arg_0 {stop_gradient:true}`.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockArg {
    /// The value it defines.
    pub value: ValueRef,
    /// Its attributes (printed since 3.1).
    pub attrs: Vec<NamedAttr>,
}

/// An op, one line of the printed program (its regions follow it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Op {
    /// The whole op, from its results to the end of its line (regions
    /// excluded).
    pub span: Range,
    /// The values it defines.
    pub results: Vec<ValueRef>,
    /// Its name, `pd_op.matmul` or `matmul(phi_kernel)`.
    pub name: String,
    /// Where its name is written (quotes included).
    pub name_span: Range,
    /// `[id:N]`, printed with `FLAGS_print_ir`.
    pub id: Option<u64>,
    /// The values it uses.
    pub operands: Vec<Operand>,
    /// Its attributes, in printed order.
    pub attrs: Vec<NamedAttr>,
    /// The types of its operands, when printed.
    pub operand_types: Vec<Type>,
    /// The types of its results, when printed (`pd_op.while` prints none:
    /// see [`Op::inferred`]).
    pub result_types: Vec<Type>,
    /// The result types were inferred (from the body's `cf.yield`), not
    /// printed.
    pub inferred: bool,
    /// Its regions, each a list of blocks.
    pub regions: Vec<Region>,
}

/// A region: its blocks (`pd_op.if` has two regions of one block each).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Region {
    /// The blocks.
    pub blocks: Vec<Block>,
}

/// A block: its arguments and ops.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    /// From its opening line to its closing brace.
    pub span: Range,
    /// `^%arg_0, …` (a while body's loop values).
    pub args: Vec<BlockArg>,
    /// `^kw:` arguments.
    pub kwargs: Vec<BlockArg>,
    /// Its ops in order.
    pub ops: Vec<Op>,
}

/// How the printer that wrote a program spelled types and attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Up to 3.0: `builtin.tensor<…>` or `pd_op.tensor<…>`, tagged
    /// attributes `(Float)1.5`.
    Tagged,
    /// 3.0 and later: `tensor<…>`, untagged attributes.
    Bare,
    /// Nothing told (no types or attributes seen).
    Unknown,
}

impl Era {
    /// Its name in JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Tagged => "tagged",
            Era::Bare => "bare",
            Era::Unknown => "unknown",
        }
    }
}

/// A whole program: the module's one block.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    /// From its opening brace to its closing one.
    pub span: Range,
    /// Its top-level block.
    pub block: Block,
    /// The printer's era, from its types and attributes.
    pub era: Era,
}

impl Op {
    /// Calls `f` on this op and every op in its regions, depth first.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Op)) {
        f(self);
        for r in &self.regions {
            for b in &r.blocks {
                for op in &b.ops {
                    op.walk(f);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_common_word_is_found_and_no_other() {
        for w in super::COMMON {
            assert!(matches!(super::intern(w), std::borrow::Cow::Borrowed(b) if b == *w));
        }
        let mut sorted = super::COMMON.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), super::COMMON.len(), "a word twice");
        for w in ["zz", "", "f3", "f322", "tensorx", "NCHW "] {
            assert!(matches!(super::intern(w), std::borrow::Cow::Owned(ref o) if o == w));
        }
    }
}
