//! tar: ustar, GNU (long names `L`/`K`, base-256 numbers) and PAX (`x`/`g`).
//!
//! Recovery goes further than GNU tar, bsdtar and Python's tarfile, which all
//! lose every member after a few bytes of drift (measured on damaged copies):
//!
//! * a header whose checksum fails but whose magic, size and following header
//!   all check out is kept as a corrupt member instead of being dropped;
//! * otherwise the parser looks for the next header at any byte offset (magic
//!   `ustar` at +257 and a valid checksum) or at any 512-byte block in the
//!   current alignment (checksum only, for v7 headers), and reports the span
//!   it skipped — so members survive a decoded stream whose length drifted;
//! * a member cut off by the end of the bytes is a truncated extraction with
//!   the bytes that exist.

use memchr::memmem;

use crate::data::{Data, Range, Source, read_exact_at, view};
use crate::extraction::{EntryKind, ExtId};
use crate::name::{Name, escape_bytes};
use crate::node::{Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::status::Damage;

/// tar: ustar, GNU and PAX.
pub(crate) static FORMAT: Format = Format {
    name: "tar",
    extent: None,
    sniff,
    parse: |data, _| Box::new(TarParser::new(data.clone())),
    load,
    offers: Offers::NONE,
};

const BLOCK: u64 = 512;

/// Consecutive entries shown as one lazy node. A tar of ten million small
/// members would otherwise hold ten million entry nodes (about 120 bytes
/// each) for a view that shows a screenful; a group costs one node and is
/// rebuilt from its headers when opened.
const GROUP: usize = 1024;
/// A group spans at most this many bytes of the archive: opening it reads
/// its headers, and in a decoded stream bytes that far apart may be
/// decoded again.
const GROUP_SPAN: u64 = 16 << 20;
/// A run of entries that reaches [`GROUP_SPAN`] with fewer entries than
/// this stays entry by entry: such entries average 256 KiB or more, few
/// enough per byte to keep.
const MIN_GROUP: usize = 64;
/// Longest GNU long name or PAX header accepted; longer is treated as damage.
const MAX_META: u64 = 1 << 20;

/// Where the fields of a header block are (POSIX ustar; v7 headers end
/// after `LINKNAME`, and GNU headers keep their own fields where ustar has
/// `PREFIX`). Numbers are octal text, or GNU base-256; strings end at the
/// first NUL.
mod field {
    use std::ops::Range;

    pub(super) const NAME: Range<usize> = 0..100;
    pub(super) const MODE: Range<usize> = 100..108;
    pub(super) const UID: Range<usize> = 108..116;
    pub(super) const GID: Range<usize> = 116..124;
    pub(super) const SIZE: Range<usize> = 124..136;
    pub(super) const MTIME: Range<usize> = 136..148;
    /// Summed as spaces when the checksum is computed.
    pub(super) const CHKSUM: Range<usize> = 148..156;
    pub(super) const TYPEFLAG: usize = 156;
    pub(super) const LINKNAME: Range<usize> = 157..257;
    /// `ustar\0` (POSIX) or `ustar ` (GNU, with `VERSION` ` \0`).
    pub(super) const MAGIC: Range<usize> = 257..263;
    pub(super) const VERSION: Range<usize> = 263..265;
    pub(super) const UNAME: Range<usize> = 265..297;
    pub(super) const GNAME: Range<usize> = 297..329;
    pub(super) const DEVMAJOR: Range<usize> = 329..337;
    pub(super) const DEVMINOR: Range<usize> = 337..345;
    pub(super) const PREFIX: Range<usize> = 345..500;
}

/// A valid header at the start; or, when the first header is damaged, a
/// `.tar` name or a valid ustar header in the first 8 KiB (the parser then
/// reports the damaged span and resynchronises, as GNU tar would).
fn sniff(s: &Sniff) -> bool {
    if s.head.len() < BLOCK as usize {
        return false;
    }
    let b: &[u8; 512] = s.head[..512].try_into().expect("512 bytes");
    if matches!(check(b), Check::Valid) && (has_magic(b) || plausible_v7(b)) {
        return true;
    }
    if s.name.ends_with(".tar") && s.head.len() >= BLOCK as usize {
        return true;
    }
    let mut buf = vec![0u8; 8192];
    let n = s.data.read_at(0, &mut buf).unwrap_or(0);
    buf.truncate(n);
    memmem::find_iter(&buf, b"ustar").any(|i| {
        i.checked_sub(field::MAGIC.start).is_some_and(|at| {
            at % BLOCK as usize == 0 && at + 512 <= buf.len() && {
                let blk: &[u8; 512] = buf[at..at + 512].try_into().expect("512");
                matches!(check(blk), Check::Valid)
            }
        })
    })
}

/// `n` rounded up to whole blocks; sizes from a header may be anything up
/// to 2^64-1, so the result saturates (such a member runs past any end).
fn round_up(n: u64) -> u64 {
    n.div_ceil(BLOCK).saturating_mul(BLOCK)
}

/// What one 512-byte block is.
enum Check {
    Zero,
    Valid,
    /// Checksum field unreadable or not matching: (stored, unsigned sum).
    Bad(Option<u64>, u64),
}

fn check(b: &[u8; 512]) -> Check {
    if b.iter().all(|&x| x == 0) {
        return Check::Zero;
    }
    let mut unsigned: u64 = 0;
    let mut signed: i64 = 0;
    for (i, &x) in b.iter().enumerate() {
        let x = if field::CHKSUM.contains(&i) { b' ' } else { x };
        unsigned += x as u64;
        signed += x as i8 as i64;
    }
    let stored = octal(&b[field::CHKSUM]);
    match stored {
        Some(s) if s == unsigned || s as i64 == signed => Check::Valid,
        _ => Check::Bad(stored, unsigned),
    }
}

/// Whether `b`, the 512 bytes before a member's data, is the header of a
/// member of `size` bytes: its checksum holds, its type has data, and its
/// size field says `size` (or says nothing a pax record could not
/// override: 0, or the most 11 octal digits hold). An index reader checks
/// a member's range with it: a range moved or stretched in a forged index
/// does not follow such a header.
pub(crate) fn header_vouches(b: &[u8; 512], size: u64) -> bool {
    if !matches!(check(b), Check::Valid) || !has_data(b[field::TYPEFLAG]) {
        return false;
    }
    match number(&b[field::SIZE]) {
        Some(s) => s == size || s == 0 || s == 0o77777777777,
        None => false,
    }
}

/// What a walk along an archive's header chain finds at one 512-byte
/// block (each header says where the next one is: 512 bytes on, plus its
/// data rounded up to blocks). A decoder whose output failed its check
/// walks it to locate the damage (`gzip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// A header whose checksum holds: the next one is this many bytes on.
    Header(u64),
    /// A block of zeros: the end of the archive.
    End,
    /// Not a header: the chain breaks here.
    Broken,
}

