//! The program tree of `pparse ir --json`, serialized straight to the
//! output rather than built as JSON values op by op (a million-op program
//! would allocate each key and value). Object keys come in sorted order,
//! duplicates keeping the last, as a JSON object map gives them, so the
//! output does not depend on how it is written (docs/contract.md, `ir`).

use std::fmt::Display;

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::ast::{AttrValue, Op, Type, TypeKind};
use crate::data::Range;

/// An op and its regions.
pub(super) struct OpJson<'a>(pub(super) &'a Op);

/// A type.
struct TypeJson<'a>(&'a Type);

/// An attribute's value, with its span (an opaque value is its span).
struct AttrJson<'a>(&'a AttrValue, Range);

/// A value shown by its `Display` (value names).
struct Shown<'a, T: Display>(&'a T);

impl<T: Display> Serialize for Shown<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
    }
}

/// `{"start": …, "end": …}` in sorted key order.
struct Span(Range);

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("end", &self.0.end)?;
        m.serialize_entry("start", &self.0.start)?;
        m.end()
    }
}

/// The indices of `keys` in key order, one per key (the last of equal
/// ones), as an object keyed by them keeps them.
fn sorted_unique<K: Ord>(keys: &[K]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    idx.sort_by(|&a, &b| keys[a].cmp(&keys[b]).then(b.cmp(&a)));
    idx.dedup_by(|later, kept| keys[*later] == keys[*kept]);
    idx
}

impl Serialize for TypeJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut m = s.serialize_map(None)?;
        match &t.kind {
            TypeKind::Tensor {
                dialect,
                name,
                dims,
                dtype,
            } => {
                m.serialize_entry("dialect", dialect)?;
                m.serialize_entry("dims", dims.as_slice())?;
                m.serialize_entry("dtype", dtype)?;
                m.serialize_entry("kind", name)?;
            }
            TypeKind::Scalar(d) => {
                m.serialize_entry("dtype", d)?;
                m.serialize_entry("kind", "scalar")?;
            }
            TypeKind::Vec(items) => {
                let items: Vec<TypeJson> = items.iter().map(TypeJson).collect();
                m.serialize_entry("items", &items)?;
                m.serialize_entry("kind", "vec")?;
            }
            TypeKind::Null => m.serialize_entry("kind", "null")?,
            TypeKind::Opaque => {
                m.serialize_entry("end", &t.span.end)?;
                m.serialize_entry("kind", "opaque")?;
                m.serialize_entry("start", &t.span.start)?;
            }
        }
        m.end()
    }
}

impl Serialize for AttrJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            AttrValue::Bool(b) => s.serialize_bool(*b),
            AttrValue::Int(i) => s.serialize_i64(*i),
            AttrValue::Float(f) if f.is_finite() => s.serialize_f64(*f),
            // JSON has no inf or nan: their names, as text.
            AttrValue::Float(f) => s.collect_str(f),
            AttrValue::Str(v) => s.serialize_str(v),
            AttrValue::Array(items) => {
                s.collect_seq(items.iter().map(|a| AttrJson(&a.value, a.span)))
            }
            AttrValue::Place(p) => s.collect_str(&format_args!("Place({p})")),
            AttrValue::KernelKey(kv) => {
                let keys: Vec<&str> = kv.iter().map(|(k, _)| &**k).collect();
                let mut m = s.serialize_map(None)?;
                for i in sorted_unique(&keys) {
                    m.serialize_entry(keys[i], &*kv[i].1)?;
                }
                m.end()
            }
            AttrValue::Word(w) => s.serialize_str(w),
            AttrValue::Null => s.serialize_unit(),
            AttrValue::Opaque => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("opaque", &Span(self.1))?;
                m.end()
            }
        }
    }
}

/// The attributes of an op, as an object.
struct Attrs<'a>(&'a Op);

impl Serialize for Attrs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let attrs = &self.0.attrs;
        let keys: Vec<&str> = attrs.iter().map(|a| &*a.key).collect();
        let mut m = s.serialize_map(None)?;
        for i in sorted_unique(&keys) {
            let a = &attrs[i];
            m.serialize_entry(keys[i], &AttrJson(&a.attr.value, a.attr.span))?;
        }
        m.end()
    }
}

/// The regions of an op: their blocks with arguments, ops and spans.
struct Regions<'a>(&'a Op);

impl Serialize for Regions<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.regions.iter().map(Blocks))
    }
}

struct Blocks<'a>(&'a super::ast::Region);

impl Serialize for Blocks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Block<'a>(&'a super::ast::Block);
        impl Serialize for Block<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let b = self.0;
                let args: Vec<Shown<_>> = b.args.iter().map(|a| Shown(&a.value.name)).collect();
                let ops: Vec<OpJson> = b.ops.iter().map(OpJson).collect();
                let mut m = s.serialize_map(Some(4))?;
                m.serialize_entry("args", &args)?;
                m.serialize_entry("end", &b.span.end)?;
                m.serialize_entry("ops", &ops)?;
                m.serialize_entry("start", &b.span.start)?;
                m.end()
            }
        }
        let blocks: Vec<Block> = self.0.blocks.iter().map(Block).collect();
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("blocks", &blocks)?;
        m.end()
    }
}

impl Serialize for OpJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let op = self.0;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("attributes", &Attrs(op))?;
        m.serialize_entry("end", &op.span.end)?;
        if let Some(id) = op.id {
            m.serialize_entry("id", &id)?;
        }
        m.serialize_entry("name", &op.name)?;
        if op.operands.iter().any(|o| o.label.is_some()) {
            let labels: Vec<Option<&str>> =
                op.operands.iter().map(|o| o.label.as_deref()).collect();
            m.serialize_entry("operand_labels", &labels)?;
        }
        let types: Vec<TypeJson> = op.operand_types.iter().map(TypeJson).collect();
        m.serialize_entry("operand_types", &types)?;
        let names: Vec<Shown<_>> = op.operands.iter().map(|o| Shown(&o.value.name)).collect();
        m.serialize_entry("operands", &names)?;
        if !op.regions.is_empty() {
            m.serialize_entry("regions", &Regions(op))?;
        }
        let types: Vec<TypeJson> = op.result_types.iter().map(TypeJson).collect();
        m.serialize_entry("result_types", &types)?;
        if op.inferred {
            m.serialize_entry("result_types_inferred", &true)?;
        }
        let names: Vec<Shown<_>> = op.results.iter().map(|r| Shown(&r.name)).collect();
        m.serialize_entry("results", &names)?;
        m.serialize_entry("start", &op.span.start)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::sorted_unique;

    #[test]
    fn keys_sort_and_the_last_of_equal_ones_stays() {
        assert_eq!(sorted_unique(&["b", "a", "b", "c", "a"]), vec![4, 2, 3]);
        assert_eq!(sorted_unique::<&str>(&[]), Vec::<usize>::new());
    }
}
