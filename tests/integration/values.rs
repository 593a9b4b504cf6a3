//! Tensor values (`pparse::view::values`) against numpy and ml_dtypes.
//!
//! Every expectation comes from fixtures/values/expected.json and the `.npy`
//! files beside it, written by fixtures/values/make_values.py with numpy and
//! ml_dtypes; the element offsets of the truncation tests are computed here
//! from the shape and strides alone.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock};

use pparse::Status;
use pparse::data::{MemSource, MmapSource};
use pparse::offer::tensor::{Dtype, Encoding, Tensor};
use pparse::view::values::{self, Element};
use serde_json::Value as Json;

use crate::util::{FIX, s, u};

fn dir() -> PathBuf {
    PathBuf::from(FIX).join("values")
}

/// One fixture case of expected.json.
#[derive(Clone, Debug)]
struct Case {
    name: String,
    file: String,
    dtype: Dtype,
    shape: Vec<u64>,
    stride: Option<Vec<u64>>,
    offset: u64,
    length: u64,
    big_endian: bool,
    values: Vec<String>,
    npy: String,
    stats: Option<Json>,
    aliases: Vec<Dtype>,
}

impl Case {
    fn tensor(&self, dtype: Dtype) -> Tensor {
        Tensor {
            name: self.name.clone(),
            dtype,
            shape: self.shape.clone(),
            stride: self.stride.clone(),
            storage_offset: None,
            source: 0,
            offset: self.offset,
            length: self.length,
            status: Status::Complete,
            detail: None,
            big_endian: self.big_endian,
            encoding: Encoding::Raw,
        }
    }
    fn bytes(&self) -> Vec<u8> {
        std::fs::read(dir().join(&self.file)).expect("read fixture")
    }
    fn source(&self) -> MmapSource {
        MmapSource::open(&dir().join(&self.file)).expect("map fixture")
    }
    fn npy(&self) -> Vec<u8> {
        std::fs::read(dir().join(&self.npy)).expect("read npy")
    }
    fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
    /// Every dtype these bytes are checked as.
    fn dtypes(&self) -> Vec<Dtype> {
        let mut v = vec![self.dtype];
        v.extend(&self.aliases);
        v
    }
    /// Byte range of each element in C order, from the shape and strides.
    fn element_ranges(&self) -> Vec<(u64, u64)> {
        let nd = self.shape.len();
        let stride = self.stride.clone().unwrap_or_else(|| {
            let mut s = vec![1u64; nd];
            for k in (0..nd.saturating_sub(1)).rev() {
                s[k] = s[k + 1] * self.shape[k + 1];
            }
            s
        });
        let bits = self.dtype.bits();
        (0..self.numel())
            .map(|mut i| {
                let mut lin = 0;
                for k in (0..nd).rev() {
                    lin += (i % self.shape[k]) * stride[k];
                    i /= self.shape[k];
                }
                let start = lin * bits;
                (
                    self.offset + start / 8,
                    self.offset + (start + bits).div_ceil(8),
                )
            })
            .collect()
    }
}

fn cases() -> &'static [Case] {
    static C: OnceLock<Vec<Case>> = OnceLock::new();
    C.get_or_init(|| {
        let text = std::fs::read_to_string(dir().join("expected.json")).expect("expected.json");
        let j: Json = serde_json::from_str(&text).expect("parse expected.json");
        let dtype = |v: &Json| Dtype::parse(s(v)).unwrap_or_else(|| panic!("dtype {v}"));
        j["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .map(|c| Case {
                name: s(&c["name"]).to_string(),
                file: s(&c["file"]).to_string(),
                dtype: dtype(&c["dtype"]),
                shape: c["shape"].as_array().unwrap().iter().map(u).collect(),
                stride: c["stride"].as_array().map(|a| a.iter().map(u).collect()),
                offset: u(&c["offset"]),
                length: u(&c["length"]),
                big_endian: c["big_endian"].as_bool().unwrap(),
                values: c["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| s(v).to_string())
                    .collect(),
                npy: s(&c["npy"]).to_string(),
                stats: (!c["stats"].is_null()).then(|| c["stats"].clone()),
                aliases: c["aliases"].as_array().unwrap().iter().map(dtype).collect(),
            })
            .collect()
    })
}

fn case(name: &str) -> &'static Case {
    cases()
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

