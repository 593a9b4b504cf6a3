//! xz: streams, blocks, index, recovery, and the decoded stream.
//!
//! A stream is a 12-byte header, blocks (a header with its CRC32, the
//! filter chain's compressed data, zero padding to 4 bytes, the check of
//! the decoded data), the index and a 12-byte footer; streams may be
//! concatenated with zero padding between them. Each block is decoded on
//! its own by liblzma's raw decoder (the `liblzma` crate) with the filter
//! chain its header names, so each block is a checkpoint of the decoded
//! stream (a [`crate::data::BlockSource`]). Recovery:
//!
//! * a block whose data does not decode loses itself: the parser scans
//!   forward, at 4-byte alignment, for the next block header whose CRC32
//!   matches (or an index, footer or stream header) and goes on there;
//! * a block whose check fails keeps its bytes and is marked corrupt;
//! * a stream cut off keeps all decodable output, the cut block's too.

use crate::data::blocks::xz::*;
use crate::data::{BlockReader, Data, Pull, Range, view};
use crate::node::{Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{Format, Sniff, Step, StepCx};
use crate::parsers::compress::driver::{BlockFormat, Core, Scan, State, Trailer};
use crate::status::Damage;

/// xz: streams, blocks, index, the decoded stream.
pub(crate) static FORMAT: Format = Format {
    name: "xz",
    extent: Some(found_extent),
    sniff,
    parse: |data, _| Box::new(XzParser::new(data.clone())),
    load: |_, _, _| Vec::new(),
    offers: Offers::NONE,
};

const MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];
const FOOTER_MAGIC: [u8; 2] = [b'Y', b'Z'];
const NAMES: &[(&str, &str)] = &[(".txz", ".tar"), (".xz", "")];
/// Largest index read (a record is 2 to 18 bytes: millions of blocks).
const MAX_INDEX: usize = 64 << 20;

/// Whether `b` starts with a valid stream header: the magic, stream flags
/// with no reserved bit set, and their CRC32.
fn stream_header(b: &[u8]) -> bool {
    b.len() >= 12
        && b.starts_with(&MAGIC)
        && crc32fast::hash(&b[6..8]) == u32::from_le_bytes([b[8], b[9], b[10], b[11]])
        && b[6] == 0
        && b[7] & 0xf0 == 0
}

/// Where an xz stream found by carving ends: after its stream footer (its
/// CRC right, its flags the header's, 4-byte aligned), or at the end of
/// its span when no footer is found (a cut stream: the parse says where);
/// `None` when its stream header is not valid, as the magic among other
/// bytes (the xz program holds it as a constant) is not. An ELF file's
/// `.gnu_debugdata` is such a stream, with the file's other sections after.
fn found_extent(data: &Data) -> Option<u64> {
    let mut h = [0u8; 12];
    let n = data.read_at(0, &mut h).ok()?;
    if !stream_header(&h[..n]) {
        return None;
    }
    let avail = data.available();
    let mut buf = vec![0u8; 64 * 1024];
    // Footers are 12 bytes at a multiple of 4 from the stream's start; each
    // read overlaps the last by 11 bytes so no footer straddles two.
    let mut at = 12u64;
    while at < avail {
        let n = data.read_at(at, &mut buf).ok()?;
        if n < 12 {
            break;
        }
        let b = &buf[..n];
        let first = (4 - (at % 4) as usize) % 4;
        for i in (first..=n - 12).step_by(4) {
            let f = &b[i..i + 12];
            if &f[10..12] == b"YZ"
                && f[8..10] == h[6..8]
                && crc32fast::hash(&f[4..10]) == u32::from_le_bytes([f[0], f[1], f[2], f[3]])
            {
                return Some(at + i as u64 + 12);
            }
        }
        at += (n - 11) as u64;
    }
    Some(avail)
}

/// The magic, or an `.xz`/`.txz` name (a damaged stream header is then
/// reported and the blocks after it are found).
fn sniff(s: &Sniff) -> bool {
    s.head.starts_with(&MAGIC) || s.name.ends_with(".xz") || s.name.ends_with(".txz")
}

