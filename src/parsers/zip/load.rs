//! Rebuilding zip nodes from their bytes (lazy children).

use super::records::{self, Central};
use crate::data::{Range, Source, le, read_exact_at, view};
use crate::name::escape_bytes;
use crate::node::{Node, Value};
use crate::status::Damage;
use crate::util::dos_datetime;

pub fn load(data: &dyn Source, node: &Node) -> Vec<Node> {
    match node.kind {
        "entry" | "entry+dd" => entry(data, node),
        "central directory" => directory(data, node.range),
        "cd entry" => central_fields(data, node.range.start),
        "end" => end_fields(data, node.range.start),
        "zip64 end" => end64_fields(data, node.range.start),
        "zip64 locator" => locator_fields(data, node.range.start),
        _ => Vec::new(),
    }
}

fn u16_node(b: &[u8], at: u64, off: usize, name: &str) -> Node {
    Node::new(
        "u16",
        name,
        Range::new(at + off as u64, at + off as u64 + 2),
    )
    .uint(le::u16(b, off) as u64)
}

fn u32_node(b: &[u8], at: u64, off: usize, name: &str) -> Node {
    Node::new(
        "u32",
        name,
        Range::new(at + off as u64, at + off as u64 + 4),
    )
    .uint(le::u32(b, off) as u64)
}

fn flags_text(f: u16) -> String {
    let mut parts = Vec::new();
    if f & records::FLAG_ENCRYPTED != 0 {
        parts.push("encrypted");
    }
    if f & records::FLAG_DESCRIPTOR != 0 {
        parts.push("data descriptor");
    }
    if f & records::FLAG_UTF8 != 0 {
        parts.push("UTF-8 names");
    }
    if f & 6 != 0 {
        parts.push("compression option");
    }
    if parts.is_empty() {
        format!("{f:#06x}")
    } else {
        format!("{f:#06x} ({})", parts.join(", "))
    }
}

fn method_node(b: &[u8], at: u64, off: usize) -> Node {
    let m = le::u16(b, off);
    Node::new(
        "u16",
        "method",
        Range::new(at + off as u64, at + off as u64 + 2),
    )
    .text(format!(
        "{m} ({})",
        records::method_name(m).unwrap_or("unknown")
    ))
}

fn time_node(b: &[u8], at: u64, off: usize) -> Node {
    Node::new(
        "dos time",
        "modified",
        Range::new(at + off as u64, at + off as u64 + 4),
    )
    .text(dos_datetime(le::u16(b, off + 2), le::u16(b, off)))
}

fn extra_nodes(x: &[u8], at: u64) -> Vec<Node> {
    records::extras(x)
        .into_iter()
        .map(|(id, p, d)| {
            let r = Range::new(at + p as u64, at + (p + 4 + d.len()) as u64);
            let mut n = Node::new(
                "extra",
                format!("{:#06x} {}", id, records::extra_name(id)),
                r,
            )
            .value(Value::Bytes(d[..d.len().min(64)].into()));
            if id == 1 {
                let kids = d
                    .chunks_exact(8)
                    .enumerate()
                    .map(|(i, c)| {
                        let s = at + (p + 4 + i * 8) as u64;
                        Node::new("u64", "value", Range::new(s, s + 8)).uint(le::u64(c, 0))
                    })
                    .collect();
                n = n.with_children(kids);
            }
            n
        })
        .collect()
}

