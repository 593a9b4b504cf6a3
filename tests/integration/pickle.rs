//! Pickles against CPython: every fixture in fixtures/pickle was written by
//! `pickle.dumps` (or by hand for the opcodes it no longer writes), and its
//! references by `pickletools.genops`, `python -m pickletools` and
//! `pickle.loads` (see fixtures/pickle/make_pickles.py).

use std::path::PathBuf;

use pparse::data::{MemSource, Source};
use pparse::parsers::ml::pickle::vm::{Id, Obj, Vm};
use pparse::parsers::ml::pickle::{self, VM_LIMIT};
use serde_json::{Value, json};

use crate::util::*;

fn pickles() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture_path("pickle"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pkl"))
        .collect();
    v.sort();
    assert!(v.len() >= 30, "pickle fixtures missing: {v:?}");
    v
}

fn reference(pkl: &std::path::Path, suffix: &str) -> Option<String> {
    let p = pkl.with_extension(suffix);
    std::fs::read_to_string(p).ok()
}

#[test]
fn json_listing_is_genops() {
    for pkl in pickles() {
        let want: Value = serde_json::from_str(&reference(&pkl, "genops.json").unwrap()).unwrap();
        let run = pparse(["pickle".as_ref(), "--json".as_ref(), pkl.as_os_str()]);
        assert_eq!(run.code, 0, "{}: {}", pkl.display(), run.stderr_text());
        let got: Value = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(got, want, "{}", pkl.display());
    }
}

#[test]
fn text_listing_is_pickletools() {
    for pkl in pickles() {
        let run = pparse(["pickle".as_ref(), "--decimal".as_ref(), pkl.as_os_str()]);
        assert_eq!(run.code, 0, "{}", pkl.display());
        let got = run.stdout_text();
        // Without --decimal, positions are hex, as every offset pparse
        // prints (issue 36): the same listing otherwise.
        let hex = pparse(["pickle".as_ref(), pkl.as_os_str()]).stdout_text();
        let as_hex = |line: &str| -> String {
            match line.split_once(": ") {
                Some((pos, rest)) if pos.trim().parse::<u64>().is_ok() => {
                    format!("{:#7x}: {rest}", pos.trim().parse::<u64>().unwrap())
                }
                _ => line.to_string(),
            }
        };
        assert_eq!(
            hex.lines().collect::<Vec<_>>(),
            got.lines().map(as_hex).collect::<Vec<_>>(),
            "{}",
            pkl.display()
        );
        if let Some(all) = reference(&pkl, "dis_all.txt") {
            // Several pickles: pparse heads each; pickletools.dis, called
            // until the end, prints them one after the other.
            let body: String = got
                .lines()
                .filter(|l| !l.starts_with("==> pickle #") && !l.is_empty())
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(body, all, "{}", pkl.display());
            assert_eq!(got.matches("==> pickle #").count(), 5, "{}", pkl.display());
        } else {
            let want = reference(&pkl, "dis.txt").unwrap();
            assert_eq!(got, want, "{}", pkl.display());
        }
    }
}

