//! bzip2: streams, blocks found at any bit offset, recovery, and the
//! decoded stream.
//!
//! A bzip2 block starts with the 48-bit magic 0x314159265359 at any bit
//! offset and decodes on its own; a stream ends with 0x177245385090 and the
//! combined CRC. The parser finds each block's end by searching bit by bit
//! for the next magic, and decodes the block by itself, as bzip2recover
//! does but in memory: a tiny stream of "BZh9", the block's bits shifted to
//! byte alignment, the end-of-stream magic and the block CRC as combined
//! CRC, fed to the `bzip2` crate's decoder. So damage loses only its block:
//! the blocks after it decode, and each block is a checkpoint of the
//! decoded stream (a [`crate::data::BlockSource`]).
//!
//! Every input byte may be hostile, and a block magic is six bytes anyone
//! can write. So before a decoder is opened, the block is walked by hand
//! (`walk_block`: its header, tables and every Huffman symbol, with
//! libbz2's checks): a fake fails there at the cost of reading it, and a
//! real block's symbol count sets the smallest level that holds it (libbz2
//! zeroes 400 kB per level for each block it opens). Blocks over 128 KiB
//! compressed skip the walk: it would cost 5% of their decoding, and
//! their decoder is small beside them. A small block (at
//! most `SMALL` symbols, a tiny stream's) is decoded there too, without
//! libbz2.
//!
//! * a block whose CRC fails keeps its bytes and is marked corrupt;
//! * a block that does not decode is lost: its compressed bits are
//!   reported, and the decoded stream gets a point of loss (the length of
//!   what it held is unknown); blocks lost in a row (fake magics) are one
//!   lost range, one node and one record;
//! * a stream cut off keeps every whole block before the cut.

