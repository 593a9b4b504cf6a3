//! The fixed records of a zip file, read from bytes (APPNOTE 6.3), and the
//! search for the end record, which both modes and the sniffer need.

use memchr::memmem;

use crate::data::{Data, Range, ReadAhead, Source, le, view};
use crate::name::escape_bytes;
use crate::node::{Node, Value};
use crate::status::Damage;

pub(super) const LFH: &[u8; 4] = b"PK\x03\x04";
pub(super) const CDH: &[u8; 4] = b"PK\x01\x02";
pub(super) const EOCD: &[u8; 4] = b"PK\x05\x06";
pub(super) const Z64_EOCD: &[u8; 4] = b"PK\x06\x06";
pub(super) const Z64_LOC: &[u8; 4] = b"PK\x06\x07";
pub(super) const DD: &[u8; 4] = b"PK\x07\x08";

pub(super) const FLAG_ENCRYPTED: u16 = 1;
pub(super) const FLAG_DESCRIPTOR: u16 = 8;
pub(super) const FLAG_UTF8: u16 = 1 << 11;

// Where the fields of each record are: byte offsets from its signature
// (APPNOTE 4.3), each module named after the record's signature above.
// Numbers are little-endian; `LEN` is the fixed part, `MAX` (where the
// record's tail is searched for) the longest record with its variable
// fields.

/// Local file header; the name and the extra field follow the fixed part.
pub(super) mod lfh {
    pub(crate) const VERSION: usize = 4;
    pub(crate) const FLAGS: usize = 6;
    pub(crate) const METHOD: usize = 8;
    /// DOS time, then DOS date.
    pub(crate) const TIME: usize = 10;
    pub(crate) const CRC: usize = 14;
    pub(crate) const CSIZE: usize = 18;
    pub(crate) const USIZE: usize = 22;
    pub(crate) const NAME_LEN: usize = 26;
    pub(crate) const EXTRA_LEN: usize = 28;
    pub(crate) const LEN: usize = 30;
}

/// Central directory header; name, extra field and comment follow.
pub(super) mod cdh {
    pub(crate) const MADE_BY: usize = 4;
    pub(crate) const VERSION: usize = 6;
    pub(crate) const FLAGS: usize = 8;
    pub(crate) const METHOD: usize = 10;
    /// DOS time, then DOS date.
    pub(crate) const TIME: usize = 12;
    pub(crate) const CRC: usize = 16;
    pub(crate) const CSIZE: usize = 20;
    pub(crate) const USIZE: usize = 24;
    pub(crate) const NAME_LEN: usize = 28;
    pub(crate) const EXTRA_LEN: usize = 30;
    pub(crate) const COMMENT_LEN: usize = 32;
    pub(crate) const DISK: usize = 34;
    pub(crate) const INTERNAL: usize = 36;
    pub(crate) const EXTERNAL: usize = 38;
    /// Of the local header.
    pub(crate) const OFFSET: usize = 42;
    pub(crate) const LEN: usize = 46;
}

/// End of central directory record; the comment follows.
pub(super) mod eocd {
    pub(crate) const DISK: usize = 4;
    pub(crate) const CD_DISK: usize = 6;
    pub(crate) const DISK_ENTRIES: usize = 8;
    pub(crate) const ENTRIES: usize = 10;
    pub(crate) const CD_SIZE: usize = 12;
    pub(crate) const CD_OFFSET: usize = 16;
    pub(crate) const COMMENT_LEN: usize = 20;
    pub(crate) const LEN: usize = 22;
    pub(crate) const MAX: usize = LEN + 65535;
}

/// Zip64 end of central directory record (its extensible data is not read).
pub(super) mod z64_eocd {
    pub(crate) const RECORD_SIZE: usize = 4;
    pub(crate) const MADE_BY: usize = 12;
    pub(crate) const VERSION: usize = 14;
    pub(crate) const DISK: usize = 16;
    pub(crate) const CD_DISK: usize = 20;
    pub(crate) const DISK_ENTRIES: usize = 24;
    pub(crate) const ENTRIES: usize = 32;
    pub(crate) const CD_SIZE: usize = 40;
    pub(crate) const CD_OFFSET: usize = 48;
    pub(crate) const LEN: usize = 56;
}

