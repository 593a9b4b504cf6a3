//! Paddle programs printed by paddlepaddle itself (fixtures/paddle/make.py:
//! 3.3.1 for the bare printer, 3.0.0b2 for the tagged one), read back: op
//! counts checked against Paddle's own walk of the program, the printer
//! form against Paddle's print, and damaged variants for located errors
//! with every other op kept.

use std::collections::BTreeMap;

use pparse::parsers::ml::paddle::ast::{AttrValue, Era, Op, Program, TypeKind, ValueName};
use pparse::parsers::ml::paddle::parse::{Builder, Reader, Severity, read_all};

use crate::util::*;

const PRINTED: &[&str] = &[
    "v3-encoder",
    "v3-cnn",
    "v3-control",
    "b2-encoder",
    "b2-cnn",
    "b2-control",
];

fn counts(programs: &[Program]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for p in programs {
        for op in &p.block.ops {
            op.walk(&mut |o| *out.entry(o.name.to_string()).or_default() += 1);
        }
    }
    out
}

fn paddle_counts(name: &str) -> BTreeMap<String, u64> {
    let text = fixture(&format!("paddle/{name}.counts.json"));
    serde_json::from_slice(&text).unwrap()
}

fn all_ops(programs: &[Program]) -> Vec<&Op> {
    let mut out = Vec::new();
    for p in programs {
        for op in &p.block.ops {
            op.walk(&mut |o| out.push(o));
        }
    }
    out
}

fn errors(b: &Builder) -> Vec<String> {
    b.diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| format!("{}:{}: {}", d.at.line, d.at.col, d.message))
        .collect()
}

#[test]
fn printed_programs_have_paddles_op_counts() {
    for name in PRINTED {
        let b = read_all(&fixture(&format!("paddle/{name}.txt")));
        assert_eq!(b.programs.len(), 1, "{name}");
        assert!(b.diagnostics.is_empty(), "{name}: {:?}", errors(&b));
        assert_eq!(counts(&b.programs), paddle_counts(name), "{name}");
        let era = if name.starts_with("b2") {
            Era::Tagged
        } else {
            Era::Bare
        };
        assert_eq!(b.programs[0].era, era, "{name}");
    }
}

/// Every op's byte range is its line; every operand, attribute and type
/// range holds what it names.
#[test]
fn ranges_point_at_the_text() {
    for name in PRINTED {
        let text = fixture(&format!("paddle/{name}.txt"));
        let b = read_all(&text);
        let at = |r: pparse::data::Range| &text[r.start as usize..r.end as usize];
        for op in all_ops(&b.programs) {
            let line = at(op.span);
            assert!(
                line.starts_with(b"("),
                "{name}: {}",
                String::from_utf8_lossy(line)
            );
            assert!(!line.contains(&b'\n'));
            let quoted = format!("\"{}\"", op.name);
            assert_eq!(at(op.name_span), quoted.as_bytes());
            for r in &op.results {
                assert_eq!(at(r.span), r.name.to_string().as_bytes());
            }
            for o in &op.operands {
                assert_eq!(at(o.value.span), o.value.name.to_string().as_bytes());
            }
            for a in &op.attrs {
                assert_eq!(at(a.key_span), a.key.as_bytes());
                let v = at(a.attr.span);
                assert!(
                    !v.is_empty() && !v.ends_with(b",") && !v.ends_with(b"}"),
                    "{name}: {}",
                    String::from_utf8_lossy(v)
                );
            }
            for t in op.operand_types.iter().chain(&op.result_types) {
                if op.inferred {
                    continue;
                }
                let s = String::from_utf8_lossy(at(t.span)).into_owned();
                assert!(
                    s.contains("tensor") || s.starts_with("vec[") || !s.is_empty(),
                    "{s}"
                );
                if let TypeKind::Tensor { dtype, .. } = &t.kind {
                    assert!(s.ends_with(&format!("{dtype}>")), "{s}");
                }
            }
        }
    }
}

#[test]
fn printer_form_is_paddles_print() {
    for name in PRINTED {
        let path = fixture_path(&format!("paddle/{name}.txt"));
        let r = pparse(["ir".as_ref(), path.as_os_str()]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr_text());
        let want: String = String::from_utf8(fixture(&format!("paddle/{name}.txt")))
            .unwrap()
            .lines()
            .map(|l| format!("{}\n", l.trim_end()))
            .collect();
        assert_eq!(r.stdout_text(), want, "{name}");
    }
}

