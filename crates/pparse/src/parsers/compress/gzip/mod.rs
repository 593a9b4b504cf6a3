//! gzip (RFC 1952): members, recovery, and the decoded stream.
//!
//! The decoded bytes of all members form one child extraction (as `gunzip`
//! writes one file). Recovery rules, from measuring real damage:
//!
//! * a CRC or size mismatch never discards output: it is reported, the bytes
//!   stay;
//! * a truncated member keeps everything decodable from the bytes that exist;
//! * after a hard deflate error the parser scans forward for the next member
//!   header that parses *and* decodes, and reports the compressed span it
//!   skipped and where in the decoded stream bytes are missing;
//! * trailing zeros are padding; any other trailing bytes are reported.

mod locate;

use std::sync::Arc;

use memchr::memmem;

use crate::data::inflate::members::MembersAhead;
use crate::data::inflate::resync;
use crate::data::inflate::zlib::{Code, RawInflate};
use crate::data::{ChunkCache, Data, InflateEvent, InflateSource, Inflater, Range, Source, view};
use crate::extraction::{EntryKind, ExtId};
use crate::name::{Name, escape_bytes};
use crate::node::{Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{Background, ChildSpec, Format, Parser, Ready, Sniff, Step, StepCx};
use crate::parsers::compress::decoded::derived_name;
use crate::status::Damage;
use locate::{Chain, Locate, Located, Outcome};

/// gzip: members, their headers, decoded streams.
pub(crate) static FORMAT: Format = Format {
    name: "gzip",
    extent: Some(|d: &Data| member_end(d, 0)),
    sniff,
    parse: |data, _| Box::new(GzipParser::new(data.clone())),
    load,
    offers: Offers::NONE,
};

const MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];
/// Longest FNAME or FCOMMENT accepted; longer means a damaged header.
const MAX_STRING: usize = 64 * 1024;
/// Compressed bytes left in the file from which a member's decoding runs
/// on the engine's helper thread, once the member has gone on for
/// [`OFFLOAD_AFTER`] (a small member decodes faster than it is handed off:
/// a file of many, bgzip's of 64 KiB, spent an eighth of its time in the
/// hand-offs).
const OFFLOAD_INPUT: u64 = 1 << 20;
/// Compressed bytes of a member decoded on the engine's thread before the
/// rest may be handed off.
const OFFLOAD_AFTER: u64 = 256 << 10;
/// How many times the cache's budget a stream decoded on the helper
/// thread may run ahead of the parsers reading it (32 MiB with the
/// default 16 MiB cache): the parsers work in bursts (a jar's entries, a
/// run of small `.gz` files) while the decoder runs evenly, and a lead
/// that covers a burst keeps both busy (16 MiB slowed the 10 GB tar.gz
/// of `peers/index.sh` by a fifth; 32, 64 and 128 MiB took the same
/// time).
/// Those bytes are kept out of the cache (see
/// `data::inflate::AHEAD_WINDOW`).
const LEAD: u64 = 2;
/// Output of one run on the helper thread, after which the new bytes are
/// published.
const RUN: u64 = 1 << 20;
/// Output of one piece of handed-off work, after which the parser reports
/// progress and the decode budget is counted.
const BACKGROUND_BUDGET: u64 = 256 << 20;
/// Input bytes the deflate block finder scans in one step (it reads a
/// few MB/s: every bit position is a candidate).
const SCAN_STEP: u64 = 256 * 1024;
/// Output a resync candidate must decode without error to be accepted.
const TRIAL_OUTPUT: usize = 64 * 1024;

const FTEXT: u8 = 1;
const FHCRC: u8 = 2;
const FEXTRA: u8 = 4;
const FNAME: u8 = 8;
const FCOMMENT: u8 = 16;

/// The full magic, or a `.gz` name with the first two magic bytes (a
/// damaged method or flags byte is then reported and resynchronised).
fn sniff(s: &Sniff) -> bool {
    s.head.starts_with(&MAGIC)
        || (s.head.starts_with(&MAGIC[..2])
            && (s.name.ends_with(".gz") || s.name.ends_with(".tgz")))
}

/// A parsed member header; offsets are relative to the member start.
#[derive(Debug, Clone)]
struct Header {
    len: usize,
    flags: u8,
    mtime: u32,
    xfl: u8,
    os: u8,
    extra: Option<(usize, usize)>,
    name: Option<(usize, usize)>,
    comment: Option<(usize, usize)>,
    hcrc: Option<(u16, u16)>,
}

enum HeaderError {
    /// The bytes end inside the header.
    Short,
    Bad(String),
}

fn parse_header(b: &[u8]) -> Result<Header, HeaderError> {
    if b.len() < 10 {
        if !MAGIC.starts_with(&b[..b.len().min(3)]) {
            return Err(HeaderError::Bad("not a gzip member header".into()));
        }
        return Err(HeaderError::Short);
    }
    if b[0] != 0x1f || b[1] != 0x8b {
        return Err(HeaderError::Bad(format!(
            "bad magic {:02x} {:02x} (expected 1f 8b)",
            b[0], b[1]
        )));
    }
    if b[2] != 8 {
        return Err(HeaderError::Bad(format!(
            "unknown compression method {} (only 8, deflate, exists)",
            b[2]
        )));
    }
    let flags = b[3];
    if flags & 0xe0 != 0 {
        return Err(HeaderError::Bad(format!(
            "reserved flag bits set ({flags:#04x})"
        )));
    }
    let mut h = Header {
        len: 10,
        flags,
        mtime: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        xfl: b[8],
        os: b[9],
        extra: None,
        name: None,
        comment: None,
        hcrc: None,
    };
    let mut p = 10;
    if flags & FEXTRA != 0 {
        if b.len() < p + 2 {
            return Err(HeaderError::Short);
        }
        let xlen = u16::from_le_bytes([b[p], b[p + 1]]) as usize;
        p += 2;
        if b.len() < p + xlen {
            return Err(HeaderError::Short);
        }
        h.extra = Some((p, p + xlen));
        p += xlen;
    }
    for (flag, slot, what) in [(FNAME, 0, "file name"), (FCOMMENT, 1, "comment")] {
        if flags & flag == 0 {
            continue;
        }
        let limit = (p + MAX_STRING).min(b.len());
        match memchr::memchr(0, &b[p..limit]) {
            Some(n) => {
                let span = Some((p, p + n));
                if slot == 0 {
                    h.name = span;
                } else {
                    h.comment = span;
                }
                p += n + 1;
            }
            None if limit == b.len() && b.len() < p + MAX_STRING => return Err(HeaderError::Short),
            None => {
                return Err(HeaderError::Bad(format!(
                    "{what} not terminated within {MAX_STRING} bytes"
                )));
            }
        }
    }
    if flags & FHCRC != 0 {
        if b.len() < p + 2 {
            return Err(HeaderError::Short);
        }
        let stored = u16::from_le_bytes([b[p], b[p + 1]]);
        let computed = (crc32fast::hash(&b[..p]) & 0xffff) as u16;
        h.hcrc = Some((stored, computed));
        p += 2;
    }
    h.len = p;
    Ok(h)
}

