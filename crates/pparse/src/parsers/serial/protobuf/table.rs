//! A schema flattened for hot loops.
//!
//! prost-reflect's descriptors answer every question about a schema, but
//! each answer is a lookup (a hash, an `Arc` clone for a field's kind). A
//! reader that goes through half a million records asks the same questions
//! millions of times, so [`Table`] asks them once: every message type
//! reachable from a root becomes a plain struct with its fields indexed by
//! number, and a field's type is a small `Copy` enum pointing at other
//! entries of the table.

use std::collections::HashMap;

use prost_reflect::{Cardinality, EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor};

/// A message type's index in its [`Table`].
pub(crate) type MsgId = u32;

/// Field numbers below this are found by direct indexing.
const DENSE: u32 = 1024;

/// Message types taken into one table at most (the closure of a root).
const MAX_TYPES: usize = 10_000;

/// The value type of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    /// The protobuf type `double`.
    Double,
    /// The protobuf type `float`.
    Float,
    /// The protobuf type `int32`.
    Int32,
    /// The protobuf type `int64`.
    Int64,
    /// The protobuf type `uint32`.
    Uint32,
    /// The protobuf type `uint64`.
    Uint64,
    /// The protobuf type `sint32`.
    Sint32,
    /// The protobuf type `sint64`.
    Sint64,
    /// The protobuf type `fixed32`.
    Fixed32,
    /// The protobuf type `fixed64`.
    Fixed64,
    /// The protobuf type `sfixed32`.
    Sfixed32,
    /// The protobuf type `sfixed64`.
    Sfixed64,
    /// The protobuf type `bool`.
    Bool,
    /// The protobuf type `string`.
    String,
    /// The protobuf type `bytes`.
    Bytes,
    /// An enum: its index among the table's enum types.
    Enum(u32),
    /// A message, length-delimited.
    Message(MsgId),
    /// A message as a group (start and end tags).
    Group(MsgId),
}

impl Ty {
    /// The wire type a field of this type is written with, unpacked.
    pub(crate) fn wire(self) -> super::wire::Wire {
        use super::wire::Wire;
        match self {
            Ty::Double | Ty::Fixed64 | Ty::Sfixed64 => Wire::I64,
            Ty::Float | Ty::Fixed32 | Ty::Sfixed32 => Wire::I32,
            Ty::String | Ty::Bytes | Ty::Message(_) => Wire::Len,
            Ty::Group(_) => Wire::Group,
            _ => Wire::Varint,
        }
    }

    /// Scalars that may be packed into one `Len` field.
    pub(crate) fn packable(self) -> bool {
        !matches!(self, Ty::String | Ty::Bytes | Ty::Message(_) | Ty::Group(_))
    }
}

/// How many values a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Card {
    /// One value; `presence` when a default value is still written.
    One {
        /// The field tracks presence (`optional`, a message, a oneof
        /// member), so a default value on the wire is not left out.
        presence: bool,
    },
    /// `repeated`: any number of values, packed or not.
    List,
    /// A map (repeated entry messages): its key and value types.
    Map {
        /// The type of the entries' keys (field 1).
        key: Ty,
        /// The type of the entries' values (field 2).
        value: Ty,
    },
}

/// One field of a message type.
#[derive(Clone, Debug)]
pub(crate) struct FieldT {
    number: u32,
    pub(crate) name: String,
    pub(crate) ty: Ty,
    pub(super) card: Card,
    /// A list of `{key, nested_key, value_json}` items to be written as
    /// one object (see [`super::json::Options::items`]).
    pub items: bool,
    /// A member of a oneof.
    pub oneof: bool,
}

/// Types the JSON mapping writes in a form of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    /// An ordinary message, written field by field.
    None,
    /// `google.protobuf.Timestamp`: an RFC 3339 string.
    Timestamp,
    /// `google.protobuf.Empty`: `{}`.
    Empty,
    /// Another `google.protobuf.*` type (Struct, Value, wrappers ...).
    WellKnown,
}

/// One message type.
pub(crate) struct Msg {
    name: String,
    pub(super) special: Special,
    pub(crate) desc: MessageDescriptor,
    /// Fields by number, for numbers below [`DENSE`]: index + 1, 0 for none.
    dense: Vec<u32>,
    /// What a validity check does with each field number below [`DENSE`].
    quick: Vec<Quick>,
    /// Only scalar and string fields, all numbered below `DENSE`: checked
    /// without recursion.
    pub leaf: bool,
    /// Sorted by number.
    pub fields: Vec<FieldT>,
}

/// A field as a validity check sees it: eight bytes, no indirection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Quick {
    /// The wire type's code.
    pub wire: u8,
    pub(super) what: QuickWhat,
    /// The message type of [`QuickWhat::Message`].
    pub id: MsgId,
}

