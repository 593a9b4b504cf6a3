//! safetensors: every fixture's tensor table against what the real
//! `safetensors` package reports (fixtures/safetensors/expect.json), the
//! status of each tensor at many cuts, each kind of header corruption, the
//! sharded model as a folder and as an index, and a no-panic damage sweep.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use pparse::offer::tensor::Tensor;
use pparse::view::tensors::tensors;
use pparse::{Options, Session, Status, Tree};
use serde_json::Value;

use crate::sweep::sweep_with;
use crate::util::*;

fn expect() -> &'static Value {
    static E: OnceLock<Value> = OnceLock::new();
    E.get_or_init(|| {
        let text = std::fs::read_to_string(fixture_path("safetensors/expect.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

fn files() -> Vec<(String, &'static Value)> {
    expect()["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v))
        .collect()
}

fn base(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap()
}

/// Opens a file or folder on disk and parses it to the end, with a deadline.
fn open(path: &Path) -> Session {
    let s = Session::open(path, Options::default()).expect("open");
    let start = Instant::now();
    while !s.is_finished() {
        assert!(
            start.elapsed() < DEADLINE,
            "parse of {} did not finish",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    s
}

/// Compares a table with the package's tensors of one file.
fn check_table(tree: &Tree, table: &[Tensor], want: &Value, what: &str, f: &mut Failures) {
    let want = want["tensors"].as_array().unwrap();
    let names: Vec<&str> = table.iter().map(|t| t.name.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|t| s(&t["name"])).collect();
    if names != want_names {
        f.push(format!(
            "{what}: tensors {names:?}, expected {want_names:?}"
        ));
        return;
    }
    for (t, w) in table.iter().zip(want) {
        let shape: Vec<u64> = w["shape"].as_array().unwrap().iter().map(u).collect();
        let got = (&*t.dtype.name(), &t.shape, t.offset, t.length, t.status);
        let exp = (
            s(&w["dtype"]),
            &shape,
            u(&w["offset"]),
            u(&w["length"]),
            Status::Complete,
        );
        if got != exp {
            f.push(format!("{what}: {}: got {got:?}, expected {exp:?}", t.name));
            continue;
        }
        if t.detail.is_some() {
            f.push(format!("{what}: {}: detail {:?}", t.name, t.detail));
        }
        let sha = sha_hex(&tensor_bytes(tree, t));
        if sha != s(&w["sha256"]) {
            f.push(format!("{what}: {}: sha256 of the bytes differs", t.name));
        }
    }
}

#[test]
fn every_fixture_matches_the_safetensors_package() {
    let mut f = Failures::default();
    for (rel, want) in files() {
        let session = parse(base(&rel), fixture(&format!("safetensors/{rel}")));
        let t = session.tree();
        let root = t.root();
        if root.parser() != Some("safetensors") || !root.damage.is_empty() {
            f.push(format!(
                "{rel}: parser {:?}, damage {}",
                root.parser(),
                damage_text(&t, 0)
            ));
            continue;
        }
        check_table(&t, &tensors(&t, 0), want, &rel, &mut f);
        // Nodes: the length field, the header, and each tensor's data range.
        let n = u(&want["header_len"]);
        let nodes = &root.nodes;
        if nodes[0].value != Some(pparse::node::Value::UInt(n)) || nodes[1].range.end != 8 + n {
            f.push(format!(
                "{rel}: header nodes {:?} {:?}",
                nodes[0], nodes[1].range
            ));
        }
        for w in want["tensors"].as_array().unwrap() {
            let (o, l) = (u(&w["offset"]), u(&w["length"]));
            let found = nodes.iter().any(|x| {
                x.kind == "tensor"
                    && *x.name == *s(&w["name"])
                    && x.range.start == o
                    && x.range.len() == l
            });
            if !found {
                f.push(format!(
                    "{rel}: no tensor node {} at {o}+{l}",
                    s(&w["name"])
                ));
            }
        }
        // The header's members, loaded lazily, span what Python's json finds.
        drop(t);
        assert!(session.load(0, &[1]));
        let t = session.tree();
        let members: Vec<(String, u64, u64)> = t.root().nodes[1]
            .loaded_children()
            .iter()
            .map(|c| (c.name.to_string(), c.range.start, c.range.end))
            .collect();
        let want_members: Vec<(String, u64, u64)> = want["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (s(&m["name"]).to_string(), u(&m["start"]), u(&m["end"])))
            .collect();
        if members != want_members {
            f.push(format!(
                "{rel}: header members {members:?}, expected {want_members:?}"
            ));
        }
    }
    f.check("safetensors fixtures");
}

#[test]
fn every_dtype_of_the_spec_is_covered() {
    let mut seen: Vec<String> = files()
        .iter()
        .flat_map(|(_, v)| {
            v["tensors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| s(&t["dtype"]).to_string())
        })
        .collect();
    seen.sort();
    seen.dedup();
    for d in &pparse::offer::tensor::Dtype::ALL[..22] {
        assert!(
            seen.contains(&d.name().to_string()),
            "no fixture has {}",
            d.name()
        );
    }
}

/// The status each tensor must have when the file is cut at `cut`.
fn check_cut(rel: &str, data: &[u8], want: &Value, cut: usize, f: &mut Failures) {
    let what = format!("{rel} cut at {cut}");
    let session = parse_named(base(rel), data[..cut].to_vec(), &what);
    let t = session.tree();
    let table = tensors(&t, 0);
    let n = u(&want["header_len"]) as usize;
    let cut64 = cut as u64;
    let want_status = if cut == data.len() {
        Status::Complete
    } else {
        Status::Truncated
    };
    if t.worst_status() != want_status {
        f.push(format!(
            "{what}: status {:?}, expected {want_status:?}: {}",
            t.worst_status(),
            damage_text(&t, 0)
        ));
    }
    // Which tensors must be listed: all once the header is whole; before
    // that, those whose header member is whole.
    let members = want["members"].as_array().unwrap();
    for w in want["tensors"].as_array().unwrap() {
        let name = s(&w["name"]);
        let member_end = members
            .iter()
            .find(|m| s(&m["name"]) == name)
            .map(|m| u(&m["end"]))
            .unwrap();
        let listed = table.iter().find(|x| x.name == name);
        let must = cut >= 8 + n || member_end <= cut64;
        let Some(x) = listed else {
            if must {
                f.push(format!("{what}: {name} is not listed"));
            }
            continue;
        };
        let (o, l) = (u(&w["offset"]), u(&w["length"]));
        let (st, word) = if o + l <= cut64 {
            (Status::Complete, None)
        } else if o < cut64 {
            (
                Status::Truncated,
                Some(format!("partial: {} of {l} bytes present", cut64 - o)),
            )
        } else {
            (
                Status::Truncated,
                Some(format!("missing: none of its {l} bytes present")),
            )
        };
        if x.status != st || x.detail != word || x.offset != o || x.length != l {
            f.push(format!(
                "{what}: {name}: {:?} {:?} at {}+{}, expected {st:?} {word:?} at {o}+{l}",
                x.status, x.detail, x.offset, x.length
            ));
        }
        if st == Status::Complete && sha_hex(&tensor_bytes(&t, x)) != s(&w["sha256"]) {
            f.push(format!("{what}: {name}: bytes differ"));
        }
    }
}

#[test]
fn truncation_gives_each_tensor_its_status() {
    let mut f = Failures::default();
    for (rel, want) in files() {
        let data = fixture(&format!("safetensors/{rel}"));
        let n = u(&want["header_len"]) as usize;
        let mut cuts: Vec<usize> = if data.len() <= 4096 {
            (0..=data.len()).collect()
        } else {
            // Every byte of the header, then the ends of the tensors ±1 and a spread.
            let mut c: Vec<usize> = (0..=8 + n + 1).collect();
            for w in want["tensors"].as_array().unwrap() {
                let e = (u(&w["offset"]) + u(&w["length"])) as usize;
                c.extend([e - 1, e, e + 1]);
            }
            c.extend((0..64).map(|i| i * data.len() / 64));
            c
        };
        cuts.retain(|&c| c <= data.len());
        cuts.sort();
        cuts.dedup();
        for cut in cuts {
            check_cut(&rel, &data, want, cut, &mut f);
        }
    }
    f.check("safetensors truncation");
}

/// `metadata.safetensors` with its header text edited by `edit` (the data
/// section is kept; N is recomputed and the header padded to 8 bytes).
fn edited(edit: impl Fn(&str) -> String) -> Vec<u8> {
    let data = fixture("safetensors/metadata.safetensors");
    let n = u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&data[8..8 + n]).unwrap().trim_end();
    let mut h = edit(header);
    assert_ne!(h, header, "the edit changed nothing");
    while !h.len().is_multiple_of(8) {
        h.push(' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(&data[8 + n..]);
    out
}

/// Parses a damaged variant and checks that a corrupt damage says `want`
/// and that the tensors in `kept` are listed whole, with the right bytes.
fn check_corrupt(what: &str, bytes: Vec<u8>, want: &[&str], kept: &[&str]) {
    let session = parse_named("metadata.safetensors", bytes, what);
    let t = session.tree();
    let d = &t.root().damage;
    for w in want {
        assert!(
            d.iter()
                .any(|d| d.status == Status::Corrupt && d.reason.contains(w)),
            "{what}: no corrupt damage saying {w:?}: {}",
            damage_text(&t, 0)
        );
    }
    let exp = &expect()["files"]["metadata.safetensors"]["tensors"];
    let table = tensors(&t, 0);
    for k in kept {
        let w = exp
            .as_array()
            .unwrap()
            .iter()
            .find(|x| s(&x["name"]) == *k)
            .unwrap();
        let Some(x) = table.iter().find(|x| x.name == *k) else {
            panic!("{what}: {k} is not kept: {table:?}");
        };
        assert_eq!(x.status, Status::Complete, "{what}: {k}: {:?}", x.detail);
        assert_eq!(
            sha_hex(&tensor_bytes(&t, x)),
            s(&w["sha256"]),
            "{what}: {k}"
        );
    }
}

#[test]
fn each_header_corruption_is_named_and_the_rest_kept() {
    check_corrupt(
        "overlap",
        edited(|h| h.replace("\"data_offsets\":[8,40]", "\"data_offsets\":[4,36]")),
        &[
            "tensors 'step' and 'embed.bias' overlap",
            "hole in the data",
        ],
        &["embed.weight"],
    );
    check_corrupt(
        "gap",
        edited(|h| h.replace("\"data_offsets\":[40,168]", "\"data_offsets\":[48,176]")),
        &[
            "8 bytes between tensors 'embed.bias' and 'embed.weight' belong to no tensor",
            "tensor 'embed.weight': data_offsets [48, 176] point past the end of the file's data section; partial: 120 of 128 bytes present",
        ],
        &["step", "embed.bias"],
    );
    check_corrupt(
        "bad dtype",
        edited(|h| {
            h.replacen(
                "\"dtype\":\"F32\",\"shape\":[8]",
                "\"dtype\":\"F8_E4M3FN\",\"shape\":[8]",
                1,
            )
        }),
        &["tensor 'embed.bias': unknown dtype 'F8_E4M3FN'"],
        &["step", "embed.weight"],
    );
    check_corrupt(
        "size mismatch",
        edited(|h| h.replace("\"shape\":[8]", "\"shape\":[9]")),
        &[
            "tensor 'embed.bias': size mismatch: F32 [9] needs 36 bytes, data_offsets [8, 40] hold 32",
        ],
        &["step", "embed.weight"],
    );
    check_corrupt(
        "duplicate key",
        edited(|h| h.replace("\"embed.weight\"", "\"embed.bias\"")),
        &["duplicate tensor name 'embed.bias'"],
        &["step"],
    );
    check_corrupt(
        "bad JSON",
        edited(|h| h.replace("\"shape\":[4,8]", "\"shape\":[4,8")),
        &[
            "header: syntax error at 1:",
            "expected ',' or ']' after array element",
        ],
        &["step", "embed.bias"],
    );
    check_corrupt(
        "trailing bytes",
        {
            let mut b = fixture("safetensors/metadata.safetensors");
            b.extend_from_slice(b"extra");
            b
        },
        &["5 bytes after the last tensor belong to no tensor"],
        &["step", "embed.bias", "embed.weight"],
    );
    let mut big = fixture("safetensors/metadata.safetensors");
    big[..8].copy_from_slice(&200_000_000u64.to_le_bytes());
    check_corrupt(
        "N too large",
        big,
        &["header length 200000000 is larger than the 100000000-byte limit"],
        &["step", "embed.bias", "embed.weight"],
    );
    let mut bad_utf8 = fixture("safetensors/metadata.safetensors");
    let at = bad_utf8.windows(4).position(|w| w == b"note").unwrap() + 10;
    bad_utf8[at] = 0xff;
    check_corrupt(
        "not UTF-8",
        bad_utf8,
        &["invalid UTF-8"],
        &["step", "embed.bias", "embed.weight"],
    );
}

/// The sharded fixture's tensors: (name, shard file, sha256) from expect.json.
fn shard_tensors() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for shard in expect()["index"]["shards"].as_array().unwrap() {
        let shard = s(shard);
        for t in expect()["files"][format!("sharded/{shard}")]["tensors"]
            .as_array()
            .unwrap()
        {
            out.push((
                s(&t["name"]).to_string(),
                shard.to_string(),
                s(&t["sha256"]).to_string(),
            ));
        }
    }
    out
}

/// Checks that a table lists every tensor of the sharded model once, from
/// the right shard, with the right bytes; `prefix` is the shards' parent PATH.
fn check_sharded(tree: &Tree, table: &[Tensor], prefix: &str) {
    let want = shard_tensors();
    assert_eq!(table.len(), want.len(), "{table:?}");
    let map = expect()["index"]["weight_map"].as_object().unwrap();
    for (name, shard, sha) in want {
        let t = table
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(s(&map[&name]), shard);
        assert_eq!(tree.path_of(t.source), format!("{prefix}{shard}"), "{name}");
        assert_eq!(t.status, Status::Complete, "{name}: {:?}", t.detail);
        assert_eq!(t.detail, None, "{name}");
        assert_eq!(sha_hex(&tensor_bytes(tree, t)), sha, "{name}");
    }
}

#[test]
fn a_sharded_model_lists_every_tensor_from_its_shard() {
    let dir = fixture_path("safetensors/sharded");
    // As a folder: one model, its shards under the index.
    let s1 = open(&dir);
    let t = s1.tree();
    assert_eq!(t.root().parser(), Some("folder"));
    assert_eq!(t.worst_status(), Status::Complete, "{}", tree_text(&t));
    check_sharded(&t, &tensors(&t, 0), "model.safetensors.index.json/");
    // The index file itself.
    let s2 = open(&dir.join("model.safetensors.index.json"));
    let t = s2.tree();
    assert_eq!(t.root().parser(), Some("safetensors-index"));
    assert_eq!(t.worst_status(), Status::Complete, "{}", tree_text(&t));
    check_sharded(&t, &tensors(&t, 0), "");
    // The fixtures folder: every file's tensors, the shards once.
    let s3 = open(&fixture_path("safetensors"));
    let t = s3.tree();
    let all: usize = files()
        .iter()
        .map(|(_, v)| v["tensors"].as_array().unwrap().len())
        .sum();
    assert_eq!(tensors(&t, 0).len(), all);
}

/// A copy of the sharded fixture in a temporary folder.
fn sharded_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    std::fs::create_dir(&dir).unwrap();
    for e in std::fs::read_dir(fixture_path("safetensors/sharded")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    (tmp, dir)
}

fn index_damage(dir: &Path) -> (Session, String) {
    let session = open(&dir.join("model.safetensors.index.json"));
    let text = damage_text(&session.tree(), 0);
    (session, text)
}

#[test]
fn an_index_reports_missing_shards_and_tensors() {
    // A missing shard: reported, the other shard's tensors still listed.
    let (_tmp, dir) = sharded_copy();
    std::fs::remove_file(dir.join("model-00002-of-00002.safetensors")).unwrap();
    let (session, d) = index_damage(&dir);
    assert!(
        d.contains("shard 'model-00002-of-00002.safetensors' is missing"),
        "{d}"
    );
    assert!(d.contains("3 tensors of weight_map are in it"), "{d}");
    let t = session.tree();
    assert_eq!(t.worst_status(), Status::Truncated);
    let names: Vec<String> = tensors(&t, 0).into_iter().map(|t| t.name).collect();
    assert_eq!(names.len(), 3);
    // A tensor the map lists but its shard lacks; a tensor a shard holds but
    // the map does not list.
    let (_tmp, dir) = sharded_copy();
    let path = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(
        "\"lm_head.weight\": \"model-00002-of-00002.safetensors\",",
        "\"ghost.weight\": \"model-00001-of-00002.safetensors\",",
    );
    std::fs::write(&path, text).unwrap();
    let (session, d) = index_damage(&dir);
    assert!(
        d.contains("tensor 'ghost.weight' is listed in weight_map for 'model-00001-of-00002.safetensors', but that shard does not hold it"),
        "{d}"
    );
    assert!(
        d.contains("shard 'model-00002-of-00002.safetensors' holds tensor 'lm_head.weight', which weight_map does not list"),
        "{d}"
    );
    let t = session.tree();
    let lm = tensors(&t, 0)
        .into_iter()
        .find(|t| t.name == "lm_head.weight")
        .unwrap();
    assert_eq!(lm.detail.as_deref(), Some("not listed in weight_map"));
    // A shard name that leaves the folder is not opened.
    let (_tmp, dir) = sharded_copy();
    let path = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "\"model-00001-of-00002.safetensors\"",
        "\"../escape.safetensors\"",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let (_s, d) = index_damage(&dir);
    assert!(
        d.contains("'../escape.safetensors', which is not a plain relative path"),
        "{d}"
    );
}

#[test]
fn a_folder_does_not_follow_symlinks_out_of_it() {
    let (tmp, dir) = sharded_copy();
    let outside = tmp.path().join("outside.safetensors");
    std::fs::copy(fixture_path("safetensors/metadata.safetensors"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("link-out.safetensors")).unwrap();
    std::os::unix::fs::symlink("config.json", dir.join("link-in.json")).unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop")).unwrap();
    let session = open(&dir);
    let t = session.tree();
    let kinds: Vec<(String, &str, Option<&str>)> = t.exts[0]
        .children
        .iter()
        .map(|&c| {
            (
                t.exts[c].display_name(),
                t.exts[c].kind.as_str(),
                t.exts[c].parser(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("config.json".to_string(), "file", Some("json")),
            ("link-in.json".to_string(), "file", Some("json")),
            ("link-out.safetensors".to_string(), "symlink", None),
            ("loop".to_string(), "symlink", None),
            (
                "model.safetensors.index.json".to_string(),
                "file",
                Some("safetensors-index")
            ),
        ]
    );
}

/// No panic or hang on damaged input, and the table stays within the bytes.
fn table_invariants(t: &Tree, what: &str, f: &mut Failures) {
    for id in 0..t.len() {
        for x in tensors(t, id) {
            let size = t.exts[x.source].size();
            if x.status == Status::Complete && x.offset.saturating_add(x.length) > size {
                f.push(format!(
                    "{what}: {} is complete but ends past {size}",
                    x.name
                ));
            }
        }
    }
}

macro_rules! st_sweeps {
    ($($test:ident => $name:expr,)*) => {
        $(
            #[test]
            fn $test() {
                sweep_with($name, &table_invariants);
            }
        )*
    };
}

st_sweeps! {
    sweep_numpy_dtypes => "safetensors/numpy_dtypes.safetensors",
    sweep_spec_dtypes => "safetensors/spec_dtypes.safetensors",
    sweep_f6_handmade => "safetensors/f6_handmade.safetensors",
    sweep_metadata => "safetensors/metadata.safetensors",
    sweep_empty_scalar => "safetensors/empty_scalar.safetensors",
    sweep_silero => "safetensors/silero_vad_16k.safetensors",
    sweep_shard => "safetensors/sharded/model-00001-of-00002.safetensors",
    sweep_index => "safetensors/sharded/model.safetensors.index.json",
}

#[test]
fn sources_stay_readable() {
    // The tensor table of a truncated stream source is computed from what is there.
    let data = fixture("safetensors/silero_vad_16k.safetensors");
    let session = parse("silero_vad_16k.safetensors", data[..5000].to_vec());
    let t = session.tree();
    let table = tensors(&t, 0);
    assert_eq!(table.len(), 15);
    assert!(t.exts[0].available() == 5000);
    assert_eq!(table[0].status, Status::Truncated);
}

/// A safetensors file inside a gzip stream: its bytes arrive while they are
/// decoded, the tensors are listed as their bytes come, and the table points
/// into the decoded stream.
#[test]
fn a_file_decoded_while_it_is_parsed() {
    use std::io::Write;
    // Three 4 MiB tensors (more than one decoding step each).
    let mut h = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    let mb4 = 4u64 << 20;
    for i in 0..3u64 {
        h.push_str(&format!(
            ",\"t{i}\":{{\"dtype\":\"U8\",\"shape\":[{mb4}],\"data_offsets\":[{},{}]}}",
            i * mb4,
            (i + 1) * mb4
        ));
    }
    h.push('}');
    while !h.len().is_multiple_of(8) {
        h.push(' ');
    }
    let mut file = (h.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(h.as_bytes());
    let data_at = file.len() as u64;
    file.extend((0..3 * mb4).map(|i| (i / 4099) as u8));
    let mut gz = flate2::GzBuilder::new()
        .filename("m.safetensors")
        .write(Vec::new(), flate2::Compression::fast());
    gz.write_all(&file).unwrap();
    let session = parse("m.safetensors.gz", gz.finish().unwrap());
    let t = session.tree();
    let id = t.resolve("m.safetensors").unwrap();
    assert_eq!(t.exts[id].parser(), Some("safetensors"));
    assert_eq!(t.worst_status(), Status::Complete, "{}", tree_text(&t));
    let table = tensors(&t, id);
    assert_eq!(table.len(), 3);
    for (i, x) in table.iter().enumerate() {
        let i = i as u64;
        assert_eq!((x.source, x.offset, x.length), (id, data_at + i * mb4, mb4));
        assert_eq!(x.status, Status::Complete);
        let s = (data_at + i * mb4) as usize;
        assert_eq!(tensor_bytes(&t, x), file[s..s + mb4 as usize]);
    }
}
