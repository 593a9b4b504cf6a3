//! Viewers: format-level views computed from extractions and their bytes,
//! such as the list of tensors of a model. A viewer is a pure function of
//! the tree and the bytes, run when someone asks, so parsers stay lazy.

pub mod records;
pub mod search;
pub mod stepper;
pub mod tensors;
pub mod values;