/// The chain's step at `b` (see [`Link`]). A header must also carry the
/// ustar magic or look like a v7 one, as the scan for one after damage
/// requires, and read as a tar writer made it (`written`).
pub(crate) fn link(b: &[u8; 512]) -> Link {
    match check(b) {
        Check::Zero => Link::End,
        Check::Bad(..) => Link::Broken,
        Check::Valid if !(has_magic(b) || plausible_v7(b)) || !written(b) => Link::Broken,
        Check::Valid => match number(&b[field::SIZE]) {
            Some(size) if has_data(b[field::TYPEFLAG]) => {
                Link::Header(round_up(size).saturating_add(BLOCK))
            }
            Some(_) => Link::Header(BLOCK),
            None => Link::Broken,
        },
    }
}

/// Whether a header whose checksum holds reads as one a tar writer made:
/// a name (and a link name, if any) without control bytes and only NULs
/// after it (writers fill the rest of a field with them), numbers where
/// numbers go, and a known type. A walk that vouches for the bytes before
/// a header trusts it by this and not by its checksum alone: output
/// damaged after a change of length copies the header before it shifted,
/// and such a copy, its name blank and digits strewn where the name was,
/// once summed to its checksum (a damage sweep of real files found it).
/// A real header refused here only makes a walk vouch for less.
fn written(b: &[u8; 512]) -> bool {
    let text = |f: &[u8], empty_ok: bool| {
        let n = memchr::memchr(0, f).unwrap_or(f.len());
        (empty_ok || n > 0)
            && f[..n].iter().all(|&c| c >= 0x20 && c != 0x7f)
            && f[n..].iter().all(|&c| c == 0)
    };
    let numbers = [
        field::MODE,
        field::UID,
        field::GID,
        field::SIZE,
        field::MTIME,
    ]
    .into_iter()
    .all(|f| number(&b[f]).is_some());
    let known = matches!(
        b[field::TYPEFLAG],
        0 | b'0'..=b'7' | b'x' | b'g' | b'L' | b'K' | b'D' | b'M' | b'N' | b'S' | b'V'
    );
    text(&b[field::NAME], false) && text(&b[field::LINKNAME], true) && numbers && known
}

fn has_magic(b: &[u8; 512]) -> bool {
    b[field::MAGIC].starts_with(b"ustar")
}

fn is_gnu(b: &[u8; 512]) -> bool {
    &b[field::MAGIC.start..field::VERSION.end] == b"ustar  \0"
}

/// A v7 header has no magic: accept it only with a plausible name and mode.
fn plausible_v7(b: &[u8; 512]) -> bool {
    b[field::NAME.start] != 0
        && octal(&b[field::MODE]).is_some()
        && octal(&b[field::SIZE]).is_some()
}

/// Octal number terminated by NUL or space, leading spaces allowed; an
/// all-NUL field is 0. `None` for anything else.
fn octal(f: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < f.len() && f[i] == b' ' {
        i += 1;
    }
    let mut v: u64 = 0;
    let mut digits = 0;
    while i < f.len() && (b'0'..=b'7').contains(&f[i]) {
        v = v.checked_mul(8)?.checked_add((f[i] - b'0') as u64)?;
        i += 1;
        digits += 1;
    }
    if f[i..].iter().all(|&c| c == 0 || c == b' ') && (digits > 0 || f.iter().all(|&c| c == 0)) {
        Some(v)
    } else {
        None
    }
}

/// A numeric field: octal, or GNU base-256 (first byte 0x80, big-endian).
/// Negative base-256 values (0xff) are rejected.
fn number(f: &[u8]) -> Option<u64> {
    if f[0] & 0x80 != 0 {
        if f[0] != 0x80 {
            return None;
        }
        let mut v: u64 = 0;
        for &c in &f[1..] {
            v = v.checked_mul(256)?.checked_add(c as u64)?;
        }
        return Some(v);
    }
    octal(f)
}

fn cstr(f: &[u8]) -> &[u8] {
    match memchr::memchr(0, f) {
        Some(n) => &f[..n],
        None => f,
    }
}

/// The fields of one header block that the scan needs.
struct Header {
    name: Vec<u8>,
    link: Vec<u8>,
    size: u64,
    kind: u8,
    mtime: Option<i64>,
    mode: Option<u32>,
}

fn header_fields(b: &[u8; 512]) -> Option<Header> {
    let size = number(&b[field::SIZE])?;
    let mut name = cstr(&b[field::NAME]).to_vec();
    if has_magic(b) && !is_gnu(b) {
        let prefix = cstr(&b[field::PREFIX]);
        if !prefix.is_empty() {
            let mut full = prefix.to_vec();
            full.push(b'/');
            full.extend_from_slice(&name);
            name = full;
        }
    }
    Some(Header {
        name,
        link: cstr(&b[field::LINKNAME]).to_vec(),
        size,
        kind: b[field::TYPEFLAG],
        mtime: number(&b[field::MTIME]).and_then(|t| i64::try_from(t).ok()),
        mode: octal(&b[field::MODE]).map(|m| (m & 0o7777) as u32),
    })
}

