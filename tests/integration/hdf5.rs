//! HDF5: the fixtures h5py wrote (fixtures/hdf5/make_hdf5.py, both
//! `libver` settings) against what h5py reads back from them
//! (fixtures/hdf5/expect.json): every group and dataset by its path, each
//! dataset's dtype, shape, layout, where its bytes are and their sha256,
//! chunked ones decoded through every kind of chunk index and filter;
//! groups load their members on expand (2,000 of them, in a B-tree of
//! symbol-table nodes or a fractal heap indexed by a v2 B-tree); cut files
//! keep every dataset whose bytes are whole; damage never panics, and a
//! compressed dataset called complete is byte-exact.

use pparse::offer::tensor::Tensor;
use pparse::view::tensors::tensors;
use pparse::{Session, Status};
use serde_json::Value;

use crate::util::*;

fn expect() -> Value {
    let text = std::fs::read_to_string(fixture_path("hdf5/expect.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// pparse's dtype name for a NumPy dtype string.
fn dtype_name(numpy: &str) -> String {
    let (kind, size) = numpy.split_at(2);
    match &kind[1..] {
        "f" => format!("F{}", size.parse::<u32>().unwrap() * 8),
        "i" => format!("I{}", size.parse::<u32>().unwrap() * 8),
        "u" => format!("U{}", size.parse::<u32>().unwrap() * 8),
        "S" => format!("S{size}"),
        "V" => format!("V{size}"),
        k => panic!("no name for {k}"),
    }
}

/// The datasets h5py lists whose values pparse offers: all but those
/// stored with a filter it does not decode (lzf).
fn value_datasets(want: &Value) -> Vec<&Value> {
    want["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "dataset" && o["compression"] != "lzf")
        // Variable-length strings, enums and arrays are no tensors.
        .filter(|o| {
            !s(&o["dtype"]).starts_with("|O") && !matches!(o["class"].as_u64(), Some(8 | 10))
        })
        .collect()
}

/// The bytes of a dataset's values, by its shape and NumPy dtype.
fn nbytes(w: &Value) -> u64 {
    let item: u64 = s(&w["dtype"])[2..].parse().unwrap();
    w["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(u)
        .product::<u64>()
        * item
}

fn check_tensor(session: &Session, x: &Tensor, w: &Value, ctx: &str, f: &mut Failures) {
    let shape: Vec<u64> = w["shape"].as_array().unwrap().iter().map(u).collect();
    let got = (
        x.name.as_str(),
        x.dtype.name().to_string(),
        &x.shape,
        x.length,
        x.status,
    );
    let exp = (
        s(&w["path"]),
        dtype_name(s(&w["dtype"])),
        &shape,
        nbytes(w),
        Status::Complete,
    );
    if got != exp {
        f.push(format!("{ctx}: got {got:?}, h5py {exp:?}"));
        return;
    }
    if let Some(at) = w["offset"].as_u64()
        && x.offset != at
    {
        f.push(format!("{ctx}: {} at {}, h5py {at}", x.name, x.offset));
    }
    if sha_hex(&tensor_bytes(&session.tree(), x)) != s(&w["sha256"]) {
        f.push(format!("{ctx}: {}: sha256 of the values differs", x.name));
    }
}

/// The index of the root group's node among the file's top nodes.
fn root_group(session: &Session) -> usize {
    let t = session.tree();
    t.root()
        .nodes
        .iter()
        .position(|n| n.kind == "group")
        .unwrap()
}

/// Every object below the root group's node, by path, with its node kind:
/// groups loaded on expand, as the explorer does.
fn objects(session: &Session) -> Vec<(String, String)> {
    let root = root_group(session);
    let mut out = Vec::new();
    let mut todo = vec![(vec![root], String::new())];
    while let Some((path, name)) = todo.pop() {
        assert!(session.load(0, &path));
        let t = session.tree();
        let mut n = &t.root().nodes[path[0]];
        for &i in &path[1..] {
            n = &n.loaded_children()[i];
        }
        for (i, k) in n.loaded_children().iter().enumerate().rev() {
            if !matches!(k.kind, "group" | "dataset") {
                continue;
            }
            let p = if name.is_empty() {
                k.name.to_string()
            } else {
                format!("{name}/{}", k.name)
            };
            out.push((p.clone(), k.kind.to_string()));
            if k.kind == "group" {
                let mut q = path.clone();
                q.push(i);
                todo.push((q, p));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_hdf5_fixture_matches_h5py() {
    let e = expect();
    let mut f = Failures::default();
    let mut versions = Vec::new();
    for (name, want) in e["files"].as_object().unwrap() {
        let session = parse(name, fixture(&format!("hdf5/{name}")));
        {
            let t = session.tree();
            if t.root().parser() != Some("hdf5") || !t.root().damage.is_empty() {
                f.push(format!(
                    "{name}: parser {:?}, damage {}",
                    t.root().parser(),
                    damage_text(&t, 0)
                ));
                continue;
            }
            let sb = t
                .root()
                .nodes
                .iter()
                .find(|n| n.kind == "superblock")
                .unwrap();
            let v = format!("version {}", u(&want["superblock"]));
            if sb.value.as_ref().map(|v| v.to_string()) != Some(v.clone()) {
                f.push(format!("{name}: superblock {:?}, h5py {v}", sb.value));
            }
            versions.push(u(&want["superblock"]));
        }
        let list = tensors(&session.tree(), 0);
        let want_t = value_datasets(want);
        let names: Vec<&str> = list.iter().map(|x| x.name.as_str()).collect();
        let want_names: Vec<&str> = want_t.iter().map(|w| s(&w["path"])).collect();
        if names != want_names {
            f.push(format!("{name}: tensors {names:?}, h5py {want_names:?}"));
            continue;
        }
        for (x, w) in list.iter().zip(&want_t) {
            check_tensor(&session, x, w, name, &mut f);
        }
        // Every group and dataset, chunked ones too, as a node.
        let mut want_o: Vec<(String, String)> = want["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (s(&o["path"]).to_string(), s(&o["kind"]).to_string()))
            .collect();
        want_o.sort();
        let got = objects(&session);
        if got != want_o {
            f.push(format!("{name}: objects {got:?}, h5py {want_o:?}"));
        }
    }
    versions.sort();
    versions.dedup();
    if versions != [0, 3] {
        f.push(format!("superblock versions {versions:?}, want 0 and 3"));
    }
    f.check("hdf5 fixtures");
}

/// An HDF5 file in a tar.gz (its data at 512, where a superblock after a
/// user block may be: the tar is still a tar), a zip and a `.keras`
/// archive lists the same tensors as standalone.
#[test]
fn hdf5_files_nest_in_archives() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let h5 = fixture("hdf5/basic-latest.h5");
    std::fs::write(dir.join("model.weights.h5"), &h5).unwrap();
    let status = std::process::Command::new("tar")
        .args(["czf", "t.tar.gz", "model.weights.h5"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success());
    let script = "import zipfile\n\
        with zipfile.ZipFile('m.keras', 'w') as z:\n    \
        z.writestr('metadata.json', '{}'); z.write('model.weights.h5')\n";
    let status = std::process::Command::new("python3")
        .args(["-c", script])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success());
    let alone = parse("model.weights.h5", h5);
    let want: Vec<(String, u64, u64)> = tensors(&alone.tree(), 0)
        .iter()
        .map(|x| (x.name.clone(), x.length, x.offset))
        .collect();
    assert!(want.len() > 5);
    for outer in ["t.tar.gz", "m.keras"] {
        let session = parse(outer, std::fs::read(dir.join(outer)).unwrap());
        let t = session.tree();
        let id = (0..t.exts.len())
            .find(|&i| t.exts[i].parser() == Some("hdf5"))
            .unwrap_or_else(|| panic!("{outer}: no hdf5 extraction"));
        assert_eq!(
            t.path_of(id).rsplit('/').next(),
            Some("model.weights.h5"),
            "{outer}"
        );
        assert!(
            t.exts[id].damage.is_empty(),
            "{outer}: {}",
            damage_text(&t, id)
        );
        let got: Vec<(String, u64, u64)> = tensors(&t, id)
            .iter()
            .map(|x| (x.name.clone(), x.length, x.offset))
            .collect();
        assert_eq!(got, want, "{outer}");
    }
}

/// Attributes are listed with their groups and datasets, and their values
/// as h5py reads them: a variable-length string from the global heap, an
/// i32, an f64.
#[test]
fn attributes_show_their_values() {
    for name in ["basic-earliest.h5", "basic-latest.h5"] {
        let session = parse(name, fixture(&format!("hdf5/{name}")));
        let root = root_group(&session);
        assert!(session.load(0, &[root]));
        let t = session.tree();
        let got: Vec<(String, String)> = t.root().nodes[root]
            .loaded_children()
            .iter()
            .filter(|n| n.kind == "attribute")
            .map(|n| (n.name.to_string(), n.value.as_ref().unwrap().to_string()))
            .collect();
        let want = [
            ("title", "\"pparse basic fixture\""),
            ("version", "3"),
            ("scale", "0.5"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

/// A chunked dataset is listed with its chunk shape, index and filters,
/// and its chunks on expand; `cat` gives its values in C order as h5py
/// reads them; the chunks of a filter pparse does not decode (lzf) are
/// files of their stored bytes, named as zarr names chunks.
#[test]
fn a_chunked_dataset_names_its_chunks_and_filters() {
    let e = expect();
    for (name, index) in [
        ("chunks-earliest.h5", "v1 B-tree"),
        ("chunks-latest.h5", "fixed array"),
    ] {
        let path = fixture_path(&format!("hdf5/{name}"));
        let path = path.to_str().unwrap();
        let run = pparse(["nodes", "--depth", "2", path]);
        assert_eq!(run.code, 0, "{}", run.stderr_text());
        let out = run.stdout_text();
        let want = format!("i16 [200, 300], chunked [5, 7] ({index}), shuffle+deflate+fletcher32");
        assert!(out.contains(&want), "{name}: {out}");
        let objects = e["files"][name]["objects"].as_array().unwrap();
        for w in objects {
            if w["kind"] != "dataset" {
                continue;
            }
            let p = s(&w["path"]);
            if w["compression"] == "lzf" {
                for (key, sha) in w["chunks"].as_object().unwrap() {
                    let run = pparse(["cat", "--no-index", path, &format!("{p}/{key}")]);
                    assert_eq!(run.code, 0, "{name} {p}/{key}: {}", run.stderr_text());
                    assert_eq!(&sha_hex(&run.stdout), s(sha), "{name} {p}/{key}");
                }
                continue;
            }
            let run = pparse(["cat", "--no-index", path, p]);
            assert_eq!(run.code, 0, "{name} {p}: {}", run.stderr_text());
            assert_eq!(sha_hex(&run.stdout), s(&w["sha256"]), "{name} {p}");
        }
        // The fixed array's 1,720 chunks, 1,000 of them as nodes.
        let session = parse(name, fixture(&format!("hdf5/{name}")));
        let root = root_group(&session);
        assert!(session.load(0, &[root]));
        let i = session.tree().root().nodes[root]
            .loaded_children()
            .iter()
            .position(|n| &*n.name == "filtered")
            .unwrap();
        assert!(session.load(0, &[root, i]));
        let t = session.tree();
        let kids = t.root().nodes[root].loaded_children()[i].loaded_children();
        let chunks = kids.iter().find(|n| n.kind == "chunks").unwrap();
        assert_eq!(
            chunks.value.as_ref().unwrap().to_string(),
            "1720 of 1720 written",
            "{name}"
        );
        assert_eq!(chunks.loaded_children().len(), 1001, "{name}");
    }
    for name in ["basic-earliest.h5", "basic-latest.h5"] {
        let path = fixture_path(&format!("hdf5/{name}"));
        let path = path.to_str().unwrap();
        let run = pparse(["nodes", "--depth", "2", path]);
        assert_eq!(run.code, 0, "{}", run.stderr_text());
        let out = run.stdout_text();
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with("chunked "))
            .unwrap_or_else(|| panic!("{name}: {out}"));
        assert!(
            line.contains("i32 [40, 25], chunked [10, 25]"),
            "{name}: {line}"
        );
        assert!(line.contains("shuffle+deflate"), "{name}: {line}");
    }
}

/// Cut anywhere: a dataset whose bytes are all there is complete and
/// byte-exact, one whose bytes are cut is not complete, and a cut file
/// is never called intact.
#[test]
fn a_cut_file_keeps_every_whole_dataset() {
    let e = expect();
    let mut f = Failures::default();
    for name in [
        "basic-earliest.h5",
        "basic-latest.h5",
        "chunks-earliest.h5",
        "chunks-latest.h5",
        "tiny-earliest.h5",
        "tiny-latest.h5",
    ] {
        let want = &e["files"][name];
        let whole = value_datasets(want);
        let full = fixture(&format!("hdf5/{name}"));
        let step = (full.len() / 150).max(97);
        let mut cuts: Vec<u64> = (0..full.len() as u64).step_by(step).collect();
        for w in &whole {
            if let Some(o) = w["offset"].as_u64() {
                let l = u(&w["storage"]);
                cuts.extend([o, o + 1, o + l.saturating_sub(1), o + l]);
            }
        }
        for cut in cuts {
            let cut = cut.min(full.len() as u64);
            let bytes = truncated(&full, cut);
            let session = parse_named(name, bytes, &format!("{name} cut at {cut}"));
            let t = session.tree();
            // Fewer bytes than the signature are no HDF5 file.
            if (8..full.len() as u64).contains(&cut) && t.root().damage.is_empty() {
                f.push(format!("{name} cut at {cut}: no damage"));
            }
            drop(t);
            for x in tensors(&session.tree(), 0) {
                // Found by its signature: complete, it is one of them.
                if x.name.starts_with("recovered/") {
                    if x.status == Status::Complete {
                        let sha = sha_hex(&tensor_bytes(&session.tree(), &x));
                        if !whole.iter().any(|w| s(&w["sha256"]) == sha) {
                            f.push(format!("{name} cut at {cut}: {} is no dataset", x.name));
                        }
                    }
                    continue;
                }
                let Some(w) = whole.iter().find(|w| s(&w["path"]) == x.name) else {
                    f.push(format!("{name} cut at {cut}: unknown dataset {}", x.name));
                    continue;
                };
                // A chunked dataset's bytes are its own extraction's.
                let inside = x.source != 0 || x.offset + x.length <= cut;
                match (x.status, inside) {
                    (Status::Complete, true)
                        if sha_hex(&tensor_bytes(&session.tree(), &x)) != s(&w["sha256"]) =>
                    {
                        f.push(format!("{name} cut at {cut}: {} differs", x.name));
                    }
                    (Status::Complete, false) => {
                        f.push(format!("{name} cut at {cut}: {} cut but complete", x.name));
                    }
                    _ => {}
                }
            }
        }
    }
    f.check("cut hdf5 files");
}

/// Flips, zeros and random spans anywhere: never a panic or a hang, a
/// complete dataset lies within the file, and a compressed one called
/// complete is byte-exact (deflate's Adler-32 and the index's checks hold
/// it; an unfiltered chunk has nothing to check it by).
#[test]
fn damage_never_panics_or_misplaces() {
    let e = expect();
    let mut rng = Rng::new(38);
    let mut f = Failures::default();
    for (name, rounds) in [
        ("basic-earliest.h5", 200),
        ("basic-latest.h5", 200),
        ("many-latest.h5", 60),
        ("many-earliest.h5", 60),
        ("chunks-earliest.h5", 150),
        ("chunks-latest.h5", 150),
        ("tiny-earliest.h5", 150),
        ("tiny-latest.h5", 150),
    ] {
        let objects = e["files"][name]["objects"].as_array().unwrap();
        let full = fixture(&format!("hdf5/{name}"));
        for round in 0..rounds {
            let mut b = full.clone();
            let at = rng.below(full.len() as u64);
            match round % 3 {
                0 => flip(&mut b, at, 1 << rng.below(8)),
                1 => {
                    let n = 1 + rng.below(64).min(full.len() as u64 - at - 1);
                    for x in &mut b[at as usize..(at + n) as usize] {
                        *x = 0;
                    }
                }
                _ => overwrite(&mut b, at, 1 + rng.below(32), &mut rng),
            }
            let len = b.len() as u64;
            let session = parse_named(name, b, &format!("{name} damaged at {at}"));
            for x in tensors(&session.tree(), 0) {
                if x.status != Status::Complete {
                    continue;
                }
                if x.source == 0 && x.offset + x.length > len {
                    f.push(format!(
                        "{name} round {round}: {} complete past the end",
                        x.name
                    ));
                }
                let w = objects.iter().find(|w| s(&w["path"]) == x.name);
                if let Some(w) = w
                    && w["compression"] == "gzip"
                    && x.shape
                        == w["shape"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(u)
                            .collect::<Vec<_>>()
                    && sha_hex(&tensor_bytes(&session.tree(), &x)) != s(&w["sha256"])
                {
                    f.push(format!(
                        "{name} round {round}, damaged at {at}: {} complete but wrong",
                        x.name
                    ));
                }
            }
            // Expanding every group never panics either.
            let _ = objects_lenient(&session);
        }
    }
    f.check("damaged hdf5 files");
}

/// Loads every group node it can reach (bounded), whatever it holds.
fn objects_lenient(session: &Session) -> usize {
    let roots: Vec<usize> = {
        let t = session.tree();
        (0..t.root().nodes.len()).collect()
    };
    let mut todo: Vec<Vec<usize>> = roots.into_iter().map(|i| vec![i]).collect();
    let mut n = 0;
    while let Some(path) = todo.pop() {
        n += 1;
        if n > 2000 || path.len() > 16 {
            break;
        }
        session.load(0, &path);
        let t = session.tree();
        let mut node = &t.root().nodes[path[0]];
        for &i in &path[1..] {
            node = &node.loaded_children()[i];
        }
        for (i, k) in node.loaded_children().iter().enumerate() {
            if k.kind == "group" || k.kind == "dataset" {
                let mut q = path.clone();
                q.push(i);
                todo.push(q);
            }
        }
    }
    n
}

/// Layers, each with its weights' names and `type [shape]`.
type Layers = Vec<(String, Vec<(String, String)>)>;

/// The layers of a Keras file, each with its weights in order, as the
/// node `keras layers` lists them on expand.
fn keras_listing(session: &Session) -> Option<Layers> {
    let i = {
        let t = session.tree();
        t.root().nodes.iter().position(|n| n.kind == "keras")?
    };
    assert!(session.load(0, &[i]));
    let t = session.tree();
    let layers = t.root().nodes[i].loaded_children();
    Some(
        layers
            .iter()
            .map(|l| {
                let ws = l
                    .loaded_children()
                    .iter()
                    .map(|w| (w.name.to_string(), w.value.as_ref().unwrap().to_string()))
                    .collect();
                (l.name.to_string(), ws)
            })
            .collect(),
    )
}

/// What h5py reads of the same layers (expect.json's `keras_layers`), in
/// pparse's words: `f32 [4, 8]`.
fn keras_expected(want: &Value) -> Option<Layers> {
    let layers = want.get("keras_layers")?.as_array()?;
    Some(
        layers
            .iter()
            .map(|l| {
                let ws = l[1]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| {
                        let t = dtype_name(s(&w[1])).to_lowercase();
                        let shape: Vec<String> = w[2]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|d| u(d).to_string())
                            .collect();
                        (s(&w[0]).to_string(), format!("{t} [{}]", shape.join(", ")))
                    })
                    .collect();
                (s(&l[0]).to_string(), ws)
            })
            .collect(),
    )
}

/// Keras 2 files (`layer_names` and `weight_names`) and Keras 3 weights
/// (`layers/<name>/vars/<i>`, nested layers too) list their weights by
/// layer, in Keras' order, as h5py reads them; other HDF5 files have no
/// such listing (a group named `layers` of datasets is not Keras').
#[test]
fn keras_weights_are_listed_by_layer() {
    let e = expect();
    let mut seen = 0;
    for (name, want) in e["files"].as_object().unwrap() {
        let session = parse(name, fixture(&format!("hdf5/{name}")));
        let got = keras_listing(&session);
        let exp = keras_expected(want);
        assert_eq!(got, exp, "{name}");
        seen += usize::from(exp.is_some());
    }
    assert_eq!(seen, 4);
}

/// A `.keras` archive (a zip of config.json, metadata.json and
/// model.weights.h5, as Keras 3 saves it): its weights are tensors at the
/// same offsets as in the file alone, listed by layer, and `cat` reads a
/// weight through the zip.
#[test]
fn a_keras_archive_lists_its_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let h5 = fixture("hdf5/keras3-earliest.h5");
    std::fs::write(dir.join("model.weights.h5"), &h5).unwrap();
    let script = "import zipfile\n\
        with zipfile.ZipFile('m.keras', 'w') as z:\n    \
        z.writestr('config.json', '{\"class_name\": \"Sequential\"}')\n    \
        z.writestr('metadata.json', '{\"keras_version\": \"3.6.0\"}')\n    \
        z.write('model.weights.h5')\n";
    let status = std::process::Command::new("python3")
        .args(["-c", script])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success());
    let alone = parse("model.weights.h5", h5);
    let want: Vec<(String, u64, u64)> = tensors(&alone.tree(), 0)
        .iter()
        .map(|x| (x.name.clone(), x.length, x.offset))
        .collect();
    assert_eq!(want.len(), 17);
    let archive = dir.join("m.keras");
    let session = parse("m.keras", std::fs::read(&archive).unwrap());
    let t = session.tree();
    let id = (0..t.exts.len())
        .find(|&i| t.exts[i].parser() == Some("hdf5"))
        .unwrap();
    let got: Vec<(String, u64, u64)> = tensors(&t, id)
        .iter()
        .map(|x| (x.name.clone(), x.length, x.offset))
        .collect();
    assert_eq!(got, want);
    assert!(t.exts[id].nodes.iter().any(|n| n.kind == "keras"));
    drop(t);
    let run = pparse([
        "cat",
        "--no-index",
        archive.to_str().unwrap(),
        "model.weights.h5/layers/dense/vars/0",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let x = tensors(&alone.tree(), 0)
        .into_iter()
        .find(|x| x.name == "layers/dense/vars/0")
        .unwrap();
    assert_eq!(run.stdout, tensor_bytes(&alone.tree(), &x));
}

/// Groups are folders and datasets files, in `pparse::fs` and in a FUSE
/// mount: a dataset read as a file is its values, as h5py reads them,
/// chunked ones decoded.
#[test]
fn groups_are_folders_and_datasets_files() {
    use pparse::fs::{Fs, Kind};
    use std::io::Read;
    let e = expect();
    let name = "basic-latest.h5";
    let want = &e["files"][name]["objects"];
    let sha_of = |p: &str| {
        s(&want
            .as_array()
            .unwrap()
            .iter()
            .find(|o| s(&o["path"]) == p)
            .unwrap()["sha256"])
        .to_string()
    };
    let path = fixture_path(&format!("hdf5/{name}"));
    let options = pparse::Options {
        index: pparse::parsers::IndexMode::Off,
        ..Default::default()
    };
    let fs = Fs::with_options(&path, options).unwrap();
    let names = |p: &str| -> Vec<(String, bool)> {
        let mut v: Vec<(String, bool)> = fs
            .list(p, false)
            .unwrap()
            .into_iter()
            .map(|e| (e.path, e.kind == Kind::Dir))
            .collect();
        v.sort();
        v
    };
    let top = names("");
    assert!(top.contains(&("weights".to_string(), true)), "{top:?}");
    assert!(top.contains(&("chunked".to_string(), false)), "{top:?}");
    let w = names("weights");
    assert!(w.contains(&("weights/deeper".to_string(), true)), "{w:?}");
    assert!(w.contains(&("weights/kernel".to_string(), false)), "{w:?}");
    for p in [
        "weights/kernel",
        "weights/deeper/still/bytes",
        "chunked",
        "small",
    ] {
        let mut got = Vec::new();
        fs.open(p).unwrap().read_to_end(&mut got).unwrap();
        assert_eq!(sha_hex(&got), sha_of(p), "{p}");
    }
    let Some(mut m) = crate::mount::Mount::start(&path) else {
        return;
    };
    assert!(m.at.join("weights/deeper/still").is_dir());
    for p in ["weights/kernel", "weights/deeper/still/bytes", "chunked"] {
        let got = std::fs::read(m.at.join(p)).unwrap();
        assert_eq!(sha_hex(&got), sha_of(p), "mounted {p}");
    }
    assert_eq!(m.stop(libc::SIGTERM), Some(0));
}

/// The root group's header wiped out: the walk from the root finds
/// nothing, and the objects are found by their signatures (`OHDR`, and
/// `SNOD` entries named from their `HEAP`) as `recovered/…`: every
/// dataset h5py reads (but lzf's), complete and byte-exact; in a file of
/// symbol tables, under the names the root gave them.
#[test]
fn a_broken_root_is_searched_by_signature() {
    let e = expect();
    let mut f = Failures::default();
    for name in [
        "basic-earliest.h5",
        "basic-latest.h5",
        "chunks-earliest.h5",
        "chunks-latest.h5",
    ] {
        let mut b = fixture(&format!("hdf5/{name}"));
        let root = {
            let s = parse(name, b.clone());
            let t = s.tree();
            t.root().nodes[root_group(&s)].range.start as usize
        };
        b[root..root + 64].fill(0);
        let session = parse_named(name, b, &format!("{name} without its root"));
        let t = session.tree();
        if t.root().damage.is_empty() {
            f.push(format!("{name}: no damage"));
        }
        drop(t);
        let list = tensors(&session.tree(), 0);
        let mut got: Vec<(String, String)> = Vec::new();
        for x in &list {
            if !x.name.starts_with("recovered/") {
                f.push(format!("{name}: {} is not recovered", x.name));
            }
            if x.status == Status::Complete {
                got.push((x.name.clone(), sha_hex(&tensor_bytes(&session.tree(), x))));
            }
        }
        for w in value_datasets(&e["files"][name]) {
            let p = s(&w["path"]);
            let found = got.iter().find(|(_, sha)| sha == s(&w["sha256"]));
            match found {
                None => f.push(format!("{name}: {p} not recovered")),
                // A member of the root keeps its name (a symbol table's).
                Some((n, _)) if name.contains("earliest") && !p.contains('/') => {
                    if !n.starts_with(&format!("recovered/{p}@")) {
                        f.push(format!("{name}: {p} recovered as {n}"));
                    }
                }
                Some(_) => {}
            }
        }
    }
    f.check("hdf5 files without their root");
}

/// An HDF5 file inside bytes no format takes (random bytes around it):
/// carving finds its superblock, bounds it by the end the superblock
/// records, and reads the same datasets as the file alone.
#[test]
fn carving_finds_an_hdf5_file_in_unclaimed_bytes() {
    let h5 = fixture("hdf5/chunks-latest.h5");
    let alone = parse("chunks-latest.h5", h5.clone());
    let want: Vec<(String, u64, String)> = tensors(&alone.tree(), 0)
        .iter()
        .map(|x| {
            (
                x.name.clone(),
                x.length,
                sha_hex(&tensor_bytes(&alone.tree(), x)),
            )
        })
        .collect();
    let mut rng = Rng::new(5);
    let mut blob: Vec<u8> = (0..5000).map(|_| rng.below(256) as u8).collect();
    let at = blob.len() as u64;
    blob.extend_from_slice(&h5);
    blob.extend((0..3000).map(|_| rng.below(256) as u8));
    let session = parse("blob.bin", blob);
    let t = session.tree();
    let id = (0..t.exts.len())
        .find(|&i| t.exts[i].parser() == Some("hdf5"))
        .expect("an hdf5 file found");
    assert_eq!(t.exts[id].display_name(), format!("found@{at:#x}.h5"));
    assert_eq!(t.exts[id].size(), h5.len() as u64);
    let got: Vec<(String, u64, String)> = tensors(&t, id)
        .iter()
        .map(|x| (x.name.clone(), x.length, sha_hex(&tensor_bytes(&t, x))))
        .collect();
    assert_eq!(got, want);
}

/// Compound, enum, array and variable-length string types are told with
/// their fields, names and shapes, as h5py wrote them.
#[test]
fn compound_enum_and_array_types_are_described() {
    for name in ["types-earliest.h5", "types-latest.h5"] {
        let path = fixture_path(&format!("hdf5/{name}"));
        let run = pparse(["nodes", "--depth", "2", path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}", run.stderr_text());
        let out = run.stdout_text();
        for want in [
            "compound[16] {id: i32 @0, score: f64 @4, tag: string[4] @12} [3]",
            "enum[1] of i8 {BLUE=2, GREEN=1, RED=0} [4]",
            "array[12] of f32 [3] [4]",
            "variable-length string [3]",
        ] {
            assert!(out.contains(want), "{name}: no {want:?} in {out}");
        }
    }
}

/// Every dataset of the chunk fixtures exported as `.npy` reads back in
/// numpy as the values h5py read, and its statistics (min, max, mean over
/// the values as f64) are numpy's.
#[test]
fn datasets_export_to_npy_and_give_numpy_statistics() {
    use pparse::view::values;
    use std::sync::atomic::AtomicBool;
    let e = expect();
    let dir = tempfile::tempdir().unwrap();
    let mut script = String::from("import hashlib, json, numpy as np\nout = {}\n");
    let mut ours = Vec::new();
    for name in ["chunks-earliest.h5", "chunks-latest.h5", "basic-latest.h5"] {
        let session = parse(name, fixture(&format!("hdf5/{name}")));
        let t = session.tree();
        for x in tensors(&t, 0) {
            if x.dtype.name().starts_with('S') || x.length == 0 {
                continue;
            }
            let key = format!("{name}/{}", x.name);
            let file = dir.path().join(format!("{}.npy", ours.len()));
            let data = t.exts[x.source].data();
            let mut f = std::fs::File::create(&file).unwrap();
            values::write_npy(&x, &*data, &mut f).unwrap();
            let st = values::stats(&x, &*data, 10, &AtomicBool::new(false), &|_, _| {}).unwrap();
            let sha = s(&e["files"][name]["objects"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| s(&o["path"]) == x.name)
                .unwrap()["sha256"])
            .to_string();
            script.push_str(&format!(
                "a = np.load({path:?})\nv = a.astype('f8')\n{swap}\
                 out[{key:?}] = [hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() == {sha:?}, float(v.min()), float(v.max()), float(v.mean())]\n",
                path = file.display().to_string(),
                // h5py's sha is of the bytes as stored.
                swap = if x.big_endian { "a = a.astype(a.dtype.newbyteorder('>'))\n" } else { "" },
            ));
            ours.push((key, st.min, st.max, st.mean));
        }
    }
    script.push_str("print(json.dumps(out))\n");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let np: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(ours.len() > 20);
    for (key, min, max, mean) in ours {
        let w = &np[&key];
        assert_eq!(w[0], true, "{key}: the export differs from h5py's values");
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + b.abs());
        let (wmin, wmax, wmean) = (
            w[1].as_f64().unwrap(),
            w[2].as_f64().unwrap(),
            w[3].as_f64().unwrap(),
        );
        assert!(
            close(min, wmin) && close(max, wmax) && close(mean, wmean),
            "{key}: stats {min} {max} {mean}, numpy {wmin} {wmax} {wmean}"
        );
    }
}