use crate::data::blocks::bzip2::*;
use crate::data::{BlockReader, Data, Pull, Range, Source};
use crate::node::{Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{Format, Sniff, Step, StepCx};
use crate::parsers::compress::driver::{BlockFormat, Core, Scan, State, Trailer};
use crate::status::Damage;

/// bzip2: streams, blocks, the decoded stream.
pub(crate) static FORMAT: Format = Format {
    name: "bzip2",
    extent: None,
    sniff,
    parse: |data, _| Box::new(Bzip2Parser::new(data.clone())),
    load,
    offers: Offers::NONE,
};

/// Clean streams in a row shown as one lazy node (`streams N–M`): a file
/// of 250,000 one-byte streams would otherwise hold 750,000 nodes. A
/// group is rebuilt from its bytes when opened ([`load`]).
const GROUP: u64 = 1024;
/// Streams longer than this are not grouped: big streams are few.
const GROUP_STREAM: u64 = 64 << 10;
const NAMES: &[(&str, &str)] = &[
    (".tbz2", ".tar"),
    (".tbz", ".tar"),
    (".bz2", ""),
    (".bz", ""),
];

fn is_header(b: &[u8]) -> bool {
    b.len() >= 4 && &b[..3] == b"BZh" && (b'1'..=b'9').contains(&b[3])
}

fn sniff(s: &Sniff) -> bool {
    if is_header(s.head) && s.head.len() >= 10 {
        // The first block magic (or the end of an empty stream) follows.
        let m = u64::from_be_bytes([
            0, 0, s.head[4], s.head[5], s.head[6], s.head[7], s.head[8], s.head[9],
        ]);
        if m == BLOCK_MAGIC || m == EOS_MAGIC {
            return true;
        }
    }
    // By name: a damaged stream header is reported and the blocks after
    // it are found by their magic.
    NAMES.iter().any(|(suffix, _)| s.name.ends_with(suffix))
}

/// bzip2's own states; the driver's hold what follows a stream and the
/// resync (by bit: a block starts at any bit).
enum At {
    /// A stream header ("BZh1".."BZh9") is expected at byte `at`.
    Header { at: u64 },
    /// A block or end-of-stream magic is expected at bit `bit`.
    Magic { bit: u64 },
    /// Looking for the end of the block at bit `start`, from bit `from`.
    Scan { start: u64, from: u64 },
    /// Decoding the block `[s, e)` (bits).
    Body {
        s: u64,
        e: u64,
        to_eof: bool,
        reader: Box<dyn BlockReader>,
        out_start: u64,
        crc: u32,
    },
}

struct Bzip2Parser {
    /// The input, the decoded stream and the state, which the driver shares.
    core: Core<At>,
    /// Blocks seen in this stream (numbered from 1), and in all streams.
    blocks: u64,
    all_blocks: u64,
    /// Combined CRC of this stream's blocks; false once a block is lost
    /// or damaged (the combined CRC can no longer be checked).
    combined: u32,
    combined_ok: bool,
    /// Streams whose every block and combined CRC matched, and whether
    /// every stream so far did: the file then proves its own bytes.
    checked_streams: u64,
    all_checked: bool,
    streams: u64,
    /// Blocks that did not decode, in a row, not yet reported.
    lost: Option<LostRun>,
    /// The nodes of the stream being read, and of the clean streams
    /// before it not yet pushed (see [`GROUP`]): `grouped` of them, from
    /// stream number `group_first`.
    cur: Vec<Node>,
    in_stream: bool,
    group: Vec<Node>,
    grouped: u64,
    group_first: u64,
}

/// Blocks in a row that did not decode: bytes `[from, to)`, the first
/// starting at bit `bit`, numbered `first` to `last`, and why the first
/// failed.
struct LostRun {
    from: u64,
    to: u64,
    bit: u64,
    first: u64,
    last: u64,
    why: String,
}

impl Bzip2Parser {
    fn new(data: Data) -> Bzip2Parser {
        Bzip2Parser {
            core: Core::new(data, Box::new(Codec), "bzip2 stream", At::Header { at: 0 }),
            blocks: 0,
            all_blocks: 0,
            combined: 0,
            combined_ok: true,
            checked_streams: 0,
            all_checked: true,
            streams: 0,
            lost: None,
            cur: Vec::new(),
            in_stream: false,
            group: Vec::new(),
            grouped: 0,
            group_first: 1,
        }
    }

    /// The input ends early: `why`, at its end.
    fn cut_at_end(&mut self, cx: &mut StepCx, why: &str) -> Step {
        self.all_checked = false;
        self.flush_lost(cx);
        self.flush_nodes(cx);
        let avail = self.core.data.available();
        self.cut(cx, Range::new(avail, avail), why)
    }

    /// A stream's nodes are complete: a clean small one joins the group.
    fn end_stream(&mut self, cx: &mut StepCx) {
        let span = match (self.cur.first(), self.cur.last()) {
            (Some(a), Some(b)) => b.range.end.saturating_sub(a.range.start),
            _ => u64::MAX,
        };
        let clean = self.combined_ok && self.cur.iter().all(|n| n.damage.is_none());
        if !clean || span > GROUP_STREAM {
            self.flush_nodes(cx);
            return;
        }
        if self.grouped == 0 {
            self.group_first = self.streams;
        }
        self.group.append(&mut self.cur);
        self.grouped += 1;
        if self.grouped == GROUP {
            let r = Range::new(
                self.group[0].range.start,
                self.group[self.group.len() - 1].range.end,
            );
            let (a, b) = (self.group_first, self.group_first + GROUP - 1);
            self.group.clear();
            self.grouped = 0;
            cx.push_node(
                Node::new("streams", format!("streams #{a}–#{b}"), r)
                    .uint(GROUP)
                    .lazy(),
            );
        }
    }

    /// Pushes the held nodes one by one.
    fn flush_nodes(&mut self, cx: &mut StepCx) {
        for n in self.group.drain(..).chain(self.cur.drain(..)) {
            cx.push_node(n);
        }
        self.grouped = 0;
    }

    /// Reports the blocks lost in a row, if any.
    fn flush_lost(&mut self, cx: &mut StepCx) {
        let Some(run) = self.lost.take() else {
            return;
        };
        let LostRun {
            from,
            to,
            bit,
            first,
            last,
            why,
        } = run;
        let what = if first == last {
            format!("bzip2 block #{first} at bit {bit} does not decode ({why})")
        } else {
            format!(
                "bzip2 blocks #{first} to #{last} ({} block magics from bit {bit}) do not decode (the first: {why})",
                last - first + 1
            )
        };
        self.flush_nodes(cx);
        self.core
            .out
            .record_lost(cx, from, to, &what, Self::UNIT, true);
    }

    fn header(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let fin = self.core.data.is_final();
        let mut b = [0u8; 4];
        let n = self.core.data.read_at(at, &mut b).unwrap_or(0);
        if n < 4 {
            if !fin {
                return Some(Step::Blocked);
            }
            return Some(self.cut_at_end(cx, "file ends inside a bzip2 stream header"));
        }
        if !is_header(&b) {
            self.resync(at * 8 + 1, at, format!("no bzip2 stream header at {at:#x}"));
            return None;
        }
        self.streams += 1;
        self.blocks = 0;
        self.combined = 0;
        self.combined_ok = true;
        self.flush_lost(cx);
        self.in_stream = true;
        self.push(
            cx,
            Node::new(
                "stream header",
                format!("stream #{}", self.streams),
                Range::new(at, at + 4),
            )
            .text(format!(
                "BZh{} ({} kB blocks)",
                b[3] as char,
                (b[3] - b'0') as u32 * 100
            )),
        );
        self.go(At::Magic { bit: (at + 4) * 8 });
        None
    }

    fn magic(&mut self, cx: &mut StepCx, bit: u64) -> Option<Step> {
        let fin = self.core.data.is_final();
        let Some(m) = bits_at(&*self.core.data, bit, 48) else {
            if !fin {
                return Some(Step::Blocked);
            }
            return Some(self.cut_at_end(cx, "bzip2 stream ends without its end-of-stream marker"));
        };
        if m == BLOCK_MAGIC {
            self.go(At::Scan {
                start: bit,
                from: bit + 48,
            });
            return None;
        }
        if m == EOS_MAGIC {
            let Some(stored) = bits_at(&*self.core.data, bit + 48, 32) else {
                if !fin {
                    return Some(Step::Blocked);
                }
                return Some(
                    self.cut_at_end(cx, "file ends inside the bzip2 end-of-stream marker"),
                );
            };
            let stored = stored as u32;
            let r = Range::new(bit / 8, (bit + 80).div_ceil(8));
            let mut n = Node::new(
                "end of stream",
                format!("end of stream #{}", self.streams),
                r,
            )
            .text(format!(
                "combined CRC {stored:#010x}, {} blocks, at bit {bit}",
                self.blocks
            ));
            if self.combined_ok && stored == self.combined {
                self.checked_streams += 1;
            } else {
                self.all_checked = false;
            }
            if self.combined_ok && stored != self.combined {
                let d = Damage::corrupt(
                    r,
                    format!(
                        "combined CRC mismatch: stored {stored:#010x}, computed {:#010x} from the blocks (a block is missing or extra)",
                        self.combined
                    ),
                );
                n = n.damaged(d.clone());
                cx.damage(d);
            }
            self.push(cx, n);
            let end = (bit + 80).div_ceil(8);
            self.after_stream(end);
            return None;
        }
        self.resync(
            bit + 1,
            bit / 8,
            format!("no bzip2 block magic at bit {bit} ({:#x})", bit / 8),
        );
        None
    }

    fn scan(&mut self, cx: &mut StepCx, start: u64, from: u64) -> Option<Step> {
        let fin = self.core.data.is_final();
        let avail_bits = self.core.data.available() * 8;
        let data = self.core.data.clone();
        match find_magic(&*data, from, cx.budget, &mut self.core.scratch) {
            Found::Magic(e) => self.begin_body(cx, start, e, false),
            Found::Upto(next) => {
                if next - start > MAX_BLOCK_BYTES * 8 {
                    return self.begin_body(cx, start, start + MAX_BLOCK_BYTES * 8, false);
                }
                if next + 48 <= avail_bits {
                    self.go(At::Scan { start, from: next });
                    return Some(Step::Yield);
                }
                if !fin {
                    self.go(At::Scan { start, from: next });
                    return Some(Step::Blocked);
                }
                self.begin_body(cx, start, avail_bits, true)
            }
        }
    }

    fn begin_body(&mut self, cx: &mut StepCx, s: u64, e: u64, to_eof: bool) -> Option<Step> {
        self.blocks += 1;
        self.all_blocks += 1;
        self.core.out.ensure_child(cx, s / 8, NAMES);
        match self.core.out.src.open(s / 8, [s, e]) {
            Ok(reader) => {
                self.core.out.src.begin_block(s / 8, [s, e]);
                self.go(At::Body {
                    s,
                    e,
                    to_eof,
                    reader,
                    out_start: self.core.out.pos(),
                    crc: 0xffff_ffff,
                });
                None
            }
            Err(why) => self.lost_block(cx, s, e, to_eof, &why.to_string()),
        }
    }

    /// Block `[s, e)` decoded to nothing.
    fn lost_block(
        &mut self,
        cx: &mut StepCx,
        s: u64,
        e: u64,
        to_eof: bool,
        why: &str,
    ) -> Option<Step> {
        self.combined_ok = false;
        self.all_checked = false;
        let k = self.blocks;
        let r = Range::new(s / 8, e.div_ceil(8));
        if to_eof {
            let d = Damage::truncated(r, format!("block #{k} is cut off ({why})"));
            self.flush_lost(cx);
            self.push(
                cx,
                Node::new("partial block", format!("block #{k}"), r)
                    .text(format!("bits {s}..{e}, cut off"))
                    .damaged(d),
            );
            return Some(self.cut_at_end(
                cx,
                &format!("bzip2 block #{k} at bit {s} is cut off: its bytes cannot be decoded"),
            ));
        }
        // Blocks that do not decode in a row (fake magics, or damage
        // spanning several blocks) are one lost range: one node and one
        // record, however many magics are in it.
        match &mut self.lost {
            Some(run) => {
                run.to = e / 8;
                run.last = k;
            }
            None => {
                self.lost = Some(LostRun {
                    from: s / 8,
                    to: e / 8,
                    bit: s,
                    first: k,
                    last: k,
                    why: why.to_string(),
                });
            }
        }
        self.go(At::Magic { bit: e });
        None
    }

    fn body(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::At(At::Body {
            s,
            e,
            to_eof,
            reader,
            out_start,
            crc,
        }) = &mut self.core.state
        else {
            return None;
        };
        let (s, e, to_eof, out_start) = (*s, *e, *to_eof, *out_start);
        let mut c = *crc;
        let run = self
            .core
            .out
            .run(cx, &mut **reader, &mut |b| c = crc_update(c, b));
        if let State::At(At::Body { crc, .. }) = &mut self.core.state {
            *crc = c;
        }
        let pull = match self.pumped(cx, run, s / 8, e.div_ceil(8)) {
            Ok(p) => p,
            Err(step) => return Some(step),
        };
        let out_end = self.core.out.pos();
        let k = self.blocks;
        let reader_stop = match &self.core.state {
            State::At(At::Body { reader, .. }) => reader.input_pos(),
            _ => e / 8,
        };
        let why = match &pull {
            Pull::Error(m) => m.clone(),
            Pull::Truncated | Pull::NeedInput => "its data ends early".into(),
            _ => String::new(),
        };
        if out_end == out_start {
            self.core.out.src.end_block(e.div_ceil(8));
            return self.lost_block(cx, s, e, to_eof, &why);
        }
        let computed = !c;
        let stored = bits_at(&*self.core.data, s + 48, 32).unwrap_or(0) as u32;
        let stop = reader_stop.min(e / 8);
        let trailing = computed == stored && matches!(pull, Pull::Error(_)) && e / 8 > stop + 8;
        let r_end = if trailing {
            (stop + 1).min(e.div_ceil(8))
        } else {
            e.div_ceil(8)
        };
        self.core.out.src.end_block(r_end);
        let r = Range::new(s / 8, r_end);
        let mut n = Node::new("block", format!("block #{k}"), r).value(Value::Str(
            format!(
                "bits {s}..{e}, decoded {out_start:#x}..{out_end:#x} ({} bytes), CRC {stored:#010x}",
                out_end - out_start
            )
            .into(),
        ));
        if computed != stored {
            self.combined_ok = false;
            self.all_checked = false;
            let d = Damage::corrupt(
                r,
                format!(
                    "bzip2 block #{k}: CRC mismatch: stored {stored:#010x}, computed {computed:#010x} (decoded bytes kept)"
                ),
            );
            n = n.damaged(d.clone());
            cx.damage(d);
            // It decoded without an error: which of its bytes are wrong is
            // not known.
            self.core.out.damage(
                cx,
                Damage::unverified(
                    Range::new(out_start, out_end),
                    format!(
                        "block #{k} fails its CRC; it decoded without an error, and which bytes are wrong is not known"
                    ),
                ),
            );
        } else {
            self.combined = self.combined.rotate_left(1) ^ stored;
        }
        self.push(cx, n);
        self.go(At::Magic { bit: e });
        if trailing {
            // The block decoded and checks out, but the bits after its end
            // are no block magic: a magic was damaged, and the block it
            // began is lost up to the next magic found.
            self.report_lost(
                cx,
                stop,
                e / 8,
                &format!(
                    "the bits after bzip2 block #{k} (which ends near {stop:#x}) are not a block magic ({why})"
                ),
                true,
            );
        }
        None
    }
}

/// A group's nodes, rebuilt from its bytes (clean streams: a header,
/// blocks, an end of stream each). Blocks are shown by their bits and
/// CRC, without the decoded offsets the first pass gave them.
fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    if node.kind != "streams" {
        return Vec::new();
    }
    let mut k: u64 = node
        .name
        .trim_start_matches("streams #")
        .split('–')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    let mut at = node.range.start;
    while at + 4 <= node.range.end {
        let mut b = [0u8; 4];
        if !matches!(crate::data::read_exact_at(data, at, &mut b), Ok(true)) || !is_header(&b) {
            break;
        }
        out.push(
            Node::new(
                "stream header",
                format!("stream #{k}"),
                Range::new(at, at + 4),
            )
            .text(format!(
                "BZh{} ({} kB blocks)",
                b[3] as char,
                (b[3] - b'0') as u32 * 100
            )),
        );
        let (mut bit, mut blocks) = ((at + 4) * 8, 0u64);
        loop {
            match bits_at(data, bit, 48) {
                Some(BLOCK_MAGIC) => {
                    let Found::Magic(e) = find_magic(data, bit + 48, GROUP_STREAM, &mut scratch)
                    else {
                        return out;
                    };
                    blocks += 1;
                    let crc = bits_at(data, bit + 48, 32).unwrap_or(0);
                    out.push(
                        Node::new(
                            "block",
                            format!("block #{blocks}"),
                            Range::new(bit / 8, e.div_ceil(8)),
                        )
                        .text(format!("bits {bit}..{e}, CRC {crc:#010x}")),
                    );
                    bit = e;
                }
                Some(EOS_MAGIC) => {
                    let stored = bits_at(data, bit + 48, 32).unwrap_or(0);
                    out.push(
                        Node::new(
                            "end of stream",
                            format!("end of stream #{k}"),
                            Range::new(bit / 8, (bit + 80).div_ceil(8)),
                        )
                        .text(format!(
                            "combined CRC {stored:#010x}, {blocks} blocks, at bit {bit}"
                        )),
                    );
                    at = (bit + 80).div_ceil(8);
                    k += 1;
                    break;
                }
                _ => return out,
            }
        }
    }
    out
}