/// A Python float repr parsed ("nan", "inf", "-inf" included).
fn pyf(text: &str) -> f64 {
    text.parse()
        .unwrap_or_else(|_| panic!("not a float: {text:?}"))
}

/// The expected value of one element as a number pair (complex: real, imag).
fn expected_parts(text: &str) -> (f64, f64) {
    match text {
        "True" => (1.0, 0.0),
        "False" => (0.0, 0.0),
        _ if text.contains('j') => {
            // "(a+bj)", "(a-bj)" or "bj": split before the imaginary sign.
            let t = text.trim_start_matches('(').trim_end_matches(')');
            let t = &t[..t.len() - 1];
            let cut = t
                .char_indices()
                .skip(1)
                .filter(|&(i, ch)| (ch == '+' || ch == '-') && !t[..i].ends_with('e'))
                .map(|(i, _)| i)
                .last();
            match cut {
                Some(i) => (pyf(&t[..i]), pyf(&t[i..])),
                None => (0.0, pyf(t)),
            }
        }
        _ => (pyf(text), 0.0),
    }
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a == b && a.is_sign_negative() == b.is_sign_negative())
}

fn is_float(d: Dtype) -> bool {
    use Dtype::*;
    matches!(
        d,
        F4 | F6_E2M3
            | F6_E3M2
            | F8_E5M2
            | F8_E4M3
            | F8_E8M0
            | F8_E4M3FNUZ
            | F8_E5M2FNUZ
            | F16
            | BF16
            | F32
            | F64
    )
}

fn check_value(c: &Case, dtype: Dtype, i: usize, got: &Element, want: &str) {
    let ctx = || {
        format!(
            "{} as {} element {i}: got {got:?}, want {want}",
            c.name,
            dtype.name()
        )
    };
    // display() is Python's repr, which is what the fixture holds.
    assert_eq!(got.display(), want, "{}", ctx());
    match *got {
        Element::Time { .. } | Element::Text(_) => panic!("not a safetensors value: {}", ctx()),
        Element::Float(x) => {
            assert!(is_float(dtype), "{}", ctx());
            assert!(same(x, pyf(want)), "{}", ctx());
        }
        Element::Complex(re, im) => {
            assert!(
                matches!(dtype, Dtype::C32 | Dtype::C64 | Dtype::C128),
                "{}",
                ctx()
            );
            let (wr, wi) = expected_parts(want);
            assert!(same(re, wr) && same(im, wi), "{}", ctx());
        }
        Element::Int(v) => assert_eq!(v.to_string(), want, "{}", ctx()),
        Element::UInt(v) => assert_eq!(v.to_string(), want, "{}", ctx()),
        Element::Bool(b) => {
            assert_eq!(dtype, Dtype::BOOL, "{}", ctx());
            assert_eq!(if b { "True" } else { "False" }, want, "{}", ctx());
        }
    }
}

#[test]
fn fixtures_cover_every_dtype() {
    let mut seen: Vec<Dtype> = cases().iter().flat_map(Case::dtypes).collect();
    seen.sort_by_key(|d| d.name());
    seen.dedup();
    assert_eq!(seen.len(), Dtype::ALL.len(), "{seen:?}");
    for name in [
        "f8_e4m3",
        "f8_e5m2",
        "f8_e4m3fnuz",
        "f8_e5m2fnuz",
        "f8_e8m0",
    ] {
        assert_eq!(case(name).values.len(), 256);
    }
    assert_eq!(case("f4").values.len(), 16);
    assert_eq!(case("f6_e2m3").values.len(), 64);
    assert_eq!(case("f6_e3m2").values.len(), 64);
}

#[test]
fn every_value_decodes_as_numpy_does() {
    let mut checked = 0;
    for c in cases() {
        let src = c.source();
        for dtype in c.dtypes() {
            let t = c.tensor(dtype);
            let vals = values::values(&t, &src, 0, c.values.len() + 5);
            assert_eq!(vals.len(), c.values.len(), "{}", c.name);
            for (i, (got, want)) in vals.iter().zip(&c.values).enumerate() {
                check_value(c, dtype, i, got, want);
                checked += 1;
            }
            // Windows from any logical index give the same values.
            let n = vals.len();
            for first in [0, 1, n / 3, n.saturating_sub(2), n] {
                for count in [0, 1, 3, 17, n] {
                    let w = values::values(&t, &src, first as u64, count);
                    let end = (first + count).min(n);
                    assert_eq!(w.len(), end - first.min(end), "{} window", c.name);
                    for (k, v) in w.iter().enumerate() {
                        assert_eq!(v.display(), vals[first + k].display(), "{} window", c.name);
                    }
                }
            }
            assert!(values::values(&t, &src, n as u64 + 10, 5).is_empty());
        }
    }
    let want: usize = cases()
        .iter()
        .map(|c| c.values.len() * c.dtypes().len())
        .sum();
    assert_eq!(checked, want);
}

