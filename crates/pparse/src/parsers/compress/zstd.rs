//! zstd (RFC 8878): frames, skippable frames, recovery, and the decoded
//! stream.
//!
//! The decoded bytes of all frames form one child extraction (as `unzstd`
//! writes one file); each frame is a block of a `BlockSource`, so a read
//! anywhere decodes only the frame that holds it. Frames are decoded by the
//! reference library (the `zstd` crate). Recovery:
//!
//! * a frame whose data is invalid loses itself: the parser scans forward
//!   for the next frame magic (or skippable frame) that decodes, and
//!   reports the compressed bytes skipped and the point of loss in the
//!   decoded stream; what the frame decoded before the error is kept but
//!   marked corrupt (no check covers it);
//! * a checksum mismatch keeps the frame's bytes and marks them corrupt;
//! * a truncated frame keeps every block that decoded.

use memchr::memmem;

use crate::data::blocks::zstd::*;
use crate::data::{Block, BlockCodec, BlockReader, Data, Pull, Range, view};
use crate::node::{Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{Format, Sniff, Step, StepCx};
use crate::parsers::compress::driver::{BlockFormat, Core, Scan, State};
use crate::status::Damage;

/// zstd: frames, skippable frames, the decoded stream.
pub(crate) static FORMAT: Format = Format {
    name: "zstd",
    extent: Some(found_extent),
    sniff,
    parse: |data, _| Box::new(ZstdParser::new(data.clone())),
    load: |_, _, _| Vec::new(),
    offers: Offers::NONE,
};

/// Output a resync candidate must decode without error to be accepted.
const TRIAL_OUTPUT: usize = 64 * 1024;
const NAMES: &[(&str, &str)] = &[(".tzst", ".tar"), (".zstd", ""), (".zst", "")];

/// Where a zstd stream found by carving ends: after its last frame, found
/// by walking the block headers of each frame (no decoding), once its first
/// frame decodes (to its end, or for a good stretch); `None` when it does
/// not, as a frame magic among other bytes (the zstd program holds it as a
/// constant) does not. A frame cut by the end of the span, or one whose
/// blocks stop making sense, runs to the span's end (the parse says where
/// it breaks); what follows the last whole frame is not part of it.
fn found_extent(data: &Data) -> Option<u64> {
    let mut p = ZstdParser::new(data.clone());
    if !matches!(p.try_frame(0), Trial::Good) {
        return None;
    }
    let avail = data.available();
    let mut at = 0u64;
    let mut b = [0u8; 18];
    loop {
        let n = data.read_at(at, &mut b).ok()?;
        let head = &b[..n];
        let next = if is_skippable(head) {
            let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
            at.checked_add(8 + u64::from(size))
        } else if head.starts_with(&MAGIC) {
            let Some(h) = parse_frame_header(head) else {
                return Some(avail);
            };
            frame_end(&**data, at + h.len as u64, h.checksum)
        } else {
            // Not a frame: the stream ended at the last whole one.
            return Some(at);
        };
        match next {
            Some(e) if e <= avail && e > at => at = e,
            // Cut, or blocks that make no sense: the parse reports it.
            _ => return Some(avail),
        }
        if at == avail {
            return Some(at);
        }
    }
}

/// A frame or skippable frame magic, or a `.zst`/`.tzst` name (damage at
/// the start is then reported and the frames after it are found).
fn sniff(s: &Sniff) -> bool {
    s.head.starts_with(&MAGIC)
        || is_skippable(s.head)
        || NAMES.iter().any(|(suffix, _)| s.name.ends_with(suffix))
}

/// zstd's own states; the driver's hold the resync.
enum At {
    /// A frame (or skippable frame) is expected at `at`.
    Frame { at: u64 },
    Body {
        at: u64,
        out_start: u64,
        reader: Box<dyn BlockReader>,
    },
}

struct ZstdParser {
    /// The input, the decoded stream and the state, which the driver shares.
    core: Core<At>,
    frames: u64,
}

impl ZstdParser {
    fn new(data: Data) -> ZstdParser {
        ZstdParser {
            core: Core::new(data, Box::new(Codec), "zstd stream", At::Frame { at: 0 }),
            frames: 0,
        }
    }

    fn frame(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let (avail, fin) = self.core.data.extent();
        if at >= avail && fin {
            return Some(self.finish(cx));
        }
        let data = self.core.data.clone();
        let Ok(b) = view(&*data, at, 18, &mut self.core.scratch) else {
            return Some(self.finish(cx));
        };
        let b = b.to_vec();
        if b.len() < 8 && !fin {
            return Some(Step::Blocked);
        }
        if b.starts_with(&MAGIC) {
            let Some(h) = parse_frame_header(&b) else {
                if !fin {
                    return Some(Step::Blocked);
                }
                let r = Range::new(at, avail);
                cx.push_node(
                    Node::new("partial frame", format!("frame #{}", self.frames + 1), r)
                        .damaged(Damage::truncated(r, "frame header cut off")),
                );
                cx.damage(Damage::truncated(r, "file ends inside a zstd frame header"));
                let o = self.core.out.pos();
                self.core.out.damage(
                    cx,
                    Damage::truncated(Range::new(o, o), "zstd input ends here"),
                );
                return Some(self.finish(cx));
            };
            let _ = h;
            self.core.out.ensure_child(cx, at, NAMES);
            let reader = match self.core.out.src.open(at, [0, 0]) {
                Ok(r) => r,
                Err(e) => {
                    cx.damage(Damage::corrupt(Range::new(at, avail), e.to_string()));
                    return Some(self.finish(cx));
                }
            };
            self.core.out.src.begin_block(at, [0, 0]);
            self.frames += 1;
            self.go(At::Body {
                at,
                out_start: self.core.out.pos(),
                reader,
            });
            return None;
        }
        if is_skippable(&b) {
            let size = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as u64;
            let end = at + 8 + size;
            if end > avail && !fin {
                return Some(Step::Blocked);
            }
            let r = Range::new(at, end.min(avail));
            let mut n = Node::new(
                "skippable frame",
                format!("skippable frame {:#x}", b[0] & 0x0f),
                r,
            )
            .value(Value::Str(format!("{size} bytes of user data").into()))
            .with_children(vec![
                Node::new("magic", "magic", Range::new(at, at + 4)).text(format!(
                    "{:#010x}",
                    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
                )),
                Node::new("u32", "size", Range::new(at + 4, at + 8)).uint(size),
                Node::new("bytes", "user data", Range::new(at + 8, end.min(avail))).uint(size),
            ]);
            if end > avail {
                let d = Damage::truncated(Range::new(avail, avail), "skippable frame cut off");
                n = n.damaged(d.clone());
                cx.push_node(n);
                cx.damage(d);
                return Some(self.finish(cx));
            }
            cx.push_node(n);
            self.go(At::Frame { at: end });
            return None;
        }
        if b.len() < 4 && fin {
            let r = Range::new(at, avail);
            cx.push_node(Node::new("trailing", "trailing bytes", r).uint(r.len()));
            cx.damage(Damage::truncated(r, "file ends inside a zstd frame magic"));
            return Some(self.finish(cx));
        }
        self.resync(
            at + 1,
            at,
            if self.frames == 0 && at == 0 {
                "no zstd frame magic at the start".into()
            } else {
                format!("bytes at {at:#x} are not a zstd frame")
            },
        );
        None
    }

    fn body(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::At(At::Body {
            at,
            out_start,
            reader,
        }) = &mut self.core.state
        else {
            return None;
        };
        let (at, out_start) = (*at, *out_start);
        let run = self.core.out.run(cx, &mut **reader, &mut |_| {});
        let in_pos = reader.input_pos();
        let pull = match self.pumped(cx, run, in_pos, in_pos) {
            Ok(p) => p,
            Err(step) => return Some(step),
        };
        let k = self.frames;
        let out_end = self.core.out.pos();
        let header = {
            let mut hb = Vec::new();
            view(&*self.core.data, at, 18, &mut hb)
                .ok()
                .and_then(parse_frame_header)
        };
        match pull {
            Pull::NeedInput => Some(Step::Blocked),
            Pull::End => {
                self.core.out.src.end_block(in_pos);
                cx.push_node(frame_node(
                    k,
                    Range::new(at, in_pos),
                    out_start,
                    out_end,
                    header.as_ref(),
                    None,
                ));
                self.go(At::Frame { at: in_pos });
                None
            }
            Pull::Truncated => {
                self.core.out.src.end_block(in_pos);
                let d = Damage::truncated(Range::new(in_pos, in_pos), "frame cut off");
                cx.push_node(frame_node(
                    k,
                    Range::new(at, in_pos),
                    out_start,
                    out_end,
                    header.as_ref(),
                    Some(d),
                ));
                cx.damage(Damage::truncated(
                    Range::new(in_pos, in_pos),
                    format!(
                        "zstd frame #{k} is cut off after {} decoded bytes",
                        out_end - out_start
                    ),
                ));
                self.core.out.damage(
                    cx,
                    Damage::truncated(
                        Range::new(out_end, out_end),
                        format!("decoded stream ends early (frame #{k} cut off)"),
                    ),
                );
                Some(self.finish(cx))
            }
            Pull::Error(msg) if msg.contains("checksum") => {
                self.core.out.src.end_block(in_pos);
                let reason =
                    format!("zstd frame #{k}: content checksum mismatch (decoded bytes kept)");
                let d = Damage::corrupt(Range::new(at, in_pos), reason.clone());
                cx.push_node(frame_node(
                    k,
                    Range::new(at, in_pos),
                    out_start,
                    out_end,
                    header.as_ref(),
                    Some(d.clone()),
                ));
                cx.damage(d);
                // It decoded without an error: which of its bytes are wrong
                // is not known.
                self.core.out.damage(
                    cx,
                    Damage::unverified(
                        Range::new(out_start, out_end),
                        format!(
                            "frame #{k} fails its content checksum; it decoded without an error, and which bytes are wrong is not known"
                        ),
                    ),
                );
                // Where a damaged frame ended is not to be trusted: the
                // next frame is looked for from just after its start.
                self.resync(
                    at + 1,
                    in_pos,
                    format!("zstd frame #{k} fails its checksum"),
                );
                None
            }
            Pull::Error(msg) => {
                self.core.out.src.end_block(in_pos);
                let d = Damage::corrupt(
                    Range::new(in_pos, in_pos),
                    format!("invalid zstd data: {msg}"),
                );
                let mut n = frame_node(
                    k,
                    Range::new(at, in_pos),
                    out_start,
                    out_end,
                    header.as_ref(),
                    Some(d),
                );
                n.kind = "partial frame";
                cx.push_node(n);
                if out_end > out_start {
                    self.core.out.damage(
                        cx,
                        Damage::corrupt(
                            Range::new(out_start, out_end),
                            format!(
                                "frame #{k} has invalid data ({msg}); the bytes it decoded before that cannot be checked"
                            ),
                        ),
                    );
                }
                self.resync(
                    at + 1,
                    at,
                    format!("zstd frame #{k} has invalid data ({msg}) detected near {in_pos:#x}"),
                );
                None
            }
            Pull::Out(_) => Some(Step::Yield),
        }
    }

    /// Whether a frame at `at` decodes (to its end or for a good stretch).
    fn try_frame(&mut self, at: u64) -> Trial {
        let fin = self.core.data.is_final();
        let mut b = Vec::new();
        let Ok(head) = view(&*self.core.data, at, 8, &mut b) else {
            return Trial::Bad;
        };
        if head.len() < 8 {
            return if fin { Trial::Bad } else { Trial::NeedMore };
        }
        if is_skippable(head) {
            let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as u64;
            return if at + 8 + size <= self.core.data.available() {
                Trial::Good
            } else if fin {
                Trial::Bad
            } else {
                Trial::NeedMore
            };
        }
        if !head.starts_with(&MAGIC) {
            return Trial::Bad;
        }
        let Ok(mut r) = Codec.open(
            &self.core.data,
            &Block {
                input: Range::new(at, at),
                out_start: 0,
                out_len: 0,
                aux: [0, 0],
            },
        ) else {
            return Trial::Bad;
        };
        let mut out = vec![0u8; 16 * 1024];
        let mut made = 0;
        loop {
            match r.read(&mut out) {
                Pull::Out(n) => {
                    made += n;
                    if made >= TRIAL_OUTPUT {
                        return Trial::Good;
                    }
                }
                Pull::End => return Trial::Good,
                Pull::NeedInput => return Trial::NeedMore,
                Pull::Truncated => return if made > 0 { Trial::Good } else { Trial::Bad },
                Pull::Error(_) => return Trial::Bad,
            }
        }
    }
}

enum Trial {
    Good,
    Bad,
    NeedMore,
}

fn frame_node(
    k: u64,
    r: Range,
    out_start: u64,
    out_end: u64,
    h: Option<&FrameHeader>,
    damage: Option<Damage>,
) -> Node {
    let size = out_end - out_start;
    let cut = damage.is_some();
    let mut kids = Vec::new();
    if let Some(h) = h {
        let hr = Range::new(r.start, (r.start + h.len as u64).min(r.end.max(r.start)));
        let mut fields = vec![format!(
            "content size {}",
            h.content_size
                .map_or("not recorded".to_string(), |c| c.to_string())
        )];
        if let Some(w) = h.window {
            fields.push(format!("window {w}"));
        }
        if h.single_segment {
            fields.push("single segment".into());
        }
        if let Some(d) = h.dict_id {
            fields.push(format!("dictionary {d}"));
        }
        fields.push(
            if h.checksum {
                "checksum"
            } else {
                "no checksum"
            }
            .into(),
        );
        kids.push(Node::new("frame header", "frame header", hr).text(fields.join(", ")));
        let dr = Range::new(hr.end, r.end);
        kids.push(Node::new("blocks", "compressed blocks", dr).uint(dr.len()));
    }
    let mut n = Node::new(
        if cut { "partial frame" } else { "frame" },
        format!("frame #{k}"),
        r,
    )
    .value(Value::Str(
        format!("decoded {out_start:#x}..{out_end:#x} ({size} bytes)").into(),
    ))
    .with_children(kids);
    if let Some(d) = damage {
        n = n.damaged(d);
    }
    n
}

impl BlockFormat for ZstdParser {
    type At = At;
    const UNIT: &'static str = "frame";

    fn core(&mut self) -> &mut Core<At> {
        &mut self.core
    }

    fn step_at(&mut self, cx: &mut StepCx) -> Option<Step> {
        match self.core.state {
            State::At(At::Frame { at }) => self.frame(cx, at),
            State::At(At::Body { .. }) => self.body(cx),
            _ => None,
        }
    }

    /// The next frame magic or skippable frame that decodes.
    fn find_next(&mut self, cx: &mut StepCx, from: u64, _lost: u64) -> Scan<At> {
        let (avail, fin) = self.core.data.extent();
        let data = self.core.data.clone();
        let mut pos = from;
        let mut scanned = 0u64;
        while pos + 4 <= avail && scanned < cx.budget.max(1 << 20) {
            let window = match view(&*data, pos, 1 << 20, &mut self.core.scratch) {
                Ok(w) => w.to_vec(),
                Err(_) => break,
            };
            if window.len() < 4 {
                break;
            }
            let mut i = 0;
            while i + 4 <= window.len() {
                // The next candidate: a frame magic or a skippable magic.
                let next = memmem::find(&window[i..], &MAGIC[1..]).map(|k| i + k);
                let skip = memmem::find(&window[i..], &[0x2a, 0x4d, 0x18]).map(|k| i + k);
                let Some(j) = [next, skip].into_iter().flatten().min() else {
                    break;
                };
                if j == 0 {
                    i = 1;
                    continue;
                }
                let cand = pos + j as u64 - 1;
                i = j + 1;
                if cand < from {
                    continue;
                }
                match self.try_frame(cand) {
                    Trial::Good => {
                        return Scan::Found {
                            to: cand,
                            next: At::Frame { at: cand },
                        };
                    }
                    Trial::NeedMore => return Scan::Wait(cand),
                    Trial::Bad => {}
                }
            }
            let advance = (window.len() as u64).saturating_sub(3).max(1);
            pos += advance;
            scanned += advance;
        }
        if pos + 4 <= avail {
            return Scan::Further(pos);
        }
        if !fin {
            return Scan::Wait(pos);
        }
        Scan::End
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::{BlockSource, MemSource};
    use crate::parsers::compress::decoded::{check_random_reads, decode_block, fixture};

    #[test]
    fn frames_are_checkpoints() {
        let file = fixture("nested.tar.zst");
        let reference = zstd::decode_all(&file[..]).unwrap();
        let input: Data = Arc::new(MemSource::new(file.clone()));
        let src = BlockSource::new(input, Box::new(Codec), "test");
        let mut at = 0u64;
        let mut frames = 0;
        while (at as usize) < file.len() {
            let b = &file[at as usize..];
            if is_skippable(b) {
                at += 8 + u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as u64;
                continue;
            }
            at = decode_block(&src, at, [0, 0]);
            frames += 1;
        }
        src.finish();
        assert_eq!(frames, 4);
        check_random_reads(&src, &reference);
    }
}
