//! The engine thread: a queue of jobs (extractions waiting to be sniffed,
//! parsers in progress), stepped deepest first, each step's results
//! committed to the shared tree under one short write lock.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::memory::release_free_memory;
use super::shared::Shared;
use crate::data::{Data, InflateSource, Range, growth};
use crate::extraction::{EntryKind, ExtId, Extraction, Phase};
use crate::parsers::api::{Control, Options};
use crate::parsers::archive::carve::{self, Carver, Seen};
use crate::parsers::{self, Parser, SNIFF_LEN, Sniff, Step, StepCx};
use crate::status::Damage;

/// Keeps every range a finished parse reported inside the extraction's
/// bytes: damaged length fields must not make pparse point past the end.
fn clamp_ranges(e: &mut Extraction) {
    let len = e.available();
    let clamp = |r: &mut crate::data::Range| {
        r.start = r.start.min(len);
        r.end = r.end.clamp(r.start, len);
    };
    for d in &mut e.damage {
        clamp(&mut d.range);
    }
    for n in &mut e.nodes {
        clamp(&mut n.range);
        if let Some(d) = &mut n.damage {
            clamp(&mut d.range);
        }
    }
}

/// A hasher for the engine's integer keys (extraction ids, source
/// addresses): one multiply, where SipHash cost more than the work of a
/// step on a zip of a million small entries.
#[derive(Default, Clone, Copy)]
struct IntHasher(u64);

