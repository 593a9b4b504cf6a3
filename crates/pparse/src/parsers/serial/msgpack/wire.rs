//! The byte-level MessagePack reader: one value's header at a time, and a
//! walker that finds where a value ends without recursion.
//!
//! Every value starts with a header of at most 9 bytes (the type byte, then
//! a length, a count or the scalar itself); strings, binaries and
//! extensions carry that many payload bytes after it, arrays and maps that
//! many values (maps: twice as many, key then value). So the end of a value
//! is found with one counter of values still to read, never a stack: each
//! value takes at least one byte, so a count larger than the bytes left is
//! refused before anything is read or allocated.

use crate::data::Source;

/// What a header says a value is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// A positive fixint or a uint 8..64.
    UInt(u64),
    /// A negative fixint or an int 8..64.
    Int(i64),
    /// float 32.
    F32(f32),
    /// float 64.
    F64(f64),
    /// A string of `len` bytes (UTF-8 by the spec).
    Str,
    /// A binary of `len` bytes.
    Bin,
    /// An array of `count` values.
    Array,
    /// A map of `count / 2` pairs.
    Map,
    /// An extension of this type with `len` bytes of data.
    Ext(i8),
}

impl Kind {
    /// The kind of a node holding such a value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Nil => "nil",
            Kind::Bool(_) => "bool",
            Kind::UInt(_) => "uint",
            Kind::Int(_) => "int",
            Kind::F32(_) => "float32",
            Kind::F64(_) => "float64",
            Kind::Str => "str",
            Kind::Bin => "bin",
            Kind::Array => "array",
            Kind::Map => "map",
            Kind::Ext(_) => "ext",
        }
    }
}

/// One value's header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Head {
    /// Where the value starts.
    pub at: u64,
    /// What it is.
    pub kind: Kind,
    /// Bytes of the header (the type byte, lengths, an ext's type, a
    /// scalar's bytes).
    pub hlen: u64,
    /// Payload bytes after the header (strings, binaries, extensions).
    pub len: u64,
    /// Values after the header that belong to it (arrays: their elements,
    /// maps: keys and values).
    pub count: u64,
}

impl Head {
    /// Where the payload (or the first element) starts.
    pub(crate) fn body(&self) -> u64 {
        self.at + self.hlen
    }
}

/// Why a value could not be read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Unreadable {
    /// Where the value that failed starts.
    pub at: u64,
    /// The bytes end first (false: the bytes are wrong).
    pub truncated: bool,
    /// What went wrong, in words.
    pub reason: String,
}

impl Unreadable {
    fn cut(at: u64, reason: String) -> Unreadable {
        Unreadable {
            at,
            truncated: true,
            reason,
        }
    }
}

/// Bytes kept in a [`Cursor`]'s window when the source is not in memory.
const WINDOW: usize = 64 * 1024;

