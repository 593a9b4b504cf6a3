//! Serialised data and logs: JSON, MessagePack (flax checkpoints),
//! protobuf with the builtin or the user's schemas, and W&B run logs.

pub(crate) mod json;
pub(crate) mod msgpack;
// Its tables and wire reader are public where the W&B reader's are (the
// `internals` feature), and some of their parts only the tests use.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub, dead_code))]
pub(crate) mod protobuf;
// Reached through their offers; public only for the tests and fuzz
// targets that check their pieces (the `internals` feature).
#[cfg(feature = "internals")]
pub mod wandb;
#[cfg(not(feature = "internals"))]
#[allow(unreachable_pub, dead_code)]
pub(crate) mod wandb;