/// What is read of a member header first (see [`HEADER_WINDOW`]).
const HEADER_FIRST: usize = 512;
/// Longest possible header, so one read always covers it.
const HEADER_WINDOW: usize = 10 + 2 + 65535 + 2 * (MAX_STRING + 1) + 2;

enum State {
    /// A member header is expected at `at`.
    Header {
        at: u64,
    },
    Body {
        node: usize,
        start: u64,
        out_start: u64,
        /// `None` while it decodes on the engine's helper thread.
        inflater: Option<Box<Inflater>>,
        /// Decoding resumed after damage inside this member: its CRC and
        /// size cannot be checked.
        recovered: bool,
    },
    Trailer {
        node: usize,
        start: u64,
        at: u64,
        crc: u32,
        size: u64,
        out_start: u64,
        recovered: bool,
    },
    /// A member that decoded without an error failed its check: looking
    /// for where the damage lies (see `locate`) before its decoded bytes
    /// `out` are reported unverified.
    Locate {
        member: usize,
        why: String,
        out: (u64, u64),
        search: Box<Locate>,
        next: u64,
    },
    /// After a member: another member, zero padding (from `pad`), or garbage.
    After {
        at: u64,
        pad: u64,
    },
    /// After invalid deflate data detected at `lost` in the member at
    /// `start`: looking, from input bit `bit`, for a deflate block to
    /// resume at, before the next valid member (`member`, once found;
    /// members were looked for up to `members_to`).
    Blocks {
        bit: u64,
        lost: u64,
        start: u64,
        why: String,
        member: Option<u64>,
        members_to: u64,
    },
    /// Looking for the next valid member after damage that was detected at
    /// `lost`; the bytes from `suspect` on cannot be trusted (the damaged
    /// member's start, as its CRC can no longer be checked).
    Resync {
        from: u64,
        lost: u64,
        suspect: u64,
        why: String,
    },
    Done,
}

struct GzipParser {
    data: Data,
    out: Option<Arc<InflateSource>>,
    child: Option<ExtId>,
    members: usize,
    /// Members whose trailer's CRC-32 and size matched what they decoded to.
    checked: usize,
    /// The last stream ended was one recovered after damage: its end is
    /// a final block found by decoding from a guessed start, not a trailer
    /// that checks out, and may be false.
    after_recovered: bool,
    state: State,
    scratch: Vec<u8>,
    /// Name of the first decoded stream, which recovered ones are named after.
    stream_name: String,
    /// The walk along a tar header chain in the decoded stream, while
    /// one can locate damage (see `locate`): until a member fails its
    /// check or decoding resumes after damage.
    chain: Option<Chain>,
    /// A run of the member's decoding on the engine's helper thread: the
    /// inflater, what the run ended with, and what it had produced before.
    running: Option<Background<(Box<Inflater>, InflateEvent, u64)>>,
    /// Workers decoding a BGZF file's members ahead, once the first
    /// member header says it is one.
    members_ahead: Option<MembersAhead>,
    members_tried: bool,
    /// The file's pages before this offset were let go of.
    released: u64,
}

/// How far a scan for the next member got.
enum MemberScan {
    /// A member that parses and decodes starts here.
    Found(u64),
    /// None before this offset; the scan budget was used.
    Scanned(u64),
    /// Bytes are missing at this offset and may come.
    NeedMore(u64),
    /// None to the end of the input.
    Nothing,
}

impl GzipParser {
    fn new(data: Data) -> GzipParser {
        GzipParser {
            data,
            out: None,
            child: None,
            members: 0,
            checked: 0,
            after_recovered: false,
            state: State::Header { at: 0 },
            scratch: Vec::new(),
            stream_name: String::new(),
            chain: Some(Chain::START),
            running: None,
            members_ahead: None,
            members_tried: false,
            released: 0,
        }
    }

    fn out_pos(&self) -> u64 {
        self.out.as_ref().map_or(0, |o| o.available())
    }

    fn child_damage(&self, cx: &mut StepCx, d: Damage) {
        if let Some(c) = self.child {
            cx.child_damage(c, d);
        }
    }

    fn finish(&mut self, cx: &mut StepCx) -> Step {
        if let Some(o) = &self.out {
            o.finish();
        }
        // Every member decoded and matched its trailer: the CRCs cover the
        // file's every byte but headers and padding, which a parse that
        // found no damage read as valid.
        if self.members > 0 && self.checked == self.members {
            cx.proved();
        }
        let len = self.data.available();
        cx.progress(len, Some(len));
        self.state = State::Done;
        Step::Done
    }

    /// Creates the decoded-stream child on the first good member.
    fn ensure_child(&mut self, cx: &mut StepCx, fname: Option<&[u8]>, origin: u64) {
        if self.out.is_some() {
            return;
        }
        let out = InflateSource::new(self.data.clone(), "gzip stream");
        let name = match fname {
            Some(n) if !n.is_empty() => Name::new(n.to_vec()),
            _ => Name::new(derived_name(cx.name, SUFFIXES)),
        };
        self.stream_name = name.display();
        let mut spec = ChildSpec::new(name, EntryKind::Stream, out.clone() as Data);
        spec.origin = Some(Range::new(origin, self.data.available().max(origin)));
        self.child = Some(cx.add_child(spec));
        self.out = Some(out);
    }

