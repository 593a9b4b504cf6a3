//! A no-panic sweep: every fixture with 200 seeded random damages
//! (truncation, a flipped bit, 1–64 overwritten bytes, a duplicated span),
//! each parsed with a deadline. Nothing may panic or hang, and the tree must
//! stay self-consistent: no extraction holds more than its declared size,
//! every damage range lies within the bytes it describes, every extraction
//! reads back exactly `size()` bytes.

use pparse::Tree;

use crate::util::*;

const CASES: u64 = 200;

fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// The `i`th damage of `data`: a description and the damaged bytes.
fn damage(data: &[u8], rng: &mut Rng, i: u64) -> (String, Vec<u8>) {
    let len = data.len() as u64;
    match i % 4 {
        0 => {
            let cut = rng.below(len + 1);
            (format!("truncated to {cut}"), truncated(data, cut))
        }
        1 => {
            let at = rng.below(len);
            let mask = 1u8 << rng.below(8);
            let mut d = data.to_vec();
            flip(&mut d, at, mask);
            (format!("bit {mask:#04x} flipped at {at}"), d)
        }
        2 => {
            let n = rng.range(1, 64).min(len);
            let start = rng.below(len - n + 1);
            let mut d = data.to_vec();
            overwrite(&mut d, start, n, rng);
            (format!("{start}..{} overwritten", start + n), d)
        }
        _ => {
            let n = rng.range(1, 1024).min(len);
            let start = rng.below(len - n + 1);
            let at = rng.below(len + 1);
            (
                format!("{start}..{} duplicated at {at}", start + n),
                duplicate_span(data, start, n, at),
            )
        }
    }
}

/// Reads every available byte without panicking; `Err` on a read error.
fn read_checked(t: &Tree, id: usize) -> Result<u64, String> {
    let data = &t.exts[id].data();
    let mut buf = vec![0u8; 64 * 1024];
    let mut off = 0u64;
    loop {
        match data.read_at(off, &mut buf) {
            Ok(0) => return Ok(off),
            Ok(n) => off += n as u64,
            Err(e) => return Err(format!("read_at {off}: {e}")),
        }
    }
}

fn check_invariants(t: &Tree, what: &str, f: &mut Failures) {
    for id in 0..t.len() {
        let e = &t.exts[id];
        let path = t.path_of(id);
        let size = e.size();
        if let Some(d) = e.declared_size()
            && size > d
        {
            f.push(format!(
                "{what}: {path:?} holds {size} bytes, more than its declared {d}"
            ));
        }
        for d in &e.damage {
            if d.range.start > d.range.end || d.range.end > size {
                f.push(format!(
                    "{what}: {path:?} ({size} bytes) reports damage outside its bytes: {d}"
                ));
            }
        }
        match read_checked(t, id) {
            Ok(n) if n == size => {}
            Ok(n) => f.push(format!(
                "{what}: {path:?} reads back {n} bytes, size() says {size}"
            )),
            Err(err) => f.push(format!("{what}: {path:?}: {err}")),
        }
        for &c in &e.children {
            if t.exts[c].parent() != Some(id) {
                f.push(format!(
                    "{what}: child {c} of {path:?} names {:?} as its parent",
                    t.exts[c].parent()
                ));
            }
        }
        if t.status_of(id) < e.status() {
            f.push(format!("{what}: {path:?}: status_of is better than status"));
        }
    }
}

fn sweep(name: &str) {
    sweep_with(name, &|_, _, _| {});
}

/// Sweeps the fixture at `name` (relative to fixtures/, also the name it is
/// parsed under) and runs `extra` on every damaged tree as well.
pub(crate) fn sweep_with(name: &str, extra: &dyn Fn(&Tree, &str, &mut Failures)) {
    let data = fixture(name);
    let mut rng = Rng::new(seed_of(name));
    let mut f = Failures::default();
    for i in 0..CASES {
        let (how, bytes) = damage(&data, &mut rng, i);
        let what = format!("{name} case {i}: {how}");
        let session = parse_named(name, bytes, &what);
        check_invariants(&session.tree(), &what, &mut f);
        extra(&session.tree(), &what, &mut f);
    }
    f.check(&format!("{name} damage sweep"));
}

/// One test per fixture, and [`SWEPT`]: the list of what these tests
/// sweep, made from the same lines, so the coverage check below sees the
/// sweeps that run and not a copy of them.
macro_rules! sweeps {
    ($($test:ident => $name:expr,)*) => {
        $(
            #[test]
            fn $test() {
                sweep($name);
            }
        )*
        const SWEPT: &[&str] = &[$($name),*];
    };
}

sweeps! {
    sweep_nested_tar_gz => "nested.tar.gz",
    sweep_multi_gz => "multi.gz",
    sweep_ustar_tar => "ustar.tar",
    sweep_gnu_tar => "gnu.tar",
    sweep_pax_tar => "pax.tar",
    sweep_v7_tar => "v7.tar",
    sweep_base256_tar => "base256.tar",
    sweep_plain_zip => "plain.zip",
    sweep_dd_zip => "dd.zip",
    sweep_dd0_zip => "dd0.zip",
    sweep_dd_stored_zip => "dd_stored.zip",
    sweep_zip64_zip => "zip64.zip",
    sweep_nested_stored_zip => "nested_stored.zip",
    sweep_hostile_tar => "hostile.tar",
    sweep_hostile_zip => "hostile.zip",
}

/// Every fixture is swept (a new fixture needs a line above).
#[test]
fn sweep_covers_every_fixture() {
    let mut names: Vec<&str> = manifest()
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.extend(["hostile.tar", "hostile.zip"]);
    for n in names {
        assert!(SWEPT.contains(&n), "{n} is not swept");
    }
}