/// `pickle.loads`' value, rendered as make_pickles.py renders it, where a
/// VM that calls nothing can know it: calls and extension objects are
/// compared by nobody (`None`), everything else must be equal.
fn render(vm: &Vm, data: &dyn Source, id: Id, depth: usize, compared: &mut usize) -> Option<Value> {
    assert!(depth < 200, "object graph too deep");
    let each = |ids: &[Id], compared: &mut usize| -> Option<Vec<Value>> {
        ids.iter()
            .map(|&x| render(vm, data, x, depth + 1, compared))
            .collect()
    };
    let v = match vm.get(id) {
        Obj::None => Value::Null,
        Obj::Bool(b) => json!(b),
        Obj::Int(i) if i.unsigned_abs() <= 1 << 53 => json!(i),
        Obj::Int(i) => json!({ "int": i.to_string() }),
        Obj::Big(s) => json!({ "int": s.to_string() }),
        Obj::Float(f) if f.is_nan() => json!({"float": "nan"}),
        Obj::Float(f) if f.is_infinite() => {
            json!({"float": if *f > 0.0 { "inf" } else { "-inf" }})
        }
        Obj::Float(f) => json!(f),
        Obj::Str(t) if t.cut => return None,
        Obj::Str(t) => json!(t.text.to_string()),
        Obj::Bytes { range, bytearray } => {
            let mut b = vec![0u8; range.len() as usize];
            data.read_at(range.start, &mut b).unwrap();
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            if *bytearray {
                json!({ "bytearray": hex })
            } else {
                json!({ "bytes": hex })
            }
        }
        Obj::Tuple(xs) => json!({ "tuple": each(xs, compared)? }),
        Obj::List(xs) => Value::Array(each(xs, compared)?),
        Obj::Dict(kv) => {
            let mut pairs = Vec::new();
            for (k, v) in kv {
                let k = render(vm, data, *k, depth + 1, compared)?;
                let v = render(vm, data, *v, depth + 1, compared)?;
                pairs.push(json!([k, v]));
            }
            json!({ "dict": pairs })
        }
        Obj::Set(xs) | Obj::FrozenSet(xs) => {
            let mut items = each(xs, compared)?;
            items.sort_by_key(|v| v.to_string());
            let kind = if matches!(vm.get(id), Obj::Set(_)) {
                "set"
            } else {
                "frozenset"
            };
            json!({ kind: items })
        }
        Obj::Global { module, name } => json!({ "global": format!("{module}.{name}") }),
        Obj::Persistent(pid) => {
            json!({ "persistent_id": render(vm, data, *pid, depth + 1, compared)? })
        }
        Obj::Call(_) | Obj::Ext(_) | Obj::Buffer { .. } | Obj::Unknown => return None,
    };
    *compared += 1;
    Some(v)
}

/// Equal, except that with `encoding='bytes'` Python 2 strings load as
/// bytes: a VM string then matches the bytes of its latin-1 encoding.
fn same(vm_side: &Value, py: &Value, py2_bytes: bool) -> bool {
    match (vm_side, py) {
        (Value::String(s), Value::Object(o)) if py2_bytes && o.contains_key("bytes") => {
            let latin1: Option<String> = s
                .chars()
                .map(|c| (c as u32 <= 0xff).then(|| format!("{:02x}", c as u32)))
                .collect();
            latin1.as_deref() == o["bytes"].as_str()
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y, py2_bytes))
        }
        // A set loads in hash order, not in the order it was pickled.
        (Value::Object(a), Value::Object(b))
            if a.len() == 1 && (b.contains_key("set") || b.contains_key("frozenset")) =>
        {
            let (Some((ka, Value::Array(xs))), Some((kb, Value::Array(ys)))) =
                (a.iter().next(), b.iter().next())
            else {
                return false;
            };
            ka == kb
                && xs.len() == ys.len()
                && xs.iter().all(|x| ys.iter().any(|y| same(x, y, py2_bytes)))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, x)| b.get(k).is_some_and(|y| same(x, y, py2_bytes)))
        }
        _ => vm_side == py,
    }
}

