//! `.wandb` logs: records compared with what wandb's own reader
//! (`wandb.sdk.internal.datastore` + the wandb protobuf schema, see
//! fixtures/wandb/README.md) read from the same files, then the same logs
//! cut, flipped and overwritten.

use pparse::parsers::serial::wandb::view as records;
use pparse::parsers::serial::wandb::{self, log};
use serde_json::Value;

use crate::util::*;

const LOGS: [&str; 3] = ["current-core", "v0175-legacy", "v0175-core-buggy"];

fn reference(name: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(fixture_path(&format!("wandb/{name}.records.jsonl"))).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn log_bytes(name: &str) -> Vec<u8> {
    fixture(&format!("wandb/{name}.wandb"))
}

/// JSON equality with numbers compared by value (Go writes `1`, Python `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs())
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
        }
        _ => a == b,
    }
}

/// The records pparse reads from `bytes` (as `records --json` writes them)
/// and the damage it reports.
fn ours(bytes: &[u8]) -> (Vec<Value>, Vec<log::Damaged>) {
    let layout = log::detect(bytes);
    let mut recs = Vec::new();
    let mut bad = Vec::new();
    for item in log::Records::new(bytes, layout) {
        match item {
            log::Item::Record(chunks) => {
                let start = chunks[0].range.start;
                let payload = log::payload(bytes, &chunks);
                let rec = wandb::decode(&payload);
                if rec.msg.is_err() {
                    bad.push(log::Damaged {
                        range: log::Item::Record(chunks).range(),
                        status: pparse::Status::Corrupt,
                        reason: "undecodable".into(),
                    });
                    continue;
                }
                recs.push(serde_json::json!({
                    "number": rec.number, "type": rec.kind, "offset": start, "data": records::data(&rec),
                }));
            }
            log::Item::Damaged(b) => bad.push(b),
        }
    }
    (recs, bad)
}

#[test]
fn records_match_wandbs_own_reader() {
    for name in LOGS {
        let path = fixture_path(&format!("wandb/{name}.wandb"));
        let run = pparse(["records".as_ref(), "--json".as_ref(), path.as_os_str()]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr_text());
        assert_eq!(run.stderr_text(), "", "{name}");
        let got: Vec<Value> = run
            .stdout_text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let want = reference(name);
        assert_eq!(got.len(), want.len(), "{name}: record count");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                same(g, w),
                "{name}: record {}:\n ours {g}\n wandb {w}",
                w["number"]
            );
        }
        // The keys come in the documented order.
        let first = run.stdout_text().lines().next().unwrap().to_string();
        assert!(
            first.starts_with("{\"number\":1,\"type\":\"header\",\"offset\":7,\"data\":"),
            "{first}"
        );
    }
}