#[test]
fn single_codes_decode_as_ml_dtypes() {
    // Each code alone, at every alignment the packing produces.
    for (name, dtype, bits) in [
        ("f8_e4m3", Dtype::F8_E4M3, 8),
        ("f8_e5m2", Dtype::F8_E5M2, 8),
        ("f8_e4m3fnuz", Dtype::F8_E4M3FNUZ, 8),
        ("f8_e5m2fnuz", Dtype::F8_E5M2FNUZ, 8),
        ("f8_e8m0", Dtype::F8_E8M0, 8),
        ("f4", Dtype::F4, 4),
        ("f6_e2m3", Dtype::F6_E2M3, 6),
        ("f6_e3m2", Dtype::F6_E3M2, 6),
    ] {
        let c = case(name);
        for (code, want) in c.values.iter().enumerate() {
            for slot in 0..4u64 {
                // `code` as element `slot` of a little-endian bit stream whose
                // other elements are all ones.
                let mut acc: u64 = (1 << (bits * 4)) - 1;
                acc &= !(((1u64 << bits) - 1) << (slot * bits));
                acc |= (code as u64) << (slot * bits);
                let bytes = &acc.to_le_bytes()[..(bits as usize * 4).div_ceil(8)];
                let got = values::decode(dtype, bytes, slot, false).expect("decode");
                check_value(c, dtype, code, &got, want);
            }
        }
        // Short input: no value, no panic.
        assert_eq!(values::decode(dtype, &[], 0, false), None);
        assert_eq!(values::decode(dtype, &[0], 2, false), None);
        assert_eq!(values::decode(dtype, &[0; 8], u64::MAX, false), None);
    }
}

#[test]
fn decode_reads_the_file_bytes() {
    for c in cases()
        .iter()
        .filter(|c| c.stride.is_none() && c.offset == 0)
    {
        let bytes = c.bytes();
        for dtype in c.dtypes() {
            for (i, want) in c.values.iter().enumerate() {
                let got = values::decode(dtype, &bytes, i as u64, c.big_endian)
                    .unwrap_or_else(|| panic!("{} {i}", c.name));
                check_value(c, dtype, i, &got, want);
            }
            let n = c.values.len() as u64;
            assert_eq!(
                values::decode(dtype, &bytes, n, c.big_endian),
                None,
                "{}",
                c.name
            );
        }
    }
}

#[test]
fn big_endian_matches_little_endian() {
    for (be, le) in [
        ("f32_be", "f32"),
        ("f64_be", "f64"),
        ("f16_be", "f16"),
        ("bf16_be", "bf16"),
        ("c64_be", "c64"),
        ("c32_be", "c32"),
    ] {
        let (b, l) = (case(be), case(le));
        assert!(b.big_endian && !l.big_endian);
        assert_eq!(b.values, l.values);
        let (bb, lb) = (b.bytes(), l.bytes());
        assert_ne!(bb, lb);
        for i in 0..l.values.len() as u64 {
            let x = values::decode(b.dtype, &bb, i, true).unwrap();
            let y = values::decode(l.dtype, &lb, i, false).unwrap();
            assert_eq!(x.display(), y.display(), "{be} {i}");
        }
        // Both export to the same little-endian file.
        let (mut ob, mut ol) = (Vec::new(), Vec::new());
        values::write_npy(&b.tensor(b.dtype), &b.source(), &mut ob).unwrap();
        values::write_npy(&l.tensor(l.dtype), &l.source(), &mut ol).unwrap();
        assert_eq!(ob, ol, "{be}");
    }
}

fn close(got: f64, want: f64, scale: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    (got - want).abs() <= 1e-6 * want.abs().max(scale * 1e-6).max(f64::MIN_POSITIVE)
}