#[test]
fn vm_values_are_pickle_loads() {
    let mut compared_total = 0;
    for pkl in pickles() {
        let Some(text) = reference(&pkl, "loads.json") else {
            continue;
        };
        let refs: Value = serde_json::from_str(&text).unwrap();
        let py2_bytes = refs["kwargs"]["encoding"] == "bytes";
        let bytes = std::fs::read(&pkl).unwrap();
        let data = MemSource::new(bytes.clone());
        let wanted: Vec<Value> = match refs.get("values") {
            Some(Value::Array(v)) => v.clone(),
            _ => vec![refs["value"].clone()],
        };
        let mut pos = 0u64;
        for want in wanted {
            let (vm, end, _) = pickle::run(&data, pos, bytes.len() as u64, VM_LIMIT);
            let pickle::End::Stop(next) = end else {
                panic!("{}: no STOP at {pos}", pkl.display());
            };
            pos = next;
            assert!(
                vm.problems.is_empty(),
                "{}: {:?}",
                pkl.display(),
                vm.problems
            );
            let top = vm.result.expect("a result");
            // Compare every top-level item that the VM can know in full.
            let mut compared = 0;
            match (vm.get(top), &want) {
                (Obj::Dict(kv), Value::Object(o)) if o.contains_key("dict") => {
                    let pairs = o["dict"].as_array().unwrap();
                    assert_eq!(kv.len(), pairs.len(), "{}", pkl.display());
                    for ((k, v), p) in kv.iter().zip(pairs) {
                        let k = render(&vm, &data, *k, 0, &mut compared);
                        let k = k.unwrap_or_else(|| panic!("{}: a key", pkl.display()));
                        assert!(
                            same(&k, &p[0], py2_bytes),
                            "{}: {k} != {}",
                            pkl.display(),
                            p[0]
                        );
                        if let Some(v) = render(&vm, &data, *v, 0, &mut compared) {
                            assert!(
                                same(&v, &p[1], py2_bytes),
                                "{}: {k}: {v} != {}",
                                pkl.display(),
                                p[1]
                            );
                        }
                    }
                }
                (Obj::List(xs), Value::Array(ys)) => {
                    assert_eq!(xs.len(), ys.len(), "{}", pkl.display());
                    for (x, y) in xs.iter().zip(ys) {
                        if let Some(v) = render(&vm, &data, *x, 0, &mut compared) {
                            assert!(same(&v, y, py2_bytes), "{}: {v} != {y}", pkl.display());
                        }
                    }
                }
                _ => {
                    if let Some(v) = render(&vm, &data, top, 0, &mut compared) {
                        assert!(
                            same(&v, &want, py2_bytes),
                            "{}: {v} != {want}",
                            pkl.display()
                        );
                    }
                }
            }
            compared_total += compared;
        }
    }
    // Most of the fixtures' values are plain data: they must have been seen.
    assert!(
        compared_total > 1000,
        "only {compared_total} values compared"
    );
}

#[test]
fn damaged_pickles_list_what_pickletools_lists_and_say_why() {
    let refs: Value = serde_json::from_slice(&fixture("pickle/damaged/damaged.json")).unwrap();
    for (name, r) in refs.as_object().unwrap() {
        let path = fixture_path(&format!("pickle/damaged/{name}.pkl"));
        let text = pparse(["pickle".as_ref(), "--decimal".as_ref(), path.as_os_str()]);
        let dis = r["dis_stdout"].as_str().unwrap();
        assert!(
            text.stdout_text().starts_with(dis),
            "{name}: pickletools printed\n{dis}\npparse printed\n{}",
            text.stdout_text()
        );
        // And then says what is wrong, where pickletools raised.
        assert!(
            text.stdout_text()[dis.len()..].contains("!!! "),
            "{name}: {}",
            text.stdout_text()
        );
        assert_eq!(text.code, 1, "{name}: damage is a partial result");
        let json = pparse(["pickle".as_ref(), "--json".as_ref(), path.as_os_str()]);
        let got: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(got, r["genops"], "{name}");
        let status = json.stderr_text();
        assert!(
            status.contains("truncated") || status.contains("corrupt"),
            "{name}: {status}"
        );
    }
}

/// The opcodes of `bytes` as (pos, name), as far as they decode.
fn ops_of(bytes: &[u8]) -> Vec<(u64, &'static str)> {
    let data = MemSource::new(bytes.to_vec());
    let mut v = Vec::new();
    pickle::scan(&data, 0, bytes.len() as u64, |op| {
        v.push((op.pos, op.name()));
        true
    });
    v
}