    /// Decodes on from the deflate block at input bit `bit`, found after
    /// damage at `lost` in the member at `start`, into a new child: the
    /// stream recovered after the damage, parsed as the first stream was.
    fn recover_at(&mut self, cx: &mut StepCx, bit: u64, lost: u64, start: u64) {
        let byte = bit / 8;
        if let Some(o) = &self.out {
            // The stream before the damage ends there.
            o.finish();
        }
        let out = InflateSource::new(self.data.clone(), "recovered deflate stream");
        let inflater = Inflater::recover(out.clone(), bit);
        self.chain = None;
        let name = format!("{}~recovered@{byte:#x}", self.stream_name);
        let mut spec = ChildSpec::new(Name::new(name), EntryKind::Stream, out.clone() as Data);
        spec.origin = Some(Range::new(byte, self.data.available().max(byte)));
        spec.like = self.child;
        spec.damage.push(Damage::unknown(
            Range::new(0, 0),
            format!(
                "recovered after damage at {lost:#x}: decoding resumed at bit {} of byte {byte:#x}; what the stream held before is lost, and bytes that copy the 32 KiB before this point are unknown",
                bit % 8
            ),
        ));
        self.child = Some(cx.add_child(spec));
        self.out = Some(out);
        let node = cx.push_node(
            Node::new("recovered", "decoding resumed", Range::new(byte, byte))
                .text(format!("at bit {} of byte {byte:#x}", bit % 8)),
        );
        self.state = State::Body {
            node,
            start,
            out_start: 0,
            inflater: Some(Box::new(inflater)),
            recovered: true,
        };
    }

    /// Looks for the next member that parses and decodes, from `from`,
    /// scanning at most `budget` bytes.
    fn next_member(&mut self, from: u64, budget: u64) -> MemberScan {
        let (avail, fin) = self.data.extent();
        let data = self.data.clone();
        let finder = memmem::Finder::new(&MAGIC);
        let mut pos = from;
        let mut scanned = 0u64;
        while pos + 3 <= avail && scanned < budget {
            let window = match view(&*data, pos, 1 << 20, &mut self.scratch) {
                Ok(w) => w.to_vec(),
                Err(_) => break,
            };
            if window.len() < 3 {
                break;
            }
            let mut search_from = 0;
            while let Some(i) = finder.find(&window[search_from..]) {
                let cand = pos + (search_from + i) as u64;
                match self.try_member(cand) {
                    Trial::Good => return MemberScan::Found(cand),
                    Trial::NeedMore => return MemberScan::NeedMore(cand),
                    Trial::Bad => search_from += i + 1,
                }
            }
            let advance = (window.len() as u64).saturating_sub(2).max(1);
            pos += advance;
            scanned += advance;
        }
        if pos + 3 <= avail {
            MemberScan::Scanned(pos)
        } else if !fin {
            MemberScan::NeedMore(pos)
        } else {
            MemberScan::Nothing
        }
    }

    fn header(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let (avail, fin) = self.data.extent();
        let data = self.data.clone();
        // Nearly every header fits in a few bytes: the longest one it may
        // be is read only when those are too few, not at every member (a
        // bgzip file has one every 64 KiB).
        let short = match view(&*data, at, HEADER_FIRST, &mut self.scratch) {
            Ok(b) => b.len() == HEADER_FIRST && matches!(parse_header(b), Err(HeaderError::Short)),
            Err(_) => true,
        };
        let len = if short { HEADER_WINDOW } else { HEADER_FIRST };
        let bytes = match view(&*data, at, len, &mut self.scratch) {
            Ok(b) => b,
            Err(e) => {
                cx.damage(Damage::corrupt(
                    Range::new(at, avail),
                    format!("read error: {e}"),
                ));
                return Some(self.finish(cx));
            }
        };
        match parse_header(bytes) {
            Err(HeaderError::Short) if !fin => Some(Step::Blocked),
            Err(HeaderError::Short) => {
                let r = Range::new(at, avail);
                cx.push_node(
                    Node::new("partial header", format!("member #{}", self.members + 1), r)
                        .damaged(Damage::truncated(r, "gzip member header is cut off")),
                );
                cx.damage(Damage::truncated(
                    r,
                    "file ends inside a gzip member header",
                ));
                let out = self.out_pos();
                self.child_damage(
                    cx,
                    Damage::truncated(Range::new(out, out), "gzip input ends here"),
                );
                Some(self.finish(cx))
            }
            Err(HeaderError::Bad(why)) => {
                self.state = State::Resync {
                    from: at + 1,
                    lost: at,
                    suspect: at,
                    why: format!("bad gzip member header: {why}"),
                };
                None
            }
            Ok(h) => {
                let fname = h.name.map(|(s, e)| bytes[s..e].to_vec());
                if let Some((stored, computed)) = h.hcrc
                    && stored != computed
                {
                    cx.damage(Damage::corrupt(
                        Range::new(at + h.len as u64 - 2, at + h.len as u64),
                        format!(
                            "header CRC16 mismatch: stored {stored:#06x}, computed {computed:#06x}"
                        ),
                    ));
                }
                self.ensure_child(cx, fname.as_deref(), at);
                self.members += 1;
                let node = cx.push_node(
                    Node::new(
                        "member",
                        format!("member #{}", self.members),
                        Range::new(at, at + h.len as u64),
                    )
                    .lazy(),
                );
                let out = self.out.clone().expect("child created above");
                let out_start = out.available();
                // A BGZF file's members are decoded ahead on worker
                // threads (`--threads`); what they made is used only
                // where this member starts.
                // From the second member: a file of one member (thousands
                // of small `.gz` in a tar) has nothing to decode ahead.
                if self.members >= 2 && !std::mem::replace(&mut self.members_tried, true) {
                    self.members_ahead = MembersAhead::start(&self.data, at);
                }
                let made = self.members_ahead.as_mut().and_then(|m| m.take(at));
                self.state = State::Body {
                    node,
                    start: at,
                    out_start,
                    inflater: Some(Box::new(Inflater::new_member(out, at + h.len as u64, made))),
                    recovered: false,
                };
                None
            }
        }
    }

