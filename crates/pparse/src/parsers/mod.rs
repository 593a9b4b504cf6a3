//! Parsers, one module per format in four families (`compress`,
//! `archive`, `ml`, `serial`), and the registry that picks them.
//!
//! The interface a format implements is in [`api`]. Adding a format is one
//! module in its family plus one line in [`REGISTRY`]; what it offers beyond nodes
//! and children (tensors, pickles, records) is declared in its [`Format`]'s
//! `offers`, and the views, the CLI and the explorer find it only there.
//!
//! Format modules are the crate's own: a library user, the command line,
//! the explorer and the Python package reach a format through
//! [`REGISTRY`], its [`Format`] and what it offers ([`crate::offer`]).
//! The `internals` feature makes the pickle VM, the Paddle reader and the
//! W&B log reader public for the tests and fuzz targets that check them
//! piece by piece; it is not an API.

pub mod api;
pub(crate) mod archive;
pub(crate) mod compress;
#[cfg(feature = "internals")]
pub mod ml;
#[cfg(not(feature = "internals"))]
pub(crate) mod ml;
#[cfg(feature = "internals")]
pub mod serial;
#[cfg(not(feature = "internals"))]
pub(crate) mod serial;

pub use api::{ChildSpec, Format, IndexMode, Parser, SNIFF_LEN, Sniff, Step, StepCx};

use crate::extraction::Extraction;

/// Every known format, in sniffing order.
///
/// Folders first (they are recognised by kind alone); protobuf next, as it
/// takes the opened file whatever its bytes when `--message` names a type
/// (and otherwise only `.pb` names); then formats with magic bytes (the compressors before tar, whose
/// sniffer would otherwise look at their bytes); safetensors and the sharded index before JSON, which would
/// claim an index by its name; MessagePack (no magic: `.msgpack` names and
/// flax checkpoints) after every format with magic bytes; JSON last, as it
/// accepts any `.json` name.
pub static REGISTRY: &[&Format] = &[
    &archive::folder::FORMAT,
    &serial::protobuf::FORMAT,
    &compress::gzip::FORMAT,
    &archive::zip::FORMAT,
    &compress::bzip2::FORMAT,
    &compress::xz::FORMAT,
    &compress::zstd::FORMAT,
    &ml::npy::FORMAT,
    &ml::gguf::FORMAT,
    &archive::tar::FORMAT,
    // After tar: a tar's first member starts at 512, where a superblock
    // after a user block may be.
    &ml::hdf5::FORMAT,
    &ml::torch::FORMAT,
    &ml::pickle::FORMAT,
    &serial::wandb::FORMAT,
    &ml::safetensors::FORMAT,
    &ml::safetensors_index::FORMAT,
    &ml::onnx::FORMAT,
    &ml::paddle::json_program::FORMAT,
    &ml::paddle::params::FORMAT,
    &serial::msgpack::FORMAT,
    &serial::json::FORMAT,
    &ml::paddle::FORMAT,
];

/// The format `pparse ir` reads any file as, whatever its name or
/// content: printed Paddle programs (a log holds them among other lines),
/// or one saved as JSON.
pub static PROGRAM_TEXT: &Format = &ml::paddle::FORMAT;

/// Picks the first format whose sniffer accepts the bytes.
pub fn sniff(s: &Sniff) -> Option<&'static Format> {
    REGISTRY.iter().copied().find(|f| (f.sniff)(s))
}

/// Whether `format` took these bytes for its own by their name alone: it
/// would not without the name.
pub fn by_name_only(format: &Format, s: &Sniff) -> bool {
    !(format.sniff)(&Sniff { name: "", ..*s })
}

/// The decoder of one block of a bzip2, xz or zstd stream (or zip entry)
/// named `name` (see [`crate::data::BlockCodec::name`]): how an index
/// makes such a stream again.
pub fn block_codec(name: &str) -> Option<Box<dyn crate::data::BlockCodec>> {
    Some(match name {
        "bzip2 block" => Box::new(crate::data::blocks::bzip2::Codec),
        "bzip2 stream" => Box::new(crate::data::blocks::bzip2::StreamCodec),
        "xz block" => Box::new(crate::data::blocks::xz::Codec),
        "xz stream" => Box::new(crate::data::blocks::xz::StreamCodec),
        "lzma zip" => Box::new(crate::data::blocks::xz::LzmaZipCodec),
        "zstd frame" => Box::new(crate::data::blocks::zstd::Codec),
        _ => return None,
    })
}

/// Looks a format up by name.
pub fn by_name(name: &str) -> Option<&'static Format> {
    REGISTRY.iter().copied().find(|f| f.name == name)
}

/// The format an extraction was parsed as.
pub fn format_of(e: &Extraction) -> Option<&'static Format> {
    by_name(e.parser()?)
}
