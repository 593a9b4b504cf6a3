//! JSON pieces every report writes the same way, as safe on a terminal
//! as the escaped names above.

use std::io::{self, Write};

use super::c1_escaped;

/// `s` as a JSON string. JSON escapes C0 controls itself; DEL and C1
/// controls (U+0080–U+009F, which some terminals act on as CSI and OSC)
/// are escaped too, so JSON printed to a terminal is as safe as text.
pub fn string(s: &str) -> String {
    let out = serde_json::to_string(s).expect("strings always serialise");
    match c1_escaped(out.as_bytes()) {
        std::borrow::Cow::Borrowed(_) => out,
        // ASCII escapes replaced whole characters: still UTF-8.
        std::borrow::Cow::Owned(b) => String::from_utf8(b)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

/// Integers beyond 2^53 are strings, so JSON readers do not round them.
pub fn u64(v: u64) -> String {
    if v > (1u64 << 53) {
        format!("\"{v}\"")
    } else {
        v.to_string()
    }
}

/// `v` as one line of JSON, C1 controls escaped (see [`c1_escaped`]).
pub fn write_line(out: &mut impl Write, v: &serde_json::Value) -> io::Result<()> {
    let text = serde_json::to_vec(v).map_err(io::Error::other)?;
    out.write_all(&c1_escaped(&text))?;
    writeln!(out)
}