impl BlockFormat for Bzip2Parser {
    type At = At;
    const UNIT: &'static str = "block";
    const PER_BYTE: u64 = 8;
    const TRAILER: Option<Trailer> = Some(Trailer {
        first_read: 64,
        head: b"BZh",
        head_len: 4,
        padding: "zero padding",
        align: 1,
        garbage: "bytes after the end of the bzip2 stream are not bzip2 data",
    });

    fn core(&mut self) -> &mut Core<At> {
        &mut self.core
    }

    fn step_at(&mut self, cx: &mut StepCx) -> Option<Step> {
        match &self.core.state {
            State::At(At::Header { at }) => self.header(cx, *at),
            State::At(At::Magic { bit }) => self.magic(cx, *bit),
            State::At(At::Scan { start, from }) => self.scan(cx, *start, *from),
            State::At(At::Body { .. }) => self.body(cx),
            _ => None,
        }
    }

    /// The next block or end-of-stream magic, at any bit.
    fn find_next(&mut self, cx: &mut StepCx, from: u64, _lost: u64) -> Scan<At> {
        let fin = self.core.data.is_final();
        let avail_bits = self.core.data.available() * 8;
        let data = self.core.data.clone();
        match find_magic(&*data, from, cx.budget, &mut self.core.scratch) {
            Found::Magic(m) => Scan::Found {
                to: m / 8,
                next: At::Magic { bit: m },
            },
            Found::Upto(next) if next + 48 <= avail_bits => Scan::Further(next),
            Found::Upto(next) if !fin => Scan::Wait(next),
            Found::Upto(_) => Scan::End,
        }
    }