#[test]
fn the_buggy_writers_layout_is_recognised() {
    let buggy = log_bytes("v0175-core-buggy");
    assert_eq!(log::detect(&buggy[..]), log::Framing::Shifted);
    for name in ["current-core", "v0175-legacy"] {
        assert_eq!(
            log::detect(&log_bytes(name)[..]),
            log::Framing::Standard,
            "{name}"
        );
    }
    // Read the standard way, most of the buggy log is lost: the detection matters.
    let lost = log::Records::new(&buggy[..], log::Framing::Standard)
        .filter(|i| matches!(i, log::Item::Damaged(_)))
        .count();
    assert!(lost > 0);
    let path = fixture_path("wandb/v0175-core-buggy.wandb");
    let run = pparse([
        "nodes".as_ref(),
        path.as_os_str(),
        "--depth".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(
        run.stdout_text().contains("shifted by the 7-byte header"),
        "{}",
        run.stdout_text()
    );
    assert_eq!(run.stdout_text().matches("  record  ").count(), 266);
}

/// Ends of the reference records: a record ends at most where the next starts.
fn bounds(want: &[Value], len: u64) -> Vec<(u64, u64)> {
    (0..want.len())
        .map(|i| {
            let s = want[i]["offset"].as_u64().unwrap();
            let e = want
                .get(i + 1)
                .map_or(len, |n| n["offset"].as_u64().unwrap());
            (s, e)
        })
        .collect()
}

#[test]
fn truncation_keeps_every_whole_record() {
    let mut f = Failures::default();
    for name in LOGS {
        let data = log_bytes(name);
        let want = reference(name);
        let spans = bounds(&want, data.len() as u64);
        let mut cuts: Vec<u64> = (7..data.len() as u64).step_by(1409).collect();
        for k in 1..=(data.len() as u64 / log::BLOCK) {
            for d in [-8i64, -7, -1, 0, 1, 7, 8, 14] {
                cuts.push((k * log::BLOCK).saturating_add_signed(d));
            }
        }
        for cut in cuts {
            let (got, bad) = ours(&data[..cut as usize]);
            let whole = spans.iter().filter(|&&(_, e)| e <= cut).count();
            if got.len() < whole || got.len() > whole + 1 {
                f.push(format!(
                    "{name} cut at {cut}: {} records, expected {whole} or one more",
                    got.len()
                ));
            }
            for (g, w) in got.iter().zip(&want) {
                if !same(g, w) {
                    f.push(format!(
                        "{name} cut at {cut}: record {} differs",
                        w["number"]
                    ));
                }
            }
            for b in &bad {
                if b.status != pparse::Status::Truncated || b.range.end > cut {
                    f.push(format!("{name} cut at {cut}: {b:?}"));
                }
            }
        }
    }
    f.check("truncated logs");
}

/// Checks a damaged log: every record the damage does not touch is read,
/// equal to wandb's; damage is reported over the damaged bytes.
fn check_damaged(name: &str, data: &[u8], hit: (u64, u64), what: &str, f: &mut Failures) {
    let want = reference(name);
    let spans = bounds(&want, data.len() as u64);
    let (got, bad) = ours(data);
    let by_offset: std::collections::HashMap<u64, &Value> = got
        .iter()
        .map(|g| (g["offset"].as_u64().unwrap(), g))
        .collect();
    for (w, &(s, e)) in want.iter().zip(&spans) {
        let touched = s < hit.1 && hit.0 < e;
        match by_offset.get(&s) {
            Some(g) if !same(g, w) => f.push(format!("{what}: record {} read wrong", w["number"])),
            None if !touched => f.push(format!("{what}: record {} at {s} lost", w["number"])),
            _ => {}
        }
    }
    if !bad
        .iter()
        .any(|b| b.range.start <= hit.0 && hit.0 < b.range.end.max(b.range.start + 1))
    {
        f.push(format!("{what}: no damage reported over {hit:?}: {bad:?}"));
    }
    if got.len() > want.len() {
        f.push(format!(
            "{what}: more records than wandb's reader: {}",
            got.len()
        ));
    }
}

#[test]
fn a_flipped_byte_costs_only_its_record() {
    let mut f = Failures::default();
    for name in LOGS {
        let data = log_bytes(name);
        let mut rng = Rng::new(0x5eed ^ data.len() as u64);
        for _ in 0..60 {
            let at = rng.range(7, data.len() as u64);
            let mut d = data.clone();
            flip(&mut d, at, 1 << rng.below(8));
            check_damaged(
                name,
                &d,
                (at, at + 1),
                &format!("{name}: flip at {at}"),
                &mut f,
            );
        }
    }
    f.check("flipped bytes");
}

#[test]
fn overwritten_spans_and_zeroed_blocks() {
    let mut f = Failures::default();
    for name in LOGS {
        let data = log_bytes(name);
        let mut rng = Rng::new(77);
        for _ in 0..20 {
            let n = rng.range(1, 2000);
            let at = rng.range(7, data.len() as u64 - n);
            let mut d = data.clone();
            overwrite(&mut d, at, n, &mut rng);
            check_damaged(
                name,
                &d,
                (at, at + n),
                &format!("{name}: {at}+{n} overwritten"),
                &mut f,
            );
        }
        // A whole block of zeros in the middle (a hole a crash left).
        let mut d = data.clone();
        let (s, e) = (2 * log::BLOCK as usize, 3 * log::BLOCK as usize);
        d[s..e].fill(0);
        check_damaged(
            name,
            &d,
            (s as u64, e as u64),
            &format!("{name}: block 2 zeroed"),
            &mut f,
        );
    }
    f.check("overwritten logs");
}

#[test]
fn zeros_at_the_end_are_a_cut_not_corruption() {
    let mut data = log_bytes("v0175-legacy");
    let len = data.len() as u64;
    data.extend(vec![0u8; 70_000]);
    let (got, bad) = ours(&data);
    assert_eq!(got.len(), reference("v0175-legacy").len());
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].status, pparse::Status::Truncated);
    assert!(
        bad[0].range.start >= len && bad[0].reason.contains("never written"),
        "{bad:?}"
    );
}