/// Whether data blocks follow a header of this type (as Python's tarfile).
fn has_data(kind: u8) -> bool {
    !matches!(kind, b'1' | b'2' | b'3' | b'4' | b'5' | b'6')
}

fn entry_kind(kind: u8, link: &[u8], sparse: bool) -> EntryKind {
    if sparse {
        return EntryKind::Other("sparse file (not expanded)".into());
    }
    match kind {
        b'0' | 0 | b'7' => EntryKind::File,
        b'1' => EntryKind::HardLink(escape_bytes(link).into()),
        b'2' => EntryKind::Symlink(escape_bytes(link).into()),
        b'3' | b'4' => EntryKind::Device,
        b'5' => EntryKind::Dir,
        b'6' => EntryKind::Fifo,
        b'S' => EntryKind::Other("sparse file (not expanded)".into()),
        b'V' => EntryKind::Other("volume label".into()),
        b'M' => EntryKind::Other("multi-volume continuation".into()),
        b'D' => EntryKind::Other("directory listing".into()),
        k => EntryKind::Other(format!("type {}", escape_bytes(&[k])).into()),
    }
}

fn type_name(kind: u8) -> &'static str {
    match kind {
        b'0' | 0 => "file",
        b'1' => "hard link",
        b'2' => "symlink",
        b'3' => "char device",
        b'4' => "block device",
        b'5' => "directory",
        b'6' => "fifo",
        b'7' => "contiguous file",
        b'L' => "GNU long name",
        b'K' => "GNU long link",
        b'x' => "PAX header",
        b'g' => "PAX global header",
        b'X' => "Solaris extended header",
        b'S' => "GNU sparse file",
        b'V' => "volume label",
        b'M' => "multi-volume continuation",
        b'D' => "GNU directory listing",
        _ => "unknown type",
    }
}

/// One PAX record: key, value, and its bytes in the extended header.
type PaxRecord = (String, Vec<u8>, Range);

/// PAX records `"%d %s=%s\n"`. A malformed record ends the list; it is
/// returned with its offset in `data` and the reason, so that it is
/// reported rather than silently dropped.
fn pax_records(data: &[u8]) -> (Vec<PaxRecord>, Option<(u64, String)>) {
    let mut out = Vec::new();
    let mut p = 0usize;
    let problem = loop {
        // NUL padding after the last record is how writers fill the block.
        if p >= data.len() || data[p..].iter().all(|&b| b == 0) {
            break None;
        }
        let Some(sp) = memchr::memchr(b' ', &data[p..(p + 20).min(data.len())]) else {
            break Some((p as u64, "PAX record without a length".to_string()));
        };
        let Some(len) = std::str::from_utf8(&data[p..p + sp])
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
        else {
            break Some((p as u64, "PAX record length is not a number".to_string()));
        };
        if len <= sp + 1 {
            break Some((p as u64, format!("PAX record length {len} is too short")));
        }
        if len > data.len() - p {
            break Some((
                p as u64,
                format!(
                    "PAX record of {len} bytes is longer than the {} bytes left in its header",
                    data.len() - p
                ),
            ));
        }
        if data[p + len - 1] != b'\n' {
            break Some((p as u64, "PAX record does not end with a line break".into()));
        }
        let rec = &data[p + sp + 1..p + len - 1];
        if let Some(eq) = memchr::memchr(b'=', rec) {
            out.push((
                String::from_utf8_lossy(&rec[..eq]).into_owned(),
                rec[eq + 1..].to_vec(),
                Range::new(p as u64, (p + len) as u64),
            ));
        }
        p += len;
    };
    (out, problem)
}

/// Metadata carried from extension headers to the next real header.
#[derive(Default, Clone)]
struct Pending {
    name: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    size: Option<u64>,
    /// A pax `mtime` (whole seconds; pax gives fractions too).
    mtime: Option<i64>,
    sparse: bool,
}

impl Pending {
    /// Takes the records' metadata; returns the problems found (offset in
    /// the header's data, reason).
    fn apply_pax(&mut self, recs: &[PaxRecord]) -> Vec<(u64, String)> {
        let mut problems = Vec::new();
        for (k, v, r) in recs {
            match k.as_str() {
                "path" => self.name = Some(v.clone()),
                "linkpath" => self.link = Some(v.clone()),
                "mtime" => {
                    let whole = std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| s.split('.').next()?.parse::<i64>().ok());
                    if whole.is_some() {
                        self.mtime = whole;
                    }
                }
                "size" => match std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()) {
                    Some(size) => self.size = Some(size),
                    None => problems.push((
                        r.start,
                        format!(
                            "PAX size {:?} is not a size (the header's own size is used)",
                            escape_bytes(v)
                        ),
                    )),
                },
                k if k.starts_with("GNU.sparse.") => self.sparse = true,
                _ => {}
            }
        }
        problems
    }
}

enum State {
    /// A header is expected at `at`.
    Header,
    /// Looking for the next valid header from `from`; damage began at `lost`.
    Resync {
        from: u64,
        lost: u64,
        why: String,
    },
    Done,
}

/// A member as its headers describe it.
struct Member {
    /// The full name, from a long-name or PAX header when there is one.
    name: Vec<u8>,
    link: Vec<u8>,
    sparse: bool,
    /// Bytes of data that follow the header.
    data_len: u64,
    /// Where the next header is expected.
    end: u64,
    /// Its node: from the first extension header to the end of its data.
    node: Node,
}

/// Applies the extension headers read before a member's own header `h`.
/// The parse and the walker that rebuilds a group ([`load`]) both describe
/// a member through here, so a group opens to the nodes the parse made.
fn member(h: Header, pending: Pending, global: &Pending, entry_start: u64, data_at: u64) -> Member {
    let name = pending
        .name
        .or_else(|| global.name.clone())
        .unwrap_or(h.name);
    let size = pending.size.or(global.size).unwrap_or(h.size);
    let data_len = if has_data(h.kind) { size } else { 0 };
    let end = data_at.saturating_add(round_up(data_len));
    let node = Node::new("entry", escape_bytes(&name), Range::new(entry_start, end))
        .value(Value::Sized(type_name(h.kind), size))
        .lazy();
    Member {
        name,
        link: pending.link.unwrap_or(h.link),
        sparse: pending.sparse || global.sparse,
        data_len,
        end,
        node,
    }
}