    fn body(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::Body {
            node,
            start,
            out_start,
            inflater,
            recovered,
        } = &mut self.state
        else {
            return None;
        };
        let (node, start, out_start, recovered) = (*node, *start, *out_start, *recovered);
        let offloaded = inflater.is_none();
        let (mut inflater, event, before) = match inflater.take() {
            Some(i) => {
                if cx.decode_left == 0 {
                    let at = out_start + i.produced();
                    *inflater = Some(i);
                    let d = cx.budget_damage(at);
                    self.child_damage(cx, d);
                    return Some(self.finish(cx));
                }
                let left = self.data.available().saturating_sub(i.input_pos());
                let long = i.input_pos().saturating_sub(start) >= OFFLOAD_AFTER;
                if long && left >= OFFLOAD_INPUT && self.data.is_final() && cx.depth == 0 {
                    let budget = BACKGROUND_BUDGET.min(cx.decode_left);
                    let lead = LEAD * ChunkCache::global().budget() as u64;
                    // A long stream decodes on the helper thread while the
                    // engine parses what it holds; this parser is stepped
                    // again when the run is done.
                    let feeds = i.source().clone();
                    let mut i = i;
                    self.running = Some(cx.background(feeds.clone(), move |ctl| {
                        let before = i.produced();
                        loop {
                            let event = i.run(RUN.min(budget - (i.produced() - before)));
                            ctl.ping();
                            let more = matches!(event, InflateEvent::Progress)
                                && i.produced() - before < budget;
                            // A closed session stops its decoder within a run.
                            if !more || ctl.stopped() {
                                return (i, event, before);
                            }
                            // Ahead of the parsers that read the stream by
                            // LEAD: wait for them (the cache holds the lead),
                            // and so do the workers decoding ahead.
                            if feeds.lead() >= lead {
                                i.hold_workers(true);
                            }
                            while feeds.lead() >= lead {
                                if ctl.stopped() {
                                    return (i, event, before);
                                }
                                std::thread::sleep(std::time::Duration::from_micros(200));
                            }
                            i.hold_workers(false);
                        }
                    }));
                    return Some(Step::Blocked);
                }
                let mut i = i;
                let before = i.produced();
                let event = i.run(cx.budget.min(cx.decode_left));
                (i, event, before)
            }
            None => match self.running.as_ref().map(Background::poll) {
                Some(Ready::Done(done)) => {
                    self.running = None;
                    done
                }
                Some(Ready::Running) => return Some(Step::Blocked),
                // The decoder panicked (or was never handed off): nothing
                // after what it published can be vouched for.
                Some(Ready::Lost) | None => {
                    self.running = None;
                    let at = self.out.as_ref().map_or(0, |o| o.available());
                    self.child_damage(
                        cx,
                        Damage::truncated(Range::new(at, at), "decoding stopped: internal error"),
                    );
                    return Some(self.finish(cx));
                }
            },
        };
        cx.decoded(inflater.produced() - before);
        let unknown = inflater.take_unknown();
        if let Some(c) = self.child {
            for (s, e) in unknown {
                cx.child_damage(
                    c,
                    Damage::unknown(
                        Range::new(out_start + s, out_start + e),
                        "unknown bytes: they copy the 32 KiB of the stream lost before the resync point",
                    ),
                );
            }
        }
        let State::Body { inflater: slot, .. } = &mut self.state else {
            return None;
        };
        let inflater = slot.insert(inflater);
        let total = self.data.available();
        cx.progress(inflater.input_pos(), Some(total));
        match event {
            // After a run on the helper thread, the next starts at once
            // while the parsers behind have little left to read (the
            // decoder stays a run or two ahead of them, within the cache).
            InflateEvent::Progress if offloaded => None,
            InflateEvent::Progress => Some(Step::Yield),
            InflateEvent::NeedInput => Some(Step::Blocked),
            InflateEvent::End { in_end } => {
                let crc = inflater.crc();
                let size = inflater.produced();
                self.state = State::Trailer {
                    node,
                    start,
                    at: in_end,
                    crc,
                    size,
                    out_start,
                    recovered,
                };
                None
            }
            InflateEvent::Truncated { in_end } => {
                let out_end = out_start + inflater.produced();
                let m = self.members;
                self.cut_off(
                    cx,
                    node,
                    Range::new(in_end, in_end),
                    out_end,
                    [
                        format!("decoded {out_start:#x}..{out_end:#x}, cut off"),
                        "deflate data ends before the end of the stream".into(),
                        format!("gzip member #{m} is cut off inside its deflate data"),
                        format!("decoded stream ends early (member #{m} cut off)"),
                    ],
                );
                Some(self.finish(cx))
            }
            InflateEvent::Error { at, message } | InflateEvent::Overflow { at, message } => {
                let out_end = out_start + inflater.produced();
                let suspect = out_start + inflater.suspect_from();
                let m = self.members;
                let msg = message.clone();
                cx.edit_node(node, move |n| {
                    n.kind = "partial member";
                    n.range.end = at;
                    n.value = Some(Value::Str(
                        format!("decoded {out_start:#x}..{out_end:#x}, then invalid").into(),
                    ));
                    n.damage = Some(Box::new(Damage::corrupt(
                        Range::new(at, at),
                        format!("invalid deflate data: {msg}"),
                    )));
                });
                // The bytes decoded since the block before the damage was
                // noticed decoded without an error, but the damage may begin
                // among them: unverified (written, as tar writes them, and
                // flagged). Bytes are lost at the end: corrupt there.
                if suspect < out_end {
                    self.child_damage(
                        cx,
                        Damage::unverified(
                            Range::new(suspect, out_end),
                            format!(
                                "member #{m} has invalid deflate data ({message}) after these bytes; they decoded without an error, but the damage may begin among them"
                            ),
                        ),
                    );
                }
                self.child_damage(
                    cx,
                    Damage::corrupt(
                        Range::new(out_end, out_end),
                        format!(
                            "bytes lost here: member #{m} has invalid deflate data ({message})"
                        ),
                    ),
                );
                let resume = at.saturating_sub(16).max(start + 1);
                self.state = State::Blocks {
                    bit: resume * 8,
                    lost: at,
                    start,
                    why: format!(
                        "member #{m} has invalid deflate data ({message}) detected at {at:#x}; its bytes before that cannot be checked"
                    ),
                    member: None,
                    members_to: resume,
                };
                None
            }
        }
    }