/// xz's own states; the driver's hold what follows a stream and the
/// resync.
enum At {
    StreamHeader {
        at: u64,
    },
    /// A block header or the index at `at`.
    Block {
        at: u64,
    },
    Body {
        at: u64,
        header: BlockHeader,
        reader: Box<dyn BlockReader>,
        out_start: u64,
        check: Check,
    },
    /// Block padding and check after the compressed data `[.., data_end)`.
    Tail {
        at: u64,
        header: BlockHeader,
        data_end: u64,
        out_start: u64,
        check: Check,
    },
    Index {
        at: u64,
    },
    Footer {
        at: u64,
        index: Option<Range>,
    },
}

struct XzParser {
    /// The input, the decoded stream and the state, which the driver shares.
    core: Core<At>,
    streams: u64,
    stream_start: u64,
    check_id: u8,
    /// Whether `check_id` comes from this stream's header (else it is
    /// guessed from where the next block header is).
    check_known: bool,
    flags: [u8; 2],
    /// Blocks of this stream as the index records them: (unpadded size,
    /// uncompressed size); `None` once a block was lost.
    records: Option<Vec<(u64, u64)>>,
    blocks: u64,
    /// Streams whose footer (and so index) checked out, and whether a
    /// block had no check (type None): the file proves its own bytes only
    /// when every block carried one.
    checked_streams: u64,
    unchecked: bool,
}

impl XzParser {
    fn new(data: Data) -> XzParser {
        XzParser {
            core: Core::new(
                data,
                Box::new(Codec),
                "xz stream",
                At::StreamHeader { at: 0 },
            ),
            streams: 0,
            stream_start: 0,
            check_id: 4,
            check_known: false,
            flags: [0, 4],
            records: Some(Vec::new()),
            blocks: 0,
            checked_streams: 0,
            unchecked: false,
        }
    }

    /// Up to `n` bytes at `at`, or what the step should do.
    fn need(&mut self, at: u64, n: usize) -> Result<Vec<u8>, Option<Step>> {
        let data = self.core.data.clone();
        // Final before the read (see `Source::is_final`).
        let fin = data.is_final();
        match view(&*data, at, n, &mut self.core.scratch) {
            Ok(b) if b.len() >= n => Ok(b.to_vec()),
            Ok(_) if !fin => Err(Some(Step::Blocked)),
            Ok(b) => Ok(b.to_vec()),
            Err(_) => Err(None),
        }
    }

    fn stream_header(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let b = match self.need(at, 12) {
            Ok(b) => b,
            Err(Some(s)) => return Some(s),
            Err(None) => return Some(self.finish(cx)),
        };
        let avail = self.core.data.available();
        if b.len() < 12 {
            if MAGIC.starts_with(&b[..b.len().min(6)]) {
                return Some(self.cut(
                    cx,
                    Range::new(at, avail),
                    "file ends inside an xz stream header",
                ));
            }
        } else if stream_header(&b) {
            self.streams += 1;
            self.stream_start = at;
            self.flags = [b[6], b[7]];
            self.check_id = b[7] & 0x0f;
            self.check_known = true;
            if !matches!(self.check_id, 0 | 1 | 4 | 10) {
                cx.note(format!(
                    "xz stream #{} uses reserved check type {}: its blocks' checks are skipped, not verified",
                    self.streams, self.check_id
                ));
            }
            self.records = Some(Vec::new());
            self.blocks = 0;
            cx.push_node(
                Node::new(
                    "stream header",
                    format!("stream #{}", self.streams),
                    Range::new(at, at + 12),
                )
                .text(format!(
                    "check {} ({})",
                    self.check_id,
                    check_name(self.check_id)
                )),
            );
            self.go(At::Block { at: at + 12 });
            return None;
        }
        self.check_known = false;
        self.resync(at + 1, at, format!("no valid xz stream header at {at:#x}"));
        None
    }