/// Zip64 end of central directory locator, right before the end record.
pub(super) mod z64_loc {
    pub(crate) const DISK: usize = 4;
    /// Of the zip64 end record.
    pub(crate) const END_OFFSET: usize = 8;
    pub(crate) const DISKS: usize = 16;
    pub(crate) const LEN: usize = 20;
}

/// Data descriptor, in four layouts: with or without its signature, with
/// 4- or 8-byte sizes (zip64). Offsets count from after the signature.
pub(super) mod dd {
    pub(crate) const SIG_LEN: usize = 4;
    pub(crate) const CRC: usize = 0;
    pub(crate) const CSIZE: usize = 4;

    /// Width of each size field.
    pub(crate) const fn size_len(wide: bool) -> usize {
        if wide { 8 } else { 4 }
    }

    pub(crate) const fn len(signed: bool, wide: bool) -> usize {
        (if signed { SIG_LEN } else { 0 }) + CSIZE + 2 * size_len(wide)
    }

    pub(crate) const MAX: usize = len(true, true);
}

/// Why a record could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RecordError {
    /// The bytes end inside the record; this many bytes would be needed.
    Short(usize),
    /// Not a valid record.
    Invalid(String),
}

fn invalid<T>(why: impl Into<String>) -> Result<T, RecordError> {
    Err(RecordError::Invalid(why.into()))
}

/// Reads the record at `at` with `parse`, asking for only the bytes the
/// record takes: its fixed part (`fixed` bytes) first, then the length
/// that part gives, through `ahead` (records close together are read from
/// the source once). Asking for the longest possible record every time
/// (about 200 KB for a record of 80 bytes) made listing a zip read its
/// whole size again for each entry.
pub(super) fn read_record<T>(
    ahead: &mut ReadAhead,
    data: &dyn Source,
    at: u64,
    fixed: usize,
    parse: impl Fn(&[u8]) -> Result<T, RecordError>,
) -> Result<T, RecordError> {
    let io = |e: std::io::Error| RecordError::Invalid(format!("unreadable: {e}"));
    let b = ahead.get(data, at, fixed).map_err(io)?;
    let got = b.len();
    match parse(b) {
        Err(RecordError::Short(n)) if n > got && got == fixed => {
            parse(ahead.get(data, at, n).map_err(io)?)
        }
        r => r,
    }
}

/// A local header at `at`, read with [`read_record`].
pub(super) fn local_at(
    ahead: &mut ReadAhead,
    data: &dyn Source,
    at: u64,
) -> Result<Local, RecordError> {
    read_record(ahead, data, at, lfh::LEN, parse_local)
}

/// A central directory header at `at`, read with [`read_record`].
pub(super) fn central_at(
    ahead: &mut ReadAhead,
    data: &dyn Source,
    at: u64,
) -> Result<Central, RecordError> {
    read_record(ahead, data, at, cdh::LEN, parse_central)
}

/// The longest a local header can be: its fixed part, a name and extra
/// field of 65,535 bytes each.
pub(super) fn lfh_len_most() -> usize {
    lfh::LEN + 2 * 0xffff
}

/// A local file header.
#[derive(Debug, Clone)]
pub(super) struct Local {
    pub flags: u16,
    pub method: u16,
    pub crc: u32,
    pub csize: u64,
    pub usize: u64,
    pub name: Vec<u8>,
    /// Sizes came from a zip64 extra field.
    pub zip64: bool,
    /// Header length: 30 + name + extra.
    pub len: u64,
    /// DOS time (low 16 bits) and date (high 16 bits).
    pub time: u32,
    /// Unix permission bits, from a central record made on Unix.
    pub mode: Option<u32>,
}

impl Local {
    pub(super) fn has_descriptor(&self) -> bool {
        self.flags & FLAG_DESCRIPTOR != 0
    }
}