    fn stream_at(bytes: &[u8], at: u64) -> Option<At> {
        is_header(bytes).then_some(At::Header { at })
    }

    /// Input lost before a valid magic leaves the combined CRC unchecked;
    /// the nodes and the lost run held go first.
    fn before_lost(&mut self, cx: &mut StepCx, found: bool) {
        if found {
            self.combined_ok = false;
            self.all_checked = false;
        }
        self.flush_lost(cx);
        self.flush_nodes(cx);
    }

    fn wrap_up(&mut self, cx: &mut StepCx) {
        self.flush_lost(cx);
        self.flush_nodes(cx);
        if self.all_checked && self.checked_streams > 0 {
            cx.proved();
        }
    }

    /// Pushes a node; the lost run before it goes first. A stream's nodes
    /// are held until its end, where a clean small stream joins a group.
    fn push(&mut self, cx: &mut StepCx, node: Node) {
        self.flush_lost(cx);
        if self.in_stream {
            let end = node.kind == "end of stream";
            self.cur.push(node);
            if end {
                self.in_stream = false;
                self.end_stream(cx);
            }
            return;
        }
        self.flush_nodes(cx);
        cx.push_node(node);
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
        let file = fixture("nested.tar.bz2");
        let mut reference = Vec::new();
        std::io::Read::read_to_end(&mut bzip2::read::BzDecoder::new(&file[..]), &mut reference)
            .unwrap();
        let input: Data = Arc::new(MemSource::new(file.clone()));
        let src = BlockSource::new(input.clone(), Box::new(Codec), "test");
        let mut scratch = Vec::new();
        let mut bit = 32;
        let mut blocks = 0;
        while bits_at(&*input, bit, 48) == Some(BLOCK_MAGIC) {
            let Found::Magic(e) = find_magic(&*input, bit + 48, 1 << 22, &mut scratch) else {
                panic!("no end");
            };
            decode_block(&src, bit / 8, [bit, e]);
            bit = e;
            blocks += 1;
        }
        src.finish();
        assert_eq!(blocks, 5);
        check_random_reads(&src, &reference);
    }

