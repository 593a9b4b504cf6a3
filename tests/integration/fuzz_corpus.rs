//! The fuzz corpora as tests: every file of `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/` goes through its target's function of
//! `fuzz/harness.rs`, the code the fuzz targets run, so a crash found once
//! cannot come back. See fuzz/README.md.

#[path = "../../fuzz/harness.rs"]
mod harness;

use std::path::{Path, PathBuf};

const FUZZ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz");

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(FUZZ).join(kind).join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.expect("read fuzz dir").path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

fn replay(target: &str) {
    let (_, run) = harness::TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    for kind in ["corpus", "regressions"] {
        for path in inputs(kind, target) {
            let bytes = std::fs::read(&path).expect("read input");
            eprintln!("fuzz {kind}: {}", path.display());
            run(&bytes);
        }
    }
}

macro_rules! replays {
    ($($name:ident,)*) => {
        $(
            #[test]
            fn $name() {
                replay(stringify!($name));
            }
        )*
        const TESTED: &[&str] = &[$(stringify!($name)),*];
    };
}

replays! {
    gzip,
    tar,
    zip,
    json,
    pickle,
    torch,
    safetensors,
    safetensors_index,
    onnx,
    protobuf,
    wandb,
    cli_json,
    nested_zip,
    pickle_memo,
    tar_counts,
    tensor_shapes,
    pir,
    index,
    index_forged,
    deflate_resync,
    deflate_pieces,
    bzip2,
    xz,
    zstd,
    npy,
    msgpack,
    gguf,
    hdf5,
}

/// Every target is replayed here, every corpus directory is a target, and
/// every target has a binary in fuzz/fuzz_targets/.
#[test]
fn every_fuzz_target_is_replayed() {
    for (name, _) in harness::TARGETS {
        assert!(TESTED.contains(name), "fuzz target {name} is not replayed");
        let bin = Path::new(FUZZ)
            .join("fuzz_targets")
            .join(format!("{name}.rs"));
        assert!(bin.is_file(), "fuzz target {name} has no {}", bin.display());
    }
    for kind in ["corpus", "regressions"] {
        let Ok(rd) = std::fs::read_dir(Path::new(FUZZ).join(kind)) else {
            continue;
        };
        for e in rd {
            let name = e.expect("read fuzz dir").file_name();
            let name = name.to_string_lossy();
            assert!(
                harness::TARGETS.iter().any(|(n, _)| *n == name),
                "fuzz/{kind}/{name} is not a fuzz target"
            );
        }
    }
}