#[test]
fn cli_reports_damage_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = log_bytes("current-core");
    data[1] = b'X'; // the header
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    let path = dir.path().join("run-damaged.wandb");
    std::fs::write(&path, &data).unwrap();
    let run = pparse(["records".as_ref(), path.as_os_str()]);
    assert_eq!(run.code, 1);
    let err = run.stderr_text();
    assert!(err.contains("invalid W&B identifier"), "{err}");
    assert!(err.contains("corrupt at 0x"), "{err}");
    // The damage is shown where it is in the listing.
    assert!(
        run.stdout_text().lines().any(|l| l.contains("!  corrupt")),
        "{}",
        run.stdout_text()
    );
    let lines = run
        .stdout_text()
        .lines()
        .filter(|l| !l.contains('!'))
        .count();
    assert!((375..380).contains(&lines), "{lines}");

    let clean = fixture_path("wandb/current-core.wandb");
    let run = pparse([
        "records".as_ref(),
        clean.as_os_str(),
        "--type".as_ref(),
        "history,exit".as_ref(),
    ]);
    assert_eq!(run.code, 0);
    let kinds: Vec<String> = run
        .stdout_text()
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "history").count(), 121);
    assert_eq!(kinds.iter().filter(|k| *k == "exit").count(), 1);
    assert_eq!(kinds.len(), 122);
    let run = pparse([
        "records".as_ref(),
        clean.as_os_str(),
        "--type".as_ref(),
        "history".as_ref(),
        "--verbose".as_ref(),
    ]);
    let out = run.stdout_text();
    assert!(
        out.contains("\"grad/norm\": 3") && out.contains("\"num\": \"5\""),
        "{}",
        &out[..2000.min(out.len())]
    );
    let run = pparse(["records".as_ref(), fixture_path("plain.zip").as_os_str()]);
    assert_eq!(run.code, 4);
    assert!(
        run.stderr_text().contains("not a W&B log"),
        "{}",
        run.stderr_text()
    );
}

#[test]
fn record_nodes_point_at_their_bytes() {
    let data = log_bytes("current-core");
    let session = parse("run.wandb", data.clone());
    let tree = session.tree();
    let nodes = &tree.exts[0].nodes;
    assert_eq!(nodes.len(), 381, "header + 380 records");
    let want = reference("current-core");
    drop(tree);
    for (i, w) in want.iter().enumerate().step_by(37) {
        assert!(session.load(0, &[i + 1]));
        let t = session.tree();
        let n = &t.exts[0].nodes[i + 1];
        assert_eq!(n.range.start, w["offset"].as_u64().unwrap());
        assert_eq!(
            &*n.name,
            format!("{} #{}", w["type"].as_str().unwrap(), w["number"])
        );
        let kids = n.loaded_children();
        let num = kids.iter().find(|k| &*k.name == "num").expect("num field");
        // The field's bytes are tag 0x08 and the varint of the number.
        let bytes = &data[num.range.start as usize..num.range.end as usize];
        assert_eq!(bytes[0], 0x08);
        let mut v = 0u64;
        for (j, b) in bytes[1..].iter().enumerate() {
            v |= u64::from(b & 0x7f) << (7 * j);
        }
        assert_eq!(v, w["number"].as_u64().unwrap());
    }
    // A record of several chunks: its fields map to file offsets across the
    // chunk headers, and its value reads back whole.
    let long = want
        .iter()
        .position(|w| w["data"]["item"].get("long_text").is_some())
        .expect("the long record");
    assert!(session.load(0, &[long + 1]));
    let t = session.tree();
    let kids = t.exts[0].nodes[long + 1].loaded_children();
    assert_eq!(&*kids[0].name, "chunks");
    assert!(kids[0].loaded_children().len() >= 3);
}

