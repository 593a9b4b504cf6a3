//! `cf`, control flow (`cf.yield`, `cf.tuple_push`, …): its ops carry no
//! types or attributes of their own, so it only claims its name.

use crate::parsers::ml::paddle::dialect::Dialect;

/// The dialect.
pub static DIALECT: Dialect = Dialect {
    name: "cf",
    bare_type: |_| false,
    parse_type: |_, _| None,
    parse_attr: |_, _| None,
};
