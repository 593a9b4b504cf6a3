//! Rebuilding zip nodes from their bytes (lazy children).

use super::records::{self, Central, cdh, dd, eocd, lfh, z64_eocd, z64_loc};
use crate::data::{Range, Source, le, read_exact_at, view};
use crate::name::escape_bytes;
use crate::node::{Node, Value};
use crate::status::Damage;
use crate::util::dos_datetime;

pub(super) fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    match node.kind {
        "entry" | "entry+dd" => entry(data, node),
        "entries" => group(data, node),
        "central directory" => directory(data, node.range),
        "cd entry" => central_fields(data, node.range.start),
        "end" => end_fields(data, node.range.start),
        "zip64 end" => end64_fields(data, node.range.start),
        "zip64 locator" => locator_fields(data, node.range.start),
        _ => Vec::new(),
    }
}

/// The entry nodes of a group of checked entries (`Group` in the zip parser),
/// each as it would have been listed on its own: the group's directory
/// records are read from where its value says, and each entry's extent
/// from its local header. The archive's prefix is where the group starts
/// less the lowest offset its records give.
fn group(data: &dyn Source, node: &Node) -> Vec<Node> {
    let range = node
        .name
        .strip_prefix("entries ")
        .and_then(|r| r.split_once('–'))
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
    let at = match &node.value {
        Some(Value::Str(v)) => v
            .rsplit_once("from 0x")
            .and_then(|(_, h)| u64::from_str_radix(h, 16).ok()),
        _ => None,
    };
    let (Some((first, last)), Some(mut at)) = (range, at) else {
        return Vec::new();
    };
    // A group holds at most `GROUP_LEN` records; a node can say anything.
    let count = last.saturating_sub(first).saturating_add(1).min(1 << 16);
    let mut ahead = crate::data::ReadAhead::new();
    let mut cds: Vec<Central> = Vec::new();
    while (cds.len() as u64) < count {
        let Ok(c) = records::central_at(&mut ahead, data, at) else {
            break;
        };
        at += c.len;
        cds.push(c);
    }
    let Some(low) = cds.iter().map(|c| c.offset).min() else {
        return Vec::new();
    };
    let shift = i64::try_from(i128::from(node.range.start) - i128::from(low)).unwrap_or(0);
    let mut locals = crate::data::ReadAhead::new();
    cds.iter()
        .map(|c| {
            let lfh = c.offset.saturating_add_signed(shift);
            let local = records::local_at(&mut locals, data, lfh).ok();
            let zip64 = local.as_ref().is_some_and(|l| l.zip64);
            let len = local
                .filter(|l| l.name == c.name)
                .map_or(lfh::LEN as u64 + c.name.len() as u64, |l| l.len);
            let mut end = lfh.saturating_add(len).saturating_add(c.csize);
            if c.flags & records::FLAG_DESCRIPTOR != 0 {
                end += records::descriptor_len(&mut locals, data, end, c, zip64);
            }
            records::entry_node(c, Range::new(lfh, end))
        })
        .collect()
}

/// The bytes of the record at `at`: its fixed part (`fixed` bytes), then
/// as many as `len` says the whole record takes, so that loading an entry's
/// fields reads its header and not the longest header there could be.
fn record<'a>(
    data: &'a dyn Source,
    at: u64,
    fixed: usize,
    len: impl Fn(&[u8]) -> usize,
    buf: &'a mut Vec<u8>,
) -> std::io::Result<&'a [u8]> {
    let n = {
        let b = view(data, at, fixed, buf)?;
        if b.len() < fixed {
            return view(data, at, fixed, buf);
        }
        len(b)
    };
    view(data, at, n, buf)
}

/// The bytes of a field: `len` bytes at `off` in the record at `at`.
fn span(at: u64, off: usize, len: usize) -> Range {
    Range::new(at + off as u64, at + (off + len) as u64)
}

fn u16_node(b: &[u8], at: u64, off: usize, name: &str) -> Node {
    Node::new("u16", name, span(at, off, 2)).uint(le::u16(b, off) as u64)
}

fn u32_node(b: &[u8], at: u64, off: usize, name: &str) -> Node {
    Node::new("u32", name, span(at, off, 4)).uint(le::u32(b, off) as u64)
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
    Node::new("u16", "method", span(at, off, 2)).text(format!(
        "{m} ({})",
        records::method_name(m).unwrap_or("unknown")
    ))
}