/// Reads a local header at the start of `b`, validating it as a recovery
/// scanner must: a `PK\3\4` in the middle of compressed data is common.
pub(super) fn parse_local(b: &[u8]) -> Result<Local, RecordError> {
    if b.len() < lfh::LEN {
        if !LFH.starts_with(&b[..b.len().min(4)]) {
            return invalid("no local header signature");
        }
        return Err(RecordError::Short(lfh::LEN));
    }
    if &b[0..4] != LFH {
        return invalid("no local header signature");
    }
    let version = le::u16(b, lfh::VERSION);
    let flags = le::u16(b, lfh::FLAGS);
    let method = le::u16(b, lfh::METHOD);
    let nlen = le::u16(b, lfh::NAME_LEN) as usize;
    let xlen = le::u16(b, lfh::EXTRA_LEN) as usize;
    if version & 0xff > 63 {
        return invalid(format!(
            "version needed {} is not a zip version",
            version & 0xff
        ));
    }
    if method_name(method).is_none() {
        return invalid(format!("unknown compression method {method}"));
    }
    if nlen == 0 {
        return invalid("empty entry name");
    }
    let len = lfh::LEN + nlen + xlen;
    if b.len() < len {
        return Err(RecordError::Short(len));
    }
    let name = b[lfh::LEN..lfh::LEN + nlen].to_vec();
    if name.contains(&0) {
        return invalid("entry name contains NUL bytes");
    }
    let extra = &b[lfh::LEN + nlen..len];
    if !extras_valid(extra) {
        return invalid("extra field records do not parse");
    }
    let mut l = Local {
        flags,
        method,
        crc: le::u32(b, lfh::CRC),
        csize: le::u32(b, lfh::CSIZE) as u64,
        usize: le::u32(b, lfh::USIZE) as u64,
        name,
        zip64: false,
        len: len as u64,
        time: le::u32(b, lfh::TIME),
        mode: None,
    };
    if let Some(z) = find_extra(extra, 1) {
        // In a local header the zip64 field holds both sizes.
        if z.len() >= 16 {
            if l.usize == 0xffff_ffff || l.csize == 0xffff_ffff || l.has_descriptor() {
                l.usize = le::u64(z, 0);
                l.csize = le::u64(z, 8);
            }
            l.zip64 = true;
        } else if z.len() >= 8 && l.usize == 0xffff_ffff {
            l.usize = le::u64(z, 0);
            l.zip64 = true;
        }
    }
    if method == 0 && !l.has_descriptor() && l.csize != l.usize && l.flags & FLAG_ENCRYPTED == 0 {
        return invalid(format!(
            "stored entry with compressed size {} != size {}",
            l.csize, l.usize
        ));
    }
    Ok(l)
}

/// A central directory file header.
#[derive(Debug, Clone)]
pub(super) struct Central {
    pub made_by: u16,
    pub flags: u16,
    pub method: u16,
    pub crc: u32,
    pub csize: u64,
    pub usize: u64,
    pub disk: u32,
    pub external: u32,
    /// DOS time (low 16 bits) and date (high 16 bits).
    pub time: u32,
    pub offset: u64,
    pub name: Vec<u8>,
    pub extra_len: u64,
    /// Record length: 46 + name + extra + comment.
    pub len: u64,
}

impl Central {
    /// Unix permission bits, when the record was made on Unix.
    pub(super) fn unix_mode(&self) -> Option<u32> {
        (self.made_by >> 8 == 3 && self.external >> 16 != 0)
            .then_some((self.external >> 16) & 0o7777)
    }

    /// A Unix symlink (file type bits in the external attributes).
    pub(super) fn is_symlink(&self) -> bool {
        self.made_by >> 8 == 3 && (self.external >> 16) & 0o170000 == 0o120000
    }
}

pub(super) fn parse_central(b: &[u8]) -> Result<Central, RecordError> {
    if b.len() < cdh::LEN {
        if !CDH.starts_with(&b[..b.len().min(4)]) {
            return invalid("no central directory signature");
        }
        return Err(RecordError::Short(cdh::LEN));
    }
    if &b[0..4] != CDH {
        return invalid("no central directory signature");
    }
    let nlen = le::u16(b, cdh::NAME_LEN) as usize;
    let xlen = le::u16(b, cdh::EXTRA_LEN) as usize;
    let clen = le::u16(b, cdh::COMMENT_LEN) as usize;
    let len = cdh::LEN + nlen + xlen + clen;
    if b.len() < len {
        return Err(RecordError::Short(len));
    }
    let method = le::u16(b, cdh::METHOD);
    let mut c = Central {
        made_by: le::u16(b, cdh::MADE_BY),
        flags: le::u16(b, cdh::FLAGS),
        method,
        crc: le::u32(b, cdh::CRC),
        csize: le::u32(b, cdh::CSIZE) as u64,
        usize: le::u32(b, cdh::USIZE) as u64,
        disk: le::u16(b, cdh::DISK) as u32,
        external: le::u32(b, cdh::EXTERNAL),
        time: le::u32(b, cdh::TIME),
        offset: le::u32(b, cdh::OFFSET) as u64,
        name: b[cdh::LEN..cdh::LEN + nlen].to_vec(),
        extra_len: xlen as u64,
        len: len as u64,
    };
    let extra = &b[cdh::LEN + nlen..cdh::LEN + nlen + xlen];
    if let Some(z) = find_extra(extra, 1) {
        // Only the fields that overflowed are present, in this order.
        let mut p = 0;
        let mut take = |v: &mut u64| {
            if p + 8 <= z.len() {
                *v = le::u64(z, p);
                p += 8;
            }
        };
        if c.usize == 0xffff_ffff {
            take(&mut c.usize);
        }
        if c.csize == 0xffff_ffff {
            take(&mut c.csize);
        }
        if c.offset == 0xffff_ffff {
            take(&mut c.offset);
        }
        if c.disk == 0xffff && p + 4 <= z.len() {
            c.disk = le::u32(z, p);
        }
    }
    Ok(c)
}