#[test]
fn every_truncation_keeps_the_opcodes_before_the_cut() {
    for name in ["p2_containers", "p4_objects", "p0_scalars", "p5_buffers"] {
        let full = fixture(&format!("pickle/{name}.pkl"));
        let genops: Value =
            serde_json::from_slice(&fixture(&format!("pickle/{name}.genops.json"))).unwrap();
        let genops = genops.as_array().unwrap();
        let ends: Vec<u64> = genops
            .iter()
            .map(|o| o["pos"].as_u64().unwrap())
            .skip(1)
            .chain([full.len() as u64])
            .collect();
        for cut in 1..full.len() {
            let bytes = truncated(&full, cut as u64);
            let got = ops_of(&bytes);
            // Exactly the opcodes that end at or before the cut.
            let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
            assert_eq!(got.len(), whole, "{name} cut at {cut}");
            for (g, o) in got.iter().zip(genops) {
                assert_eq!(g.0, o["pos"].as_u64().unwrap(), "{name} cut at {cut}");
                assert_eq!(g.1, o["op"].as_str().unwrap(), "{name} cut at {cut}");
            }
            let session = parse(&format!("{name}.pkl"), bytes);
            let t = session.tree();
            assert_eq!(
                t.status_of(0),
                pparse::Status::Truncated,
                "{name} cut at {cut}: {}",
                damage_text(&t, 0)
            );
        }
    }
}

#[test]
fn flipped_bytes_never_lose_the_opcodes_before_them() {
    let full = fixture("pickle/p2_objects.pkl");
    let genops = ops_of(&full);
    let mut rng = Rng::new(0x91c);
    for _ in 0..400 {
        let mut bytes = full.clone();
        let at = rng.below(full.len() as u64);
        flip(&mut bytes, at, 1 << rng.below(8));
        let got = ops_of(&bytes);
        // Opcodes wholly before the flipped byte are read as before.
        for (i, g) in genops.iter().enumerate() {
            let end = genops.get(i + 1).map_or(full.len() as u64, |n| n.0);
            if end > at {
                break;
            }
            assert_eq!(got.get(i), Some(g), "flip at {at}");
        }
        let session = parse("p2_objects.pkl", bytes);
        let t = session.tree();
        let _ = t.status_of(0);
    }
}