/// The entry nodes of a group: walks its headers again, applying long-name
/// and PAX headers as the parse did. Groups hold only clean entries after
/// no global header that renames (see `push_entry`).
fn entries(data: &dyn Source, range: Range) -> Vec<Node> {
    let mut out = Vec::new();
    let mut at = range.start;
    let mut pending = Pending::default();
    let mut entry_start = None;
    let global = Pending::default();
    while at.saturating_add(BLOCK) <= range.end && out.len() < GROUP {
        let mut b = [0u8; 512];
        if !matches!(read_exact_at(data, at, &mut b), Ok(true)) {
            break;
        }
        let Some(h) = header_fields(&b) else { break };
        let start = *entry_start.get_or_insert(at);
        let data_at = at + BLOCK;
        match h.kind {
            b'L' | b'K' | b'x' | b'X' if h.size <= MAX_META => {
                let mut meta = vec![0u8; h.size as usize];
                if !matches!(read_exact_at(data, data_at, &mut meta), Ok(true)) {
                    break;
                }
                match h.kind {
                    b'L' => pending.name = Some(cstr(&meta).to_vec()),
                    b'K' => pending.link = Some(cstr(&meta).to_vec()),
                    _ => {
                        pending.apply_pax(&pax_records(&meta).0);
                    }
                }
                at = data_at.saturating_add(round_up(h.size));
            }
            _ => {
                let m = member(h, std::mem::take(&mut pending), &global, start, data_at);
                out.push(m.node);
                entry_start = None;
                at = m.end;
            }
        }
    }
    out
}

/// A member whose data runs past the bytes available so far.
struct Open {
    child: ExtId,
    data: u64,
    size: u64,
    name: String,
}

struct TarParser {
    data: Data,
    state: State,
    /// Where the next header is expected.
    pos: u64,
    /// Start of the first extension header of the entry being read.
    entry_start: Option<u64>,
    pending: Pending,
    global: Pending,
    open: Option<Open>,
    /// The last member whose data is past: its child and where its
    /// padded data ends.
    prev: Option<(ExtId, u64)>,
    /// Whether an end-of-archive marker was seen.
    ended: bool,
    /// Whether a member's leading `/` was dropped (and said so, once).
    rooted: bool,
    /// Bytes before this were handed back to the source ([`Source::release`]):
    /// a tar of a million small members is read once, front to back, and
    /// its pages need not stay in this process.
    released: u64,
    scratch: Vec<u8>,
    /// Entry nodes not yet pushed (see [`GROUP`]).
    run: Vec<Node>,
    /// Entry nodes pushed so far, grouped or not.
    entries: u64,
}

impl TarParser {
    fn new(data: Data) -> TarParser {
        TarParser {
            data,
            state: State::Header,
            pos: 0,
            entry_start: None,
            pending: Pending::default(),
            global: Pending::default(),
            open: None,
            prev: None,
            rooted: false,
            ended: false,
            released: 0,
            scratch: Vec::new(),
            run: Vec::new(),
            entries: 0,
        }
    }

    fn block(&self, at: u64) -> Option<[u8; 512]> {
        let mut b = [0u8; 512];
        match read_exact_at(&*self.data, at, &mut b) {
            Ok(true) => Some(b),
            _ => None,
        }
    }

    /// Pushes a node that is not an entry: the run of entries before it
    /// goes first.
    fn node(&mut self, cx: &mut StepCx, node: Node) {
        self.flush(cx);
        cx.push_node(node);
    }

    /// Pushes the entries of the current run one by one.
    fn flush(&mut self, cx: &mut StepCx) {
        self.entries += self.run.len() as u64;
        for n in self.run.drain(..) {
            cx.push_node(n);
        }
    }

    /// Queues an entry's node: [`GROUP`] clean entries in a row become one
    /// lazy `entries` node, which [`load`] rebuilds from the headers.
    fn push_entry(&mut self, cx: &mut StepCx, node: Node, clean: bool) {
        // A global PAX name or size changes every later entry; the walker
        // that rebuilds a group does not replay it, so such entries stay
        // one by one (GNU tar writes no such header).
        let groupable = clean && self.global.name.is_none() && self.global.size.is_none();
        if !groupable {
            self.flush(cx);
            self.entries += 1;
            cx.push_node(node);
            return;
        }
        let first = self.run.first().map_or(node.range.start, |n| n.range.start);
        if node.range.end.saturating_sub(first) > GROUP_SPAN {
            // The run ends before this entry: a group when it is long
            // enough (a tar of 25 KiB files cut every 650 entries held
            // every entry's node), else entry by entry.
            if self.run.len() >= MIN_GROUP {
                self.push_group(cx);
            } else {
                self.flush(cx);
            }
            if node.range.len() > GROUP_SPAN {
                // A big member: few nodes per byte, nothing to save.
                self.entries += 1;
                cx.push_node(node);
                return;
            }
        }
        self.run.push(node);
        if self.run.len() == GROUP {
            self.push_group(cx);
        }
    }

    /// Pushes the entries of the current run as one lazy `entries` node,
    /// which [`load`] rebuilds from the headers it spans.
    fn push_group(&mut self, cx: &mut StepCx) {
        let (Some(first), Some(last)) = (self.run.first(), self.run.last()) else {
            return;
        };
        let r = Range::new(first.range.start, last.range.end);
        let n = self.run.len();
        let from = self.entries;
        self.entries += n as u64;
        self.run.clear();
        cx.push_node(
            Node::new("entries", format!("entries {from}–{}", self.entries - 1), r)
                .uint(n as u64)
                .lazy(),
        );
    }

