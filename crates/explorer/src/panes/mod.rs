//! The explorer's panes, each a [`super::panel::Component`] that owns its
//! state: the extraction tree, the node tree, the bytes, the inspector, and
//! the side panels drawn in place of the node tree.

pub mod exts;
pub mod hex;
pub mod inspector;
pub mod metrics;
pub mod nodes;
pub mod problems;
pub mod query;
pub mod stepper;
pub mod tensors;
