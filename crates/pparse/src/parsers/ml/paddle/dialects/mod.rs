//! The dialects the reader knows, in the order they are asked about a type
//! printed without a prefix.

pub mod builtin;
pub mod cf;
pub mod kernel;
pub mod pd_op;

use super::dialect::Dialect;

/// Every dialect: one line each.
pub static DIALECTS: &[&Dialect] = &[
    &builtin::DIALECT,
    &pd_op::DIALECT,
    &cf::DIALECT,
    &kernel::DIALECT,
];

/// The dialect named `name`.
pub fn named(name: &str) -> Option<&'static Dialect> {
    DIALECTS.iter().copied().find(|d| d.name == name)
}