    /// Ends the parse, reporting a member or header cut off by the end.
    fn finish(&mut self, cx: &mut StepCx) -> Step {
        self.flush(cx);
        let avail = self.data.available();
        if let Some(o) = self.open.take() {
            let have = avail.saturating_sub(o.data).min(o.size);
            if have < o.size {
                cx.child_damage(
                    o.child,
                    Damage::truncated(
                        Range::new(have, have),
                        format!("member cut off: {have} of {} bytes present", o.size),
                    ),
                );
                cx.damage(Damage::truncated(
                    Range::new(o.data + have, o.data + have),
                    format!(
                        "member {} cut off: {have} of {} bytes present",
                        o.name, o.size
                    ),
                ));
            }
        }
        cx.progress(avail, Some(avail));
        self.state = State::Done;
        Step::Done
    }

    fn header_step(&mut self, cx: &mut StepCx) -> Option<Step> {
        let at = self.pos;
        let (avail, fin) = self.data.extent();
        if at >= avail || avail - at < BLOCK {
            if !fin {
                return Some(Step::Blocked);
            }
            let end = Range::new(avail, avail);
            if at < avail {
                let r = Range::new(at, avail);
                self.node(
                    cx,
                    Node::new("partial header", "cut-off header", r)
                        .damaged(Damage::truncated(r, "archive ends inside a header block")),
                );
                cx.damage(Damage::truncated(r, "archive ends inside a header block"));
            } else if self.entry_start.is_some() {
                cx.damage(Damage::truncated(
                    end,
                    "archive ends after the extension headers of a member whose header is missing",
                ));
            } else if !self.ended {
                let what = match &self.open {
                    Some(o) if avail >= o.data.saturating_add(o.size) && at > avail => {
                        format!("archive ends inside the padding after member {}", o.name)
                    }
                    _ => "archive ends without its end-of-archive marker".to_string(),
                };
                cx.damage(Damage::truncated(end, what));
            }
            return Some(self.finish(cx));
        }
        // The previous member's data is complete once we are past it.
        if let Some(o) = &self.open
            && avail >= o.data.saturating_add(o.size)
        {
            self.prev = Some((o.child, o.data.saturating_add(round_up(o.size))));
            self.open = None;
        }
        let b = self.block(at)?;
        match check(&b) {
            Check::Zero => self.zero_block(cx, at),
            Check::Valid => self.accept(cx, at, &b, None),
            Check::Bad(stored, sum) => {
                let why = match stored {
                    Some(s) => format!("header checksum mismatch: stored {s}, computed {sum}"),
                    None => "not a tar header (checksum field unreadable)".to_string(),
                };
                if has_magic(&b) {
                    match self.plausible_after(&b, at) {
                        Some(true) => return self.accept(cx, at, &b, Some(why)),
                        None => return Some(Step::Blocked),
                        Some(false) => {}
                    }
                }
                self.suspect_prev(cx, at);
                self.lose(at, at + 1, why);
                None
            }
        }
    }

    /// A header that fails right after a member's data, in decoded bytes:
    /// a decoder that read damaged input writes garbage for a while before
    /// anything notices, so the member before may hold some of it too.
    fn suspect_prev(&mut self, cx: &mut StepCx, at: u64) {
        let Some((child, end)) = self.prev.take() else {
            return;
        };
        let (_, exact) = crate::data::file_offset(&self.data, at);
        if end == at && !exact {
            cx.child_damage(
                child,
                Damage::corrupt(
                    Range::new(0, 0),
                    "the tar header after it is damaged, in decoded bytes: the damage may have begun in this member's bytes",
                ),
            );
        }
    }

    /// For a header with a bad checksum: does the block where the next header
    /// would be look like a header? `None` if those bytes are not here yet.
    fn plausible_after(&self, b: &[u8; 512], at: u64) -> Option<bool> {
        let Some(h) = header_fields(b) else {
            return Some(false);
        };
        let data = if has_data(h.kind) {
            round_up(h.size)
        } else {
            0
        };
        let next = at.checked_add(BLOCK)?.checked_add(data)?;
        let avail = self.data.available();
        if next + BLOCK > avail {
            return if self.data.is_final() {
                Some(next == avail)
            } else {
                None
            };
        }
        Some(matches!(
            self.block(next).map(|nb| check(&nb)),
            Some(Check::Valid | Check::Zero)
        ))
    }

    fn zero_block(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let (avail, fin) = self.data.extent();
        // Count the run of zero blocks.
        let mut end = at;
        while end + BLOCK <= avail {
            match self.block(end) {
                Some(b) if b.iter().all(|&x| x == 0) => end += BLOCK,
                _ => break,
            }
            if end - at > cx.budget {
                break;
            }
        }
        if end + BLOCK > avail && !fin && end - at < 2 * BLOCK {
            return Some(Step::Blocked);
        }
        let r = Range::new(at, end);
        if end - at >= 2 * BLOCK {
            if !self.ended {
                self.ended = true;
                self.node(
                    cx,
                    Node::new("end", "end of archive", Range::new(at, at + 2 * BLOCK)),
                );
                if end - at > 2 * BLOCK {
                    let p = Range::new(at + 2 * BLOCK, end);
                    self.node(cx, Node::new("padding", "zero padding", p).uint(p.len()));
                }
            } else {
                self.node(cx, Node::new("padding", "zero blocks", r).uint(r.len()));
            }
        } else {
            self.node(cx, Node::new("zero", "lone zero block", r));
        }
        self.pos = end;
        if end + BLOCK > avail {
            if !fin {
                return Some(Step::Blocked);
            }
            if !self.ended {
                cx.damage(Damage::truncated(
                    Range::new(avail, avail),
                    "archive ends inside its end-of-archive marker (one zero block of two)",
                ));
            }
            if end < avail {
                // Non-block-sized tail after the marker: harmless if zeros.
                let tail = Range::new(end, avail);
                self.node(
                    cx,
                    Node::new("padding", "trailing bytes", tail).uint(tail.len()),
                );
            }
            return Some(self.finish(cx));
        }
        // Something follows the zeros: a concatenated archive or more
        // members after a zeroed hole. Keep reading (like --ignore-zeros).
        None
    }

