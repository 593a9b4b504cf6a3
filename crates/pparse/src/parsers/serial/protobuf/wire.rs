//! The protobuf wire format, read field by field with exact offsets.
//!
//! A message is a sequence of fields, each a tag varint (`number << 3 |
//! wire type`) followed by a value whose size the wire type tells. That is
//! all the scanner needs: it never decodes a payload, it records where each
//! field's tag, length and value are, so a `bytes` field of 2 GB costs the
//! same as one of 2 bytes. It reads through [`Bytes`], so the message can be
//! in a mapping, in memory or in a decoded stream.
//!
//! The scanner stops at the first field it cannot delimit and says why:
//! *truncated* when the bytes end inside the field, *corrupt* when the field
//! breaks the format (an invalid wire type, field number 0, a length running
//! past its enclosing message).

use crate::data::{Range, Source};
use crate::status::{Damage, Status};

/// Deepest group nesting followed before a group is called corrupt.
pub(crate) const MAX_GROUP_DEPTH: usize = 64;

/// Random access to the bytes a message lives in.
pub trait Bytes {
    /// Bytes readable now.
    fn size(&self) -> u64;
    /// Copies bytes at `off` into `buf`; returns how many (fewer only at the end).
    fn read(&self, off: u64, buf: &mut [u8]) -> usize;
    /// All the bytes as one slice, when they are in memory or mapped: hot
    /// loops then borrow instead of copying.
    fn slice(&self) -> Option<&[u8]> {
        None
    }
}

impl Bytes for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> usize {
        let Ok(off) = usize::try_from(off) else {
            return 0;
        };
        let Some(rest) = self.get(off..) else {
            return 0;
        };
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        n
    }
    fn slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl Bytes for dyn Source {
    fn size(&self) -> u64 {
        self.available()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> usize {
        if let Some(all) = self.as_slice() {
            return all.read(off, buf);
        }
        let mut done = 0;
        while done < buf.len() {
            match self.read_at(off + done as u64, &mut buf[done..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => done += n,
            }
        }
        done
    }
    fn slice(&self) -> Option<&[u8]> {
        self.as_slice()
    }
}

/// Reads `range` into memory, at most `limit` bytes of it.
pub(crate) fn read_range<B: Bytes + ?Sized>(b: &B, range: Range, limit: usize) -> Vec<u8> {
    let n = (range.len().min(limit as u64)) as usize;
    let mut v = vec![0u8; n];
    let got = b.read(range.start, &mut v);
    v.truncate(got);
    v
}

/// The wire types of protobuf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    /// 0: a varint (ints, bools, enums; zigzag for `sint`).
    Varint,
    /// 1: eight bytes (`fixed64`, `sfixed64`, `double`).
    I64,
    /// 2: a length-prefixed payload (strings, bytes, messages, packed lists).
    Len,
    /// 3: a group's start tag; its fields run to the matching end tag (4).
    Group,
    /// 5: four bytes (`fixed32`, `sfixed32`, `float`).
    I32,
}

impl Wire {
    /// The wire type's number in a tag.
    pub(crate) fn code(self) -> u64 {
        match self {
            Wire::Varint => 0,
            Wire::I64 => 1,
            Wire::Len => 2,
            Wire::Group => 3,
            Wire::I32 => 5,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Wire::Varint => "varint",
            Wire::I64 => "i64",
            Wire::Len => "len",
            Wire::Group => "group",
            Wire::I32 => "i32",
        }
    }
}

/// One field of a message: where it is and its undecoded value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) number: u32,
    pub(crate) wire: Wire,
    /// The whole field: tag, length prefix and value.
    pub range: Range,
    /// The value: the payload of a `Len` field, the contents of a group
    /// (without its end tag), the bytes of a number.
    pub value: Range,
    /// The number itself for varint and fixed-width fields; the declared
    /// length for `Len` fields.
    pub int: u64,
    /// A `Len` field whose payload the bytes end inside of: `value` is cut
    /// to what exists, and it is the last field.
    pub cut: bool,
}