/// The end of central directory record, with zip64 values applied.
#[derive(Debug, Clone)]
pub(super) struct End {
    /// Offset of the `PK\5\6` record.
    pub pos: u64,
    pub entries: u64,
    pub cd_size: u64,
    pub cd_offset: u64,
    pub comment_len: u64,
    /// Offset of the zip64 end record and of its locator, when present.
    pub zip64: Option<(u64, u64)>,
    /// Fields that contradict each other (classic vs zip64 values).
    pub problems: Vec<crate::status::Damage>,
}

/// Parses the classic end record at the start of `b`.
pub(super) fn parse_end(b: &[u8], pos: u64) -> Option<End> {
    if b.len() < eocd::LEN || &b[0..4] != EOCD {
        return None;
    }
    Some(End {
        pos,
        entries: le::u16(b, eocd::ENTRIES) as u64,
        cd_size: le::u32(b, eocd::CD_SIZE) as u64,
        cd_offset: le::u32(b, eocd::CD_OFFSET) as u64,
        comment_len: le::u16(b, eocd::COMMENT_LEN) as u64,
        zip64: None,
        problems: Vec::new(),
    })
}

/// Values of a zip64 end record: (entries, cd_size, cd_offset).
pub(super) fn parse_end64(b: &[u8]) -> Option<(u64, u64, u64)> {
    if b.len() < z64_eocd::LEN || &b[0..4] != Z64_EOCD {
        return None;
    }
    Some((
        le::u64(b, z64_eocd::ENTRIES),
        le::u64(b, z64_eocd::CD_SIZE),
        le::u64(b, z64_eocd::CD_OFFSET),
    ))
}

/// Whether extra-field bytes are a clean list of (id, len, data) records.
/// A tail of under 4 zero bytes is tolerated (alignment padding).
pub(super) fn extras_valid(mut x: &[u8]) -> bool {
    while x.len() >= 4 {
        let len = le::u16(x, 2) as usize;
        if 4 + len > x.len() {
            return false;
        }
        x = &x[4 + len..];
    }
    x.iter().all(|&b| b == 0)
}

/// Iterates extra-field records: (id, offset of data within `x`, data).
pub(super) fn extras(x: &[u8]) -> Vec<(u16, usize, &[u8])> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 4 <= x.len() {
        let id = le::u16(x, p);
        let len = le::u16(x, p + 2) as usize;
        let end = (p + 4 + len).min(x.len());
        out.push((id, p, &x[p + 4..end]));
        p = end;
    }
    out
}

fn find_extra(x: &[u8], want: u16) -> Option<&[u8]> {
    extras(x).into_iter().find(|e| e.0 == want).map(|e| e.2)
}

/// Name of a compression method; `None` for numbers no writer uses.
pub(super) fn method_name(m: u16) -> Option<&'static str> {
    Some(match m {
        0 => "stored",
        1 => "shrunk",
        2..=5 => "reduced",
        6 => "imploded",
        8 => "deflate",
        9 => "deflate64",
        10 => "PKWARE imploding",
        12 => "bzip2",
        14 => "lzma",
        16 => "IBM z/OS CMPSC",
        18 => "IBM TERSE",
        19 => "IBM LZ77",
        20 | 93 => "zstd",
        94 => "mp3",
        95 => "xz",
        96 => "jpeg",
        97 => "wavpack",
        98 => "ppmd",
        99 => "AE-x encrypted",
        _ => return None,
    })
}