impl std::hash::Hasher for IntHasher {
    fn finish(&self) -> u64 {
        // The product's high bits are mixed, its low ones much less (an
        // address's low bits are zeros): fold them down, where hash tables
        // take the bucket from.
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type IntMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IntHasher>>;

/// The format a sniff chose, and whether the name alone chose it.
struct Sniffed {
    format: &'static parsers::Format,
    by_name: bool,
}

enum Work {
    Sniff,
    Parse(Box<dyn Parser>),
}

struct Job {
    ext: ExtId,
    depth: u32,
    data: Data,
    name: String,
    kind: EntryKind,
    file: Option<std::path::PathBuf>,
    work: Work,
    /// See [`StepCx::by_name`].
    by_name: bool,
    nodes: usize,
    /// (available, final) of the source when the job last could not progress.
    blocked_at: Option<(u64, bool)>,
    /// The sibling whose format it is parsed as (see
    /// [`crate::parsers::ChildSpec::like`]).
    like: Option<ExtId>,
    /// Its parse is over and a [`Carver`] scans what it left unclaimed.
    carving: bool,
    /// The source whose growth can wake it ([`growth::key`]).
    feed: usize,
    /// With [`Options::focus`], the part of that PATH below this
    /// extraction: only children on the way to it are parsed.
    focus: Option<Arc<str>>,
}

impl Job {
    /// A job that sniffs extraction `ext` first.
    fn sniffing(
        ext: ExtId,
        depth: u32,
        data: Data,
        name: String,
        kind: EntryKind,
        file: Option<std::path::PathBuf>,
    ) -> Job {
        let feed = growth::key(&data);
        Job {
            ext,
            depth,
            data,
            name,
            kind,
            file,
            work: Work::Sniff,
            by_name: false,
            nodes: 0,
            blocked_at: None,
            like: None,
            carving: false,
            feed,
            focus: None,
        }
    }

    fn runnable(&self) -> bool {
        match self.blocked_at {
            None => true,
            Some((avail, fin)) => self.data.available() != avail || self.data.is_final() != fin,
        }
    }
}

/// A child waiting for its first bytes before it can be sniffed, kept
/// small: a zip of a million entries lists them all before decoding the
/// first, and a job each would cost a million names and sources.
struct Parked {
    depth: u32,
    /// (available, final) of its bytes when it was parked.
    seen: (u64, bool),
    focus: Option<Arc<str>>,
}

/// The extractions waiting on one source: nearly always one (a zip
/// entry waits on its own stream), kept without an allocation then.
enum Waiters {
    One(ExtId),
    Many(Vec<ExtId>),
}

impl Waiters {
    fn push(&mut self, ext: ExtId) {
        match self {
            Waiters::One(a) => *self = Waiters::Many(vec![*a, ext]),
            Waiters::Many(v) => v.push(ext),
        }
    }

    fn ids(self) -> impl Iterator<Item = ExtId> {
        let (one, many) = match self {
            Waiters::One(a) => (Some(a), Vec::new()),
            Waiters::Many(v) => (None, v),
        };
        one.into_iter().chain(many)
    }
}

/// The engine thread's state: its jobs and what is left of the budget
/// for decoding.
///
/// Picking a job and waking waiting ones cost O(log n) each, never a pass
/// over all jobs: a zip of a million entries has a million children
/// waiting for their bytes while the zip's parser decodes them one by one.
pub(super) struct Engine {
    shared: Arc<Shared>,
    opts: Options,
    /// Every job, by the extraction it parses.
    jobs: IntMap<ExtId, Job>,
    /// Children waiting for their first bytes (made jobs when they come).
    parked: IntMap<ExtId, Parked>,
    /// The jobs that can run, deepest first, then in the order found.
    ready: BTreeSet<(u32, Reverse<ExtId>)>,
    /// Jobs waiting for bytes, by the source whose growth can wake them
    /// ([`growth::key`]). Entries may be stale (a job since woken or
    /// done): they are dropped when their source grows.
    waiting: IntMap<usize, Waiters>,
    ext_count: usize,
    /// See [`StepCx::decode_left`].
    decode_left: u64,
    /// The thread that runs work parsers hand off ([`StepCx::background`]),
    /// started at the first.
    helper: Option<Helper>,
    /// Work handed off and not done yet: the job, and the stream it feeds.
    in_flight: Vec<(ExtId, Arc<InflateSource>)>,
    /// Streams ever decoded on the helper thread: each keeps a window of
    /// its last decoded chunks for the parsers behind it, let go of once
    /// the parse is over (see [`InflateSource::release_ahead`]).
    decoded_ahead: Vec<std::sync::Weak<InflateSource>>,
    /// Jobs whose handed-off work is done: stepped before any other, so
    /// that a decoder is given its next run while the engine parses what
    /// it made.
    urgent: VecDeque<ExtId>,
    /// The opened bytes: their first read error stops the parse.
    guard: Arc<crate::data::ReadGuard>,
    /// The CRC-32 of the first bytes the last sniff read, and whose they
    /// were: kept in the tree ([`crate::extraction::Tree::set_head_crc`])
    /// so that an index can check a member's bytes when it serves them.
    head_crc: std::cell::Cell<Option<(ExtId, u32)>>,
}

/// What the helper thread tells the engine.
enum Signal {
    /// The work of this job is done.
    Done(ExtId),
    /// A stream it feeds has new bytes to publish.
    Grew,
}

type Task = (ExtId, Box<dyn FnOnce(&Control) + Send>, Arc<AtomicBool>);

/// The engine's helper thread: it runs handed-off work in order and says
/// which job's work is done.
struct Helper {
    work: crossbeam_channel::Sender<Task>,
    signal: crossbeam_channel::Receiver<Signal>,
}

impl Helper {
    fn start() -> Helper {
        let (work, todo) = crossbeam_channel::unbounded::<Task>();
        let (tell, signal) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name("pparse-helper".into())
            .spawn(move || {
                for (ext, f, stop) in todo {
                    let ping = tell.clone();
                    let ctl = Control {
                        stop,
                        ping: Box::new(move || {
                            let _ = ping.try_send(Signal::Grew);
                        }),
                    };
                    // A panic in handed-off work ends the work, not the
                    // thread: its job finds no result and reports it.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&ctl)));
                    if tell.send(Signal::Done(ext)).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn the engine's helper thread");
        Helper { work, signal }
    }
}

impl Engine {
    pub(super) fn new(
        shared: Arc<Shared>,
        opts: Options,
        guard: Arc<crate::data::ReadGuard>,
    ) -> Engine {
        let (data, name, kind, file) = {
            let t = shared.tree.read();
            let r = t.root();
            (
                r.data(),
                r.display_name(),
                r.kind.clone(),
                r.file().map(|f| f.to_path_buf()),
            )
        };
        let size = shared.tree.read().root().available();
        let mut e = Engine {
            decode_left: opts.decode_budget(size),
            shared,
            opts,
            jobs: IntMap::default(),
            parked: IntMap::default(),
            ready: BTreeSet::new(),
            waiting: IntMap::default(),
            ext_count: 1,
            helper: None,
            in_flight: Vec::new(),
            decoded_ahead: Vec::new(),
            urgent: VecDeque::new(),
            guard,
            head_crc: std::cell::Cell::new(None),
        };
        let mut root = Job::sniffing(0, 0, data, name, kind, file);
        root.focus = e
            .opts
            .focus
            .as_deref()
            .map(|f| Arc::from(crate::name::normal_path(f).as_ref()));
        e.add(root);
        e
    }

    /// Takes a job on: ready, or waiting for its source to grow.
    fn add(&mut self, job: Job) {
        let ext = job.ext;
        let (depth, feed, blocked) = (job.depth, job.feed, job.blocked_at.is_some());
        self.jobs.insert(ext, job);
        if blocked {
            self.wait_on(feed, ext);
        } else {
            self.ready.insert((depth, Reverse(ext)));
        }
    }

    /// After job `ext` has run: it is ready again, waits, or is gone.
    fn settle(&mut self, ext: ExtId) {
        let Some(job) = self.jobs.get(&ext) else {
            return;
        };
        if job.blocked_at.is_some() {
            self.ready.remove(&(job.depth, Reverse(ext)));
            let feed = job.feed;
            self.wait_on(feed, ext);
        }
    }

    fn remove(&mut self, ext: ExtId) {
        if let Some(job) = self.jobs.remove(&ext) {
            self.ready.remove(&(job.depth, Reverse(ext)));
        }
    }

    /// Files `ext` under the source `feed` whose growth wakes it.
    fn wait_on(&mut self, feed: usize, ext: ExtId) {
        use std::collections::hash_map::Entry;
        match self.waiting.entry(feed) {
            Entry::Occupied(mut o) => o.get_mut().push(ext),
            Entry::Vacant(v) => {
                v.insert(Waiters::One(ext));
            }
        }
    }

    /// Hands a step's background work to the helper thread.
    fn hand_off(&mut self, ext: ExtId, work: Vec<crate::parsers::api::BackgroundWork>) {
        for w in work {
            let helper = self.helper.get_or_insert_with(Helper::start);
            // A stream runs on the helper in many runs; it is listed once.
            if !self
                .decoded_ahead
                .last()
                .is_some_and(|d| std::ptr::eq(d.as_ptr(), Arc::as_ptr(&w.feeds)))
            {
                self.decoded_ahead.push(Arc::downgrade(&w.feeds));
            }
            if helper.work.send((ext, w.work, w.stop)).is_ok() {
                self.in_flight.push((ext, w.feeds));
            } else {
                w.feeds.stage(false);
            }
        }
    }

    /// Work done on the helper thread: its stream published and unstaged,
    /// its job ready before all others.
    fn done(&mut self, ext: ExtId) {
        if let Some(i) = self.in_flight.iter().position(|(e, _)| *e == ext) {
            let (_, feeds) = self.in_flight.swap_remove(i);
            feeds.stage(false);
        }
        if let Some(job) = self.jobs.get_mut(&ext) {
            job.blocked_at = None;
            self.ready.insert((job.depth, Reverse(ext)));
            self.urgent.push_back(ext);
        }
    }

    /// Wakes the waiting jobs whose sources grew during the last step (or
    /// on the helper thread, published now), and those whose handed-off
    /// work is done.
    fn wake(&mut self) {
        for (_, feeds) in &self.in_flight {
            feeds.publish();
        }
        let finished: Vec<ExtId> = match &self.helper {
            Some(h) => h
                .signal
                .try_iter()
                .filter_map(|s| match s {
                    Signal::Done(ext) => Some(ext),
                    Signal::Grew => None,
                })
                .collect(),
            None => Vec::new(),
        };
        for ext in finished {
            self.done(ext);
        }
        for key in growth::take() {
            let Some(list) = self.waiting.remove(&key) else {
                continue;
            };
            let mut still = Vec::new();
            for ext in list.ids() {
                if self.parked.contains_key(&ext) {
                    if !self.unpark(ext) {
                        still.push(ext);
                    }
                    continue;
                }
                let Some(job) = self.jobs.get_mut(&ext) else {
                    continue;
                };
                if job.blocked_at.is_none() || job.feed != key {
                    continue;
                }
                if job.runnable() {
                    job.blocked_at = None;
                    self.ready.insert((job.depth, Reverse(ext)));
                } else {
                    still.push(ext);
                }
            }
            still.sort_unstable();
            still.dedup();
            // Added to: a child sniffed again above may wait here anew.
            for ext in still {
                self.wait_on(key, ext);
            }
        }
    }

    /// Sniffs a parked child again when its bytes have changed since it
    /// was parked: it is a leaf, a parse job, or parked anew; returns
    /// whether it was sniffed. No job is made for a leaf (most entries of a
    /// big zip), as none is for the children sniffed when they are added.
    fn unpark(&mut self, ext: ExtId) -> bool {
        let Some(p) = self.parked.get(&ext) else {
            return false;
        };
        let job = {
            let t = self.shared.tree.read();
            let e = &t.exts[ext];
            if (e.available(), e.is_final()) == p.seen {
                return false;
            }
            let mut job = Job::sniffing(
                ext,
                p.depth,
                e.data(),
                e.display_name(),
                e.kind.clone(),
                e.file().map(|f| f.to_path_buf()),
            );
            job.like = e.extra.as_ref().and_then(|x| x.like);
            job.focus = p.focus.clone();
            job
        };
        let depth = p.depth;
        self.parked.remove(&ext);
        let mut started = Started::default();
        self.sniff_now(job, depth, &mut started);
        started.apply(&mut self.shared.tree.write());
        true
    }

    /// Sniffs a child that is not a job: parks it when its first bytes
    /// are not there yet, else notes it as a leaf or makes it a parse job.
    fn sniff_now(&mut self, mut job: Job, depth: u32, started: &mut Started) {
        let id = job.ext;
        // Seen before the sniff, as a step's is: bytes that arrive during
        // it make the parked child runnable again.
        let seen = (job.data.available(), job.data.is_final());
        let sniffed = self.sniff(&job, depth);
        if let Some((of, crc)) = self.head_crc.take()
            && of == id
            && sniffed.is_some()
        {
            started.heads.push((id, crc));
        }
        match sniffed {
            None => {
                self.wait_on(job.feed, id);
                self.parked.insert(
                    id,
                    Parked {
                        depth,
                        seen,
                        focus: job.focus,
                    },
                );
            }
            Some(None) => started.leaves.push(id),
            Some(Some(Sniffed { format, by_name })) => {
                started.parsing.push((id, &format.name));
                job.work = Work::Parse((format.parse)(&job.data, &self.opts));
                job.by_name = by_name;
                self.add(job);
            }
        }
    }

    /// Checks every waiting job (when nothing is ready: a source that grows
    /// on its own, such as a file being written, reports nothing).
    fn wake_all(&mut self) {
        let parked: Vec<ExtId> = self.parked.keys().copied().collect();
        for ext in parked {
            self.unpark(ext);
        }
        for (ext, job) in &mut self.jobs {
            if job.blocked_at.is_some() && job.runnable() {
                job.blocked_at = None;
                self.ready.insert((job.depth, Reverse(*ext)));
            }
        }
    }

    fn pick(&mut self) -> Option<ExtId> {
        while let Some(ext) = self.urgent.pop_front() {
            if let Some(job) = self.jobs.get(&ext)
                && self.ready.contains(&(job.depth, Reverse(ext)))
            {
                return Some(ext);
            }
        }
        if self.ready.is_empty() {
            self.wake_all();
        }
        self.ready.last().map(|&(_, Reverse(ext))| ext)
    }

    pub(super) fn run(&mut self) {
        if engine_panic_requested() {
            panic!("engine panic requested by PPARSE_TEST_ENGINE_PANIC");
        }
        growth::record();
        let mut last_trim = Instant::now();
        let mut last_wake = Instant::now();
        while !self.shared.cancel.load(Ordering::Acquire) {
            let Some(ext) = self.pick() else {
                // Everything waits: for the helper thread's work (whose
                // bytes are published as they come), or for bytes. If some
                // source can still grow (a file being written, a pipe),
                // wait for it; otherwise stop.
                if !self.in_flight.is_empty() {
                    for (_, feeds) in &self.in_flight {
                        feeds.pass_reads();
                    }
                    let got = self
                        .helper
                        .as_ref()
                        .map(|h| h.signal.recv_timeout(Duration::from_millis(20)));
                    if let Some(Ok(Signal::Done(ext))) = got {
                        self.done(ext);
                    }
                    self.wake();
                    continue;
                }
                let growing =
                    !self.parked.is_empty() || self.jobs.values().any(|j| !j.data.is_final());
                if growing && self.root_growing() {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                break;
            };
            self.shared.steps.fetch_add(1, Ordering::Relaxed);
            if last_trim.elapsed() > Duration::from_millis(500) {
                release_free_memory();
                last_trim = Instant::now();
            }
            if matches!(self.jobs[&ext].work, Work::Sniff) {
                self.sniff_job(ext);
            } else {
                self.parse_step(ext);
            }
            if self.stop_on_read_failure() {
                break;
            }
            self.wake();
            self.shared.notify();
            // Wake `wait_until` callers now rather than at their next poll,
            // but not after every step: a step can be a child's sniff, and
            // waking a waiting thread costs more than that.
            if last_wake.elapsed() >= Duration::from_millis(1) {
                self.shared.over_cv.notify_all();
                last_wake = Instant::now();
            }
        }
        // Cancelled with work on the helper thread: what it appends from
        // now on reaches readers directly.
        for (_, feeds) in self.in_flight.drain(..) {
            feeds.stage(false);
        }
        // Nothing parses any more: no window is needed ahead of a reader.
        let mut released = false;
        for d in self.decoded_ahead.drain(..) {
            if let Some(feeds) = d.upgrade() {
                feeds.release_ahead();
                released = true;
            }
        }
        // Its chunks are 64 KiB, below glibc's mapping threshold, so they
        // lived in the heap: freed now, their pages would stay counted
        // against a session that goes on (an index being written, the
        // explorer), 40 MiB of peak RSS on the 10 GB tar.gz of
        // `peers/index.sh`.
        if released {
            release_free_memory();
        }
        if self.shared.cancel.load(Ordering::Acquire) {
            return;
        }
        // Every remaining job waits for bytes that can no longer come; that
        // would be a producer bug, but report it rather than hang.
        let mut stuck: Vec<ExtId> = self
            .jobs
            .keys()
            .chain(self.parked.keys())
            .copied()
            .collect();
        stuck.sort_unstable();
        let mut t = self.shared.tree.write();
        for id in stuck {
            let e = &mut t.exts[id];
            let at = e.available();
            e.damage.push(Damage::truncated(
                crate::data::Range::new(at, at),
                "parse stopped: its input never completed",
            ));
            e.phase = Phase::Done;
            t.damage_count += 1;
        }
    }

    /// After a read of the opened bytes failed: the failure is the root's
    /// damage, every parse not over yet stops with damage that says why
    /// (its parser may have taken the failed read for an end, or be
    /// trying it again), and the engine stops. Returns whether it did.
    fn stop_on_read_failure(&mut self) -> bool {
        let Some(failure) = self.guard.failure() else {
            return false;
        };
        let mut open: Vec<ExtId> = self
            .jobs
            .keys()
            .chain(self.parked.keys())
            .copied()
            .filter(|&id| id != 0)
            .collect();
        open.sort_unstable();
        let mut t = self.shared.tree.write();
        let at = failure.offset;
        t.exts[0].damage.push(Damage::corrupt(
            crate::data::Range::new(at, at),
            failure.to_string(),
        ));
        t.exts[0].phase = Phase::Done;
        t.damage_count += 1;
        for id in open {
            let e = &mut t.exts[id];
            e.damage.push(Damage::corrupt(
                crate::data::Range::new(0, 0),
                format!("parse stopped: the file could not be read at offset {at}"),
            ));
            e.phase = Phase::Done;
            t.damage_count += 1;
        }
        drop(t);
        self.jobs.clear();
        self.parked.clear();
        self.ready.clear();
        self.waiting.clear();
        self.urgent.clear();
        true
    }

    fn root_growing(&self) -> bool {
        !self.shared.tree.read().root().is_final()
    }

    fn sniff_job(&mut self, ext: ExtId) {
        let job = &self.jobs[&ext];
        // Taken before the sniff (see `sniff_now`).
        let snap = (job.data.available(), job.data.is_final());
        let sniffed = self.sniff(job, job.depth);
        if let Some((of, crc)) = self.head_crc.take()
            && of == ext
            && sniffed.is_some()
        {
            self.shared.tree.write().set_head_crc(ext, crc);
        }
        match sniffed {
            None => {
                self.jobs.get_mut(&ext).expect("job").blocked_at = Some(snap);
                self.settle(ext);
            }
            Some(None) if job.ext == 0 && job.data.available() > 0 => {
                // The opened file is no format pparse knows: scan it for
                // ones it does.
                let span = Range::new(0, job.data.available());
                let carver = Carver::new(job.data.clone(), vec![span], Seen::default(), &self.opts);
                self.shared.tree.write().exts[0].phase = Phase::Parsing;
                let job = self.jobs.get_mut(&ext).expect("job");
                job.work = Work::Parse(Box::new(carver));
                job.carving = true;
                job.blocked_at = None;
            }
            Some(None) => {
                let mut t = self.shared.tree.write();
                t.exts[job.ext].phase = Phase::Leaf;
                t.settle_sources(job.ext);
                drop(t);
                self.remove(ext);
            }
            Some(Some(Sniffed { format, by_name })) => {
                let parser = (format.parse)(&job.data, &self.opts);
                {
                    let mut t = self.shared.tree.write();
                    let e = &mut t.exts[job.ext];
                    e.set_parser(&format.name);
                    e.phase = Phase::Parsing;
                }
                let job = self.jobs.get_mut(&ext).expect("job");
                job.work = Work::Parse(parser);
                job.by_name = by_name;
                job.blocked_at = None;
            }
        }
    }

    /// `None`: not enough bytes yet; `Some(None)`: a leaf; `Some(Some(f))`: parse with f.
    fn sniff(&self, job: &Job, depth: u32) -> Option<Option<Sniffed>> {
        let data = &job.data;
        let fin = data.is_final();
        if data.available() < SNIFF_LEN as u64 && !fin {
            return None;
        }
        if depth > self.opts.max_depth {
            return Some(None);
        }
        if let Some(like) = job.like {
            // As the sibling was parsed, or would be: it may not have been
            // sniffed yet when damage came early.
            let (parser, data, name, kind) = {
                let t = self.shared.tree.read();
                let l = &t.exts[like];
                (l.parser(), l.data(), l.display_name(), l.kind.clone())
            };
            if let Some(format) = parser.and_then(parsers::by_name) {
                return Some(Some(Sniffed {
                    format,
                    by_name: false,
                }));
            }
            let like_job = Job::sniffing(like, depth, data, name.clone(), kind, None);
            match self.sniff(&like_job, depth) {
                None => return None,
                Some(Some(s)) => {
                    return Some(Some(Sniffed {
                        format: s.format,
                        by_name: false,
                    }));
                }
                // The sibling is too short to tell (damage came early):
                // this stream is sniffed itself, under the sibling's name.
                Some(None) => return self.sniff_as(job, &name, depth),
            }
        }
        self.sniff_as(job, &job.name, depth)
    }

    /// Sniffs `job`'s bytes as if named `name`.
    fn sniff_as(&self, job: &Job, name: &str, depth: u32) -> Option<Option<Sniffed>> {
        let data = &job.data;
        let head = match parsers::api::head(&**data) {
            Ok(head) => head,
            Err(e) => {
                // Bytes that cannot be read are no format, and not nothing
                // either: the extraction says why it is not parsed.
                let why = match self.guard.failure() {
                    // The opened file failed (maybe at another offset):
                    // said once, at the root (see `stop_on_read_failure`).
                    Some(f) => format!(
                        "parse stopped: the file could not be read at offset {}",
                        f.offset
                    ),
                    None => format!("its first bytes cannot be read: {e}"),
                };
                let mut t = self.shared.tree.write();
                t.exts[job.ext]
                    .damage
                    .push(Damage::corrupt(Range::new(0, 0), why));
                t.damage_count += 1;
                return Some(None);
            }
        };
        self.head_crc.set(Some((job.ext, crc32fast::hash(&head))));
        let sniff = Sniff {
            head: &head,
            name,
            data,
            kind: &job.kind,
            file: job.file.as_deref(),
            options: &self.opts,
        };
        Some(parsers::sniff(&sniff).map(|format| Sniffed {
            format,
            // The opened file is what the user asked about: its problems
            // are damage whatever told its format.
            by_name: depth > 0 && parsers::by_name_only(format, &sniff),
        }))
    }

    fn parse_step(&mut self, ext: ExtId) {
        let Some(job) = self.jobs.get_mut(&ext) else {
            return;
        };
        let Work::Parse(parser) = &mut job.work else {
            return;
        };
        let mut cx = StepCx {
            data: &job.data,
            name: &job.name,
            budget: self.opts.step_bytes,
            file: job.file.as_deref(),
            decode_left: self.decode_left,
            me: job.ext,
            next_ext: self.ext_count,
            node_count: job.nodes,
            edits: Vec::new(),
            new_children: Vec::new(),
            depth: job.depth,
            by_name: job.by_name,
            background: Vec::new(),
        };
        // What the parser saw: a block is judged against this, so that
        // bytes that arrive while it steps (a file still being written)
        // wake it again.
        let seen = (job.data.available(), job.data.is_final());
        let step = parser.step(&mut cx);
        self.decode_left = cx.decode_left;
        // Children that are not parsed are not in `children`, but count.
        self.ext_count = cx.next_ext;
        let (edits, children, nodes, background) = cx.finish();
        job.nodes = nodes;
        match step {
            Step::Yield => job.blocked_at = None,
            Step::Blocked => job.blocked_at = Some(seen),
            Step::Done => {}
        }
        let ext = job.ext;
        let depth = job.depth;
        let focus = job.focus.clone();
        let mut carve = None;
        {
            let mut t = self.shared.tree.write();
            for e in edits {
                e(&mut t);
            }
            if step == Step::Done {
                if !job.carving
                    && let Some(spans) =
                        Some(carve::unclaimed(&t.exts[ext].nodes)).filter(|s| !s.is_empty())
                {
                    match carve::seen(&t, ext) {
                        Ok(seen) => carve = Some((spans, seen)),
                        Err(note) => t.exts[ext].extra_mut().notes.push(note.into()),
                    }
                }
                let e = &mut t.exts[ext];
                if carve.is_none() {
                    e.phase = if e.parser().is_none() && e.children.is_empty() {
                        Phase::Leaf
                    } else {
                        Phase::Done
                    };
                    e.settle_extra();
                    clamp_ranges(e);
                    t.settle_sources(ext);
                }
            }
        }
        if let Some((spans, seen)) = carve {
            // What the parser left unclaimed is scanned next, as this
            // extraction's parse.
            let job = self.jobs.get_mut(&ext).expect("job");
            job.work = Work::Parse(Box::new(Carver::new(
                job.data.clone(),
                spans,
                seen,
                &self.opts,
            )));
            job.carving = true;
            job.blocked_at = None;
        } else if step == Step::Done {
            self.remove(ext);
        } else {
            self.settle(ext);
        }
        self.hand_off(ext, background);
        self.start_children(children, depth + 1, focus);
    }

    /// Sniffs new children right away when their first bytes are there (the
    /// common case), so only the few that wait for bytes become jobs.
    fn start_children(
        &mut self,
        ids: Vec<crate::parsers::api::NewChild>,
        depth: u32,
        focus: Option<Arc<str>>,
    ) {
        if ids.is_empty() {
            return;
        }
        let infos: Vec<(Job, bool)> = {
            let t = self.shared.tree.read();
            ids.into_iter()
                .map(|(id, head)| {
                    let e = &t.exts[id];
                    // Contents, or a folder on disk, are worth sniffing.
                    let mut content =
                        e.kind.has_content() || (e.kind == EntryKind::Dir && e.file().is_some());
                    // Opened for one PATH: a child is parsed only when the
                    // PATH goes on below it.
                    let mut rest = None;
                    if let Some(f) = &focus {
                        match crate::extraction::match_name(&e.display_name(), f) {
                            Some(i) if i < f.len() => rest = Some(Arc::from(&f[i..])),
                            _ => content = false,
                        }
                    }
                    // Its first bytes, when its parser handed them over,
                    // are read from there (see `ChildSpec::deflated`).
                    let data = match head {
                        Some(h) => Arc::new(crate::data::HeadSource::new(h, e.data())) as Data,
                        None => e.data(),
                    };
                    let mut job = Job::sniffing(
                        id,
                        depth,
                        data,
                        e.display_name(),
                        e.kind.clone(),
                        e.file().map(|f| f.to_path_buf()),
                    );
                    job.like = e.extra.as_ref().and_then(|x| x.like);
                    job.focus = rest;
                    (job, content)
                })
                .collect()
        };
        let mut started = Started::default();
        for (job, content) in infos {
            if content {
                self.sniff_now(job, depth, &mut started);
            } else {
                started.leaves.push(job.ext);
            }
        }
        started.apply(&mut self.shared.tree.write());
    }
}

/// What sniffing children found, written to the tree under one lock.
#[derive(Default)]
struct Started {
    leaves: Vec<ExtId>,
    parsing: Vec<(ExtId, &'static &'static str)>,
    /// CRC-32s of the first bytes sniffed.
    heads: Vec<(ExtId, u32)>,
}

impl Started {
    fn apply(self, t: &mut crate::extraction::Tree) {
        for (id, crc) in self.heads {
            t.set_head_crc(id, crc);
        }
        for id in self.leaves {
            t.exts[id].phase = Phase::Leaf;
            t.settle_sources(id);
        }
        for (id, name) in self.parsing {
            t.exts[id].set_parser(name);
            t.exts[id].phase = Phase::Parsing;
        }
    }
}

/// Whether a test asked this engine to panic, to check that a failing
/// engine ends commands instead of leaving them waiting. The hook is in
/// every build (a release build must be tested as it ships), yet it cannot
/// fire by accident: the variable must hold the process id of the process
/// that started this one, so only a parent that sets it for the child it
/// spawns (a test harness) can arm it; a value exported in a shell or left
/// in an environment names some other process.
fn engine_panic_requested() -> bool {
    std::env::var_os("PPARSE_TEST_ENGINE_PANIC")
        .is_some_and(|v| v.to_str() == Some(&std::os::unix::process::parent_id().to_string()))
}