/// What to check of a field's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum QuickWhat {
    /// Not in the schema (or no check table for this number): look it up.
    #[default]
    Lookup,
    /// A scalar: only its wire type.
    Scalar,
    /// Its UTF-8.
    String,
    /// A message of type `id`.
    Message,
    /// A repeated scalar, packed (`Len`) or not.
    Packable,
    /// Anything else (maps, groups): the general check.
    General,
}

impl Msg {
    /// How to check field number `n` (`Lookup` beyond the dense range).
    #[inline(always)]
    pub(crate) fn quick(&self, n: u64) -> Quick {
        self.quick.get(n as usize).copied().unwrap_or_default()
    }

    /// The field numbered `n`.
    #[inline]
    pub(crate) fn field(&self, n: u32) -> Option<&FieldT> {
        if let Some(&i) = self.dense.get(n as usize) {
            return (i > 0).then(|| &self.fields[i as usize - 1]);
        }
        let i = self.fields.binary_search_by_key(&n, |f| f.number).ok()?;
        Some(&self.fields[i])
    }

    /// The field named `name`.
    pub(crate) fn by_name(&self, name: &str) -> Option<&FieldT> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The number of the field named `name`, 0 when there is none.
    pub(crate) fn number(&self, name: &str) -> u32 {
        self.by_name(name).map_or(0, |f| f.number)
    }
}

/// One enum type: its values' names by number.
pub(crate) struct EnumT {
    pub(super) name: String,
    /// Sorted by number; the first name of an aliased number.
    values: Vec<(i32, String)>,
}

impl EnumT {
    pub(super) fn value_name(&self, n: i32) -> Option<&str> {
        let i = self.values.binary_search_by_key(&n, |v| v.0).ok()?;
        Some(&self.values[i].1)
    }
}

/// The message types reachable from a root, flattened.
pub struct Table {
    msgs: Vec<Msg>,
    pub(super) enums: Vec<EnumT>,
}

impl Table {
    /// The table of `root` and every type its fields reach; the root is
    /// message 0. `items` marks (message type, field) pairs as item lists.
    pub fn build(root: &MessageDescriptor, items: &[(&str, &str)]) -> Table {
        let mut b = Builder {
            msg_ids: HashMap::new(),
            enum_ids: HashMap::new(),
            queue: Vec::new(),
            enums: Vec::new(),
        };
        b.msg(root);
        let mut msgs = Vec::new();
        let mut next = 0;
        while next < b.queue.len() {
            let d = b.queue[next].clone();
            next += 1;
            let mut fields: Vec<FieldT> = d
                .fields()
                .map(|f| {
                    let ty = b.ty(&f);
                    let card = if f.is_map() {
                        match f.kind() {
                            Kind::Message(e) => {
                                let key = e.get_field(1).map_or(Ty::String, |k| b.ty(&k));
                                let value = e.get_field(2).map_or(Ty::String, |v| b.ty(&v));
                                Card::Map { key, value }
                            }
                            _ => Card::List,
                        }
                    } else if f.cardinality() == Cardinality::Repeated {
                        Card::List
                    } else {
                        Card::One {
                            presence: f.supports_presence(),
                        }
                    };
                    FieldT {
                        number: f.number(),
                        name: f.name().to_string(),
                        ty,
                        card,
                        items: items
                            .iter()
                            .any(|&(m, n)| m == d.full_name() && n == f.name()),
                        oneof: f.containing_oneof().is_some(),
                    }
                })
                .collect();
            fields.sort_by_key(|f| f.number);
            let top = fields.last().map_or(0, |f| f.number.min(DENSE - 1));
            let mut dense = vec![0u32; top as usize + 1];
            for (i, f) in fields.iter().enumerate() {
                if f.number < DENSE {
                    dense[f.number as usize] = i as u32 + 1;
                }
            }
            let mut quick = vec![
                Quick {
                    wire: 0,
                    what: QuickWhat::General,
                    id: 0,
                };
                dense.len()
            ];
            for (n, q) in quick.iter_mut().enumerate() {
                if dense[n] == 0 {
                    // Unknown numbers are skipped by a decoder.
                    q.what = QuickWhat::Scalar;
                    q.wire = u8::MAX;
                    continue;
                }
                let f = &fields[dense[n] as usize - 1];
                q.wire = f.ty.wire().code() as u8;
                q.what = match (f.card, f.ty) {
                    (Card::Map { .. }, _) | (_, Ty::Group(_)) => QuickWhat::General,
                    (Card::List, ty) if ty.packable() => QuickWhat::Packable,
                    (_, Ty::String) => QuickWhat::String,
                    (_, Ty::Message(id)) => {
                        q.id = id;
                        QuickWhat::Message
                    }
                    _ => QuickWhat::Scalar,
                };
            }
            let leaf = fields.iter().all(|f| f.number < DENSE)
                && quick
                    .iter()
                    .all(|q| matches!(q.what, QuickWhat::Scalar | QuickWhat::String));
            let name = d.full_name().to_string();
            let special = match name.as_str() {
                "google.protobuf.Timestamp" => Special::Timestamp,
                "google.protobuf.Empty" => Special::Empty,
                n if n.starts_with("google.protobuf.") => Special::WellKnown,
                _ => Special::None,
            };
            msgs.push(Msg {
                name,
                special,
                desc: d,
                dense,
                quick,
                leaf: leaf && special == Special::None,
                fields,
            });
        }
        Table {
            msgs,
            enums: b.enums,
        }
    }