    #[test]
    fn bits_and_streams() {
        let b = [0b1010_1010u8, 0b1100_1100, 0xff];
        let m: Data = Arc::new(MemSource::new(b.to_vec()));
        assert_eq!(bits_at(&*m, 1, 8), Some(0b0101_0101));
        assert_eq!(bits_at(&*m, 4, 12), Some(0b1010_1100_1100));
        assert_eq!(bits_at(&*m, 20, 8), None);
    }

    /// Decodes a one-block stream to its end or first error: its output
    /// and whether it ended well.
    fn decode_mini(mini: &[u8]) -> (Vec<u8>, bool) {
        let mut z = bzip2::Decompress::new(false);
        let mut out = Vec::with_capacity(1 << 20);
        loop {
            let at = z.total_in() as usize;
            if out.len() == out.capacity() {
                out.reserve(1 << 20);
            }
            match z.decompress_vec(&mini[at..], &mut out) {
                Ok(bzip2::Status::StreamEnd) => return (out, true),
                Ok(_) if z.total_in() as usize > at || out.len() < out.capacity() => {
                    if z.total_in() as usize == at && out.len() < out.capacity() {
                        return (out, false);
                    }
                }
                Ok(_) => {}
                Err(_) => return (out, false),
            }
        }
    }

    /// bzip2's first run-length coding of a block's bytes: runs of 4 to
    /// 255 equal bytes become 4 bytes and a count.
    fn rle1_len(b: &[u8]) -> u32 {
        let (mut n, mut i) = (0, 0);
        while i < b.len() {
            let run = b[i..].iter().take(255).take_while(|&&c| c == b[i]).count();
            n += if run >= 4 { 5 } else { run as u32 };
            i += run;
        }
        n
    }