#[test]
fn while_results_are_inferred_from_the_body() {
    for name in ["v3-control", "b2-control"] {
        let b = read_all(&fixture(&format!("paddle/{name}.txt")));
        let ops = all_ops(&b.programs);
        let w = ops
            .iter()
            .find(|o| o.name.as_str() == "pd_op.while")
            .unwrap();
        assert!(w.inferred);
        assert_eq!(w.results.len(), w.result_types.len(), "{name}");
        let dims: Vec<Vec<i64>> = w
            .result_types
            .iter()
            .map(|t| match &t.kind {
                TypeKind::Tensor { dims, .. } => dims.to_vec(),
                k => panic!("{k:?}"),
            })
            .collect();
        assert_eq!(dims, vec![vec![1], vec![-1, 4]], "{name}");
        // Its body's arguments are defined values.
        let body = &w.regions[0].blocks[0];
        assert_eq!(body.args.len(), 2);
        assert_eq!(body.args[0].value.name, ValueName::Arg(0));
        let ifs = ops.iter().filter(|o| o.name.as_str() == "pd_op.if");
        for i in ifs {
            assert_eq!(i.regions.len(), 2, "then and else");
        }
    }
}

#[test]
fn a_log_yields_each_program_and_kernel_ops() {
    for era in ["v3", "b2"] {
        let b = read_all(&fixture(&format!("paddle/{era}-print_ir.log")));
        assert!(b.diagnostics.is_empty(), "{era}: {:?}", errors(&b));
        assert_eq!(
            b.programs.len(),
            4,
            "{era}: before and after lowering, twice"
        );
        let ops = all_ops(&b.programs);
        let matmul = ops
            .iter()
            .find(|o| o.name.as_str() == "matmul(phi_kernel)")
            .expect("a kernel op");
        let key = matmul
            .attrs
            .iter()
            .find(|a| a.key.as_ref() == "kernel_key")
            .unwrap();
        match &key.attr.value {
            AttrValue::KernelKey(kv) => assert_eq!(kv[0], ("backend".into(), "CPU".into())),
            v => panic!("{v:?}"),
        }
        assert!(matches!(
            &matmul.result_types[0].kind,
            TypeKind::Tensor { dialect: "kernel", name, .. } if name.as_ref() == "cpu_tensor"
        ));
        if era == "v3" {
            assert!(ops.iter().any(|o| o.id.is_some()), "[id:N] is read");
        }
    }
}