    fn trailer(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::Trailer {
            node,
            start,
            at,
            crc,
            size,
            out_start,
            recovered,
        } = self.state
        else {
            return None;
        };
        let mut t = [0u8; 8];
        // "Final" first: read after the bytes, it could say the input is
        // complete when the read missed its last bytes.
        let fin = self.data.is_final();
        let n = self.data.read_at(at, &mut t).unwrap_or(0);
        let m = self.members;
        let out_end = out_start + size;
        if n < 8 {
            if !fin {
                return Some(Step::Blocked);
            }
            self.cut_off(
                cx,
                node,
                Range::new(at, at + n as u64),
                out_end,
                [
                    format!("decoded {out_start:#x}..{out_end:#x}, trailer cut off"),
                    "CRC-32 and size trailer cut off".into(),
                    format!("gzip member #{m} trailer is cut off ({n} of 8 bytes)"),
                    format!("member #{m} decoded fully but its CRC could not be checked"),
                ],
            );
            return Some(self.finish(cx));
        }
        // The file's pages behind this member are done with. A member's
        // decoder lets go of what it passed every `RELEASE_STEP`, which
        // most members never reach: a file of many (bgzip's) stayed resident.
        if (at + 8).saturating_sub(self.released) >= crate::data::RELEASE_STEP {
            self.data.release(self.released, at + 8);
            self.released = at + 8;
        }
        let stored_crc = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        let stored_size = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
        let tr = Range::new(at, at + 8);
        self.after_recovered = recovered;
        if recovered {
            // The CRC and size cover the whole member, whose start is lost.
            cx.edit_node(node, move |nd| {
                nd.range.end = at + 8;
                nd.value = Some(Value::Str(
                    format!("decoded {out_start:#x}..{out_end:#x} ({size} bytes) after damage; CRC-32 and size not checkable").into(),
                ));
            });
            self.state = State::After {
                at: at + 8,
                pad: at + 8,
            };
            return None;
        }
        let mut problems = Vec::new();
        if stored_crc != crc {
            problems.push(format!(
                "CRC-32 mismatch: stored {stored_crc:#010x}, computed {crc:#010x}"
            ));
        }
        if stored_size != size as u32 {
            problems.push(format!(
                "size mismatch: stored {stored_size} (mod 2^32), decoded {size}"
            ));
        }
        if problems.is_empty() {
            self.checked += 1;
        }
        let damage = (!problems.is_empty()).then(|| Damage::corrupt(tr, problems.join("; ")));
        let why = damage.as_ref().map(|d| d.reason.clone());
        if let Some(d) = &damage {
            // The damage is somewhere in the member; the check only says so.
            cx.damage(Damage::corrupt(
                Range::new(start, at + 8),
                format!("gzip member #{m}: {} (decoded bytes kept)", d.reason),
            ));
        }
        cx.edit_node(node, move |nd| {
            nd.range = Range::new(start, at + 8);
            nd.value = Some(Value::Decoded(out_start, out_end));
            nd.damage = damage.map(Box::new);
        });
        self.state = State::After {
            at: at + 8,
            pad: at + 8,
        };
        // No damage: nothing more to do (`None`: the next state runs).
        let why = why?;
        // Its data decoded without an error: which of its bytes are wrong
        // is not known until the damage is located.
        let shift = (size as u32).wrapping_sub(stored_size) as i32 as i64;
        let search = match (self.chain.take(), &self.out) {
            (Some(chain), Some(o)) => Locate::new(
                o.clone(),
                self.data.clone(),
                (out_start, out_end),
                shift,
                chain,
            ),
            _ => None,
        };
        match search {
            Some(search) => {
                self.state = State::Locate {
                    member: m,
                    why,
                    out: (out_start, out_end),
                    search: Box::new(search),
                    next: at + 8,
                }
            }
            None => self.soft_damage(cx, m, &why, (out_start, out_end), None),
        }
        None
    }

    /// Reports a member cut off at input `cut` after decoding to
    /// `out_end`: `why` is its node's value and reason, the file's
    /// reason and the decoded stream's.
    fn cut_off(&self, cx: &mut StepCx, node: usize, cut: Range, out_end: u64, why: [String; 4]) {
        let [value, node_why, file_why, stream_why] = why;
        cx.edit_node(node, move |n| {
            n.kind = "partial member";
            n.range.end = cut.end;
            n.value = Some(Value::Str(value.into()));
            n.damage = Some(Box::new(Damage::truncated(cut, node_why)));
        });
        cx.damage(Damage::truncated(cut, file_why));
        self.child_damage(
            cx,
            Damage::truncated(Range::new(out_end, out_end), stream_why),
        );
    }

    /// Steps the search for where a member's damage lies.
    fn locate(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::Locate {
            member,
            why,
            out,
            search,
            next,
        } = &mut self.state
        else {
            return None;
        };
        let found = match search.step(cx.budget) {
            Outcome::Working => return Some(Step::Yield),
            Outcome::Done(found) => found,
        };
        let (m, why, out, next) = (*member, std::mem::take(why), *out, *next);
        self.state = State::After {
            at: next,
            pad: next,
        };
        self.soft_damage(cx, m, &why, out, found);
        None
    }