macro_rules! wandb_sweeps {
    ($($test:ident => $name:expr,)*) => {
        $(
            #[test]
            fn $test() {
                crate::sweep::sweep_with($name, &|t, what, f| {
                    let e = &t.exts[0];
                    for n in &e.nodes {
                        if n.range.end > e.size() {
                            f.push(format!("{what}: node {} past the end", n.name));
                        }
                    }
                });
            }
        )*
    };
}

wandb_sweeps! {
    sweep_wandb_current => "wandb/current-core.wandb",
    sweep_wandb_legacy => "wandb/v0175-legacy.wandb",
    sweep_wandb_buggy => "wandb/v0175-core-buggy.wandb",
}

#[test]
fn count_matches_wandbs_reader() {
    for name in LOGS {
        let path = fixture_path(&format!("wandb/{name}.wandb"));
        let run = pparse([
            "records".as_ref(),
            "--count".as_ref(),
            "--json".as_ref(),
            path.as_os_str(),
        ]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr_text());
        let got: Value = serde_json::from_str(run.stdout_text().trim()).unwrap();
        let text = std::fs::read_to_string(fixture_path(&format!("wandb/{name}.summary.json")));
        let want: Value = serde_json::from_str(&text.unwrap()).unwrap();
        assert_eq!(got["records"], want["total_records"], "{name}");
        assert_eq!(got["types"], want["records_by_type"], "{name}");
        assert_eq!(got["damage"], 0, "{name}");
    }
    // Damage is counted, and the types counted are those asked for.
    let dir = tempfile::tempdir().unwrap();
    let mut data = log_bytes("current-core");
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    let path = dir.path().join("run.wandb");
    std::fs::write(&path, &data).unwrap();
    let run = pparse([
        "records".as_ref(),
        "--count".as_ref(),
        "--type".as_ref(),
        "history".as_ref(),
        path.as_os_str(),
    ]);
    assert_eq!(run.code, 1);
    let out = run.stdout_text();
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0][1], "history", "{out}");
    let history: u64 = lines[0][0].parse().unwrap();
    assert!((119..=121).contains(&history), "{out}");
    assert_eq!(lines[1], [history.to_string().as_str(), "records"], "{out}");
    assert_eq!(lines[2][1..], ["damaged", "spans"], "{out}");
    assert_ne!(lines[2][0], "0", "{out}");
}

#[test]
fn long_logs_are_listed_in_file_order() {
    // Records are decoded in parallel batches of a few thousand: a log of
    // many batches, with damage in some, must come out in file order and
    // equal what one reader in one thread makes of it.
    let one = log_bytes("current-core");
    let payloads: Vec<Vec<u8>> = log::Records::new(&one[..], log::Framing::Standard)
        .map(|i| match i {
            log::Item::Record(c) => log::payload(&one[..], &c).into_owned(),
            log::Item::Damaged(b) => panic!("{b:?}"),
        })
        .collect();
    let many: Vec<Vec<u8>> = (0..40).flat_map(|_| payloads.iter().cloned()).collect();
    let mut data = log::write_log(&many, log::Framing::Standard);
    for k in 1..6 {
        let at = data.len() * k / 6;
        data[at] ^= 0x10;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.wandb");
    std::fs::write(&path, &data).unwrap();
    let run = pparse(["records".as_ref(), "--json".as_ref(), path.as_os_str()]);
    assert_eq!(run.code, 1);
    let got: Vec<Value> = run
        .stdout_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (want, bad) = ours(&data);
    assert!(got.len() > 2 * 4096, "{}", got.len());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(same(g, w), "ours {g}\n serial {w}");
    }
    // The damages are reported in file order too.
    let offsets: Vec<u64> = run
        .stderr_text()
        .lines()
        .filter_map(|l| l.split(" at 0x").nth(1))
        .filter_map(|h| u64::from_str_radix(h.split("..").next()?, 16).ok())
        .collect();
    assert!(offsets.len() >= bad.len().min(50), "{}", run.stderr_text());
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]), "{offsets:?}");
}