/// Name of an extra field id.
pub(super) fn extra_name(id: u16) -> &'static str {
    match id {
        0x0001 => "zip64",
        0x000a => "NTFS times",
        0x000d => "Unix",
        0x5455 => "extended timestamp",
        0x5855 => "Info-ZIP Unix (old)",
        0x7855 => "Info-ZIP Unix UID/GID",
        0x7875 => "Info-ZIP Unix UID/GID (new)",
        0x7075 => "Unicode path",
        0x6375 => "Unicode comment",
        0x9901 => "AES encryption",
        0xcafe => "JAR marker",
        0xd935 => "Android alignment",
        _ => "extra field",
    }
}

/// A data descriptor found after an entry's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Descriptor {
    pub crc: u32,
    pub csize: u64,
    pub usize: u64,
    /// Length in bytes (12, 16, 20 or 24).
    pub len: u64,
}

/// Reads a descriptor at the start of `b` in one of its four layouts
/// (with or without signature, 32- or 64-bit sizes).
pub(super) fn parse_descriptor(b: &[u8], signed: bool, wide: bool) -> Option<Descriptor> {
    let base = if signed { dd::SIG_LEN } else { 0 };
    let len = dd::len(signed, wide);
    if b.len() < len || (signed && &b[0..4] != DD) {
        return None;
    }
    let crc = le::u32(b, base + dd::CRC);
    let at = base + dd::CSIZE;
    let (csize, usize) = if wide {
        (le::u64(b, at), le::u64(b, at + dd::size_len(wide)))
    } else {
        (
            le::u32(b, at) as u64,
            le::u32(b, at + dd::size_len(wide)) as u64,
        )
    };
    Some(Descriptor {
        crc,
        csize,
        usize,
        len: len as u64,
    })
}

/// Every layout of a data descriptor that reads at the start of `b`, the
/// `zip64` width first: the caller judges which one the writer meant.
pub(super) fn descriptor_candidates(b: &[u8], zip64: bool) -> Vec<Descriptor> {
    let mut v = Vec::new();
    for wide in [zip64, !zip64] {
        for signed in [true, false] {
            if let Some(d) = parse_descriptor(b, signed, wide) {
                v.push(d);
            }
        }
    }
    v
}

/// Finds the end of central directory record in the last 64 KiB; with
/// `exact`, only one whose comment ends exactly at the end of the bytes.
pub(super) fn find_end(data: &Data, exact: bool) -> Option<End> {
    let len = data.available();
    if len < eocd::LEN as u64 {
        return None;
    }
    let from = len.saturating_sub(eocd::MAX as u64);
    let mut buf = Vec::new();
    let tail = view(&**data, from, (len - from) as usize, &mut buf)
        .ok()?
        .to_vec();
    for i in memmem::rfind_iter(&tail, EOCD) {
        let pos = from + i as u64;
        let Some(mut e) = parse_end(&tail[i..], pos) else {
            continue;
        };
        let end = pos + eocd::LEN as u64 + e.comment_len;
        if end > len || (exact && end != len) {
            continue;
        }
        if let Some(l) = i.checked_sub(z64_loc::LEN)
            && &tail[l..l + 4] == Z64_LOC
        {
            let declared = le::u64(&tail, l + z64_loc::END_OFFSET);
            let loc = pos - z64_loc::LEN as u64;
            // The zip64 end record sits right before its locator unless
            // something is in between; try there first, then where it says.
            let mut zb = [0u8; z64_eocd::LEN];
            let before = loc.checked_sub(z64_eocd::LEN as u64);
            for c in [before, Some(declared)].into_iter().flatten() {
                if matches!(crate::data::read_exact_at(&**data, c, &mut zb), Ok(true))
                    && let Some((n, size, off)) = parse_end64(&zb)
                {
                    // Classic fields either overflow (all ones) or must agree.
                    let fields = [
                        (e.entries, 0xffff, n, "entry count"),
                        (e.cd_size, 0xffff_ffff, size, "directory size"),
                        (e.cd_offset, 0xffff_ffff, off, "directory offset"),
                    ];
                    for (classic, ones, wide, what) in fields {
                        if classic != ones && classic != wide {
                            e.problems.push(Damage::corrupt(
                                Range::new(pos, pos + eocd::LEN as u64),
                                format!("end record's {what} {classic} contradicts the zip64 record's {wide}"),
                            ));
                        }
                    }
                    e.entries = n;
                    e.cd_size = size;
                    e.cd_offset = off;
                    e.zip64 = Some((c, loc));
                    break;
                }
            }
        }
        return Some(e);
    }
    None
}