#[test]
fn stats_match_numpy() {
    let mut checked = 0;
    for c in cases() {
        let Some(want) = &c.stats else { continue };
        let src = c.source();
        for dtype in c.dtypes() {
            let t = c.tensor(dtype);
            let bins = u(&want["bins"]) as usize;
            let calls: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
            let progress = |done: u64, total: u64| calls.lock().unwrap().push((done, total));
            let st = values::stats(&t, &src, bins, &AtomicBool::new(false), &progress)
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let ctx = format!("{} as {}: {st:?}", c.name, dtype.name());
            assert_eq!(st.count, u(&want["count"]), "{ctx}");
            assert_eq!(st.nan, u(&want["nan"]), "{ctx}");
            assert_eq!(st.inf, u(&want["inf"]), "{ctx}");
            assert_eq!(st.missing, 0, "{ctx}");
            let (min, max) = (pyf(s(&want["min"])), pyf(s(&want["max"])));
            let scale = min.abs().max(max.abs());
            if matches!(dtype, Dtype::C32 | Dtype::C64 | Dtype::C128) {
                // numpy's SIMD complex abs and libm's hypot may differ in the
                // last bit.
                assert!((st.min - min).abs() <= 1e-12 * scale, "{ctx}");
                assert!((st.max - max).abs() <= 1e-12 * scale, "{ctx}");
            } else {
                assert_eq!(st.min, min, "{ctx}");
                assert_eq!(st.max, max, "{ctx}");
            }
            assert!(close(st.mean, pyf(s(&want["mean"])), scale), "{ctx} mean");
            assert!(close(st.std, pyf(s(&want["std"])), scale), "{ctx} std");
            let hist: Vec<u64> = want["hist"].as_array().unwrap().iter().map(u).collect();
            assert_eq!(st.hist, hist, "{ctx}");
            // Progress: from 0 to 2 × numel, never backwards.
            let calls = calls.into_inner().unwrap();
            let total = 2 * c.numel();
            assert_eq!(calls.first(), Some(&(0, total)), "{ctx}");
            assert_eq!(calls.last(), Some(&(total, total)), "{ctx}");
            assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0), "{ctx}");
            checked += 1;
        }
    }
    assert!(checked >= 40, "{checked}");
}

#[test]
fn stats_other_bin_counts() {
    // Bins of equal width over [min, max], the last one closed.
    let c = case("f8_e4m3");
    let src = c.source();
    let t = c.tensor(c.dtype);
    let no = AtomicBool::new(false);
    for bins in [0usize, 1, 2, 3, 255] {
        let st = values::stats(&t, &src, bins, &no, &|_, _| {}).unwrap();
        assert_eq!(st.hist.len(), bins);
        assert_eq!(
            st.hist.iter().sum::<u64>(),
            if bins == 0 { 0 } else { st.count }
        );
    }
    let st = values::stats(&t, &src, 2, &no, &|_, _| {}).unwrap();
    // Symmetric codes: as many below 0 as above, the zeros (+0, -0) in the upper bin.
    assert_eq!(st.hist, vec![126, 128]);
}

#[test]
fn stats_cancel() {
    let c = case("f64");
    let cancel = AtomicBool::new(true);
    let err = values::stats(&c.tensor(c.dtype), &c.source(), 10, &cancel, &|_, _| {}).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Interrupted);
}

#[test]
fn npy_is_byte_identical_to_numpy() {
    let mut checked = 0;
    for c in cases() {
        let want = c.npy();
        let src = c.source();
        for dtype in c.dtypes() {
            let mut out = Vec::new();
            values::write_npy(&c.tensor(dtype), &src, &mut out)
                .unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert!(
                out == want,
                "{} as {}: .npy differs from numpy's",
                c.name,
                dtype.name()
            );
            // The header names npy_descr.
            let header = String::from_utf8_lossy(&want[10..want.len().min(128)]).to_string();
            let descr = values::npy_descr(dtype);
            assert!(header.contains(&format!("'descr': '{descr}'")), "{header}");
            checked += 1;
        }
    }
    assert!(checked >= 45, "{checked}");
}