    /// Reports member `m`'s decoded bytes `out` unverified after its check
    /// failed (`why`): all of them, or where `found` says the damage lies
    /// and the bytes that copy from there.
    fn soft_damage(
        &self,
        cx: &mut StepCx,
        m: usize,
        why: &str,
        (out_start, out_end): (u64, u64),
        found: Option<Located>,
    ) {
        let Some(found) = found else {
            self.child_damage(
                cx,
                Damage::unverified(
                    Range::new(out_start, out_end),
                    format!(
                        "member #{m} fails its check: {why}; its data decoded without an error, and which bytes are wrong is not known"
                    ),
                ),
            );
            return;
        };
        let span = found.span;
        let mut all = vec![Damage::unverified(
            span,
            format!(
                "member #{m} fails its check: {why}; the damage lies in these bytes, which decoded without an error but are not proved (the tar headers before and after them check out where the member's length change puts them)"
            ),
        )];
        for r in found.copies {
            all.push(Damage::unverified(
                r,
                format!(
                    "member #{m} fails its check: {why}; these bytes copy from the 32 KiB before {:#x}, after damage that lies in {span}, so they may be wrong",
                    span.end
                ),
            ));
        }
        if let Some(r) = found.tail {
            all.push(Damage::unverified(
                r,
                format!(
                    "member #{m} fails its check: {why}; the tar header chain breaks again here, so these bytes are not proved either"
                ),
            ));
        }
        // In offset order and apart, as damage reaches members in order.
        all.sort_by_key(|d| d.range.start);
        let mut end = 0;
        for mut d in all {
            d.range.start = d.range.start.max(end);
            if d.range.end <= d.range.start {
                continue;
            }
            end = d.range.end;
            self.child_damage(cx, d);
        }
    }

    fn after(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::After { at, pad } = self.state else {
            return None;
        };
        let (avail, fin) = self.data.extent();
        let data = self.data.clone();
        let mut p = at;
        let mut scanned = 0;
        while p < avail && scanned < cx.budget {
            // Right after a member, the next member's magic is the likely
            // thing: a short read, not a megabyte per member.
            let len = if p == pad { 64 } else { 1 << 20 };
            let Ok(bytes) = view(&*data, p, len, &mut self.scratch) else {
                return Some(self.finish(cx));
            };
            if p == pad {
                if bytes.len() < 3 && !fin && MAGIC.starts_with(bytes) {
                    return Some(Step::Blocked);
                }
                if bytes.starts_with(&MAGIC) {
                    self.state = State::Header { at: p };
                    return None;
                }
            }
            let zeros = bytes.iter().take_while(|&&b| b == 0).count();
            if zeros < bytes.len() {
                let q = p + zeros as u64;
                if q > pad {
                    let r = Range::new(pad, q);
                    cx.push_node(Node::new("padding", "zero padding", r).uint(r.len()));
                    self.state = State::After { at: q, pad: q };
                    return None;
                }
                if self.after_recovered {
                    // A recovered stream whose "end" no member follows
                    // ended falsely (a final block misread): the rest of
                    // its member's deflate data is looked for here too.
                    self.after_recovered = false;
                    self.state = State::Blocks {
                        bit: q * 8,
                        lost: q,
                        start: q,
                        why: "the stream recovered before ends where no gzip member follows".into(),
                        member: None,
                        members_to: q,
                    };
                    return None;
                }
                self.state = State::Resync {
                    from: q,
                    lost: q,
                    suspect: q,
                    why: "bytes after the last member are not gzip data".into(),
                };
                return None;
            }
            p += bytes.len() as u64;
            scanned += bytes.len() as u64;
        }
        if p < avail {
            self.state = State::After { at: p, pad };
            return Some(Step::Yield);
        }
        if !fin {
            self.state = State::After { at: p, pad };
            return Some(Step::Blocked);
        }
        if avail > pad {
            let r = Range::new(pad, avail);
            cx.push_node(Node::new("padding", "zero padding", r).uint(r.len()));
        }
        Some(self.finish(cx))
    }

    fn resync(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::Resync {
            from,
            lost,
            suspect,
            why,
        } = &self.state
        else {
            return None;
        };
        let (from, lost, suspect, why) = (*from, *lost, *suspect, why.clone());
        let (pos, step) = match self.next_member(from, cx.budget.max(1 << 20)) {
            MemberScan::Found(cand) => {
                self.record_lost(cx, lost, suspect, cand, &why);
                self.state = State::Header { at: cand };
                return None;
            }
            MemberScan::Scanned(pos) => (pos, Step::Yield),
            MemberScan::NeedMore(pos) => (pos, Step::Blocked),
            MemberScan::Nothing => {
                let end = self.data.available();
                self.record_lost(cx, lost, suspect, end, &why);
                return Some(self.finish(cx));
            }
        };
        self.state = State::Resync {
            from: pos,
            lost,
            suspect,
            why,
        };
        Some(step)
    }

    /// After invalid deflate data: resumes at the next deflate block that
    /// decodes, if one begins before the next valid member.
    fn blocks(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::Blocks {
            bit,
            lost,
            start,
            why,
            member,
            members_to,
        } = &self.state
        else {
            return None;
        };
        let (mut bit, lost, start, why) = (*bit, *lost, *start, why.clone());
        let (mut member, mut members_to) = (*member, *members_to);
        let (avail, fin) = self.data.extent();
        // Blocks are looked for only where members were looked for first.
        if member.is_none() && members_to < avail {
            match self.next_member(members_to, cx.budget.max(1 << 20)) {
                MemberScan::Found(m) => member = Some(m),
                MemberScan::Scanned(p) | MemberScan::NeedMore(p) => members_to = p,
                MemberScan::Nothing => members_to = avail,
            }
        }
        let end = member.unwrap_or(if fin && members_to >= avail.saturating_sub(3) {
            avail
        } else {
            members_to
        });
        cx.progress(bit / 8, Some(avail));
        let data = self.data.clone();
        let end_ok = |at: u64| stream_may_end(&data, at);
        let found = resync::find_block(&self.data, bit, end, SCAN_STEP, &end_ok);
        let step = match found {
            Ok(resync::Found::Block(b)) => {
                self.record_lost(
                    cx,
                    lost,
                    start,
                    b / 8,
                    &format!(
                        "{why}; decoding resumed at a deflate block at bit {} of byte {:#x}",
                        b % 8,
                        b / 8
                    ),
                );
                self.recover_at(cx, b, lost, start);
                return None;
            }
            Ok(resync::Found::Scanned(b)) => {
                bit = b;
                Step::Yield
            }
            Ok(resync::Found::NeedInput(b)) => {
                bit = b;
                if end > b / 8 + 8 {
                    Step::Blocked
                } else {
                    Step::Yield
                }
            }
            Ok(resync::Found::Nothing) | Err(_) => {
                if let Some(m) = member {
                    self.record_lost(cx, lost, start, m, &why);
                    self.state = State::Header { at: m };
                    return None;
                }
                if end >= avail && fin {
                    self.record_lost(cx, lost, start, avail, &why);
                    return Some(self.finish(cx));
                }
                bit = bit.max(end * 8);
                if members_to >= avail && !fin {
                    Step::Blocked
                } else {
                    Step::Yield
                }
            }
        };
        self.state = State::Blocks {
            bit,
            lost,
            start,
            why,
            member,
            members_to,
        };
        Some(step)
    }