    fn lose(&mut self, lost: u64, from: u64, why: String) {
        self.entry_start = None;
        self.pending = Pending::default();
        self.state = State::Resync { from, lost, why };
    }

    /// Takes a header at `at`; `bad` is set when its checksum failed but it
    /// was judged sound anyway.
    fn accept(
        &mut self,
        cx: &mut StepCx,
        at: u64,
        b: &[u8; 512],
        bad: Option<String>,
    ) -> Option<Step> {
        let Some(h) = header_fields(b) else {
            self.lose(at, at + 1, "header has an unreadable size field".into());
            return None;
        };
        self.open = None;
        let entry_start = *self.entry_start.get_or_insert(at);
        let data_at = at + BLOCK;
        let kind = h.kind;
        match kind {
            b'L' | b'K' | b'x' | b'g' | b'X' => {
                if h.size > MAX_META {
                    self.lose(
                        at,
                        at + 1,
                        format!("{} of {} bytes is implausible", type_name(h.kind), h.size),
                    );
                    return None;
                }
                let (avail, fin) = self.data.extent();
                if data_at.saturating_add(h.size) > avail {
                    if !fin {
                        return Some(Step::Blocked);
                    }
                    let r = Range::new(entry_start, avail);
                    self.node(
                        cx,
                        Node::new("partial entry", "cut-off extension header", r).damaged(
                            Damage::truncated(r, "archive ends inside an extension header"),
                        ),
                    );
                    cx.damage(Damage::truncated(
                        r,
                        "archive ends inside an extension header",
                    ));
                    return Some(self.finish(cx));
                }
                let mut meta = vec![0u8; h.size as usize];
                if !matches!(read_exact_at(&*self.data, data_at, &mut meta), Ok(true)) {
                    self.lose(at, at + 1, "unreadable extension header".into());
                    return None;
                }
                let problems = match h.kind {
                    b'L' => {
                        self.pending.name = Some(cstr(&meta).to_vec());
                        Vec::new()
                    }
                    b'K' => {
                        self.pending.link = Some(cstr(&meta).to_vec());
                        Vec::new()
                    }
                    _ => {
                        let (recs, bad_record) = pax_records(&meta);
                        let target = if h.kind == b'g' {
                            &mut self.global
                        } else {
                            &mut self.pending
                        };
                        let mut problems = target.apply_pax(&recs);
                        problems.extend(bad_record);
                        problems
                    }
                };
                for (off, why) in problems {
                    let start = data_at.saturating_add(off);
                    cx.damage(Damage::corrupt(Range::new(start, start + 1), why));
                }
                if let Some(why) = bad {
                    cx.damage(Damage::corrupt(Range::new(at, at + BLOCK), why));
                }
                if h.kind == b'g' {
                    self.node(
                        cx,
                        Node::new(
                            "global",
                            "PAX global header",
                            Range::new(at, data_at.saturating_add(round_up(h.size))),
                        )
                        .lazy(),
                    );
                    self.entry_start = None;
                }
                self.pos = data_at.saturating_add(round_up(h.size));
                None
            }
            _ => {
                let pending = std::mem::take(&mut self.pending);
                let meta = crate::extraction::Meta::new(
                    pending.mtime.or(self.global.mtime).or(h.mtime),
                    h.mode,
                );
                let Member {
                    name,
                    link,
                    sparse,
                    data_len,
                    end,
                    mut node,
                } = member(h, pending, &self.global, entry_start, data_at);
                let data_end = data_at.saturating_add(data_len);
                // The member as `tar x` names it (`./a/x` is `a/x`); its
                // header node keeps the name as stored.
                let path = crate::name::member_path(&name);
                if name.starts_with(b"/") && !path.is_empty() && !self.rooted {
                    self.rooted = true;
                    cx.note("removed the leading `/` from member names, as GNU tar does");
                }
                // A hard link names the member it links to: that name is
                // taken as the member's is (a symlink's target is a path of
                // the file system, kept as it is).
                let kind = if kind == b'1' {
                    entry_kind(kind, &crate::name::member_path(&link), sparse)
                } else {
                    entry_kind(kind, &link, sparse)
                };
                if path.is_empty() && kind == EntryKind::Dir && data_len == 0 {
                    // `./`: the archive's own top, no member of it; its
                    // header stays in the node tree.
                    let clean = bad.is_none();
                    if let Some(why) = bad {
                        let d = Damage::corrupt(Range::new(at, at + BLOCK), why);
                        node = node.damaged(d.clone());
                        cx.damage(d);
                    }
                    self.push_entry(cx, node, clean);
                    self.entry_start = None;
                    self.open = None;
                    self.prev = None;
                    self.pos = end;
                    return None;
                }
                let name = if path.is_empty() {
                    name
                } else {
                    path.into_owned()
                };
                let shown = escape_bytes(&name);
                let mut spec = ChildSpec::window(
                    Name::new(name),
                    kind,
                    &self.data,
                    Range::new(data_at, data_end),
                );
                spec.declared_size = Some(data_len);
                spec.meta = meta;
                let clean = bad.is_none();
                if let Some(why) = bad {
                    let d = Damage::corrupt(Range::new(at, at + BLOCK), why.clone());
                    node = node.damaged(d.clone());
                    cx.damage(d);
                    spec.damage.push(Damage::corrupt(
                        Range::new(0, 0),
                        format!("its tar header is damaged ({why}); name and size may be wrong"),
                    ));
                }
                self.push_entry(cx, node, clean);
                let child = cx.add_child(spec);
                self.entry_start = None;
                self.open = Some(Open {
                    child,
                    data: data_at,
                    size: data_len,
                    name: shown,
                });
                self.pos = end;
                None
            }
        }
    }

