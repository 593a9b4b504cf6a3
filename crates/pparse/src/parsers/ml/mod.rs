//! Machine-learning formats: tensors in NumPy, GGUF, safetensors (and its
//! sharded index), ONNX and PyTorch files; pickles, read by a VM that
//! never imports; Paddle programs and parameters.

pub mod gguf;
pub mod npy;
pub mod onnx;
pub mod paddle;
pub mod pickle;
pub mod safetensors;
pub mod safetensors_index;
pub mod torch;
