//! Machine-learning formats: tensors in NumPy, GGUF, safetensors (and its
//! sharded index), ONNX and PyTorch files; pickles, read by a VM that
//! never imports; Paddle programs and parameters.

pub(crate) mod gguf;
pub(crate) mod npy;
pub(crate) mod onnx;
pub mod paddle;
pub mod pickle;
pub(crate) mod safetensors;
pub(crate) mod safetensors_index;
pub(crate) mod torch;