fn entry(data: &dyn Source, node: &Node) -> Vec<Node> {
    let at = node.range.start;
    let mut buf = Vec::new();
    let Ok(b) = view(data, at, 30 + 2 * 65535, &mut buf) else {
        return Vec::new();
    };
    if b.len() < 30 {
        return vec![Node::new("error", "local header", node.range).text("cut off")];
    }
    let nlen = le::u16(b, 26) as usize;
    let xlen = le::u16(b, 28) as usize;
    let mut sig =
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into()));
    if &b[0..4] != records::LFH {
        sig = sig.damaged(Damage::corrupt(Range::new(at, at + 4), "not PK\\3\\4"));
    }
    let mut header = vec![
        sig,
        u16_node(b, at, 4, "version needed"),
        Node::new("u16", "flags", Range::new(at + 6, at + 8)).text(flags_text(le::u16(b, 6))),
        method_node(b, at, 8),
        time_node(b, at, 10),
        Node::new("u32", "crc32", Range::new(at + 14, at + 18))
            .text(format!("{:#010x}", le::u32(b, 14))),
        u32_node(b, at, 18, "compressed size"),
        u32_node(b, at, 22, "size"),
        u16_node(b, at, 26, "name length"),
        u16_node(b, at, 28, "extra length"),
    ];
    let hlen = 30 + nlen + xlen;
    if b.len() >= 30 + nlen {
        header.push(
            Node::new("string", "name", Range::new(at + 30, at + 30 + nlen as u64))
                .text(escape_bytes(&b[30..30 + nlen])),
        );
    }
    if b.len() >= hlen && xlen > 0 {
        let x0 = at + 30 + nlen as u64;
        header.push(
            Node::new("extra", "extra fields", Range::new(x0, x0 + xlen as u64))
                .with_children(extra_nodes(&b[30 + nlen..hlen], x0)),
        );
    }
    let data_start = at + hlen as u64;
    let mut out = vec![
        Node::new("local header", "local header", Range::new(at, data_start)).with_children(header),
    ];
    let mut data_end = node.range.end;
    let mut desc = None;
    if node.kind == "entry+dd" {
        let zip64 = records::parse_local(b).is_ok_and(|l| l.zip64);
        for (signed, wide) in [
            (true, zip64),
            (true, !zip64),
            (false, zip64),
            (false, !zip64),
        ] {
            let len = if signed { 4 } else { 0 } + if wide { 20 } else { 12 };
            let Some(p) = node.range.end.checked_sub(len).filter(|&p| p >= data_start) else {
                continue;
            };
            let mut d = [0u8; 24];
            if !matches!(read_exact_at(data, p, &mut d[..len as usize]), Ok(true)) {
                continue;
            }
            if let Some(dd) = records::parse_descriptor(&d[..len as usize], signed, wide)
                && dd.csize == p - data_start
            {
                data_end = p;
                desc = Some((p, dd, signed, wide));
                break;
            }
        }
    }
    let mut dn = Node::new(
        "data",
        "data",
        Range::new(data_start, data_end.max(data_start)),
    )
    .uint(data_end.saturating_sub(data_start));
    if let Some(d) = &node.damage {
        dn = dn.damaged((**d).clone());
    }
    out.push(dn);
    if let Some((p, dd, signed, wide)) = desc {
        let mut kids = Vec::new();
        let mut q = p;
        if signed {
            kids.push(
                Node::new("magic", "signature", Range::new(q, q + 4))
                    .value(Value::Bytes(records::DD[..].into())),
            );
            q += 4;
        }
        kids.push(
            Node::new("u32", "crc32", Range::new(q, q + 4)).text(format!("{:#010x}", dd.crc)),
        );
        let w = if wide { 8 } else { 4 };
        kids.push(
            Node::new("size", "compressed size", Range::new(q + 4, q + 4 + w)).uint(dd.csize),
        );
        kids.push(Node::new("size", "size", Range::new(q + 4 + w, q + 4 + 2 * w)).uint(dd.usize));
        out.push(
            Node::new("descriptor", "data descriptor", Range::new(p, p + dd.len))
                .with_children(kids),
        );
    }
    out
}

fn directory(data: &dyn Source, range: Range) -> Vec<Node> {
    let mut out = Vec::new();
    let mut pos = range.start;
    let mut buf = Vec::new();
    while pos < range.end {
        let Ok(b) = view(data, pos, 46 + 3 * 65535, &mut buf) else {
            break;
        };
        match records::parse_central(b) {
            Ok(c) => {
                out.push(central_node(&c, pos));
                pos += c.len;
            }
            Err(_) => {
                let r = Range::new(pos, range.end);
                out.push(
                    Node::new("error", "unreadable record", r)
                        .damaged(Damage::corrupt(r, "not a central directory header")),
                );
                break;
            }
        }
    }
    out
}

fn central_node(c: &Central, pos: u64) -> Node {
    Node::new(
        "cd entry",
        escape_bytes(&c.name),
        Range::new(pos, pos + c.len),
    )
    .text(format!(
        "at {:#x}, {} → {} bytes",
        c.offset, c.csize, c.usize
    ))
    .lazy()
}