    fn block(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let first = match self.need(at, 1) {
            Ok(b) if b.is_empty() => {
                let avail = self.core.data.available();
                return Some(self.cut(
                    cx,
                    Range::new(avail, avail),
                    "xz stream ends before its index",
                ));
            }
            Ok(b) => b[0],
            Err(Some(s)) => return Some(s),
            Err(None) => return Some(self.finish(cx)),
        };
        if first == 0 {
            self.go(At::Index { at });
            return None;
        }
        let len = (first as usize + 1) * 4;
        let b = match self.need(at, len) {
            Ok(b) => b,
            Err(Some(s)) => return Some(s),
            Err(None) => return Some(self.finish(cx)),
        };
        let avail = self.core.data.available();
        let header = match parse_block_header(&b) {
            Ok(h) => h,
            Err(None) => {
                return Some(self.cut(
                    cx,
                    Range::new(at, avail),
                    "file ends inside an xz block header",
                ));
            }
            Err(Some(why)) => {
                self.records = None;
                self.resync(
                    at + 4,
                    at,
                    format!("xz block #{} at {at:#x}: {why}", self.blocks + 1),
                );
                return None;
            }
        };
        self.core.out.ensure_child(cx, at, NAMES);
        let reader = match self.core.out.src.open(at, [0, 0]) {
            Ok(r) => r,
            Err(e) => {
                self.records = None;
                self.resync(
                    at + 4,
                    at,
                    format!("xz block #{} at {at:#x}: {e}", self.blocks + 1),
                );
                return None;
            }
        };
        self.blocks += 1;
        self.core.out.src.begin_block(at, [0, 0]);
        self.go(At::Body {
            at,
            header,
            reader,
            out_start: self.core.out.pos(),
            check: if self.check_known {
                Check::new(self.check_id)
            } else {
                Check::Any(
                    crc32fast::Hasher::new(),
                    0,
                    Box::new(<sha2::Sha256 as sha2::Digest>::new()),
                )
            },
        });
        None
    }

    fn body(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::At(At::Body {
            at,
            reader,
            out_start,
            check,
            ..
        }) = &mut self.core.state
        else {
            return None;
        };
        let (at, out_start) = (*at, *out_start);
        let run = self
            .core
            .out
            .run(cx, &mut **reader, &mut |b| check.update(b));
        let in_pos = reader.input_pos();
        let pull = match self.pumped(cx, run, in_pos, in_pos) {
            Ok(p) => p,
            Err(step) => return Some(step),
        };
        let k = self.blocks;
        let out_end = self.core.out.pos();
        match pull {
            Pull::NeedInput => Some(Step::Blocked),
            Pull::Out(_) => Some(Step::Yield),
            Pull::End => {
                let State::At(At::Body { header, check, .. }) =
                    std::mem::replace(&mut self.core.state, State::Done)
                else {
                    return None;
                };
                self.go(At::Tail {
                    at,
                    header,
                    data_end: in_pos,
                    out_start,
                    check,
                });
                None
            }
            Pull::Truncated => {
                self.core.out.src.end_block(in_pos);
                let r = Range::new(at, in_pos);
                let d = Damage::truncated(Range::new(in_pos, in_pos), "block cut off");
                cx.push_node(
                    Node::new("partial block", format!("block #{k}"), r)
                        .value(Value::Str(
                            format!("decoded {out_start:#x}..{out_end:#x}, cut off").into(),
                        ))
                        .damaged(d),
                );
                let avail = self.core.data.available();
                Some(self.cut(
                    cx,
                    Range::new(avail, avail),
                    &format!(
                        "xz block #{k} is cut off after {} decoded bytes",
                        out_end - out_start
                    ),
                ))
            }
            Pull::Error(msg) => {
                self.core.out.src.end_block(in_pos);
                self.records = None;
                let r = Range::new(at, in_pos);
                cx.push_node(
                    Node::new("partial block", format!("block #{k}"), r)
                        .value(Value::Str(
                            format!("decoded {out_start:#x}..{out_end:#x}, then invalid").into(),
                        ))
                        .damaged(Damage::corrupt(
                            Range::new(in_pos, in_pos),
                            format!("invalid data: {msg}"),
                        )),
                );
                if out_end > out_start {
                    self.core.out.damage(
                        cx,
                        Damage::corrupt(
                            Range::new(out_start, out_end),
                            format!(
                                "block #{k} has invalid data ({msg}); the bytes it decoded before that cannot be checked"
                            ),
                        ),
                    );
                }
                self.resync(
                    at + 4,
                    at,
                    format!("xz block #{k} has invalid data ({msg}) detected near {in_pos:#x}"),
                );
                None
            }
        }
    }

