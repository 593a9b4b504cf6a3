//! Serialised data and logs: JSON, MessagePack (flax checkpoints),
//! protobuf with the builtin or the user's schemas, and W&B run logs.

pub mod json;
pub mod msgpack;
pub mod protobuf;
pub mod wandb;