    fn resync_step(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::Resync { from, lost, why } = &self.state else {
            return None;
        };
        let (from, lost, why) = (*from, *lost, why.clone());
        let phase = lost % BLOCK;
        let (avail, fin) = self.data.extent();
        let data = self.data.clone();
        let finder = memmem::Finder::new(b"ustar");
        let mut pos = from;
        let mut scanned = 0;
        while pos + BLOCK <= avail && scanned < cx.budget {
            let want = (1 << 20).min(avail - pos) as usize;
            let w = match view(&*data, pos, want + 512, &mut self.scratch) {
                Ok(w) => w.to_vec(),
                Err(_) => break,
            };
            let mut best: Option<u64> = None;
            // Candidates by magic at any byte offset.
            for i in finder.find_iter(&w) {
                let cand = (pos + i as u64).checked_sub(field::MAGIC.start as u64);
                if let Some(c) = cand.filter(|&c| c >= from && c + BLOCK <= avail)
                    && matches!(self.block(c).map(|b| check(&b)), Some(Check::Valid))
                {
                    best = Some(c);
                    break;
                }
            }
            // Candidates by checksum on the current block grid.
            let mut c = pos + (phase + BLOCK - pos % BLOCK) % BLOCK;
            while c + BLOCK <= avail && c < pos + want as u64 && best.is_none_or(|b| c < b) {
                let off = (c - pos) as usize;
                if off + 512 <= w.len() {
                    let blk: &[u8; 512] = w[off..off + 512].try_into().expect("512");
                    if matches!(check(blk), Check::Valid) && (has_magic(blk) || plausible_v7(blk)) {
                        best = Some(c);
                        break;
                    }
                }
                c += BLOCK;
            }
            if let Some(found) = best {
                let r = Range::new(lost, found);
                self.node(
                    cx,
                    Node::new("skipped", "unreadable bytes", r)
                        .uint(r.len())
                        .damaged(Damage::corrupt(r, why.clone())),
                );
                cx.damage(Damage::corrupt(
                    r,
                    format!("{why}; skipped {} bytes to the next valid header", r.len()),
                ));
                self.pos = found;
                self.state = State::Header;
                return None;
            }
            let advance = (want as u64).saturating_sub(512).max(1);
            pos += advance;
            scanned += advance;
        }
        if pos + BLOCK <= avail {
            self.state = State::Resync {
                from: pos,
                lost,
                why,
            };
            return Some(Step::Yield);
        }
        if !fin {
            self.state = State::Resync {
                from: pos,
                lost,
                why,
            };
            return Some(Step::Blocked);
        }
        let r = Range::new(lost, avail);
        self.node(
            cx,
            Node::new("skipped", "unreadable bytes", r)
                .uint(r.len())
                .damaged(Damage::corrupt(r, why.clone())),
        );
        cx.damage(Damage::corrupt(
            r,
            format!(
                "{why}; no valid header after it ({} bytes unreadable)",
                r.len()
            ),
        ));
        Some(self.finish(cx))
    }
}

impl Parser for TarParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if self.pos.saturating_sub(self.released) >= crate::data::RELEASE_STEP {
            self.data.release(self.released, self.pos);
            self.released = self.pos;
        }
        let start = self.pos;
        // A bounded batch: its results are committed under the tree's write lock,
        // which a UI frame waits for.
        for _ in 0..2048 {
            let r = match self.state {
                State::Header => self.header_step(cx),
                State::Resync { .. } => self.resync_step(cx),
                State::Done => Some(Step::Done),
            };
            if let Some(step) = r {
                if step != Step::Done {
                    let fin = self.data.is_final();
                    cx.progress(self.pos, fin.then(|| self.data.available()));
                }
                return step;
            }
            if self.pos.saturating_sub(start) > cx.budget * 16 {
                break;
            }
        }
        cx.progress(self.pos, None);
        Step::Yield
    }
}

/// Rebuilds the headers of an entry, or the entries of a group, from their
/// bytes.
fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    if node.kind == "entries" {
        return entries(data, node.range);
    }
    if node.kind != "entry" && node.kind != "global" {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = node.range.start;
    while at + BLOCK <= node.range.end {
        let mut b = [0u8; 512];
        if !matches!(read_exact_at(data, at, &mut b), Ok(true)) {
            break;
        }
        let Some(h) = header_fields(&b) else { break };
        let kind = h.kind;
        let mut fields = header_nodes(&b, at);
        let data_at = at + BLOCK;
        let dlen = if has_data(kind) { h.size } else { 0 };
        let avail = data.available();
        let have = avail.saturating_sub(data_at).min(dlen);
        if matches!(kind, b'L' | b'K' | b'x' | b'g' | b'X') && dlen <= MAX_META {
            let mut meta = vec![0u8; have as usize];
            if read_exact_at(data, data_at, &mut meta).unwrap_or(false) {
                let r = Range::new(data_at, data_at + dlen);
                if kind == b'L' || kind == b'K' {
                    fields.push(Node::new("string", "content", r).text(escape_bytes(cstr(&meta))));
                } else {
                    let recs = pax_records(&meta)
                        .0
                        .into_iter()
                        .map(|(k, v, rr)| {
                            Node::new(
                                "record",
                                escape_bytes(k.as_bytes()),
                                Range::new(data_at + rr.start, data_at + rr.end),
                            )
                            .text(escape_bytes(&v))
                        })
                        .collect();
                    fields.push(Node::new("records", "records", r).with_children(recs));
                }
            }
            out.push(
                Node::new(
                    "header",
                    type_name(kind),
                    Range::new(at, data_at.saturating_add(round_up(dlen))),
                )
                .with_children(fields),
            );
            at = data_at.saturating_add(round_up(dlen));
            continue;
        }
        let mut d = Node::new(
            "data",
            "data",
            Range::new(data_at, data_at.saturating_add(dlen)),
        )
        .uint(dlen);
        if have < dlen {
            d = d.damaged(Damage::truncated(
                Range::new(data_at + have, data_at + have),
                format!("{have} of {dlen} bytes present"),
            ));
        }
        out.push(Node::new("header", "header", Range::new(at, data_at)).with_children(fields));
        out.push(d);
        break;
    }
    out
}