    fn tail(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::At(At::Tail {
            at,
            data_end,
            out_start,
            ..
        }) = &self.core.state
        else {
            return None;
        };
        let (at, data_end, out_start) = (*at, *data_end, *out_start);
        let pad = ((4 - (data_end - at) % 4) % 4) as usize;
        if !self.check_known {
            // The stream header is lost: the check's size is the one after
            // which the next block header or the index starts.
            let b = match self.need(data_end, pad + 32 + 1024) {
                Ok(b) => b,
                Err(Some(s)) => return Some(s),
                Err(None) => return Some(self.finish(cx)),
            };
            let fits = |size: usize| {
                let q = pad + size;
                match b.get(q..) {
                    None => false,
                    Some([]) => true,
                    Some(rest) if rest[0] == 0 => !matches!(parse_index(rest, None), Err(Some(_))),
                    Some(rest) => parse_block_header(rest).is_ok(),
                }
            };
            if let Some(id) = [4u8, 1, 10, 0].into_iter().find(|&id| fits(check_size(id))) {
                self.check_id = id;
                self.check_known = true;
                cx.note(format!(
                    "xz stream #{}: its header is lost; its blocks' check is taken to be {} from where the next block starts",
                    self.streams.max(1),
                    check_name(id)
                ));
            }
        }
        let csize = check_size(self.check_id);
        let b = match self.need(data_end, pad + csize) {
            Ok(b) => b,
            Err(Some(s)) => return Some(s),
            Err(None) => return Some(self.finish(cx)),
        };
        let State::At(At::Tail { header, check, .. }) =
            std::mem::replace(&mut self.core.state, State::Done)
        else {
            return None;
        };
        let check = check.into_type(self.check_id);
        self.unchecked |= csize == 0;
        let k = self.blocks;
        let out_end = self.core.out.pos();
        let size = out_end - out_start;
        let end = data_end + (pad + csize) as u64;
        self.core
            .out
            .src
            .end_block(end.min(self.core.data.available()));
        let hdr_end = at + header.len as u64;
        let mut kids = vec![
            Node::new("block header", "block header", Range::new(at, hdr_end)).text(format!(
                "filters {}{}{}",
                header
                    .filters
                    .iter()
                    .map(|(id, _)| filter_name(*id))
                    .collect::<Vec<_>>()
                    .join(", "),
                header
                    .csize
                    .map_or(String::new(), |c| format!(", compressed size {c}")),
                header
                    .usize
                    .map_or(String::new(), |u| format!(", uncompressed size {u}")),
            )),
            Node::new(
                "compressed data",
                "compressed data",
                Range::new(hdr_end, data_end),
            )
            .uint(data_end - hdr_end),
        ];
        if pad > 0 {
            kids.push(
                Node::new(
                    "padding",
                    "block padding",
                    Range::new(data_end, data_end + pad as u64),
                )
                .uint(pad as u64),
            );
        }
        let mut problems = Vec::new();
        if b.len() < pad + csize {
            let avail = self.core.data.available();
            let r = Range::new(at, avail);
            cx.push_node(
                Node::new("partial block", format!("block #{k}"), r)
                    .value(Value::Str(
                        format!(
                            "decoded {out_start:#x}..{out_end:#x} ({size} bytes), check cut off"
                        )
                        .into(),
                    ))
                    .with_children(kids)
                    .damaged(Damage::truncated(
                        Range::new(avail, avail),
                        "block check cut off",
                    )),
            );
            return Some(self.cut(
                cx,
                Range::new(avail, avail),
                &format!("file ends inside the padding or check of xz block #{k}"),
            ));
        }
        if b[..pad].iter().any(|&x| x != 0) {
            problems.push("non-zero block padding".to_string());
        }
        let stored = &b[pad..pad + csize];
        if csize > 0 {
            let mut n = Node::new("check", "check", Range::new(data_end + pad as u64, end))
                .value(Value::Bytes(stored.into()));
            if let Some(v) = check.value()
                && v != stored
            {
                problems.push(format!("{} check mismatch", check_name(self.check_id)));
                let r = n.range;
                n = n.damaged(Damage::corrupt(r, "check mismatch"));
            }
            kids.push(n);
        }
        if header.csize.is_some_and(|c| c != data_end - hdr_end) {
            problems.push("compressed size differs from its header".into());
        }
        if header.usize.is_some_and(|u| u != size) {
            problems.push("decoded size differs from its header".into());
        }
        let r = Range::new(at, end);
        let mut node = Node::new("block", format!("block #{k}"), r)
            .value(Value::Str(
                format!("decoded {out_start:#x}..{out_end:#x} ({size} bytes)").into(),
            ))
            .with_children(kids);
        if !problems.is_empty() {
            let reason = format!(
                "xz block #{k}: {} (decoded bytes kept)",
                problems.join("; ")
            );
            let d = Damage::corrupt(r, reason.clone());
            node = node.damaged(d.clone());
            cx.damage(d);
            // Only its check failed, after data that decoded without an
            // error: which of its bytes are wrong is not known. Sizes that
            // differ from its header say more is wrong.
            let only_check = problems.len() == 1 && problems[0].ends_with("check mismatch");
            let out = Range::new(out_start, out_end);
            self.core.out.damage(
                cx,
                if only_check {
                    Damage::unverified(
                        out,
                        format!(
                            "block #{k} fails its check; it decoded without an error, and which bytes are wrong is not known"
                        ),
                    )
                } else {
                    Damage::corrupt(out, format!("block #{k} fails its check"))
                },
            );
        }
        cx.push_node(node);
        if let Some(recs) = &mut self.records {
            let unpadded = data_end - at + csize as u64;
            recs.push((unpadded, size));
        }
        if problems.is_empty() {
            self.go(At::Block { at: end });
        } else {
            // Where a damaged block ended is not to be trusted: the next
            // block header is looked for from just after its start.
            self.resync(at + 4, end, format!("xz block #{k} fails its check"));
        }
        None
    }