/// Forms of older printers and rarer ops, from the notes' grammar.
#[test]
fn older_and_rarer_forms() {
    let text = br#"{
    (%0) = "builtin.get_parameter" () {parameter_name:"conv2d_0.w_0"} : () -> pd_op.tensor<64x3x7x7xf32>
    (%1) = "pd_op.feed" () {col:(Int32)0,name:"x"} : () -> pd_op.tensor<-1x3x224x224xf32>
    (%2) = "pd_op.conv2d" (%1, %0) {dilations:(Array)[(Int32)1,(Int32)1],padding_algorithm:"EXPLICIT",data_format:(pd_op.DataLayout)NCHW} : (pd_op.tensor<-1x3x224x224xf32>, pd_op.tensor<64x3x7x7xf32>) -> pd_op.tensor<-1x64x112x112xf32>
    (%3) = "builtin.parameter" () {parameter_name:"conv2d_0.w_0",test:(tp.char)a} : () -> pd_op.tensor<64x3x7x7xf32>
    (%4) = "pd_op.full" () {value:(Float)-inf,v2:nan,v3:1e-05,s:"say \"hi\"",n:<#AttrNull>,t:<<NULL TYPE>>,p:(pd_op.Place)Place(gpu:0)} : () -> <<NULL TYPE>>
    (%5) = "builtin.combine" (%2, %2) {} : (pd_op.tensor<-1x64x112x112xf32>, pd_op.tensor<-1x64x112x112xf32>) -> vec[pd_op.tensor<-1x64x112x112xf32>,pd_op.tensor<-1x64x112x112xf32>]
    (%6) = cinn_op.fusion () -> builtin.tensor<1xb> {
        () = "cf.yield" (<<NULL VALUE>>) {} : (<<NULL TYPE>>) -> 
    }
    () = "pd_op.unknown_op" (%5) {x:[],y:foo(bar)} : (vec[pd_op.tensor<-1x64x112x112xf32>]) -> 
}
"#;
    let b = read_all(text);
    assert!(b.diagnostics.is_empty(), "{:?}", errors(&b));
    let ops = all_ops(&b.programs);
    assert_eq!(ops.len(), 9);
    assert_eq!(b.programs[0].era, Era::Tagged);
    let attr = |op: usize, key: &str| {
        ops[op]
            .attrs
            .iter()
            .find(|a| a.key.as_ref() == key)
            .unwrap()
            .attr
            .clone()
    };
    assert_eq!(attr(1, "col").value, AttrValue::Int(0));
    assert!(matches!(attr(2, "dilations").value, AttrValue::Array(ref v) if v.len() == 2));
    assert_eq!(attr(2, "data_format").value, AttrValue::Word("NCHW".into()));
    // An unknown dialect's attribute is kept as its text, not an error.
    assert_eq!(attr(3, "test").value, AttrValue::Opaque);
    assert_eq!(attr(3, "test").span.len(), "(tp.char)a".len() as u64);
    assert_eq!(attr(4, "value").value, AttrValue::Float(f64::NEG_INFINITY));
    assert!(matches!(attr(4, "v2").value, AttrValue::Float(f) if f.is_nan()));
    assert_eq!(attr(4, "v3").value, AttrValue::Float(1e-05));
    assert_eq!(attr(4, "s").value, AttrValue::Str("say \"hi\"".into()));
    assert_eq!(attr(4, "n").value, AttrValue::Null);
    assert_eq!(attr(4, "p").value, AttrValue::Place("gpu:0".into()));
    assert_eq!(ops[4].result_types[0].kind, TypeKind::Null);
    assert!(
        matches!(&ops[0].result_types[0].kind, TypeKind::Tensor { dialect: "pd_op", dims, .. } if dims[..] == [64, 3, 7, 7])
    );
    assert!(matches!(&ops[5].result_types[0].kind, TypeKind::Vec(v) if v.len() == 2));
    assert_eq!(ops[6].name.as_str(), "cinn_op.fusion");
    assert_eq!(ops[6].regions.len(), 1);
    assert_eq!(ops[7].operands[0].value.name, ValueName::Null);
    assert_eq!(attr(8, "y").value, AttrValue::Word("foo(bar)".into()));
}

/// The error a damaged variant gives, and the ops it keeps.
fn check_damaged(text: &str, want: &[&str], kept: usize) {
    let b = read_all(text.as_bytes());
    let got = errors(&b);
    for w in want {
        assert!(
            got.iter().any(|g| g.contains(w)),
            "expected an error containing {w:?}, got {got:?}"
        );
    }
    let n = all_ops(&b.programs).len();
    assert_eq!(n, kept, "ops kept: {got:?}");
}

fn control() -> String {
    String::from_utf8(fixture("paddle/v3-control.txt")).unwrap()
}

fn op_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| l.trim_start().starts_with('('))
        .count()
}

#[test]
fn damaged_programs_report_located_errors_and_keep_the_rest() {
    let good = control();
    let total = op_lines(&good);
    let lines: Vec<&str> = good.lines().collect();
    let with = |i: usize, new: &str| {
        let mut l = lines.clone();
        l[i] = new;
        l.join("\n") + "\n"
    };
    // Line 5 is `(%3) = "pd_op.full" ...`, line 6 uses it.
    assert!(lines[4].contains("(%3) = \"pd_op.full\""));
    // An unterminated string: the line is lost, nothing else.
    let s = lines[4].replacen("\"pd_op.full\"", "\"pd_op.full", 1);
    check_damaged(&with(4, &s), &["5:12: unterminated string"], total - 1);
    // An operand list cut off.
    let cut = &lines[5][..lines[5].find("%3").unwrap() + 2];
    check_damaged(&with(5, cut), &["6:"], total - 1);
    // A garbage line among ops.
    let mut l = lines.clone();
    l.insert(3, "    this is not an op");
    check_damaged(&(l.join("\n") + "\n"), &["4:5: expected an op"], total);
    // An undefined value, reported at its use.
    let s = lines[5].replacen("(%2, %3)", "(%2, %77)", 1);
    check_damaged(&with(5, &s), &["6:38: use of undefined value %77"], total);
    // A redefinition, with a note at the first.
    let s = lines[4].replacen("(%3) =", "(%1) =", 1);
    let b = read_all(with(4, &s).as_bytes());
    let red = b
        .diagnostics
        .iter()
        .find(|d| d.message.contains("redefinition of %1"))
        .expect("redefinition reported");
    assert_eq!((red.at.line, red.at.col), (5, 6));
    assert_eq!(red.notes[0].0.line, 3);
    // An if whose line is lost: its blocks' ops are kept, the braces
    // balance, nothing after it is lost.
    let s = lines[6].replacen("\"pd_op.if\" (%4)", "\"pd_op.if\" (%4", 1);
    check_damaged(&with(6, &s), &["7:"], total - 1);
    // A stray closing brace, and a missing one.
    let mut l = lines.clone();
    l.insert(3, "        }");
    check_damaged(
        &(l.join("\n") + "\n"),
        &["4:9: this closes no open block"],
        total,
    );
    let mut l = lines.clone();
    let last_close = l
        .iter()
        .rposition(|x| x.trim() == "}" && x.starts_with("    }"))
        .unwrap();
    l.remove(last_close);
    check_damaged(&(l.join("\n") + "\n"), &["never closed"], total);
}