/// Why a message could not be read further.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WireError {
    /// Where the field that failed starts.
    pub offset: u64,
    pub(super) status: Status,
    pub(crate) reason: String,
    /// The number of the field that failed, when its tag was read: a
    /// schema can then name it.
    pub(crate) number: Option<u32>,
}

impl WireError {
    /// The reason with the field named as `name (field N)` instead of by
    /// its number alone.
    pub(crate) fn reason_named(&self, name: Option<&str>) -> String {
        match (self.number, name) {
            (Some(n), Some(name)) => {
                self.reason
                    .replacen(&format!("field {n}"), &format!("{name} (field {n})"), 1)
            }
            _ => self.reason.clone(),
        }
    }

    pub(super) fn to_damage(&self, end: u64) -> Damage {
        Damage {
            status: self.status,
            range: Range::new(self.offset, end),
            reason: self.reason.clone(),
            unknown: false,
        }
    }
}

/// Decodes a varint from the start of `buf`: (value, length). `None` when
/// `buf` ends first; `Some((_, 0))` when it runs past 10 bytes.
pub(crate) fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    if buf.len() >= 10 { Some((0, 0)) } else { None }
}

/// Iterates over the fields of the message in `[start, end)`.
pub(crate) struct Scanner<'a, B: ?Sized> {
    bytes: &'a B,
    /// The bytes up to `end` when they are one slice (the fast path).
    fast: Option<&'a [u8]>,
    pos: u64,
    end: u64,
    /// True when `end` is where the bytes ran out, not where the message was
    /// declared to end: a field cut there is truncated, not corrupt.
    at_eof: bool,
    failed: bool,
}

impl<'a, B: Bytes + ?Sized> Scanner<'a, B> {
    /// Scans `range`. A range reaching past the readable bytes is cut there
    /// and its last field is reported as truncated.
    pub(crate) fn new(bytes: &'a B, range: Range) -> Self {
        Self::within(bytes, range, bytes.size())
    }

    /// Scans `range` of bytes that are `size` long: a caller that judged
    /// the length once (bytes may be arriving) gives the same one here, so
    /// a field cut at it is truncated, not corrupt.
    pub(crate) fn within(bytes: &'a B, range: Range, size: u64) -> Self {
        let end = range.end.min(size);
        let fast = bytes
            .slice()
            .and_then(|s| usize::try_from(end).ok().and_then(|e| s.get(..e)));
        Scanner {
            bytes,
            fast,
            pos: range.start,
            end,
            at_eof: range.end >= size,
            failed: false,
        }
    }