    fn index(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let (avail, fin) = self.core.data.extent();
        let want = (avail - at.min(avail)).min(MAX_INDEX as u64) as usize;
        let data = self.core.data.clone();
        let Ok(b) = view(&*data, at, want, &mut self.core.scratch) else {
            return Some(self.finish(cx));
        };
        match parse_index(b, self.records.as_deref()) {
            Err(None) if !fin && b.len() < MAX_INDEX => Some(Step::Blocked),
            Err(None) => Some(self.cut(cx, Range::new(at, avail), "file ends inside the xz index")),
            Err(Some(why)) => {
                self.resync(at + 4, at, format!("xz index at {at:#x}: {why}"));
                None
            }
            Ok((len, count, mismatch)) => {
                let r = Range::new(at, at + len as u64);
                let mut n = Node::new("index", "index", r).text(format!("{count} records"));
                if let Some(m) = mismatch {
                    let d = Damage::corrupt(r, format!("xz index: {m}"));
                    n = n.damaged(d.clone());
                    cx.damage(d);
                }
                cx.push_node(n);
                self.go(At::Footer {
                    at: at + len as u64,
                    index: Some(r),
                });
                None
            }
        }
    }

    fn footer(&mut self, cx: &mut StepCx, at: u64, index: Option<Range>) -> Option<Step> {
        let b = match self.need(at, 12) {
            Ok(b) => b,
            Err(Some(s)) => return Some(s),
            Err(None) => return Some(self.finish(cx)),
        };
        let avail = self.core.data.available();
        if b.len() < 12 {
            return Some(self.cut(
                cx,
                Range::new(at, avail),
                "file ends inside the xz stream footer",
            ));
        }
        let crc_ok = crc32fast::hash(&b[4..10]) == u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if !crc_ok || b[10..12] != FOOTER_MAGIC {
            self.resync(at + 4, at, format!("no valid xz stream footer at {at:#x}"));
            return None;
        }
        let backward = (u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as u64 + 1) * 4;
        let mut problems = Vec::new();
        if [b[8], b[9]] != self.flags {
            problems.push("stream flags differ from the header's".to_string());
        }
        if let Some(ir) = index
            && ir.len() != backward
        {
            problems.push(format!(
                "backward size {backward} but the index is {} bytes",
                ir.len()
            ));
        }
        let r = Range::new(at, at + 12);
        let mut n = Node::new(
            "stream footer",
            format!("stream footer #{}", self.streams),
            r,
        )
        .text(format!("index size {backward}"));
        if problems.is_empty() {
            self.checked_streams += 1;
        } else {
            let d = Damage::corrupt(r, format!("xz stream footer: {}", problems.join("; ")));
            n = n.damaged(d.clone());
            cx.damage(d);
        }
        cx.push_node(n);
        self.after_stream(at + 12);
        None
    }
}

