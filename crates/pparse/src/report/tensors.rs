//! `pparse tensors`: the tensor table as text or JSON.

use std::io::{self, Write};

use crate::extraction::{ExtId, Tree};
use crate::offer::tensor::Tensor;
use crate::status::Status;

/// `pparse tensors --json` of extraction `id`.
pub fn json_of(t: &Tree, id: ExtId, out: &mut dyn Write) -> io::Result<()> {
    let list = crate::view::tensors::collect(t, id);
    json(t, &list, &mut &mut *out)
}

/// The tensors in `list` as a JSON array, one object per line.
pub fn json(t: &Tree, list: &[Tensor], out: &mut impl Write) -> io::Result<()> {
    let js = |s: &str| crate::name::json::string(s);
    writeln!(out, "[")?;
    for (i, x) in list.iter().enumerate() {
        let nums = |v: &[u64]| {
            v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        write!(
            out,
            "{}{{\"name\":{},\"dtype\":\"{}\",\"shape\":[{}],\"source\":{},\"offset\":{},\"length\":{},\"status\":\"{}\"",
            if i > 0 { ",\n" } else { "" },
            js(&x.name),
            x.dtype.name(),
            nums(&x.shape),
            js(&t.path_of(x.source)),
            x.offset,
            x.length,
            x.status.as_str()
        )?;
        if let Some(s) = &x.stride {
            write!(out, ",\"stride\":[{}]", nums(s))?;
        }
        if let Some(o) = x.storage_offset {
            write!(out, ",\"storage_offset\":{o}")?;
        }
        if let Some(d) = &x.detail {
            write!(out, ",\"detail\":{}", js(d))?;
        }
        if x.big_endian {
            write!(out, ",\"byteorder\":\"big\"")?;
        }
        if x.encoding == crate::offer::tensor::Encoding::Varints {
            write!(out, ",\"encoding\":\"varints\"")?;
        }
        write!(out, "}}")?;
    }
    writeln!(out, "\n]")
}

/// The tensors in `list` as a table: name, dtype, shape, bytes, source.
pub fn text(t: &Tree, list: &[Tensor], out: &mut impl Write) -> io::Result<()> {
    let w = list
        .iter()
        .map(|x| x.name.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 60);
    writeln!(
        out,
        "{:<w$}  {:<8} {:<20} {:>14}  source",
        "name", "dtype", "shape", "bytes"
    )?;
    for x in list {
        let shape = format!(
            "[{}]",
            x.shape
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut line = format!(
            "{:<w$}  {:<8} {:<20} {:>14}  {}@{:#x}",
            crate::name::escape_str(&x.name),
            x.dtype.name(),
            shape,
            crate::util::thousands(x.length),
            {
                let p = t.path_of(x.source);
                if p.is_empty() {
                    t.root().display_name()
                } else {
                    p
                }
            },
            x.offset
        );
        if x.status != Status::Complete {
            line.push_str(&format!("  {}", x.status.as_str().to_uppercase()));
        }
        if let Some(d) = &x.detail {
            line.push_str(&format!("  ({})", crate::name::escape_str(d)));
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}