    fn record_lost(&mut self, cx: &mut StepCx, lost: u64, suspect: u64, next: u64, why: &str) {
        let r = Range::new(lost, next);
        let reason = if why.contains("decoding resumed") {
            format!("{why} ({} bytes skipped)", r.len())
        } else if next >= self.data.available() {
            format!(
                "{why}; no further gzip member found ({} bytes unreadable)",
                r.len()
            )
        } else {
            format!("{why}; skipped {} bytes to the next valid member", r.len())
        };
        if !r.is_empty() {
            cx.push_node(
                Node::new("skipped", "unreadable bytes", r)
                    .uint(r.len())
                    .damaged(Damage::corrupt(r, reason.clone())),
            );
        }
        cx.damage(Damage::corrupt(Range::new(suspect.min(lost), next), reason));
    }

    /// Whether a member header at `at` parses and its data decodes.
    fn try_member(&mut self, at: u64) -> Trial {
        let fin = self.data.is_final();
        let mut buf = Vec::new();
        let Ok(bytes) = view(&*self.data, at, HEADER_WINDOW, &mut buf) else {
            return Trial::Bad;
        };
        let h = match parse_header(bytes) {
            Ok(h) => h,
            Err(HeaderError::Short) if !fin => return Trial::NeedMore,
            Err(_) => return Trial::Bad,
        };
        let mut z = RawInflate::new();
        let mut out = vec![0u8; 32 * 1024];
        let mut made = 0;
        let mut pos = at + h.len as u64;
        let mut inbuf = vec![0u8; 64 * 1024];
        loop {
            let n = self.data.read_at(pos, &mut inbuf).unwrap_or(0);
            let s = z.inflate(&inbuf[..n], &mut out, false);
            pos += s.consumed as u64;
            made += s.produced;
            match s.code {
                Code::StreamEnd => return Trial::Good,
                Code::DataError => return Trial::Bad,
                _ if made >= TRIAL_OUTPUT => return Trial::Good,
                _ if s.consumed == 0 && s.produced == 0 => {
                    return if n > 0 {
                        Trial::Bad
                    } else if fin {
                        // Decodes cleanly up to the end of the file.
                        if made > 0 { Trial::Good } else { Trial::Bad }
                    } else {
                        Trial::NeedMore
                    };
                }
                _ => {}
            }
        }
    }
}

/// Where the gzip member that starts at `at` ends (after its trailer),
/// when its header parses and its deflate data decodes to an end whose
/// trailer matches (CRC-32 and length), or to the end of the bytes (a cut
/// member). For carving: where a member found in unclaimed bytes stops. A
/// gzip header among other bytes whose "deflate data" happens to end
/// within a few bytes has a trailer that does not match: `None`.
pub(crate) fn member_end(data: &Data, at: u64) -> Option<u64> {
    let mut buf = Vec::new();
    let h = parse_header(view(&**data, at, HEADER_WINDOW, &mut buf).ok()?).ok()?;
    let mut z = RawInflate::new();
    let mut out = vec![0u8; 64 * 1024];
    let mut inbuf = vec![0u8; 64 * 1024];
    let mut pos = at + h.len as u64;
    let mut crc = crc32fast::Hasher::new();
    let mut size = 0u32;
    loop {
        let n = data.read_at(pos, &mut inbuf).ok()?;
        let s = z.inflate(&inbuf[..n], &mut out, false);
        pos += s.consumed as u64;
        crc.update(&out[..s.produced]);
        size = size.wrapping_add(s.produced as u32);
        match s.code {
            Code::StreamEnd => {
                let mut t = [0u8; 8];
                let got = data.read_at(pos, &mut t).ok()?;
                if got == 8 {
                    let want = (
                        u32::from_le_bytes([t[0], t[1], t[2], t[3]]),
                        u32::from_le_bytes([t[4], t[5], t[6], t[7]]),
                    );
                    if want != (crc.clone().finalize(), size) {
                        return None;
                    }
                }
                return Some((pos + 8).min(data.available()));
            }
            Code::DataError => return None,
            _ if s.consumed == 0 && s.produced == 0 => {
                return (n == 0 && data.is_final()).then(|| data.available());
            }
            _ => {}
        }
    }
}

/// Whether a member's deflate data may end at `at`: its 8-byte trailer
/// follows, then the end of the file, zero padding or another member.
fn stream_may_end(data: &Data, at: u64) -> bool {
    let mut b = [0u8; 64];
    let n = data.read_at(at + 8, &mut b).unwrap_or(0);
    if data.available() < at + 8 {
        return false;
    }
    n == 0 || b[..n].starts_with(&MAGIC) || b[..n].iter().all(|&x| x == 0)
}

enum Trial {
    Good,
    Bad,
    NeedMore,
}

impl Parser for GzipParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        // Quick state changes loop here; decoding and scanning yield.
        for _ in 0..64 {
            let r = match self.state {
                State::Header { at } => self.header(cx, at),
                State::Body { .. } => self.body(cx),
                State::Trailer { .. } => self.trailer(cx),
                State::Locate { .. } => self.locate(cx),
                State::After { .. } => self.after(cx),
                State::Resync { .. } => self.resync(cx),
                State::Blocks { .. } => self.blocks(cx),
                State::Done => Some(Step::Done),
            };
            if let Some(step) = r {
                return step;
            }
        }
        Step::Yield
    }
}