    /// Where the next field starts.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    fn fail(
        &mut self,
        offset: u64,
        cut: bool,
        number: Option<u32>,
        reason: String,
    ) -> Option<Result<Field, WireError>> {
        self.failed = true;
        let status = if cut && self.at_eof {
            Status::Truncated
        } else {
            Status::Corrupt
        };
        Some(Err(WireError {
            offset,
            status,
            reason,
            number,
        }))
    }

    /// Reads a varint at `at` within the message; Err(cut) on failure.
    fn varint_at(&self, at: u64) -> Result<(u64, u64), bool> {
        if let Some(s) = self.fast {
            let rest = s.get(at as usize..).unwrap_or_default();
            // One-byte varints (most tags and small numbers) first.
            if let Some(&b) = rest.first()
                && b < 0x80
            {
                return Ok((u64::from(b), 1));
            }
            return match varint(rest) {
                Some((_, 0)) => Err(false),
                Some((v, len)) => Ok((v, len as u64)),
                None => Err(true),
            };
        }
        let mut buf = [0u8; 10];
        let want = ((self.end - at.min(self.end)) as usize).min(10);
        let n = self.bytes.read(at, &mut buf[..want]);
        match varint(&buf[..n]) {
            Some((_, 0)) => Err(false),
            Some((v, len)) => Ok((v, len as u64)),
            None => Err(true),
        }
    }

    /// Finds the end of the group that starts after a start tag at `from`:
    /// (end of contents, end after the end tag).
    fn group_end(&self, from: u64, number: u32) -> Result<(u64, u64), (u64, bool, String)> {
        let mut stack = vec![number];
        let mut pos = from;
        loop {
            let tag_at = pos;
            let (tag, tl) = self
                .varint_at(pos)
                .map_err(|cut| (tag_at, cut, format!("group {number} ends inside a tag")))?;
            pos += tl;
            let n = (tag >> 3) as u32;
            match tag & 7 {
                0 => {
                    let (_, l) = self
                        .varint_at(pos)
                        .map_err(|cut| (tag_at, cut, "varint cut short in a group".to_string()))?;
                    pos += l;
                }
                1 => pos += 8,
                5 => pos += 4,
                2 => {
                    let (len, l) = self
                        .varint_at(pos)
                        .map_err(|cut| (tag_at, cut, "length cut short in a group".to_string()))?;
                    pos = (pos + l).saturating_add(len);
                }
                3 => {
                    if stack.len() >= MAX_GROUP_DEPTH {
                        return Err((
                            tag_at,
                            false,
                            format!("groups nested deeper than {MAX_GROUP_DEPTH}"),
                        ));
                    }
                    stack.push(n);
                }
                4 => {
                    if stack.pop() != Some(n) {
                        return Err((tag_at, false, format!("end of group {n} without its start")));
                    }
                    if stack.is_empty() {
                        return Ok((tag_at, pos));
                    }
                }
                w => return Err((tag_at, false, format!("invalid wire type {w} in a group"))),
            }
            if pos > self.end {
                return Err((tag_at, true, format!("group {number} runs past the end")));
            }
        }
    }
}

impl<B: Bytes + ?Sized> Iterator for Scanner<'_, B> {
    type Item = Result<Field, WireError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        if let Some(s) = self.fast
            && let Some(f) = fast_field(s, self.pos as usize)
        {
            self.pos = f.range.end;
            return Some(Ok(f));
        }
        self.next_general()
    }
}