#[test]
fn views_decode_in_c_order() {
    // The transposed 3×4 view against the base's bytes read by hand.
    let c = case("f32_transposed");
    assert_eq!(c.stride.as_deref(), Some(&[1, 3][..]));
    let base: Vec<f32> = c
        .bytes()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let vals = values::values(&c.tensor(c.dtype), &c.source(), 0, 12);
    for i in 0..3 {
        for j in 0..4 {
            assert_eq!(vals[i * 4 + j], Element::Float(f64::from(base[j * 3 + i])));
        }
    }
    // The sliced view starts past a prefix and its storage offset, and its
    // bytes end before the base's.
    let c = case("f32_sliced");
    assert!(c.offset > 16 && c.offset + c.length < c.bytes().len() as u64);
    assert_eq!(
        values::values(&c.tensor(c.dtype), &c.source(), 0, 100).len(),
        6
    );
    for name in [
        "i16_permuted",
        "f32_expand",
        "bf16_transposed",
        "f32_scalar",
    ] {
        let c = case(name);
        let v = values::values(&c.tensor(c.dtype), &c.source(), 0, 1000);
        assert_eq!(v.len() as u64, c.numel(), "{name}");
    }
}

/// Truncates a case's bytes at `cut` and checks every function against the
/// element ranges computed from the layout.
fn check_truncated(c: &Case, cut: u64) {
    let mut bytes = c.bytes();
    bytes.truncate(cut as usize);
    let src = MemSource::new(bytes);
    let end = cut.min(c.offset + c.length);
    let ranges = c.element_ranges();
    let missing = ranges.iter().filter(|r| r.1 > end).count() as u64;
    let prefix = ranges.iter().take_while(|r| r.1 <= end).count();
    let t = c.tensor(c.dtype);
    let ctx = format!("{} cut at {cut}", c.name);

    let st = values::stats(&t, &src, 8, &AtomicBool::new(false), &|_, _| {}).unwrap();
    assert_eq!(st.missing, missing, "{ctx}");
    assert_eq!(st.count + st.nan + st.inf + st.missing, c.numel(), "{ctx}");
    assert_eq!(st.hist.iter().sum::<u64>(), st.count, "{ctx}");

    let vals = values::values(&t, &src, 0, c.values.len());
    assert_eq!(vals.len(), prefix, "{ctx}");
    for (i, v) in vals.iter().enumerate() {
        check_value(c, c.dtype, i, v, &c.values[i]);
    }

    let mut out = Vec::new();
    let res = values::write_npy(&t, &src, &mut out);
    if missing == 0 {
        res.unwrap();
        assert_eq!(out, c.npy(), "{ctx}");
    } else {
        let err = res.unwrap_err();
        assert!(out.is_empty(), "{ctx}: wrote {} bytes", out.len());
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{ctx}");
        assert!(
            err.to_string()
                .contains(&format!("{missing} of {}", c.numel())),
            "{ctx}: {err}"
        );
    }
}

#[test]
fn truncated_data_is_missing_not_wrong() {
    for name in [
        "f32",
        "f32_be",
        "c64",
        "c32",
        "bf16",
        "f4",
        "f4_rand",
        "f6_e2m3",
        "f6_e3m2_rand",
        "f8_e8m0",
        "bool",
        "u64",
        "f32_transposed",
        "f32_sliced",
        "i16_permuted",
        "f32_expand",
        "bf16_transposed",
        "f32_scalar",
    ] {
        let c = case(name);
        let len = c.bytes().len() as u64;
        let mut cuts: Vec<u64> = vec![0, 1, 2, 3, c.offset, c.offset + 1, len / 2, len - 1, len];
        cuts.extend((0..len).step_by((len as usize / 13).max(1)));
        for cut in cuts {
            check_truncated(c, cut.min(len));
        }
    }
    // A declared length shorter than the shape needs: the elements past it
    // are missing even though the file has bytes there.
    let c = case("f32");
    let mut t = c.tensor(c.dtype);
    t.length = 10 * 4 + 3;
    let st = values::stats(&t, &c.source(), 4, &AtomicBool::new(false), &|_, _| {}).unwrap();
    assert_eq!(st.missing, c.numel() - 10);
    assert_eq!(values::values(&t, &c.source(), 0, 100).len(), 10);
}