/// Reads small pieces of a source through a window, or straight from the
/// source's slice when it has one.
pub(crate) struct Cursor<'a> {
    src: &'a dyn Source,
    buf: Vec<u8>,
    buf_at: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor over `src`.
    pub(crate) fn new(src: &'a dyn Source) -> Cursor<'a> {
        Cursor {
            src,
            buf: Vec::new(),
            buf_at: 0,
        }
    }

    /// The source read.
    pub(crate) fn source(&self) -> &'a dyn Source {
        self.src
    }

    /// Up to `n` bytes at `at` (`n` at most `WINDOW`); fewer only where
    /// the source's bytes end (or cannot be read).
    pub(crate) fn get(&mut self, at: u64, n: usize) -> &[u8] {
        let n = n.min(WINDOW);
        if let Some(all) = self.src.as_slice() {
            let Ok(start) = usize::try_from(at) else {
                return &[];
            };
            let start = start.min(all.len());
            let end = start.saturating_add(n).min(all.len());
            return &all[start..end];
        }
        let held = at >= self.buf_at
            && at
                .checked_add(n as u64)
                .is_some_and(|e| e <= self.buf_at + self.buf.len() as u64);
        if !held {
            let avail = self.src.available();
            let want = avail.saturating_sub(at).min(WINDOW as u64) as usize;
            self.buf.resize(want, 0);
            let mut done = 0;
            while done < want {
                match self.src.read_at(at + done as u64, &mut self.buf[done..]) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => done += k,
                }
            }
            self.buf.truncate(done);
            self.buf_at = at;
        }
        let off = (at - self.buf_at) as usize;
        let end = off.saturating_add(n).min(self.buf.len());
        &self.buf[off.min(end)..end]
    }

    /// The header of the value at `at`, which must end by `end`.
    pub(crate) fn head(&mut self, at: u64, end: u64) -> Result<Head, Unreadable> {
        let b = self.get(at, 9.min(end.saturating_sub(at)) as usize);
        let Some(&t) = b.first() else {
            return Err(Unreadable::cut(
                at,
                "the bytes end where a value should start".into(),
            ));
        };
        // (header bytes, what follows) from the bytes after the type byte.
        let need = |n: usize| -> Result<&[u8], Unreadable> {
            b.get(1..1 + n).ok_or_else(|| {
                Unreadable::cut(
                    at,
                    format!("the bytes end inside the header of a value (type byte {t:#04x})"),
                )
            })
        };
        let be = |s: &[u8]| s.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
        let (hlen, kind, len, count): (u64, Kind, u64, u64) = match t {
            0x00..=0x7f => (1, Kind::UInt(u64::from(t)), 0, 0),
            0x80..=0x8f => (1, Kind::Map, 0, u64::from(t & 0x0f) * 2),
            0x90..=0x9f => (1, Kind::Array, 0, u64::from(t & 0x0f)),
            0xa0..=0xbf => (1, Kind::Str, u64::from(t & 0x1f), 0),
            0xc0 => (1, Kind::Nil, 0, 0),
            0xc1 => {
                return Err(Unreadable {
                    at,
                    truncated: false,
                    reason: "byte 0xc1 is never used in MessagePack".into(),
                });
            }
            0xc2 | 0xc3 => (1, Kind::Bool(t == 0xc3), 0, 0),
            0xc4..=0xc6 => {
                let w = 1usize << (t - 0xc4);
                (1 + w as u64, Kind::Bin, be(need(w)?), 0)
            }
            0xc7..=0xc9 => {
                let w = 1usize << (t - 0xc7);
                let s = need(w + 1)?;
                let ty = s[w] as i8;
                (2 + w as u64, Kind::Ext(ty), be(&s[..w]), 0)
            }
            0xca => {
                let s = need(4)?;
                (5, Kind::F32(f32::from_bits(be(s) as u32)), 0, 0)
            }
            0xcb => (9, Kind::F64(f64::from_bits(be(need(8)?))), 0, 0),
            0xcc..=0xcf => {
                let w = 1usize << (t - 0xcc);
                (1 + w as u64, Kind::UInt(be(need(w)?)), 0, 0)
            }
            0xd0..=0xd3 => {
                let w = 1usize << (t - 0xd0);
                let v = be(need(w)?);
                // Sign-extend from w bytes.
                let shift = 64 - 8 * w as u32;
                let v = ((v << shift) as i64) >> shift;
                (1 + w as u64, Kind::Int(v), 0, 0)
            }
            0xd4..=0xd8 => {
                let s = need(1)?;
                (2, Kind::Ext(s[0] as i8), 1u64 << (t - 0xd4), 0)
            }
            0xd9..=0xdb => {
                let w = 1usize << (t - 0xd9);
                (1 + w as u64, Kind::Str, be(need(w)?), 0)
            }
            0xdc | 0xdd => {
                let w = if t == 0xdc { 2 } else { 4 };
                (1 + w as u64, Kind::Array, 0, be(need(w)?))
            }
            0xde | 0xdf => {
                let w = if t == 0xde { 2 } else { 4 };
                (1 + w as u64, Kind::Map, 0, be(need(w)?) * 2)
            }
            0xe0..=0xff => (1, Kind::Int(i64::from(t as i8)), 0, 0),
        };
        let h = Head {
            at,
            kind,
            hlen,
            len,
            count,
        };
        let left = end.saturating_sub(h.body());
        if len > left {
            return Err(Unreadable::cut(
                at,
                format!("{} declares {len} bytes, {left} are left", describe(kind)),
            ));
        }
        if count > left {
            let what = if kind == Kind::Map {
                format!("a map declares {} pairs", count / 2)
            } else {
                format!("an array declares {count} elements")
            };
            return Err(Unreadable::cut(
                at,
                format!("{what}, only {left} bytes are left (a value takes at least one)"),
            ));
        }
        Ok(h)
    }
}