    #[inline]
    pub(crate) fn msg(&self, id: MsgId) -> &Msg {
        &self.msgs[id as usize]
    }

    /// A message type by its full name.
    pub fn find(&self, name: &str) -> Option<MsgId> {
        self.msgs
            .iter()
            .position(|m| m.name == name)
            .map(|i| i as MsgId)
    }
}

struct Builder {
    msg_ids: HashMap<String, MsgId>,
    enum_ids: HashMap<String, u32>,
    queue: Vec<MessageDescriptor>,
    enums: Vec<EnumT>,
}

impl Builder {
    fn msg(&mut self, d: &MessageDescriptor) -> MsgId {
        if let Some(&id) = self.msg_ids.get(d.full_name()) {
            return id;
        }
        // Schemas are bounded, but a pool a user adds to could be huge.
        if self.queue.len() >= MAX_TYPES {
            return 0;
        }
        let id = self.queue.len() as MsgId;
        self.msg_ids.insert(d.full_name().to_string(), id);
        self.queue.push(d.clone());
        id
    }

    fn enumeration(&mut self, e: &EnumDescriptor) -> u32 {
        if let Some(&id) = self.enum_ids.get(e.full_name()) {
            return id;
        }
        let mut values: Vec<(i32, String)> = Vec::new();
        for v in e.values() {
            if !values.iter().any(|(n, _)| *n == v.number()) {
                values.push((v.number(), v.name().to_string()));
            }
        }
        values.sort_by_key(|v| v.0);
        let id = self.enums.len() as u32;
        self.enum_ids.insert(e.full_name().to_string(), id);
        self.enums.push(EnumT {
            name: e.full_name().to_string(),
            values,
        });
        id
    }

    fn ty(&mut self, f: &FieldDescriptor) -> Ty {
        match f.kind() {
            Kind::Double => Ty::Double,
            Kind::Float => Ty::Float,
            Kind::Int32 => Ty::Int32,
            Kind::Int64 => Ty::Int64,
            Kind::Uint32 => Ty::Uint32,
            Kind::Uint64 => Ty::Uint64,
            Kind::Sint32 => Ty::Sint32,
            Kind::Sint64 => Ty::Sint64,
            Kind::Fixed32 => Ty::Fixed32,
            Kind::Fixed64 => Ty::Fixed64,
            Kind::Sfixed32 => Ty::Sfixed32,
            Kind::Sfixed64 => Ty::Sfixed64,
            Kind::Bool => Ty::Bool,
            Kind::String => Ty::String,
            Kind::Bytes => Ty::Bytes,
            Kind::Enum(e) => Ty::Enum(self.enumeration(&e)),
            Kind::Message(m) if f.is_group() => Ty::Group(self.msg(&m)),
            Kind::Message(m) => Ty::Message(self.msg(&m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::serial::protobuf::schema;

    #[test]
    fn fields_by_number_and_name() {
        let t = Table::build(&schema::builtin("onnx.ModelProto").unwrap(), &[]);
        let m = t.msg(0);
        assert_eq!(m.name, "onnx.ModelProto");
        let g = m.field(7).unwrap();
        assert_eq!(g.name, "graph");
        let Ty::Message(gid) = g.ty else {
            panic!("graph is a message")
        };
        assert_eq!(t.msg(gid).name, "onnx.GraphProto");
        assert_eq!(t.msg(gid).by_name("initializer").unwrap().card, Card::List);
        assert!(m.field(99_999).is_none() && m.field(0).is_none());
        let tp = t.find("onnx.TensorProto").unwrap();
        let dl = t.msg(tp).by_name("data_location").unwrap();
        let Ty::Enum(e) = dl.ty else {
            panic!("data_location is an enum")
        };
        assert_eq!(t.enums[e as usize].value_name(1), Some("EXTERNAL"));
    }
}