#[test]
fn globals_get_safety_verdicts() {
    // The torch allowlist passes torch's rebuild functions; a pickle that
    // imports os.system is dangerous; a class of the user's is unknown.
    let run = pparse([
        "nodes".as_ref(),
        fixture_path("pickle/p2_objects.pkl").as_os_str(),
    ]);
    let out = run.stdout_text();
    assert!(out.contains("outside the weights-only allowlist"), "{out}");
    let evil = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.";
    let session = parse("evil.pkl", evil.to_vec());
    let t = session.tree();
    let text = tree_text(&t);
    drop(t);
    let dir = std::env::temp_dir().join(format!("pparse-evil-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("evil.pkl");
    std::fs::write(&f, evil).unwrap();
    let run = pparse(["nodes".as_ref(), f.as_os_str()]);
    let listing = pparse(["pickle".as_ref(), f.as_os_str()]);
    let _ = std::fs::remove_dir_all(&dir);
    let out = run.stdout_text();
    assert!(out.to_lowercase().contains("dangerous"), "{out}\n{text}");
    assert!(out.contains("os.system"), "{out}");
    // `pparse pickle` says it on stderr; stdout stays pickletools' listing.
    let err = listing.stderr_text();
    assert!(
        err.contains("pickle #0 imports os.system: DANGEROUS"),
        "{err}"
    );
    assert!(listing.stdout_text().contains("GLOBAL     'os system'"));
    let user = pparse([
        "pickle".as_ref(),
        fixture_path("pickle/p2_objects.pkl").as_os_str(),
    ]);
    assert!(
        user.stderr_text().contains("imports pklmod.Point: unknown"),
        "{}",
        user.stderr_text()
    );
    // Real torch checkpoints import only what weights_only allows.
    for f in [
        "torch/views.pt",
        "torch/nested.pt",
        "torch/lpips_v0.1_alex.pth",
        "torch/dtypes.pt",
    ] {
        let run = pparse(["pickle".as_ref(), fixture_path(f).as_os_str()]);
        assert_eq!(run.code, 0, "{f}");
        assert!(
            !run.stderr_text().contains("imports"),
            "{f}: {}",
            run.stderr_text()
        );
    }
}

/// Every global torch's own weights-only unpickler accepts (dumped from
/// torch by fixtures/torch/make_allowlist.py) is "allowed" here too.
#[test]
fn allowed_verdicts_cover_torchs_weights_only_allowlist() {
    use pparse::parsers::ml::pickle::safety::{Verdict, classify};
    let text = std::fs::read_to_string(fixture_path("torch/weights_only_allowlist.json")).unwrap();
    let list: Value = serde_json::from_str(&text).unwrap();
    let names = list["allowed"].as_array().unwrap();
    assert!(names.len() > 100);
    let wrong: Vec<&str> = names
        .iter()
        .map(|n| n.as_str().unwrap())
        .filter(|full| {
            let (module, name) = full.rsplit_once('.').unwrap();
            classify(module, name) != Verdict::Allowed
        })
        .collect();
    assert!(wrong.is_empty(), "torch allows, pparse does not: {wrong:?}");
}

macro_rules! pickle_sweeps {
    ($($test:ident => $name:expr,)*) => {
        $(
            #[test]
            fn $test() {
                crate::sweep::sweep_with($name, &|_, _, _| {});
            }
        )*
    };
}

// No panic, no hang and the tree's invariants on damaged pickles of every
// protocol (the opcode-level checks are the tests above).
pickle_sweeps! {
    sweep_p0_objects => "pickle/p0_objects.pkl",
    sweep_p2_containers => "pickle/p2_containers.pkl",
    sweep_p4_memo_long => "pickle/p4_memo_long.pkl",
    sweep_p5_buffers => "pickle/p5_buffers.pkl",
    sweep_stacked => "pickle/stacked.pkl",
}

/// `pickle --check` exits 3 when loading would import anything outside
/// the allowed set, so a script can gate on it; without `--check` such a
/// pickle lists as usual (exit 0). Pickles written by Python's pickle.
#[test]
fn check_exits_3_for_imports_outside_the_allowed_set() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pickle-check");
    std::fs::create_dir_all(&dir).unwrap();
    let ok = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import os, pickle, sys, collections\n\
             class Evil:\n\
             \x20   def __reduce__(self):\n\
             \x20       return (os.system, ('true',))\n\
             d = sys.argv[1]\n\
             open(d + '/evil.pkl', 'wb').write(pickle.dumps({'a': Evil()}, protocol=4))\n\
             safe = collections.OrderedDict(w=[1.5, 2], n='x')\n\
             open(d + '/safe.pkl', 'wb').write(pickle.dumps(safe, protocol=2))",
        )
        .arg(&dir)
        .status()
        .expect("python3 runs");
    assert!(ok.success());
    let evil = dir.join("evil.pkl");
    let r = pparse(["pickle".as_ref(), evil.as_os_str(), "--check".as_ref()]);
    assert_eq!(r.code, 3, "{}", r.stderr_text());
    assert!(r.stderr_text().contains("system"), "{}", r.stderr_text());
    let r = pparse(["pickle".as_ref(), evil.as_os_str()]);
    assert_eq!(r.code, 0, "{}", r.stderr_text());
    let safe = dir.join("safe.pkl");
    let r = pparse(["pickle".as_ref(), safe.as_os_str(), "--check".as_ref()]);
    assert_eq!(r.code, 0, "{}", r.stderr_text());
}