/// "a string", "an ext of type 1"… for messages.
pub(crate) fn describe(kind: Kind) -> String {
    match kind {
        Kind::Str => "a string".into(),
        Kind::Bin => "a binary".into(),
        Kind::Ext(t) => format!("an ext of type {t}"),
        Kind::Array => "an array".into(),
        Kind::Map => "a map".into(),
        k => format!("a {}", k.name()),
    }
}

/// Finds where values end, a bounded number of headers at a time, with one
/// counter of values still to read: any nesting costs no memory.
#[derive(Clone, Debug)]
pub(crate) struct Walker {
    /// Where the next header is.
    pub pos: u64,
    /// Values still to read before the walk is over.
    pub pending: u64,
}

impl Walker {
    /// A walk over the one value at `at`.
    pub(crate) fn new(at: u64) -> Walker {
        Walker {
            pos: at,
            pending: 1,
        }
    }

    /// Reads up to `max` headers; `Ok(true)` when the value has ended at
    /// [`Walker::pos`]. On an error the walker is where it was before the
    /// header that failed, so a walk stopped by missing bytes can go on
    /// once they come.
    pub(crate) fn advance(
        &mut self,
        cur: &mut Cursor,
        end: u64,
        max: u64,
    ) -> Result<bool, Unreadable> {
        let mut n = 0;
        while self.pending > 0 {
            if n >= max {
                return Ok(false);
            }
            n += 1;
            let h = cur.head(self.pos, end)?;
            let after = h.body() + h.len;
            let pending = self.pending - 1 + h.count;
            let left = end.saturating_sub(after);
            if pending > left {
                return Err(Unreadable::cut(
                    h.at,
                    format!(
                        "{pending} values are still to come, only {left} bytes are left (a value takes at least one)"
                    ),
                ));
            }
            self.pos = after;
            self.pending = pending;
        }
        Ok(true)
    }
}

/// Where the value at `at` ends (by `end` at the latest).
pub(crate) fn skip(cur: &mut Cursor, at: u64, end: u64) -> Result<u64, Unreadable> {
    let mut w = Walker::new(at);
    w.advance(cur, end, u64::MAX)?;
    Ok(w.pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn heads(b: &[u8]) -> Result<Head, Unreadable> {
        let src = MemSource::new(b.to_vec());
        Cursor::new(&src).head(0, b.len() as u64)
    }

    #[test]
    fn headers_of_every_type() {
        let h = heads(&[0xd1, 0xff, 0x38]).unwrap();
        assert_eq!((h.kind, h.hlen), (Kind::Int(-200), 3));
        let h = heads(&[0xcf, 0, 0, 0, 1, 0, 0, 0, 0]).unwrap();
        assert_eq!(h.kind, Kind::UInt(1 << 32));
        let h = heads(&[0xc8, 0, 2, 0xff, 1, 2]).unwrap();
        assert_eq!((h.kind, h.hlen, h.len), (Kind::Ext(-1), 4, 2));
        let h = heads(&[0xd6, 0xff, 1, 2, 3, 4]).unwrap();
        assert_eq!((h.kind, h.hlen, h.len), (Kind::Ext(-1), 2, 4));
        let h = heads(&[0xde, 0, 1, 0xc0, 0xc0]).unwrap();
        assert_eq!((h.kind, h.count), (Kind::Map, 2));
        assert_eq!(heads(&[0xe0]).unwrap().kind, Kind::Int(-32));
        assert!(!heads(&[0xc1]).unwrap_err().truncated);
        let e = heads(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0]).unwrap_err();
        assert!(
            e.truncated && e.reason.contains("4294967295 elements"),
            "{e:?}"
        );
        let e = heads(&[0xc6, 0xff, 0xff, 0xff, 0xff, 0]).unwrap_err();
        assert!(
            e.reason.contains("declares 4294967295 bytes, 1 are left"),
            "{e:?}"
        );
    }

    #[test]
    fn deep_nesting_costs_a_counter() {
        let mut b = vec![0x91u8; 1_000_000];
        b.push(0xc0);
        b.push(0x01);
        let src = MemSource::new(b.clone());
        let mut cur = Cursor::new(&src);
        assert_eq!(skip(&mut cur, 0, b.len() as u64), Ok(1_000_001));
        let e = skip(&mut cur, 0, 1_000_000).unwrap_err();
        assert!(e.truncated);
    }
}