/// Reads `text` fed `step` bytes at a time, as the engine feeds chunks.
fn read_by(text: &[u8], step: usize) -> Builder {
    let mut b = Builder::default();
    let mut r = Reader::new();
    let (mut pos, mut end) = (0, 0);
    loop {
        end = (end + step).min(text.len());
        let eof = end == text.len();
        pos += r.feed(&text[pos..end], pos as u64, eof, &mut b);
        if eof {
            return b;
        }
    }
}

/// A program whose line after its opening brace is garbage (ending in `{`
/// like an opening line, or not; indented or not; one line or more): the
/// program still starts at its brace, the garbage is one error at its first
/// line with a note at the brace, and every op Paddle printed is kept.
/// Text around programs that merely ends a line in `{` stays text.
#[test]
fn garbage_after_the_opening_brace_is_an_error_in_the_program() {
    let good = String::from_utf8(fixture("paddle/v3-cnn.txt")).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    assert_eq!(lines[0], "{");
    let after_brace = |garbage: &[&str]| {
        let mut l = lines.clone();
        l.splice(1..1, garbage.iter().copied());
        l.join("\n") + "\n"
    };
    let cases: [(&[&str], &str); 4] = [
        (
            &["    )))) ??? {{{"],
            "2:5: expected an op, `}` or block arguments",
        ),
        (
            &[")))) ??? {{{"],
            "2:1: expected an op, `}` or block arguments",
        ),
        (
            &["    )))) ???", "    junk {"],
            "2:5: expected an op, `}` or block arguments (so is the line after it)",
        ),
        (
            &["  )))", "", "        ??? {{{", "    x"],
            "2:3: expected an op, `}` or block arguments (so are the 2 lines after it)",
        ),
    ];
    for (garbage, want) in cases {
        let text = after_brace(garbage);
        let b = read_all(text.as_bytes());
        assert_eq!(errors(&b), [want], "{garbage:?}");
        let d = &b.diagnostics[0];
        assert_eq!(d.notes.len(), 1, "{garbage:?}");
        assert_eq!((d.notes[0].0.line, d.notes[0].0.col), (1, 1));
        assert_eq!(b.programs.len(), 1, "{garbage:?}");
        assert_eq!(b.programs[0].span.start, 0, "{garbage:?}");
        assert_eq!(b.programs[0].span.end as usize, text.len() - 1);
        assert_eq!(counts(&b.programs), paddle_counts("v3-cnn"), "{garbage:?}");
        for step in [1, 7, 64] {
            let c = read_by(text.as_bytes(), step);
            assert_eq!(c.programs, b.programs, "{garbage:?} by {step}");
            assert_eq!(c.diagnostics, b.diagnostics, "{garbage:?} by {step}");
        }
    }

    // Text that ends lines in `{` before a program, with lines deeper than
    // them, is not a program: no error, the program after it whole.
    let text = format!(
        "config = {{\n    lr: 0.1,\n    (see below)\n}}\nnote {{\nIR before lowering = {{\n{}",
        &good[2..]
    );
    let b = read_all(text.as_bytes());
    assert!(b.diagnostics.is_empty(), "{:?}", errors(&b));
    assert_eq!(b.programs.len(), 1);
    assert_eq!(counts(&b.programs), paddle_counts("v3-cnn"));

    // The command: a located error with its caret, exit 1.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("garbage.txt");
    std::fs::write(&bad, after_brace(&["    )))) ??? {{{"])).unwrap();
    let r = pparse(["ir".as_ref(), bad.as_os_str(), "--stats".as_ref()]);
    assert_eq!(r.code, 1, "{}", r.stderr_text());
    let err = r.stderr_text();
    let head = format!("{}:2:5: error: expected an op", bad.display());
    assert!(err.contains(&head), "{err}");
    assert!(err.contains("^^^^^^^^^^^^"), "{err}");
    assert!(
        r.stdout_text().contains("20  ops in all"),
        "{}",
        r.stdout_text()
    );
    let r = pparse(["tree".as_ref(), bad.as_os_str(), "--no-index".as_ref()]);
    assert_eq!(r.code, 1, "{}", r.stderr_text());
}

