//! What a pickle would import, judged.
//!
//! `pickle.load` imports every GLOBAL and calls what REDUCE asks, so the
//! globals of a pickle are what it can do. The allowlist is the set torch's
//! `weights_only` loader accepts (tensors, storages, dtypes, containers; a
//! test checks it against torch's own list), plus a few plain builtins and
//! containers that call nothing themselves;
//! the denylist names modules and builtins that reach the shell, files,
//! code evaluation or arbitrary attribute access. Everything else is
//! "unknown": loading the pickle would import and run it.

pub use crate::offer::pickle::Verdict;

const TORCH_REBUILD: &[&str] = &[
    "_rebuild_tensor",
    "_rebuild_tensor_v2",
    "_rebuild_tensor_v3",
    "_rebuild_parameter",
    "_rebuild_parameter_with_state",
    "_rebuild_qtensor",
    "_rebuild_sparse_tensor",
    "_rebuild_nested_tensor",
    "_rebuild_meta_tensor_no_storage",
    "_rebuild_wrapper_subclass",
    "_rebuild_device_tensor_from_cpu_tensor",
    "_rebuild_device_tensor_from_numpy",
    "_rebuild_xla_tensor",
];

const TORCH_NAMES: &[&str] = &[
    "Size",
    "Tensor",
    "device",
    "per_tensor_affine",
    "per_channel_affine",
    "per_tensor_symmetric",
    "per_channel_symmetric",
    "per_channel_affine_float_qparams",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "strided",
];

/// Modules whose every name is dangerous.
const BAD_MODULES: &[&str] = &[
    "os",
    "posix",
    "nt",
    "subprocess",
    "sys",
    "runpy",
    "marshal",
    "types",
    "importlib",
    "operator",
    "functools",
    "socket",
    "ctypes",
    "pickle",
    "_pickle",
    "dill",
    "shutil",
    "tempfile",
    "webbrowser",
    "pty",
    "code",
    "codeop",
    "pdb",
    "bdb",
    "timeit",
    "platform",
    "signal",
    "asyncio",
    "multiprocessing",
    "threading",
    "_thread",
    "io",
    "_io",
    "pathlib",
    "glob",
    "shelve",
    "zipimport",
    "urllib",
    "http",
    "ftplib",
    "smtplib",
    "telnetlib",
    "requests",
    "inspect",
    "gc",
    "ssl",
    "commands",
    "popen2",
    "pip",
    "setuptools",
    "distutils",
    "nturl2path",
    "_posixsubprocess",
    "torch.hub",
    "torch.jit",
    "torch._dynamo",
    "torch._inductor",
    "numpy.f2py",
    "numpy.testing",
];

/// Builtins that evaluate code or reach attributes, files or the importer.
const BAD_BUILTINS: &[&str] = &[
    "eval",
    "exec",
    "compile",
    "open",
    "getattr",
    "setattr",
    "delattr",
    "__import__",
    "breakpoint",
    "input",
    "globals",
    "locals",
    "vars",
    "help",
    "exit",
    "quit",
    "memoryview",
    "__builtins__",
];

/// Judges `module.name`.
pub fn classify(module: &str, name: &str) -> Verdict {
    let in_module = |m: &str| module == m || module.starts_with(&format!("{m}."));
    if BAD_MODULES.iter().any(|m| in_module(m)) {
        return Verdict::Dangerous;
    }
    if matches!(module, "builtins" | "__builtin__") {
        if BAD_BUILTINS.contains(&name) {
            return Verdict::Dangerous;
        }
        return match name {
            "set" | "frozenset" | "bytearray" | "slice" | "complex" | "bool" | "int" | "float"
            | "str" | "bytes" | "list" | "tuple" | "dict" | "range" => Verdict::Allowed,
            _ => Verdict::Unknown,
        };
    }
    if matches!(
        (module, name),
        ("torch" | "torch.serialization", "load") | ("torch.storage", "_load_from_bytes")
    ) {
        return Verdict::Dangerous;
    }
    let allowed = match module {
        "collections" => matches!(name, "OrderedDict" | "Counter" | "defaultdict" | "deque"),
        "_codecs" | "codecs" => name == "encode",
        "copyreg" | "copy_reg" => name == "_reconstructor",
        "torch._utils" => TORCH_REBUILD.contains(&name),
        "torch._tensor" => name == "_rebuild_from_type_v2",
        "torch.nn.parameter" => name == "Parameter",
        "torch.serialization" => name == "_get_layout",
        "torch" => TORCH_NAMES.contains(&name) || legacy_type(name) || is_dtype(name),
        // Legacy tensor and storage types (`torch.cuda.FloatTensor`, ...).
        "torch.cuda" | "torch.sparse" | "torch.cuda.sparse" => legacy_type(name),
        "torch.storage" => matches!(name, "TypedStorage" | "UntypedStorage"),
        _ => false,
    };
    if allowed {
        Verdict::Allowed
    } else {
        Verdict::Unknown
    }
}

/// `FloatStorage`, `BFloat16Tensor`, `QUInt4x2Storage`: a capitalised
/// type name before `Storage` or `Tensor`.
fn legacy_type(name: &str) -> bool {
    let stem = name
        .strip_suffix("Storage")
        .or_else(|| name.strip_suffix("Tensor"));
    stem.is_some_and(|s| {
        s.starts_with(|c: char| c.is_ascii_uppercase())
            && s.chars().all(|c| c.is_ascii_alphanumeric())
    })
}

/// torch dtype attribute names (`torch.float32`, `torch.float8_e4m3fn`, ...).
fn is_dtype(name: &str) -> bool {
    let base = [
        "float", "double", "half", "bfloat16", "int", "long", "short", "uint", "bool", "complex",
        "cfloat", "cdouble", "chalf", "qint", "quint", "bits", "bcomplex",
    ];
    base.iter().any(|b| name.starts_with(b)) && name.len() < 24
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            classify("torch._utils", "_rebuild_tensor_v2"),
            Verdict::Allowed
        );
        assert_eq!(classify("collections", "OrderedDict"), Verdict::Allowed);
        assert_eq!(classify("torch", "FloatStorage"), Verdict::Allowed);
        assert_eq!(classify("torch", "float8_e4m3fn"), Verdict::Allowed);
        assert_eq!(classify("posix", "system"), Verdict::Dangerous);
        assert_eq!(classify("os.path", "join"), Verdict::Dangerous);
        assert_eq!(classify("builtins", "eval"), Verdict::Dangerous);
        assert_eq!(classify("builtins", "set"), Verdict::Allowed);
        assert_eq!(classify("__torch__.model", "Net"), Verdict::Unknown);
        assert_eq!(
            classify("numpy.core.multiarray", "_reconstruct"),
            Verdict::Unknown
        );
        assert_eq!(classify("torch.hub", "load"), Verdict::Dangerous);
    }
}
