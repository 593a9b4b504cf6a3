//! pparse integration tests: one test binary, one module per concern.
//!
//! Fixtures and their manifests live in `fixtures/` (see fixtures/README.md);
//! every expectation here comes from those manifests (computed with Python's
//! tarfile/zipfile/zlib), never from pparse itself.

mod util;

mod architecture;

mod bounds;
mod cli;
mod compressors;
mod costs;
mod damage;
mod fork;
mod fs;
mod fuzz_corpus;
mod gguf;
mod hdf5;
mod hostile;
mod index;
mod json;
mod mount;
mod msgpack;
mod npy;
mod onnx;
mod paddle;
mod pickle;
mod protobuf;
mod query;
mod realworld;
mod recovery;
mod remote;
mod robust;
mod safetensors;
mod scale;
mod sweep;
mod tar;
mod terminal;
mod torch;
mod truncation;
mod tui;
mod tui_habits;
mod values;
mod verdicts;
mod walks;
mod wandb;
mod zip;
