//! Build script: a hash of the sources, so that an index written by one
//! build of pparse (the CLI, an example, the Python package) is read by
//! every build of the same sources and by no other: parsers that changed
//! may find other things, and their old index must not stand in for them.

use std::hash::Hasher;
use std::path::Path;

/// FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "proto") {
            out.push(p);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=../../Cargo.lock");
    let mut all = Vec::new();
    files(Path::new("src"), &mut all);
    all.push("../../Cargo.lock".into());
    all.sort();
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    for p in &all {
        h.write(p.to_string_lossy().as_bytes());
        h.write(&std::fs::read(p).unwrap_or_default());
    }
    println!("cargo:rustc-env=PPARSE_SOURCE_HASH={:016x}", h.finish());
}
