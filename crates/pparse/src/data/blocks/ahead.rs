//! Blocks decoded ahead of the first pass, on worker threads: bzip2
//! blocks, xz blocks and zstd frames each decode on their own, so the
//! blocks after the one being read can be decoded at the same time.
//!
//! Where the next block starts is told from the compressed bytes alone
//! ([`BlockCodec::next_block`]: the next bzip2 magic, an xz block
//! header's compressed size, a zstd frame's block headers). Workers take
//! turns to plan the next block from the last one planned, and decode the
//! planned ones, a few at a time, each into a buffer of its own.
//!
//! Nothing planned is believed on its own. The first pass finds its
//! blocks as it does on one thread, and asks for each one it opens
//! ([`Ahead::take`]): only a block planned at the same place (the same
//! start and the same `aux`) is handed over, and what a worker made of it
//! is what the codec makes of those bytes, which is what the first pass
//! would have made itself. A block planned elsewhere (a bzip2 magic that
//! was a fake, damage) is dropped, and planning starts again after the
//! block the first pass opened. So workers only ever save time.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::codec::{BlockCodec, BlockReader, OUT_BUF, Pull};
use crate::data::pages::Pages;
use crate::data::source::{Block, Data};
use crate::data::stats::Counted;
use crate::data::workers::cheap_to_read;

/// Output a worker decodes of one block before it stops and hands the
/// rest over with the decoder: blocks in flight stay a few tens of MiB,
/// whatever a block decodes to (a zstd frame of a gigabyte).
const BLOCK_OUT_MAX: usize = 512 * OUT_BUF;

/// What a worker made of one planned block.
enum Slot {
    /// Not started: the first pass, when it gets there first, decodes it
    /// itself.
    Queued,
    Running,
    /// `None`: the codec could not open it (the first pass will say why).
    Done(Option<Recorded>),
}

struct Job {
    block: Block,
    slot: Slot,
}

struct State {
    /// The blocks planned and not taken yet, in order.
    jobs: VecDeque<Job>,
    /// The block planning goes on from; `None` when no next block is
    /// known.
    tail: Option<Block>,
    /// Whether a worker is planning the block after `tail`.
    planning: bool,
    /// Raised each time planning starts again, so that what a worker
    /// planned or decoded for the older plan is dropped.
    epoch: u64,
}

struct Shared {
    input: Data,
    codec: Arc<dyn BlockCodec>,
    counters: Counted,
    state: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
    /// Blocks planned and not taken, at most: one per thread and one
    /// done ahead.
    horizon: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Workers decoding a stream's blocks ahead of its first pass. Dropping it
/// stops them.
pub(crate) struct Ahead {
    shared: Arc<Shared>,
    /// The process it was started in: a forked child has no workers.
    pid: u32,
    /// Blocks handed over, and blocks the first pass decoded itself.
    pub(crate) taken: u64,
    pub(crate) passed: u64,
}

impl Ahead {
    /// Starts `threads` workers for `input`, if it is worth it: more than
    /// one thread, and the whole input there and cheap to read.
    pub(crate) fn start(input: &Data, codec: Arc<dyn BlockCodec>, threads: usize) -> Option<Ahead> {
        if threads < 2 || !input.is_final() || !cheap_to_read(input) {
            return None;
        }
        let shared = Arc::new(Shared {
            input: input.clone(),
            codec,
            counters: input.counters().cloned(),
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                tail: None,
                planning: false,
                epoch: 0,
            }),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            horizon: threads + 1,
        });
        let mut spawned = 0;
        for _ in 0..threads {
            let s = shared.clone();
            let ok = std::thread::Builder::new()
                .name("pparse-blocks".into())
                .spawn(move || work(&s));
            spawned += ok.is_ok() as usize;
        }
        (spawned > 0).then(|| Ahead {
            shared,
            pid: std::process::id(),
            taken: 0,
            passed: 0,
        })
    }

    /// The first pass opens `block`: a reader of what a worker decoded of
    /// it, if it was planned there and decoded (waiting for a worker on
    /// it); `None`, the first pass decodes it itself. Blocks planned
    /// before it are dropped; if it was not planned, planning starts again
    /// after it.
    pub(crate) fn take(&mut self, block: &Block) -> Option<Box<dyn BlockReader>> {
        if self.pid != std::process::id() || self.shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        let sh = &*self.shared;
        let mut st = sh.lock();
        let same = |j: &Job| j.block.input.start == block.input.start && j.block.aux == block.aux;
        let Some(i) = st.jobs.iter().position(same) else {
            // Planned elsewhere, or not yet: plan again from here.
            st.jobs.clear();
            st.tail = Some(*block);
            st.epoch += 1;
            sh.cv.notify_all();
            self.passed += 1;
            return None;
        };
        st.jobs.drain(..i);
        loop {
            match st.jobs.front().map(|j| &j.slot) {
                Some(Slot::Running) => st = sh.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(Slot::Queued) => {
                    st.jobs.pop_front();
                    sh.cv.notify_all();
                    self.passed += 1;
                    return None;
                }
                Some(Slot::Done(_)) => {
                    let job = st.jobs.pop_front().expect("the front job, just matched");
                    sh.cv.notify_all();
                    let Slot::Done(made) = job.slot else {
                        return None;
                    };
                    self.taken += made.is_some() as u64;
                    self.passed += made.is_none() as u64;
                    return made.map(|r| Box::new(r) as Box<dyn BlockReader>);
                }
                // Dropped meanwhile (the workers stopped).
                None => return None,
            }
        }
    }

    /// Stops the workers: the stream ended.
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // In a forked child the workers are gone, and a lock one of them
        // held at the fork stays held: nothing to wake, nothing to take.
        if self.pid != std::process::id() {
            return;
        }
        let mut st = self.shared.lock();
        st.jobs.clear();
        self.shared.cv.notify_all();
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a worker does next.
enum Task {
    Decode(Block, u64),
    Plan(Block, u64),
}