/// Cut at every line and inside lines: the reader ends, keeps every op
/// whole before the cut, and says the program is not closed.
#[test]
fn cut_anywhere_keeps_what_came_before() {
    let all = PRINTED
        .iter()
        .copied()
        .chain(["v3-print_ir", "b2-print_ir"]);
    for name in all {
        let file = if name.ends_with("print_ir") {
            format!("paddle/{name}.log")
        } else {
            format!("paddle/{name}.txt")
        };
        let text = fixture(&file);
        let mut cuts: Vec<usize> = memchr::memchr_iter(b'\n', &text).map(|i| i + 1).collect();
        let mut rng = Rng::new(13);
        for _ in 0..60 {
            cuts.push(rng.below(text.len() as u64) as usize);
        }
        for cut in cuts {
            let part = &text[..cut];
            let b = read_all(part);
            let whole_lines = part[..memchr::memrchr(b'\n', part).map_or(0, |i| i + 1)]
                .split(|&c| c == b'\n')
                .filter(|l| l.iter().find(|&&c| c != b' ') == Some(&b'('))
                .count();
            let n = all_ops(&b.programs).len();
            assert!(
                n >= whole_lines.saturating_sub(0) && n <= whole_lines + 1,
                "{name} cut at {cut}: {n} ops, {whole_lines} whole op lines"
            );
            // Cut inside a program: after its opening line and an op, before
            // its closing brace at the start of a line.
            let s = String::from_utf8_lossy(part);
            let opened = s
                .rfind(" = {\n")
                .or_else(|| s.starts_with("{\n").then_some(0));
            let closed = s.rfind("\n}");
            let open =
                opened.is_some_and(|o| closed.is_none_or(|c| c < o) && s[o..].contains("\n    ("));
            if open {
                assert!(
                    errors(&b).iter().any(|e| e.contains("never closed")),
                    "{name} cut at {cut}: {:?}",
                    errors(&b)
                );
            }
        }
    }
}

/// Fed a few bytes at a time, the reader finds what it finds whole.
#[test]
fn chunked_reading_matches_whole() {
    for file in ["paddle/v3-control.txt", "paddle/b2-print_ir.log"] {
        let text = fixture(file);
        let whole = read_all(&text);
        for step in [1usize, 7, 64, 1000] {
            let mut b = Builder::default();
            let mut r = Reader::new();
            let mut pos = 0;
            let mut end = 0;
            while pos < text.len() || end < text.len() {
                end = (end + step).min(text.len());
                let eof = end == text.len();
                pos += r.feed(&text[pos..end], pos as u64, eof, &mut b);
                if eof {
                    break;
                }
            }
            assert_eq!(b.programs, whole.programs, "{file} by {step}");
            assert_eq!(b.diagnostics, whole.diagnostics, "{file} by {step}");
        }
    }
}

/// Random bytes and random edits of a real program: the reader ends and
/// never panics.
#[test]
fn noise_never_hangs_or_panics() {
    let good = fixture("paddle/v3-control.txt");
    let mut rng = Rng::new(5);
    for i in 0..300 {
        let mut t = good.clone();
        for _ in 0..1 + i % 8 {
            let at = rng.below(t.len() as u64);
            if i % 3 == 0 {
                let len = rng.range(1, 40).min(t.len() as u64 - at);
                overwrite(&mut t, at, len, &mut rng);
            } else {
                flip(&mut t, at, 1 << rng.below(8));
            }
        }
        let b = read_all(&t);
        assert!(b.diagnostics.len() <= pparse::parsers::ml::paddle::parse::MAX_ERRORS);
    }
    let mut junk = vec![0u8; 20_000];
    rng.fill(&mut junk);
    read_all(&junk);
    read_all(&b"{\n".repeat(10_000));
    read_all(&b"{\n(".repeat(1000));
}

