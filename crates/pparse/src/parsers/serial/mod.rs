//! Serialised data and logs: JSON, MessagePack (flax checkpoints),
//! protobuf with the builtin or the user's schemas, and W&B run logs.

pub(crate) mod json;
pub(crate) mod msgpack;
pub(crate) mod protobuf;
pub mod wandb;