impl<B: Bytes + ?Sized> Scanner<'_, B> {
    /// Any field, through [`Bytes::read`], with every kind of damage named.
    #[inline(never)]
    fn next_general(&mut self) -> Option<Result<Field, WireError>> {
        let start = self.pos;
        let (tag, tl) = match self.varint_at(start) {
            Ok(v) => v,
            Err(cut) => {
                let why = if cut {
                    "the bytes end inside a field tag"
                } else {
                    "a field tag longer than 10 bytes"
                };
                return self.fail(start, cut, None, why.to_string());
            }
        };
        let number = tag >> 3;
        if number == 0 || number > (1 << 29) - 1 {
            return self.fail(
                start,
                false,
                None,
                format!("invalid field number {number} (tag {tag:#x})"),
            );
        }
        let number = number as u32;
        let at = start + tl;
        let left = self.end - at.min(self.end);
        let (wire, value, end, int) = match tag & 7 {
            0 => match self.varint_at(at) {
                Ok((v, l)) => (Wire::Varint, Range::new(at, at + l), at + l, v),
                Err(cut) => {
                    let why = if cut {
                        "cut short"
                    } else {
                        "longer than 10 bytes"
                    };
                    return self.fail(
                        start,
                        cut,
                        Some(number),
                        format!("field {number}: varint {why}"),
                    );
                }
            },
            1 | 5 => {
                let (w, size) = if tag & 7 == 1 {
                    (Wire::I64, 8)
                } else {
                    (Wire::I32, 4)
                };
                if left < size {
                    return self.fail(
                        start,
                        true,
                        Some(number),
                        format!("field {number}: {size}-byte value, only {left} bytes left"),
                    );
                }
                let mut b = [0u8; 8];
                match self.fast {
                    Some(s) => {
                        b[..size as usize].copy_from_slice(&s[at as usize..(at + size) as usize]);
                    }
                    None => {
                        self.bytes.read(at, &mut b[..size as usize]);
                    }
                }
                (
                    w,
                    Range::new(at, at + size),
                    at + size,
                    u64::from_le_bytes(b),
                )
            }
            2 => {
                let (len, l) = match self.varint_at(at) {
                    Ok(v) => v,
                    Err(cut) => {
                        return self.fail(
                            start,
                            cut,
                            Some(number),
                            format!("field {number}: length cut short"),
                        );
                    }
                };
                let p = at + l;
                let room = self.end - p.min(self.end);
                if len > room && self.at_eof {
                    // Keep what there is of the payload: a cut-off message
                    // still has its first fields.
                    self.failed = true;
                    return Some(Ok(Field {
                        number,
                        wire: Wire::Len,
                        range: Range::new(start, self.end),
                        value: Range::new(p.min(self.end), self.end),
                        int: len,
                        cut: true,
                    }));
                }
                if len > room {
                    let why = if self.at_eof {
                        format!("field {number}: {len} bytes declared, only {room} left")
                    } else {
                        format!(
                            "field {number}: length {len} runs {} bytes past the end of its message",
                            len - room
                        )
                    };
                    self.failed = true;
                    let status = if self.at_eof {
                        Status::Truncated
                    } else {
                        Status::Corrupt
                    };
                    return Some(Err(WireError {
                        offset: start,
                        status,
                        reason: why,
                        number: Some(number),
                    }));
                }
                (Wire::Len, Range::new(p, p + len), p + len, len)
            }
            3 => match self.group_end(at, number) {
                Ok((contents_end, end)) => (Wire::Group, Range::new(at, contents_end), end, 0),
                Err((_, cut, why)) => return self.fail(start, cut, None, why),
            },
            4 => {
                return self.fail(
                    start,
                    false,
                    None,
                    format!("end of group {number} without its start"),
                );
            }
            w => {
                return self.fail(
                    start,
                    false,
                    Some(number),
                    format!("field {number}: invalid wire type {w}"),
                );
            }
        };
        self.pos = end;
        Some(Ok(Field {
            number,
            wire,
            range: Range::new(start, end),
            value,
            int,
            cut: false,
        }))
    }
}

/// A varint at `p` in `s` that ends within `s` and 10 bytes: (value, end).
#[inline(always)]
pub(crate) fn varint_in(s: &[u8], p: usize) -> Option<(u64, usize)> {
    let b = *s.get(p)?;
    if b < 0x80 {
        return Some((u64::from(b), p + 1));
    }
    let mut v = u64::from(b & 0x7f);
    for i in 1..10 {
        let b = *s.get(p + i)?;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some((v, p + i + 1));
        }
    }
    None
}

/// The field at `start` of the message `s` when it is whole and of a
/// common shape (varint, fixed, length-delimited); `None` sends the
/// scanner down its general path, which also names every kind of damage.
#[inline(always)]
fn fast_field(s: &[u8], start: usize) -> Option<Field> {
    let (tag, at) = varint_in(s, start)?;
    let number = tag >> 3;
    if number == 0 || number > (1 << 29) - 1 {
        return None;
    }
    let (wire, value, int) = match tag & 7 {
        0 => {
            let (v, end) = varint_in(s, at)?;
            (Wire::Varint, (at, end), v)
        }
        1 => {
            let b: [u8; 8] = s.get(at..at + 8)?.try_into().ok()?;
            (Wire::I64, (at, at + 8), u64::from_le_bytes(b))
        }
        5 => {
            let b: [u8; 4] = s.get(at..at + 4)?.try_into().ok()?;
            (Wire::I32, (at, at + 4), u64::from(u32::from_le_bytes(b)))
        }
        2 => {
            let (len, p) = varint_in(s, at)?;
            let end = p.checked_add(usize::try_from(len).ok()?)?;
            if end > s.len() {
                return None;
            }
            (Wire::Len, (p, end), len)
        }
        _ => return None,
    };
    Some(Field {
        number: number as u32,
        wire,
        range: Range::new(start as u64, value.1 as u64),
        value: Range::new(value.0 as u64, value.1 as u64),
        int,
        cut: false,
    })
}

