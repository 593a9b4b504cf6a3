//! Programs, ops and their parts as nodes of the tree: shared by printed
//! and saved programs.

use super::ast::{self, AttrValue, Op};
use crate::data::Range;
use crate::node::{Node, Value};

/// An op as a node: named by its op name, its results as value.
pub fn op_node(op: &Op) -> Node {
    let end = op
        .regions
        .last()
        .and_then(|r| r.blocks.last())
        .map_or(op.span.end, |b| b.span.end.max(op.span.end));
    let results: Vec<String> = op.results.iter().map(|v| v.name.to_string()).collect();
    let mut n = Node::new("op", op.name.clone(), Range::new(op.span.start, end));
    if !results.is_empty() {
        n = n.text(results.join(", "));
    }
    n.lazy()
}

fn attr_text(v: &AttrValue) -> Option<Value> {
    Some(match v {
        AttrValue::Bool(b) => Value::Bool(*b),
        AttrValue::Int(i) => Value::Int(*i),
        AttrValue::Float(f) => Value::Str(f.to_string().into()),
        AttrValue::Str(s) => Value::Str(crate::name::escape_str(s).into()),
        AttrValue::Place(p) => Value::Str(format!("Place({})", crate::name::escape_str(p)).into()),
        AttrValue::Word(w) => Value::Str(crate::name::escape_str(w).into()),
        AttrValue::KernelKey(kv) => {
            let parts: Vec<String> = kv.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            Value::Str(crate::name::escape_str(&parts.join("|")).into())
        }
        AttrValue::Null => Value::Str("null".into()),
        AttrValue::Array(_) | AttrValue::Opaque => return None,
    })
}

fn attr_node(key: &str, attr: &ast::Attr, range: Range) -> Node {
    let mut n = Node::new("attribute", key, range);
    if let Some(v) = attr_text(&attr.value) {
        n = n.value(v);
    }
    if let AttrValue::Array(items) = &attr.value {
        n = n.with_children(
            items
                .iter()
                .enumerate()
                .map(|(i, a)| attr_node(&format!("[{i}]"), a, a.span))
                .collect(),
        );
    }
    n
}

/// The parts of an op: results, operands, attributes, types, regions.
pub fn op_parts(op: &Op) -> Vec<Node> {
    let mut out = Vec::new();
    for v in &op.results {
        out.push(Node::new("result", v.name.to_string(), v.span));
    }
    for o in &op.operands {
        let name = match &o.label {
            Some(l) => format!("{l}={}", o.value.name),
            None => o.value.name.to_string(),
        };
        out.push(Node::new("operand", name, o.value.span));
    }
    for a in &op.attrs {
        let range = Range::new(a.key_span.start, a.attr.span.end);
        out.push(attr_node(&a.key, &a.attr, range));
    }
    for (i, t) in op.operand_types.iter().enumerate() {
        out.push(Node::new("operand type", format!("operand {i}"), t.span).text(t.to_string()));
    }
    for (i, t) in op.result_types.iter().enumerate() {
        let kind = if op.inferred {
            "inferred type"
        } else {
            "result type"
        };
        out.push(Node::new(kind, format!("result {i}"), t.span).text(t.to_string()));
    }
    for (i, r) in op.regions.iter().enumerate() {
        for b in &r.blocks {
            let ops: Vec<Node> = b.ops.iter().map(op_node).collect();
            let n = Node::new("region", format!("region {i}"), b.span)
                .text(format!("{} ops", b.ops.len()))
                .with_children(ops);
            out.push(n);
        }
    }
    out
}