/// Output that is counted, not kept: its bytes and lines, whether a
/// needle was seen in one write (the listing writes a line or a state at a
/// time), and its last bytes.
struct Counted {
    bytes: u64,
    lines: u64,
    needle: &'static [u8],
    seen: bool,
    tail: Vec<u8>,
}

impl std::io::Write for Counted {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.bytes += b.len() as u64;
        self.lines += memchr::memchr_iter(b'\n', b).count() as u64;
        self.seen |= memchr::memmem::find(b, self.needle).is_some();
        self.tail.extend_from_slice(b);
        let keep = self.tail.len().saturating_sub(4096);
        self.tail.drain(..keep);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `pickle --trace` of a million nested lists, written by CPython's
/// pickler (protocol 2, no memo, 2 MB): `x = [x]` (APPEND, the stack
/// nested), and `x = [x, None]` (MARK ... APPENDS: a million MARKs open
/// at once, which made every opcode's pickletools bookkeeping walk them
/// all). The work of the listing besides its lines (stack segments
/// touched, objects rendered for the states) is counted, and must stay
/// within a constant per opcode; so must the output. Opcode counts are
/// pickletools.genops'.
#[test]
fn trace_of_a_million_nested_lists_is_linear() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import io, pickle, pickletools, sys, threading\n\
             def main():\n\
             \x20   sys.setrecursionlimit(10**7)\n\
             \x20   for name, pair in (('one', False), ('two', True)):\n\
             \x20       x = []\n\
             \x20       for _ in range(10**6):\n\
             \x20           x = [x, None] if pair else [x]\n\
             \x20       f = io.BytesIO()\n\
             \x20       p = pickle.Pickler(f, protocol=2)\n\
             \x20       p.fast = True\n\
             \x20       p.dump(x)\n\
             \x20       data = f.getvalue()\n\
             \x20       open(sys.argv[1] + '/' + name + '.pkl', 'wb').write(data)\n\
             \x20       print(sum(1 for _ in pickletools.genops(data)))\n\
             threading.stack_size(1 << 30)\n\
             t = threading.Thread(target=main)\n\
             t.start()\n\
             t.join()",
        )
        .arg(dir.path())
        .output()
        .expect("python3 runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let counts: Vec<u64> = String::from_utf8(made.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    for (name, ops, needle) in [
        ("one", counts[0], &b"[[[[[[[[[[[[[[[[[[[[[[[[..."[..]),
        (
            "two",
            counts[1],
            b"metastack: [\xe2\x80\xa6 999999 more frames, ",
        ),
    ] {
        let bytes = std::fs::read(dir.path().join(format!("{name}.pkl"))).unwrap();
        let size = bytes.len() as u64;
        assert!(size < 5 << 20, "{name}: {size}");
        let session = parse(name, bytes);
        let t = session.tree();
        let mut out = Counted {
            bytes: 0,
            lines: 0,
            needle,
            seen: false,
            tail: Vec::new(),
        };
        let work = pparse::report::pickle::text_of(
            &t,
            0,
            pparse::report::pickle::ListStyle {
                trace: true,
                decimal: false,
            },
            &mut out,
        )
        .unwrap()
        .expect("a pickle");
        assert_eq!(work.opcodes, ops, "{name}");
        // An opcode line and three lines of state, then the summary.
        assert_eq!(out.lines, 4 * ops + 1, "{name}");
        assert!(out.seen, "{name}: no {:?}", String::from_utf8_lossy(needle));
        let tail = String::from_utf8_lossy(&out.tail);
        assert!(
            tail.ends_with("stack: []\n       metastack: []\n       memo: {}\nhighest protocol among opcodes = 2\n"),
            "{name}: {tail}"
        );
        assert!(
            work.visited <= 64 * ops,
            "{name}: {} visits for {ops} opcodes",
            work.visited
        );
        assert!(out.bytes <= 512 * ops, "{name}: {} bytes", out.bytes);
    }
}