/// Seconds since the Unix epoch of a DOS time and date (low and high 16
/// bits), read as UTC: zip records no time zone. `None` for impossible
/// fields (a zero date, month 13).
pub(super) fn dos_time(v: u32) -> Option<i64> {
    let (time, date) = (v & 0xffff, v >> 16);
    let (year, month, day) = (1980 + (date >> 9) as i64, (date >> 5) & 15, date & 31);
    let (hour, min, sec) = (time >> 11, (time >> 5) & 63, (time & 31) * 2);
    if !(1..=12).contains(&month) || day == 0 || hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    // Days from 1970-01-01 to year-month-day (the proleptic Gregorian
    // calendar, counted from March so leap days fall at a year's end).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * i64::from(m) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + i64::from(hour * 3600 + min * 60 + sec))
}

/// The length of the data descriptor after an entry's data at `end`, when
/// one there matches its directory record; 0 otherwise.
pub(super) fn descriptor_len(
    ahead: &mut ReadAhead,
    data: &dyn Source,
    end: u64,
    c: &Central,
    zip64: bool,
) -> u64 {
    let b = ahead.get(data, end, dd::MAX).unwrap_or(&[]);
    descriptor_candidates(b, zip64)
        .into_iter()
        .find(|d| d.crc == c.crc && d.csize == c.csize)
        .map_or(0, |d| d.len)
}

/// The node of the entry `c` lists, over its local header, data and
/// descriptor.
pub(super) fn entry_node(c: &Central, range: Range) -> Node {
    let kind = if c.flags & FLAG_DESCRIPTOR != 0 {
        "entry+dd"
    } else {
        "entry"
    };
    Node::new(kind, escape_bytes(&c.name), range)
        .value(Value::Coded(
            method_name(c.method).unwrap_or("?"),
            c.csize,
            c.usize,
        ))
        .lazy()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lfh(name: &[u8], method: u16, flags: u16, csize: u32, usize: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(LFH);
        b.extend_from_slice(&20u16.to_le_bytes());
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&method.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&csize.to_le_bytes());
        b.extend_from_slice(&usize.to_le_bytes());
        b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(name);
        b
    }

    #[test]
    fn local_header_validation() {
        let ok = lfh(b"a.txt", 8, 0, 10, 20);
        assert_eq!(parse_local(&ok).unwrap().len, 35);
        assert_eq!(parse_local(&ok[..20]).unwrap_err(), RecordError::Short(30));
        assert_eq!(parse_local(&ok[..32]).unwrap_err(), RecordError::Short(35));
        assert!(matches!(
            parse_local(&lfh(b"a", 7, 0, 1, 1)),
            Err(RecordError::Invalid(_))
        ));
        assert!(matches!(
            parse_local(&lfh(b"", 8, 0, 1, 1)),
            Err(RecordError::Invalid(_))
        ));
        assert!(matches!(
            parse_local(&lfh(b"a", 0, 0, 1, 2)),
            Err(RecordError::Invalid(_))
        ));
        assert!(parse_local(&lfh(b"a", 0, 8, 0, 0)).is_ok());
    }

    #[test]
    fn extra_records() {
        assert!(extras_valid(&[1, 0, 2, 0, 9, 9]));
        assert!(!extras_valid(&[1, 0, 9, 0, 9]));
        assert!(extras_valid(&[0, 0]));
        assert!(!extras_valid(&[7]));
    }

    #[test]
    fn descriptors() {
        let mut b = DD.to_vec();
        b.extend_from_slice(&0xdeadbeefu32.to_le_bytes());
        b.extend_from_slice(&5u32.to_le_bytes());
        b.extend_from_slice(&9u32.to_le_bytes());
        let d = parse_descriptor(&b, true, false).unwrap();
        assert_eq!((d.crc, d.csize, d.usize, d.len), (0xdeadbeef, 5, 9, 16));
        assert!(parse_descriptor(&b[1..], true, false).is_none());
    }
}