/// xorshift64*: deterministic noise without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let no = AtomicBool::new(false);
    for round in 0..1500 {
        let dtype = Dtype::ALL[round % Dtype::ALL.len()];
        let len = rng.below(300) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let nd = rng.below(4) as usize;
        let shape: Vec<u64> = (0..nd).map(|_| rng.below(7)).collect();
        let stride = match rng.below(4) {
            0 => None,
            1 => Some((0..nd).map(|_| rng.below(12)).collect()),
            2 => Some((0..nd + 1).map(|_| rng.below(3)).collect()),
            _ => Some(
                (0..nd)
                    .map(|_| {
                        if rng.below(2) == 0 {
                            u64::MAX - rng.below(3)
                        } else {
                            rng.below(5)
                        }
                    })
                    .collect(),
            ),
        };
        let offset = match rng.below(5) {
            0 => u64::MAX - rng.below(10),
            _ => rng.below(len as u64 + 20),
        };
        let length = match rng.below(3) {
            0 => u64::MAX,
            _ => rng.below(len as u64 + 40),
        };
        let t = Tensor {
            name: format!("r{round}"),
            dtype,
            shape,
            stride,
            storage_offset: None,
            source: 0,
            offset,
            length,
            status: Status::Complete,
            detail: None,
            big_endian: rng.below(2) == 0,
            encoding: Encoding::Raw,
        };
        let src = MemSource::new(bytes.clone());
        let numel = t.numel();
        let vals = values::values(&t, &src, rng.below(5), rng.below(40) as usize);
        for v in &vals {
            let _ = (v.as_f64(), v.display());
        }
        let st = values::stats(&t, &src, rng.below(20) as usize, &no, &|_, _| {}).unwrap();
        assert_eq!(st.count + st.nan + st.inf + st.missing, numel, "{t:?}");
        let mut out = Vec::new();
        if values::write_npy(&t, &src, &mut out).is_ok() {
            assert_eq!(st.missing, 0);
            // Header, then numel elements of the exported type.
            assert_eq!(&out[..8], b"\x93NUMPY\x01\x00");
            let header = 10 + u16::from_le_bytes([out[8], out[9]]) as usize;
            assert_eq!(header % 64, 0);
            let descr = values::npy_descr(dtype);
            let size: u64 = descr[2..].parse().unwrap();
            assert_eq!((out.len() - header) as u64, numel * size, "{t:?}");
        } else {
            assert!(st.missing > 0 && out.is_empty(), "{t:?}");
        }
        for _ in 0..4 {
            let i = if rng.below(4) == 0 {
                u64::MAX - rng.below(3)
            } else {
                rng.below(80)
            };
            let _ = values::decode(dtype, &bytes, i, rng.below(2) == 0);
        }
    }
}

#[test]
fn hostile_layouts_finish() {
    // Huge shapes whose elements are mostly missing are counted, not visited.
    let no = AtomicBool::new(false);
    let src = MemSource::new(vec![0x3f; 64]);
    for (shape, stride) in [
        (vec![u64::MAX, 2], Some(vec![u64::MAX, u64::MAX])),
        (vec![1 << 40, 1 << 20], None),
        (vec![1 << 20, 1 << 20, 4], Some(vec![1, 1 << 20, 1 << 40])),
        (vec![3, u64::MAX / 2], Some(vec![u64::MAX / 4, 1])),
        (vec![1 << 62, 1 << 62], Some(vec![1 << 40, 1])),
    ] {
        for dtype in [Dtype::F32, Dtype::F4, Dtype::F6_E3M2, Dtype::C128] {
            let t = Tensor {
                name: "hostile".into(),
                dtype,
                shape: shape.clone(),
                stride: stride.clone(),
                storage_offset: None,
                source: 0,
                offset: 3,
                length: u64::MAX,
                status: Status::Truncated,
                detail: None,
                big_endian: false,
                encoding: Encoding::Raw,
            };
            let st = values::stats(&t, &src, 8, &no, &|_, _| {}).unwrap();
            assert!(st.missing > 0, "{shape:?}");
            assert!(st.count + st.nan + st.inf < 1000, "{shape:?}");
            let mut out = Vec::new();
            assert!(values::write_npy(&t, &src, &mut out).is_err());
            assert!(out.is_empty());
            assert!(values::values(&t, &src, 0, 100_000).len() < 1000);
            assert!(values::values(&t, &src, u64::MAX - 1, 10).len() <= 10);
        }
    }
}