/// The fields of a `Len` payload when it is a plausible message: every byte
/// accounted for by at most `max_fields` well-formed fields.
pub(crate) fn looks_like_message<B: Bytes + ?Sized>(
    b: &B,
    range: Range,
    max_fields: usize,
) -> bool {
    if range.is_empty() {
        return false;
    }
    let mut s = Scanner::new(b, range);
    let mut n = 0;
    for f in s.by_ref() {
        if f.is_err() {
            return false;
        }
        n += 1;
        if n >= max_fields {
            return true;
        }
    }
    s.pos() == range.end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(b: &[u8]) -> Vec<Result<Field, WireError>> {
        Scanner::new(b, Range::new(0, b.len() as u64)).collect()
    }

    #[test]
    fn every_wire_type() {
        // 1: varint 150; 2: "hi"; 3: fixed64; 4: group with a varint; 5: fixed32
        let b = [
            0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x19, 1, 0, 0, 0, 0, 0, 0, 0, 0x23, 0x08,
            0x01, 0x24, 0x2d, 2, 0, 0, 0,
        ];
        let f: Vec<Field> = fields(&b).into_iter().map(Result::unwrap).collect();
        assert_eq!(f.len(), 5);
        assert_eq!(
            (f[0].number, f[0].int, f[0].range),
            (1, 150, Range::new(0, 3))
        );
        assert_eq!((f[1].wire, f[1].value), (Wire::Len, Range::new(5, 7)));
        assert_eq!((f[2].wire, f[2].int), (Wire::I64, 1));
        assert_eq!(
            (f[3].wire, f[3].value, f[3].range),
            (Wire::Group, Range::new(17, 19), Range::new(16, 20))
        );
        assert_eq!((f[4].wire, f[4].int), (Wire::I32, 2));
    }

    #[test]
    fn damage_is_named() {
        // A length past the end of the bytes: the field is kept, cut.
        let f = fields(&[0x08, 1, 0x12, 5, b'a']).pop().unwrap().unwrap();
        assert_eq!((f.cut, f.value, f.int), (true, Range::new(4, 5), 5));
        // The same inside a declared message: corrupt.
        let b = [0x12, 5, b'a', 0, 0, 0, 0];
        let e: Vec<_> = Scanner::new(&b[..], Range::new(0, 4)).collect();
        assert_eq!(
            e.last().unwrap().as_ref().unwrap_err().status,
            Status::Corrupt
        );
        // Wire type 7, field 0, stray end group.
        for bad in [&[0x0f, 0][..], &[0x00, 1], &[0x0c]] {
            let e = fields(bad).pop().unwrap().unwrap_err();
            assert_eq!(e.status, Status::Corrupt, "{bad:?}: {}", e.reason);
        }
        // An unterminated varint at the end of the bytes.
        let e = fields(&[0x08, 0x80]).pop().unwrap().unwrap_err();
        assert_eq!(e.status, Status::Truncated);
        let e = fields(&[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1,
        ])
        .pop()
        .unwrap()
        .unwrap_err();
        assert_eq!(e.status, Status::Corrupt);
    }

    #[test]
    fn deep_groups_are_bounded() {
        let mut b = vec![0x0b; 1000];
        b.extend(vec![0x0c; 1000]);
        let e = fields(&b).pop().unwrap().unwrap_err();
        assert!(e.reason.contains("deeper"), "{}", e.reason);
    }
}