/// Suffixes `gunzip` replaces in the name of the file it decodes.
const SUFFIXES: &[(&str, &str)] = &[
    (".tgz", ".tar"),
    (".taz", ".tar"),
    (".gz", ""),
    (".z", ""),
    ("-gz", ""),
    ("_z", ""),
];

fn os_name(os: u8) -> &'static str {
    match os {
        0 => "FAT",
        1 => "Amiga",
        2 => "VMS",
        3 => "Unix",
        4 => "VM/CMS",
        5 => "Atari TOS",
        6 => "HPFS",
        7 => "Macintosh",
        8 => "Z-System",
        9 => "CP/M",
        10 => "TOPS-20",
        11 => "NTFS",
        12 => "QDOS",
        13 => "Acorn RISCOS",
        255 => "unknown",
        _ => "undefined",
    }
}

/// Rebuilds a member's fields from its bytes.
fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    if node.kind != "member" && node.kind != "partial member" {
        return Vec::new();
    }
    let start = node.range.start;
    let mut buf = Vec::new();
    let Ok(b) = view(
        data,
        start,
        HEADER_WINDOW.min(node.range.len() as usize),
        &mut buf,
    ) else {
        return Vec::new();
    };
    let Ok(h) = parse_header(b) else {
        return vec![Node::new("error", "header", node.range).text("unparseable header")];
    };
    let at = |s: usize, e: usize| Range::new(start + s as u64, start + e as u64);
    let mut out = vec![
        Node::new("magic", "magic", at(0, 2)).value(Value::Bytes(b[0..2].into())),
        Node::new("u8", "method", at(2, 3)).text("8 (deflate)"),
        Node::new("u8", "flags", at(3, 4)).text(flag_text(h.flags)),
        Node::new("u32", "mtime", at(4, 8)).text(if h.mtime == 0 {
            "0 (not set)".to_string()
        } else {
            format!("{} ({})", h.mtime, crate::util::utc(h.mtime as i64))
        }),
        Node::new("u8", "xfl", at(8, 9)).text(match h.xfl {
            2 => "2 (best compression)".to_string(),
            4 => "4 (fastest)".to_string(),
            x => x.to_string(),
        }),
        Node::new("u8", "os", at(9, 10)).text(format!("{} ({})", h.os, os_name(h.os))),
    ];
    if let Some((s, e)) = h.extra {
        let mut subs = Vec::new();
        let mut p = s;
        while p + 4 <= e {
            let len = u16::from_le_bytes([b[p + 2], b[p + 3]]) as usize;
            let end = (p + 4 + len).min(e);
            let id = String::from_utf8_lossy(&b[p..p + 2]).into_owned();
            subs.push(
                Node::new("subfield", escape_bytes(id.as_bytes()), at(p, end))
                    .value(Value::Bytes(b[p + 4..end.min(p + 4 + 64)].into())),
            );
            p = end;
        }
        out.push(
            Node::new("extra", "extra", at(s - 2, e))
                .uint((e - s) as u64)
                .with_children(subs),
        );
    }
    if let Some((s, e)) = h.name {
        out.push(Node::new("string", "name", at(s, e + 1)).text(escape_bytes(&b[s..e])));
    }
    if let Some((s, e)) = h.comment {
        out.push(Node::new("string", "comment", at(s, e + 1)).text(escape_bytes(&b[s..e])));
    }
    if let Some((stored, computed)) = h.hcrc {
        let mut n =
            Node::new("u16", "header crc16", at(h.len - 2, h.len)).text(format!("{stored:#06x}"));
        if stored != computed {
            let r = n.range;
            n = n.damaged(Damage::corrupt(r, format!("computed {computed:#06x}")));
        }
        out.push(n);
    }
    let data_start = start + h.len as u64;
    let complete = node.kind == "member";
    let data_end = if complete {
        node.range.end.saturating_sub(8)
    } else {
        node.range.end
    };
    let mut d = Node::new(
        "deflate",
        "deflate data",
        Range::new(data_start, data_end.max(data_start)),
    )
    .uint(data_end.saturating_sub(data_start));
    if !complete && let Some(dmg) = &node.damage {
        d = d.damaged((**dmg).clone());
    }
    out.push(d);
    if complete {
        let mut t = [0u8; 8];
        if data.read_at(data_end, &mut t).unwrap_or(0) == 8 {
            let crc = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
            let size = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
            let mut c = Node::new("u32", "crc32", Range::new(data_end, data_end + 4))
                .text(format!("{crc:#010x}"));
            if let Some(dmg) = &node.damage {
                c = c.damaged((**dmg).clone());
            }
            out.push(c);
            out.push(
                Node::new("u32", "isize", Range::new(data_end + 4, data_end + 8)).uint(size as u64),
            );
        }
    }
    out
}

fn flag_text(f: u8) -> String {
    let names = [
        (FTEXT, "FTEXT"),
        (FHCRC, "FHCRC"),
        (FEXTRA, "FEXTRA"),
        (FNAME, "FNAME"),
        (FCOMMENT, "FCOMMENT"),
    ];
    let set: Vec<&str> = names
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if set.is_empty() {
        format!("{f:#04x}")
    } else {
        format!("{f:#04x} ({})", set.join("|"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names() {
        let n = |s| derived_name(s, SUFFIXES);
        assert_eq!(n("a.tar.gz"), "a.tar");
        assert_eq!(n("b.tgz"), "b.tar");
        assert_eq!(n("c.bin"), "c.bin.decoded");
        assert_eq!(n(".gz"), ".gz.decoded");
        assert_eq!(n("bundle/bash/changelog.gz"), "changelog");
    }

    #[test]
    fn header_limits() {
        let mut h = vec![0x1f, 0x8b, 8, FNAME, 0, 0, 0, 0, 0, 3];
        h.extend(std::iter::repeat_n(b'a', 100));
        assert!(matches!(parse_header(&h), Err(HeaderError::Short)));
        h.push(0);
        let p = parse_header(&h).ok().unwrap();
        assert_eq!(p.name, Some((10, 110)));
        assert_eq!(p.len, 111);
        let bad = [0x1f, 0x8b, 8, 0x20, 0, 0, 0, 0, 0, 3];
        assert!(matches!(parse_header(&bad), Err(HeaderError::Bad(_))));
    }
}