    /// Bytes with long runs, text and noise.
    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 4 {
                0 => out.extend(std::iter::repeat_n(
                    (x >> 8) as u8,
                    (x >> 16) as usize % 3000,
                )),
                1 => out.extend_from_slice(b"the quick brown fox jumps over the lazy dog "),
                2 => out.extend((0..64).map(|i| (x >> (i % 56)) as u8)),
                _ => out.push(b'a' + (x >> 20) as u8 % 3),
            }
        }
        out.truncate(len);
        out
    }

    /// The bit ranges of a stream's blocks.
    fn block_bits(input: &Data) -> Vec<(u64, u64)> {
        let mut scratch = Vec::new();
        let (mut bit, mut out) = (32, Vec::new());
        while bits_at(&**input, bit, 48) == Some(BLOCK_MAGIC) {
            let Found::Magic(e) = find_magic(&**input, bit + 48, 1 << 23, &mut scratch) else {
                panic!("no end");
            };
            out.push((bit, e));
            bit = e;
        }
        out
    }

    #[test]
    fn check_block_takes_real_blocks_and_sizes_them() {
        for (level, len, seed) in [
            (1, 1_300_000, 1),
            (5, 700_000, 2),
            (9, 2_000_000, 3),
            (9, 1, 4),
        ] {
            let data = sample(len, seed);
            let mut file = Vec::new();
            std::io::Read::read_to_end(
                &mut bzip2::read::BzEncoder::new(&data[..], bzip2::Compression::new(level)),
                &mut file,
            )
            .unwrap();
            let input: Data = Arc::new(MemSource::new(file));
            let blocks = block_bits(&input);
            assert!(!blocks.is_empty());
            let mut all = Vec::new();
            for (s, e) in blocks {
                let (mini, small) = block_stream(&*input, s, e).unwrap();
                let nblock = check_block(&mini).unwrap();
                let (out, ok) = decode_mini(&mini);
                assert!(ok, "level {level}, block at bit {s}");
                assert_eq!(small.is_some(), nblock <= SMALL);
                if let Some(small) = small {
                    assert!(small == out, "level {level}, block at bit {s}");
                }
                assert_eq!(nblock, rle1_len(&out), "level {level}, block at bit {s}");
                assert!(mini[3] - b'0' <= level as u8);
                all.extend(out);
            }
            assert!(all == data, "level {level}");
        }
    }

    /// The pre-pass rejects only blocks libbz2 decodes no byte of (libbz2
    /// may still fail one it takes: its inverse BWT and run-length
    /// decoding are not checked).
    #[test]
    fn check_block_agrees_with_libbz2() {
        let data = sample(3000, 7);
        let mut file = Vec::new();
        std::io::Read::read_to_end(
            &mut bzip2::read::BzEncoder::new(&data[..], bzip2::Compression::new(9)),
            &mut file,
        )
        .unwrap();
        let input: Data = Arc::new(MemSource::new(file));
        let (s, e) = block_bits(&input)[0];
        let good = mini_stream(&*input, s, e).unwrap();
        let (mut taken, mut rejected) = (0, 0);
        for bit in 80..(good.len() * 8 - 80) {
            let mut m = good.clone();
            m[bit / 8] ^= 0x80 >> (bit % 8);
            let (out, _) = decode_mini(&m);
            match walk_block(&m, true) {
                Ok(w) => {
                    taken += 1;
                    if let Some(small) = w.small {
                        assert!(small == out, "bit {bit}: decoded otherwise than by libbz2");
                    }
                }
                Err(why) => {
                    rejected += 1;
                    assert!(out.is_empty(), "bit {bit}: {why}, yet libbz2 gave output");
                }
            }
        }
        assert!(taken > 0 && rejected > 0, "{taken} {rejected}");
        // Fake blocks: a magic and zeros, a magic and noise.
        let mut x = 99u64;
        for i in 0..2000 {
            let mut m = b"BZh9".to_vec();
            m.extend_from_slice(&BLOCK_MAGIC.to_be_bytes()[2..]);
            for _ in 0..(i % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                m.push(if i < 40 { 0 } else { x as u8 });
            }
            m.extend_from_slice(&EOS_MAGIC.to_be_bytes()[2..]);
            m.extend_from_slice(&[0; 4]);
            let (out, _) = decode_mini(&m);
            match check_block(&m) {
                Ok(_) => assert!(i >= 40, "a magic and zeros is no block"),
                Err(why) => assert!(out.is_empty(), "fake {i}: {why}, yet libbz2 gave output"),
            }
        }
    }

    /// Small blocks of every shape (runs that end at the block's end,
    /// runs of 4 to 255 and longer) decode as libbz2 decodes them.
    #[test]
    fn small_blocks_decode_as_libbz2_does() {
        let mut small = 0;
        for seed in 1..400u64 {
            let len = (seed * 37 % 3000) as usize;
            let mut data = sample(len, seed);
            if seed % 3 == 0 {
                data.extend(std::iter::repeat_n(b'z', (seed % 300) as usize));
            }
            if data.is_empty() {
                continue;
            }
            let mut file = Vec::new();
            std::io::Read::read_to_end(
                &mut bzip2::read::BzEncoder::new(&data[..], bzip2::Compression::new(1)),
                &mut file,
            )
            .unwrap();
            let input: Data = Arc::new(MemSource::new(file));
            for (s, e) in block_bits(&input) {
                let (mini, w) = block_stream(&*input, s, e).unwrap();
                let (out, ok) = decode_mini(&mini);
                assert!(ok);
                if let Some(w) = w {
                    small += 1;
                    assert!(w == out, "seed {seed}");
                }
            }
        }
        assert!(small > 350, "{small}");
    }

    #[test]
    fn crc_of_known_text() {
        // bzip2's block CRC of "hello\n" is stored in `echo hello | bzip2`.
        assert_eq!(!crc_update(0xffff_ffff, b"123456789"), 0xfc89_1918);
    }
}