/// Parses an index at the start of `b`: (its length, its record count, a
/// disagreement with the blocks seen). `Err(None)`: `b` ends first.
type IndexResult = Result<(usize, u64, Option<String>), Option<String>>;

fn parse_index(b: &[u8], seen: Option<&[(u64, u64)]>) -> IndexResult {
    if b.is_empty() {
        return Err(None);
    }
    if b[0] != 0 {
        return Err(Some("index indicator is not 0".into()));
    }
    let mut p = 1;
    let count = match vli(b, &mut p) {
        Some(c) => c,
        None if p >= b.len() => return Err(None),
        None => return Err(Some("invalid record count".into())),
    };
    let mut mismatch = None;
    if let Some(s) = seen
        && s.len() as u64 != count
    {
        mismatch = Some(format!("{count} records but {} blocks", s.len()));
    }
    for i in 0..count {
        if p >= b.len() {
            return Err(None);
        }
        let short = |p: usize| {
            if p >= b.len() {
                None
            } else {
                Some("invalid record".to_string())
            }
        };
        let unpadded = vli(b, &mut p).ok_or_else(|| short(p))?;
        let usize = vli(b, &mut p).ok_or_else(|| short(p))?;
        if mismatch.is_none()
            && let Some(s) = seen
            && s.get(i as usize) != Some(&(unpadded, usize))
        {
            mismatch = Some(format!("record #{} does not match block #{}", i + 1, i + 1));
        }
    }
    while p % 4 != 0 {
        match b.get(p) {
            None => return Err(None),
            Some(0) => p += 1,
            Some(_) => return Err(Some("non-zero index padding".into())),
        }
    }
    let Some(c) = b.get(p..p + 4) else {
        return Err(None);
    };
    if crc32fast::hash(&b[..p]) != u32::from_le_bytes([c[0], c[1], c[2], c[3]]) {
        return Err(Some("index CRC32 mismatch".into()));
    }
    Ok((p + 4, count, mismatch))
}

impl BlockFormat for XzParser {
    type At = At;
    const UNIT: &'static str = "block";
    const TRAILER: Option<Trailer> = Some(Trailer {
        first_read: 1 << 20,
        head: &MAGIC,
        head_len: MAGIC.len(),
        padding: "stream padding",
        align: 4,
        garbage: "bytes after the xz stream are not xz data",
    });

    fn core(&mut self) -> &mut Core<At> {
        &mut self.core
    }

    fn step_at(&mut self, cx: &mut StepCx) -> Option<Step> {
        match &self.core.state {
            State::At(At::StreamHeader { at }) => self.stream_header(cx, *at),
            State::At(At::Block { at }) => self.block(cx, *at),
            State::At(At::Body { .. }) => self.body(cx),
            State::At(At::Tail { .. }) => self.tail(cx),
            State::At(At::Index { at }) => self.index(cx, *at),
            State::At(At::Footer { at, index }) => self.footer(cx, *at, *index),
            _ => None,
        }
    }