fn time_node(b: &[u8], at: u64, off: usize) -> Node {
    Node::new("dos time", "modified", span(at, off, 4))
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
    let whole = |b: &[u8]| {
        lfh::LEN + le::u16(b, lfh::NAME_LEN) as usize + le::u16(b, lfh::EXTRA_LEN) as usize
    };
    let Ok(b) = record(data, at, lfh::LEN, whole, &mut buf) else {
        return Vec::new();
    };
    if b.len() < lfh::LEN {
        return vec![Node::new("error", "local header", node.range).text("cut off")];
    }
    let nlen = le::u16(b, lfh::NAME_LEN) as usize;
    let xlen = le::u16(b, lfh::EXTRA_LEN) as usize;
    let mut sig =
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into()));
    if &b[0..4] != records::LFH {
        sig = sig.damaged(Damage::corrupt(Range::new(at, at + 4), "not PK\\3\\4"));
    }
    let mut header = vec![
        sig,
        u16_node(b, at, lfh::VERSION, "version needed"),
        Node::new("u16", "flags", span(at, lfh::FLAGS, 2)).text(flags_text(le::u16(b, lfh::FLAGS))),
        method_node(b, at, lfh::METHOD),
        time_node(b, at, lfh::TIME),
        Node::new("u32", "crc32", span(at, lfh::CRC, 4))
            .text(format!("{:#010x}", le::u32(b, lfh::CRC))),
        u32_node(b, at, lfh::CSIZE, "compressed size"),
        u32_node(b, at, lfh::USIZE, "size"),
        u16_node(b, at, lfh::NAME_LEN, "name length"),
        u16_node(b, at, lfh::EXTRA_LEN, "extra length"),
    ];
    let name_at = lfh::LEN;
    let hlen = name_at + nlen + xlen;
    if b.len() >= name_at + nlen {
        header.push(
            Node::new("string", "name", span(at, name_at, nlen))
                .text(escape_bytes(&b[name_at..name_at + nlen])),
        );
    }
    if b.len() >= hlen && xlen > 0 {
        let x0 = at + (name_at + nlen) as u64;
        header.push(
            Node::new("extra", "extra fields", Range::new(x0, x0 + xlen as u64))
                .with_children(extra_nodes(&b[name_at + nlen..hlen], x0)),
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
            let len = dd::len(signed, wide) as u64;
            let Some(p) = node.range.end.checked_sub(len).filter(|&p| p >= data_start) else {
                continue;
            };
            let mut d = [0u8; dd::MAX];
            if !matches!(read_exact_at(data, p, &mut d[..len as usize]), Ok(true)) {
                continue;
            }
            if let Some(found) = records::parse_descriptor(&d[..len as usize], signed, wide)
                && found.csize == p - data_start
            {
                data_end = p;
                desc = Some((p, found, signed, wide));
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
    if let Some((p, found, signed, wide)) = desc {
        let mut kids = Vec::new();
        let mut q = p;
        if signed {
            kids.push(
                Node::new("magic", "signature", span(q, 0, dd::SIG_LEN))
                    .value(Value::Bytes(records::DD[..].into())),
            );
            q += dd::SIG_LEN as u64;
        }
        kids.push(
            Node::new("u32", "crc32", span(q, dd::CRC, 4)).text(format!("{:#010x}", found.crc)),
        );
        let w = dd::size_len(wide);
        kids.push(Node::new("size", "compressed size", span(q, dd::CSIZE, w)).uint(found.csize));
        kids.push(Node::new("size", "size", span(q, dd::CSIZE + w, w)).uint(found.usize));
        out.push(
            Node::new(
                "descriptor",
                "data descriptor",
                Range::new(p, p + found.len),
            )
            .with_children(kids),
        );
    }
    out
}

fn directory(data: &dyn Source, range: Range) -> Vec<Node> {
    let mut out = Vec::new();
    let mut pos = range.start;
    let mut ahead = crate::data::ReadAhead::new();
    while pos < range.end {
        match records::central_at(&mut ahead, data, pos) {
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
    let whole = |b: &[u8]| {
        cdh::LEN
            + le::u16(b, cdh::NAME_LEN) as usize
            + le::u16(b, cdh::EXTRA_LEN) as usize
            + le::u16(b, cdh::COMMENT_LEN) as usize
    };
    let Ok(b) = record(data, at, cdh::LEN, whole, &mut buf) else {
        return Vec::new();
    };
    let Ok(c) = records::parse_central(b) else {
        return Vec::new();
    };
    let nlen = le::u16(b, cdh::NAME_LEN) as usize;
    let xlen = le::u16(b, cdh::EXTRA_LEN) as usize;
    let clen = le::u16(b, cdh::COMMENT_LEN) as usize;
    let mut v = vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        Node::new("u16", "version made by", span(at, cdh::MADE_BY, 2)).text(format!(
            "{} (host {}, spec {}.{})",
            c.made_by,
            c.made_by >> 8,
            (c.made_by & 0xff) / 10,
            (c.made_by & 0xff) % 10
        )),
        u16_node(b, at, cdh::VERSION, "version needed"),
        Node::new("u16", "flags", span(at, cdh::FLAGS, 2)).text(flags_text(c.flags)),
        method_node(b, at, cdh::METHOD),
        time_node(b, at, cdh::TIME),
        Node::new("u32", "crc32", span(at, cdh::CRC, 4)).text(format!("{:#010x}", c.crc)),
        u32_node(b, at, cdh::CSIZE, "compressed size"),
        u32_node(b, at, cdh::USIZE, "size"),
        u16_node(b, at, cdh::NAME_LEN, "name length"),
        u16_node(b, at, cdh::EXTRA_LEN, "extra length"),
        u16_node(b, at, cdh::COMMENT_LEN, "comment length"),
        u16_node(b, at, cdh::DISK, "disk"),
        u16_node(b, at, cdh::INTERNAL, "internal attributes"),
        Node::new("u32", "external attributes", span(at, cdh::EXTERNAL, 4))
            .text(format!("{:#010x}", c.external)),
        u32_node(b, at, cdh::OFFSET, "local header offset"),
        Node::new("string", "name", span(at, cdh::LEN, nlen)).text(escape_bytes(&c.name)),
    ];
    let x0 = cdh::LEN + nlen;
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
    let whole = |b: &[u8]| eocd::LEN + le::u16(b, eocd::COMMENT_LEN) as usize;
    let Ok(b) = record(data, at, eocd::LEN, whole, &mut buf) else {
        return Vec::new();
    };
    if b.len() < eocd::LEN {
        return Vec::new();
    }
    let clen = le::u16(b, eocd::COMMENT_LEN) as usize;
    let mut v = vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        u16_node(b, at, eocd::DISK, "disk"),
        u16_node(b, at, eocd::CD_DISK, "directory disk"),
        u16_node(b, at, eocd::DISK_ENTRIES, "entries on disk"),
        u16_node(b, at, eocd::ENTRIES, "entries"),
        u32_node(b, at, eocd::CD_SIZE, "directory size"),
        u32_node(b, at, eocd::CD_OFFSET, "directory offset"),
        u16_node(b, at, eocd::COMMENT_LEN, "comment length"),
    ];
    if clen > 0 && b.len() >= eocd::LEN + clen {
        v.push(
            Node::new("string", "comment", span(at, eocd::LEN, clen))
                .text(escape_bytes(&b[eocd::LEN..eocd::LEN + clen])),
        );
    }
    v
}

fn end64_fields(data: &dyn Source, at: u64) -> Vec<Node> {
    let mut b = [0u8; z64_eocd::LEN];
    if !matches!(read_exact_at(data, at, &mut b), Ok(true)) {
        return Vec::new();
    }
    let u64n =
        |off: usize, name: &str| Node::new("u64", name, span(at, off, 8)).uint(le::u64(&b, off));
    vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        u64n(z64_eocd::RECORD_SIZE, "record size"),
        u16_node(&b, at, z64_eocd::MADE_BY, "version made by"),
        u16_node(&b, at, z64_eocd::VERSION, "version needed"),
        u32_node(&b, at, z64_eocd::DISK, "disk"),
        u32_node(&b, at, z64_eocd::CD_DISK, "directory disk"),
        u64n(z64_eocd::DISK_ENTRIES, "entries on disk"),
        u64n(z64_eocd::ENTRIES, "entries"),
        u64n(z64_eocd::CD_SIZE, "directory size"),
        u64n(z64_eocd::CD_OFFSET, "directory offset"),
    ]
}

fn locator_fields(data: &dyn Source, at: u64) -> Vec<Node> {
    let mut b = [0u8; z64_loc::LEN];
    if !matches!(read_exact_at(data, at, &mut b), Ok(true)) {
        return Vec::new();
    }
    vec![
        Node::new("magic", "signature", Range::new(at, at + 4)).value(Value::Bytes(b[0..4].into())),
        u32_node(&b, at, z64_loc::DISK, "disk"),
        Node::new("u64", "zip64 end offset", span(at, z64_loc::END_OFFSET, 8))
            .uint(le::u64(&b, z64_loc::END_OFFSET)),
        u32_node(&b, at, z64_loc::DISKS, "disks"),
    ]
}