/// A worker: decodes the first block planned and not started, or else
/// plans the next one, until stopped.
fn work(sh: &Shared) {
    loop {
        let task = {
            let mut st = sh.lock();
            loop {
                if sh.stop.load(Ordering::Relaxed) {
                    return;
                }
                let epoch = st.epoch;
                if let Some(j) = st.jobs.iter_mut().find(|j| matches!(j.slot, Slot::Queued)) {
                    j.slot = Slot::Running;
                    break Task::Decode(j.block, epoch);
                }
                if !st.planning
                    && st.jobs.len() < sh.horizon
                    && let Some(t) = st.tail
                {
                    st.planning = true;
                    break Task::Plan(t, epoch);
                }
                st = sh.cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        match task {
            Task::Decode(block, epoch) => {
                // A panic is a bug, but must not leave the first pass
                // waiting: the block is then its to decode.
                let made =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record(sh, &block)));
                let made = made.unwrap_or(Ok(None));
                let mut st = sh.lock();
                if st.epoch == epoch
                    && let Some(j) = st.jobs.iter_mut().find(|j| {
                        j.block.input.start == block.input.start && j.block.aux == block.aux
                    })
                {
                    // Could not open, or stopped: the first pass decodes it.
                    j.slot = Slot::Done(made.ok().flatten());
                }
                sh.cv.notify_all();
            }
            Task::Plan(from, epoch) => {
                let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    sh.codec.next_block(&*sh.input, &from)
                }))
                .unwrap_or(None);
                let mut st = sh.lock();
                st.planning = false;
                if st.epoch == epoch {
                    st.tail = next;
                    if let Some(b) = next {
                        st.jobs.push_back(Job {
                            block: b,
                            slot: Slot::Queued,
                        });
                    }
                }
                sh.cv.notify_all();
            }
        }
    }
}

/// Decodes `block` into a buffer of its own, up to [`BLOCK_OUT_MAX`]
/// bytes. `Ok(None)`: the workers were stopped.
fn record(sh: &Shared, block: &Block) -> io::Result<Option<Recorded>> {
    let mut reader = sh.codec.open(&sh.input, block)?;
    let mut out = Pages::<u8>::new();
    out.reserve(BLOCK_OUT_MAX);
    let last = loop {
        if sh.stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if out.len() >= BLOCK_OUT_MAX {
            break None;
        }
        // The first pass's reads, of the same size: a decoder that meets
        // damage may give more or less before it fails with more room.
        let room = OUT_BUF;
        match reader.read(out.spare(room)) {
            Pull::Out(n) => {
                let n = n.min(room);
                out.advance(n);
                crate::data::stats::decoded_ahead(sh.counters.as_deref(), n as u64);
            }
            other => break Some(other),
        }
    };
    let input_pos = reader.input_pos();
    Ok(Some(Recorded {
        out,
        pos: 0,
        rest: match last {
            None => Rest::Reader(reader),
            Some(pull) => Rest::Ended(pull, input_pos),
        },
    }))
}

/// What follows a recorded block's bytes.
enum Rest {
    /// The block ended: how its reader stopped, and where in the input.
    Ended(Pull, u64),
    /// The block goes on: its decoder, where the worker left it.
    Reader(Box<dyn BlockReader>),
}

/// A block a worker decoded, read as its reader would have been: its
/// bytes, then how it stopped (or the decoder, to go on with).
struct Recorded {
    out: Pages<u8>,
    pos: usize,
    rest: Rest,
}

impl BlockReader for Recorded {
    fn read(&mut self, out: &mut [u8]) -> Pull {
        if self.pos < self.out.len() {
            let n = out.len().min(self.out.len() - self.pos);
            out[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
            self.pos += n;
            if self.pos == self.out.len() {
                // Done with: its pages go back now, not when the block ends.
                self.out = Pages::new();
                self.pos = 0;
            }
            return Pull::Out(n);
        }
        match &mut self.rest {
            Rest::Ended(pull, _) => pull.clone(),
            Rest::Reader(r) => r.read(out),
        }
    }

    fn input_pos(&self) -> u64 {
        match &self.rest {
            Rest::Ended(_, at) => *at,
            Rest::Reader(r) => r.input_pos(),
        }
    }
}