    /// The next stream header, block header whose CRC32 matches, or
    /// stream footer (or the index before it), at 4-byte alignment.
    fn find_next(&mut self, cx: &mut StepCx, from: u64, lost: u64) -> Scan<At> {
        const WIN: usize = 1 << 20;
        const MARGIN: usize = 1024 + 12;
        let (avail, fin) = self.core.data.extent();
        let data = self.core.data.clone();
        let align = self.stream_start % 4;
        let mut pos = from + (4 + align - from % 4) % 4;
        let mut scanned = 0u64;
        while pos < avail && scanned < cx.budget.max(1 << 20) {
            let Ok(w) = view(&*data, pos, WIN + MARGIN, &mut self.core.scratch) else {
                break;
            };
            let w = w.to_vec();
            let limit = if w.len() == WIN + MARGIN || fin {
                w.len().min(WIN)
            } else {
                w.len().saturating_sub(MARGIN)
            };
            let mut i = 0;
            while i < limit {
                let b = &w[i..];
                let p = pos + i as u64;
                if b.len() >= 12
                    && b.starts_with(&MAGIC)
                    && crc32fast::hash(&b[6..8]) == u32::from_le_bytes([b[8], b[9], b[10], b[11]])
                {
                    return Scan::Found {
                        to: p,
                        next: At::StreamHeader { at: p },
                    };
                }
                if b[0] != 0 && b.len() >= 2 && b[1] & 0x3c == 0 && parse_block_header(b).is_ok() {
                    return Scan::Found {
                        to: p,
                        next: At::Block { at: p },
                    };
                }
                if b.len() >= 12
                    && b[10..12] == FOOTER_MAGIC
                    && crc32fast::hash(&b[4..10]) == u32::from_le_bytes([b[0], b[1], b[2], b[3]])
                {
                    let backward = (u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as u64 + 1) * 4;
                    let mut next = At::Footer { at: p, index: None };
                    if let Some(ix) = p.checked_sub(backward)
                        && ix >= lost
                    {
                        let mut ib = Vec::new();
                        if let Ok(ibytes) = view(&*data, ix, backward as usize, &mut ib)
                            && parse_index(ibytes, None).is_ok()
                        {
                            next = At::Index { at: ix };
                        }
                    }
                    let to = match next {
                        At::Index { at } => at,
                        _ => p,
                    };
                    return Scan::Found { to, next };
                }
                i += 4;
            }
            if limit == 0 {
                break;
            }
            pos += limit as u64;
            pos += (4 + align - pos % 4) % 4;
            scanned += limit as u64;
        }
        if pos < avail && (fin || avail - pos > MARGIN as u64) {
            return Scan::Further(pos);
        }
        if !fin {
            return Scan::Wait(pos);
        }
        Scan::End
    }

    fn stream_at(bytes: &[u8], at: u64) -> Option<At> {
        bytes.starts_with(&MAGIC).then_some(At::StreamHeader { at })
    }

    /// Every block's check and every stream's index and footer held (a
    /// parse that found anything else recorded damage, which stops it).
    fn wrap_up(&mut self, cx: &mut StepCx) {
        if !self.unchecked && self.checked_streams > 0 {
            cx.proved();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::{BlockSource, MemSource};
    use crate::parsers::compress::decoded::{check_random_reads, decode_block, fixture};

    #[test]
    fn blocks_are_checkpoints() {
        let file = fixture("nested.tar.xz");
        let mut reference = Vec::new();
        std::io::Read::read_to_end(
            &mut liblzma::read::XzDecoder::new(&file[..]),
            &mut reference,
        )
        .unwrap();
        let input: Data = Arc::new(MemSource::new(file.clone()));
        let src = BlockSource::new(input, Box::new(Codec), "test");
        let mut at = 12u64;
        let mut blocks = 0;
        while file[at as usize] != 0 {
            let end = decode_block(&src, at, [0, 0]);
            at = end.next_multiple_of(4) + 8;
            blocks += 1;
        }
        src.finish();
        assert!(blocks >= 7);
        check_random_reads(&src, &reference);
    }

    #[test]
    fn crc64_check_value() {
        assert_eq!(crc64_update(0, b"123456789"), 0x995d_c9bb_df19_39fa);
    }

    #[test]
    fn vli_forms() {
        let mut p = 0;
        assert_eq!(vli(&[0x80, 0x01], &mut p), Some(128));
        let mut p = 0;
        assert_eq!(vli(&[0x80, 0x00], &mut p), None);
    }
}
