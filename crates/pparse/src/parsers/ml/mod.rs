//! Machine-learning formats: tensors in NumPy, GGUF, HDF5, safetensors (and
//! its sharded index), ONNX and PyTorch files; pickles, read by a VM that
//! never imports; Paddle programs and parameters.

pub(crate) mod gguf;
pub(crate) mod hdf5;
pub(crate) mod npy;
pub(crate) mod onnx;
// Reached through their offers; public only for the tests and fuzz
// targets that check their pieces (the `internals` feature).
#[cfg(feature = "internals")]
pub mod paddle;
#[cfg(not(feature = "internals"))]
#[allow(unreachable_pub, dead_code)]
pub(crate) mod paddle;
#[cfg(feature = "internals")]
pub mod pickle;
#[cfg(not(feature = "internals"))]
#[allow(unreachable_pub, dead_code)]
pub(crate) mod pickle;
pub(crate) mod safetensors;
pub(crate) mod safetensors_index;
pub(crate) mod torch;