fn central_fields(data: &dyn Source, at: u64) -> Vec<Node> {
    let mut buf = Vec::new();
    let Ok(b) = view(data, at, 46 + 3 * 65535, &mut buf) else {
        return Vec::new();
    };
    let Ok(c) = records::parse_central(b) else {
        return Vec::new();
    };
    let nlen = le::u16(b, 28) as usize;
    let xlen = le::u16(b, 30) as usize;
    let clen = le::u16(b, 32) as usize;
    let mut v = vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        Node::new("u16", "version made by", Range::new(at + 4, at + 6)).text(format!(
            "{} (host {}, spec {}.{})",
            c.made_by,
            c.made_by >> 8,
            (c.made_by & 0xff) / 10,
            (c.made_by & 0xff) % 10
        )),
        u16_node(b, at, 6, "version needed"),
        Node::new("u16", "flags", Range::new(at + 8, at + 10)).text(flags_text(c.flags)),
        method_node(b, at, 10),
        time_node(b, at, 12),
        Node::new("u32", "crc32", Range::new(at + 16, at + 20)).text(format!("{:#010x}", c.crc)),
        u32_node(b, at, 20, "compressed size"),
        u32_node(b, at, 24, "size"),
        u16_node(b, at, 28, "name length"),
        u16_node(b, at, 30, "extra length"),
        u16_node(b, at, 32, "comment length"),
        u16_node(b, at, 34, "disk"),
        u16_node(b, at, 36, "internal attributes"),
        Node::new("u32", "external attributes", Range::new(at + 38, at + 42))
            .text(format!("{:#010x}", c.external)),
        u32_node(b, at, 42, "local header offset"),
        Node::new("string", "name", Range::new(at + 46, at + 46 + nlen as u64))
            .text(escape_bytes(&c.name)),
    ];
    let x0 = 46 + nlen;
    if xlen > 0 {
        v.push(
            Node::new(
                "extra",
                "extra fields",
                Range::new(at + x0 as u64, at + (x0 + xlen) as u64),
            )
            .with_children(extra_nodes(&b[x0..x0 + xlen], at + x0 as u64)),
        );
    }
    if clen > 0 {
        let c0 = x0 + xlen;
        v.push(
            Node::new(
                "string",
                "comment",
                Range::new(at + c0 as u64, at + (c0 + clen) as u64),
            )
            .text(escape_bytes(&b[c0..c0 + clen])),
        );
    }
    v
}

fn end_fields(data: &dyn Source, at: u64) -> Vec<Node> {
    let mut buf = Vec::new();
    let Ok(b) = view(data, at, 22 + 65535, &mut buf) else {
        return Vec::new();
    };
    if b.len() < 22 {
        return Vec::new();
    }
    let clen = le::u16(b, 20) as usize;
    let mut v = vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        u16_node(b, at, 4, "disk"),
        u16_node(b, at, 6, "directory disk"),
        u16_node(b, at, 8, "entries on disk"),
        u16_node(b, at, 10, "entries"),
        u32_node(b, at, 12, "directory size"),
        u32_node(b, at, 16, "directory offset"),
        u16_node(b, at, 20, "comment length"),
    ];
    if clen > 0 && b.len() >= 22 + clen {
        v.push(
            Node::new(
                "string",
                "comment",
                Range::new(at + 22, at + 22 + clen as u64),
            )
            .text(escape_bytes(&b[22..22 + clen])),
        );
    }
    v
}

fn end64_fields(data: &dyn Source, at: u64) -> Vec<Node> {
    let mut b = [0u8; 56];
    if !matches!(read_exact_at(data, at, &mut b), Ok(true)) {
        return Vec::new();
    }
    let u64n = |off: u64, name: &str| {
        Node::new("u64", name, Range::new(at + off, at + off + 8)).uint(le::u64(&b, off as usize))
    };
    vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        u64n(4, "record size"),
        u16_node(&b, at, 12, "version made by"),
        u16_node(&b, at, 14, "version needed"),
        u32_node(&b, at, 16, "disk"),
        u32_node(&b, at, 20, "directory disk"),
        u64n(24, "entries on disk"),
        u64n(32, "entries"),
        u64n(40, "directory size"),
        u64n(48, "directory offset"),
    ]
}

fn locator_fields(data: &dyn Source, at: u64) -> Vec<Node> {
    let mut b = [0u8; 20];
    if !matches!(read_exact_at(data, at, &mut b), Ok(true)) {
        return Vec::new();
    }
    vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        u32_node(&b, at, 4, "disk"),
        Node::new("u64", "zip64 end offset", Range::new(at + 8, at + 16)).uint(le::u64(&b, 8)),
        u32_node(&b, at, 16, "disks"),
    ]
}