fn header_nodes(b: &[u8; 512], at: u64) -> Vec<Node> {
    use field::*;
    type Field = std::ops::Range<usize>;
    let r = |f: Field| Range::new(at + f.start as u64, at + f.end as u64);
    let num = |f: Field| -> Value {
        match number(&b[f.clone()]) {
            Some(v) => Value::UInt(v),
            None => Value::Str(format!("unreadable: {}", escape_bytes(&b[f])).into()),
        }
    };
    let text = |f: Field| -> Value { Value::Str(escape_bytes(cstr(&b[f])).into()) };
    let mut v = vec![
        Node::new("string", "name", r(NAME)).value(text(NAME)),
        Node::new("octal", "mode", r(MODE)).value(match octal(&b[MODE]) {
            Some(m) => Value::Str(format!("{m:o}").into()),
            None => text(MODE),
        }),
        Node::new("number", "uid", r(UID)).value(num(UID)),
        Node::new("number", "gid", r(GID)).value(num(GID)),
        Node::new("number", "size", r(SIZE)).value(num(SIZE)),
        Node::new("number", "mtime", r(MTIME)).value(match number(&b[MTIME]) {
            Some(t) => Value::Str(format!("{t} ({})", crate::util::utc(t as i64)).into()),
            None => text(MTIME),
        }),
    ];
    let mut ck = Node::new("octal", "chksum", r(CHKSUM)).value(num(CHKSUM));
    if let Check::Bad(stored, sum) = check(b) {
        ck = ck.damaged(Damage::corrupt(
            r(CHKSUM),
            format!("stored {stored:?}, computed {sum}"),
        ));
    }
    v.push(ck);
    v.push(
        Node::new("u8", "typeflag", r(TYPEFLAG..TYPEFLAG + 1)).text(format!(
            "{} ({})",
            escape_bytes(&[b[TYPEFLAG]]),
            type_name(b[TYPEFLAG])
        )),
    );
    v.push(Node::new("string", "linkname", r(LINKNAME)).value(text(LINKNAME)));
    v.push(Node::new("magic", "magic", r(MAGIC)).value(Value::Str(escape_bytes(&b[MAGIC]).into())));
    v.push(
        Node::new("magic", "version", r(VERSION))
            .value(Value::Str(escape_bytes(&b[VERSION]).into())),
    );
    if has_magic(b) {
        v.push(Node::new("string", "uname", r(UNAME)).value(text(UNAME)));
        v.push(Node::new("string", "gname", r(GNAME)).value(text(GNAME)));
        v.push(Node::new("number", "devmajor", r(DEVMAJOR)).value(num(DEVMAJOR)));
        v.push(Node::new("number", "devminor", r(DEVMINOR)).value(num(DEVMINOR)));
        if !is_gnu(b) {
            v.push(Node::new("string", "prefix", r(PREFIX)).value(text(PREFIX)));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_trusts_only_headers_a_writer_could_have_made() {
        // A GNU header as tar writes it, then copies made of it as damaged
        // output makes them, each with its checksum summed again.
        let mut good = [0u8; 512];
        good[..9].copy_from_slice(b"src/a.txt");
        good[field::MODE].copy_from_slice(b"0000644\0");
        good[field::UID].copy_from_slice(b"0000000\0");
        good[field::GID].copy_from_slice(b"0000000\0");
        good[field::SIZE].copy_from_slice(b"00000014035\0");
        good[field::MTIME].copy_from_slice(b"00000000000\0");
        good[field::TYPEFLAG] = b'0';
        good[field::MAGIC.start..field::VERSION.end].copy_from_slice(b"ustar  \0");
        let sum = |b: &mut [u8; 512]| {
            b[field::CHKSUM].fill(b' ');
            let s: u32 = b.iter().map(|&c| u32::from(c)).sum();
            b[field::CHKSUM].copy_from_slice(format!("{s:06o}\0 ").as_bytes());
        };
        sum(&mut good);
        assert_eq!(link(&good), Link::Header(512 + 6656));
        // The one the sweep found: a blank name with digits after it.
        let mut blank = good;
        blank[..9].fill(0);
        blank[60..65].copy_from_slice(b"31346");
        sum(&mut blank);
        assert!(matches!(check(&blank), Check::Valid));
        assert_eq!(link(&blank), Link::Broken);
        let mut tail = good;
        tail[40..43].copy_from_slice(b"671");
        sum(&mut tail);
        assert_eq!(link(&tail), Link::Broken, "bytes after the name's NUL");
        let mut control = good;
        control[3] = 0x1b;
        sum(&mut control);
        assert_eq!(link(&control), Link::Broken, "a control byte in the name");
        let mut kind = good;
        kind[field::TYPEFLAG] = b'q';
        sum(&mut kind);
        assert_eq!(link(&kind), Link::Broken, "an unknown type");
        let mut mtime = good;
        mtime[field::MTIME.start + 3] = b'9';
        sum(&mut mtime);
        assert_eq!(link(&mtime), Link::Broken, "a digit no octal field has");
    }

    #[test]
    fn numbers() {
        assert_eq!(octal(b"0000644\0"), Some(0o644));
        assert_eq!(octal(b"   644 \0"), Some(0o644));
        assert_eq!(octal(b"\0\0\0\0"), Some(0));
        assert_eq!(octal(b"64x\0"), None);
        let mut f = [0u8; 12];
        f[0] = 0x80;
        f[11] = 0x10;
        f[10] = 0x02;
        assert_eq!(number(&f), Some(0x0210));
        f[0] = 0xff;
        assert_eq!(number(&f), None);
    }

    #[test]
    fn pax() {
        let (recs, bad) = pax_records(b"28 path=some/long/path/name\n11 size=42\n");
        assert!(bad.is_none());
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].0, "path");
        assert_eq!(recs[0].1, b"some/long/path/name");
        assert_eq!(recs[1].1, b"42");
        let (recs, bad) = pax_records(b"999 path=x\n");
        assert!(recs.is_empty());
        assert!(bad.unwrap().1.contains("longer than"));
    }
}