#[test]
fn cli_json_stats_and_diagnostics() {
    let path = fixture_path("paddle/v3-control.txt");
    let r = pparse(["ir".as_ref(), path.as_os_str(), "--json".as_ref()]);
    assert_eq!(r.code, 0, "{}", r.stderr_text());
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let p = &v["programs"][0];
    assert_eq!(p["era"], "bare");
    let ops = p["ops"].as_array().unwrap();
    assert_eq!(ops[0]["name"], "pd_op.data");
    assert_eq!(ops[0]["results"][0], "%0");
    assert_eq!(ops[0]["attributes"]["name"], "x");
    assert_eq!(ops[0]["attributes"]["shape"], serde_json::json!([-1, 4]));
    assert_eq!(
        ops[0]["result_types"][0]["dims"],
        serde_json::json!([-1, 4])
    );
    let w = ops.iter().find(|o| o["name"] == "pd_op.while").unwrap();
    assert_eq!(w["operand_labels"][0], "cond");
    assert_eq!(w["result_types_inferred"], true);
    assert!(
        w["regions"][0]["blocks"][0]["ops"]
            .as_array()
            .unwrap()
            .len()
            > 3
    );
    assert_eq!(v["diagnostics"], serde_json::json!([]));

    let r = pparse([
        "ir".as_ref(),
        path.as_os_str(),
        "--stats".as_ref(),
        "--json".as_ref(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let want: serde_json::Value =
        serde_json::from_slice(&fixture("paddle/v3-control.counts.json")).unwrap();
    assert_eq!(v["ops"], want);

    // A damaged program: exit 1, compiler-style errors with a caret.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    let text = control().replacen("(%2, %3)", "(%2, %77)", 1);
    std::fs::write(&bad, text).unwrap();
    let r = pparse(["ir".as_ref(), bad.as_os_str()]);
    assert_eq!(r.code, 1);
    let err = r.stderr_text();
    let head = format!("{}:6:38: error: use of undefined value %77", bad.display());
    assert!(err.contains(&head), "{err}");
    assert!(err.contains("^^^"), "{err}");
    let r = pparse(["ir".as_ref(), bad.as_os_str(), "--json".as_ref()]);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["diagnostics"][0]["line"], 6);
    assert_eq!(v["diagnostics"][0]["col"], 38);
    assert_eq!(v["diagnostics"][0]["severity"], "error");
}

#[test]
fn the_tree_shows_programs_and_ops() {
    let path = fixture_path("paddle/v3-print_ir.log");
    let r = pparse(["tree".as_ref(), path.as_os_str()]);
    assert!(r.stdout_text().contains("[pir]"), "{}", r.stdout_text());
    let r = pparse([
        "nodes".as_ref(),
        path.as_os_str(),
        "--depth".as_ref(),
        "3".as_ref(),
    ]);
    let out = r.stdout_text();
    assert!(out.contains("program at"), "{out}");
    assert!(out.contains("matmul(phi_kernel)"), "{out}");
    assert!(out.contains("kernel_key"), "{out}");
    assert_eq!(r.code, 0, "{}", r.stderr_text());
}

/// Saved programs (`paddle.jit.save`): the op counts of what
/// `paddle.static.load_inference_model` reads, and each op's JSON object.
#[test]
fn saved_programs_read_as_paddle_loads_them() {
    use pparse::parsers::ml::paddle::json_program;
    for name in ["saved-cnn", "saved-mlp"] {
        let bytes = fixture(&format!("paddle/{name}.json"));
        let s = json_program::read(&bytes).unwrap();
        assert_eq!(s.magic.as_deref(), Some("pir"));
        assert_eq!(
            counts(std::slice::from_ref(&s.program)),
            paddle_counts(name),
            "{name}"
        );
        for op in all_ops(std::slice::from_ref(&s.program)) {
            let r = op.span;
            let v: serde_json::Value =
                serde_json::from_slice(&bytes[r.start as usize..r.end as usize]).unwrap();
            assert!(v.get("#").is_some(), "{name}: an op's range is its object");
        }
        let path = fixture_path(&format!("paddle/{name}.json"));
        let r = pparse([
            "ir".as_ref(),
            path.as_os_str(),
            "--stats".as_ref(),
            "--json".as_ref(),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        let want: serde_json::Value =
            serde_json::from_slice(&fixture(&format!("paddle/{name}.counts.json"))).unwrap();
        assert_eq!(v["ops"], want, "{name}");
    }
}

fn numpy_dtype(safetensors: &str) -> &'static str {
    match safetensors {
        "F32" => "float32",
        "F64" => "float64",
        "F16" => "float16",
        "I64" => "int64",
        "I32" => "int32",
        "U8" => "uint8",
        "BOOL" => "bool",
        other => panic!("{other}"),
    }
}

/// The parameters beside a saved program, as Paddle loads them: names from
/// the program, dtype, shape and the very bytes (sha256).
#[test]
fn pdiparams_tensors_are_what_paddle_loads() {
    use sha2::{Digest, Sha256};
    for name in ["saved-cnn", "saved-mlp"] {
        let want: Vec<serde_json::Value> =
            serde_json::from_slice(&fixture(&format!("paddle/{name}.params.json"))).unwrap();
        let params = fixture(&format!("paddle/{name}.pdiparams"));
        for opened in ["json", "pdiparams"] {
            let path = fixture_path(&format!("paddle/{name}.{opened}"));
            let r = pparse(["tensors".as_ref(), path.as_os_str(), "--json".as_ref()]);
            assert_eq!(r.code, 0, "{}", r.stderr_text());
            let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
            let got = v.as_array().or_else(|| v["tensors"].as_array()).unwrap();
            assert_eq!(got.len(), want.len(), "{name} via {opened}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g["name"], w["name"], "{name}");
                assert_eq!(numpy_dtype(g["dtype"].as_str().unwrap()), w["dtype"]);
                assert_eq!(g["shape"], w["shape"]);
                let off = g["offset"].as_u64().unwrap() as usize;
                let len = g["length"].as_u64().unwrap() as usize;
                let hash: String = Sha256::digest(&params[off..off + len])
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert_eq!(hash, w["sha256"].as_str().unwrap(), "{name}: {}", w["name"]);
                assert_eq!(g["status"], "complete");
            }
        }
    }
}

/// A cut `.pdiparams` keeps every whole tensor and says which one is cut.
#[test]
fn cut_pdiparams_keep_whole_tensors() {
    let params = fixture("paddle/saved-cnn.pdiparams");
    let src = |b: &[u8]| pparse::data::MemSource::new(b.to_vec());
    let whole = pparse::parsers::ml::paddle::params::records(&src(&params));
    let ends: Vec<u64> = whole.iter().map(|r| r.range.end).collect();
    let mut cuts: Vec<u64> = ends.iter().flat_map(|&e| [e - 1, e, e + 1]).collect();
    let mut rng = Rng::new(3);
    for _ in 0..40 {
        cuts.push(rng.below(params.len() as u64));
    }
    for cut in cuts {
        let cut = cut.min(params.len() as u64);
        let part = &params[..cut as usize];
        let recs = pparse::parsers::ml::paddle::params::records(&src(part));
        let intact = ends.iter().filter(|&&e| e <= cut).count();
        let ok: Vec<_> = recs.iter().filter(|r| r.damage.is_none()).collect();
        assert_eq!(ok.len(), intact, "cut at {cut}");
        for (r, w) in ok.iter().zip(&whole) {
            assert_eq!(r.data, w.data, "cut at {cut}");
        }
        if (cut as usize) < params.len() && !ends.contains(&cut) {
            let last = recs.last().expect("the cut tensor is listed");
            let d = last.damage.as_ref().expect("and marked");
            assert_eq!(
                d.status,
                pparse::Status::Truncated,
                "cut at {cut}: {}",
                d.reason
            );
        }
    }
}

/// The shared damage sweep (cuts, flips, zeroed and random spans) on a
/// printed program, a log, a saved program and its parameters: the tree's
/// invariants hold and nothing panics or hangs.
#[test]
fn damage_sweeps() {
    for f in [
        "paddle/v3-control.txt",
        "paddle/b2-print_ir.log",
        "paddle/saved-cnn.json",
        "paddle/saved-cnn.pdiparams",
    ] {
        crate::sweep::sweep_with(f, &|_, _, _| {});
    }
}
