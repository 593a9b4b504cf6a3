//! Units of a stream decoded ahead of the first pass, on worker threads:
//! bzip2 blocks, xz blocks and zstd frames (`blocks/`), and the members
//! of a BGZF file (bgzip's gzip, `inflate/members.rs`) each decode on
//! their own, so the units after the one being read can be decoded at
//! the same time.
//!
//! Where the next unit starts is told from the input alone
//! ([`Plan::next`]: the next bzip2 magic, an xz block header's compressed
//! size, a zstd frame's block headers, a BGZF member's size field).
//! Workers take turns to plan the next unit from the last one planned,
//! and make the planned ones ([`Plan::make`]), a few at a time.
//!
//! Nothing planned is believed on its own. The first pass finds its
//! units as it does on one thread, and asks for each one it reaches
//! ([`Ahead::take`]): only a unit planned under the same key is handed
//! over, and what a worker made of it is what the first pass would have
//! made itself from the same bytes. A unit planned elsewhere (a bzip2
//! magic that was a fake, damage) is dropped, and planning starts again
//! after the unit the first pass reached. So workers only ever save time.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::source::Data;
use super::workers::cheap_to_read;

/// How a kind of unit is planned and made.
pub(crate) trait Plan: Send + Sync + 'static {
    /// Where a unit starts, as the first pass names it.
    type Key: Copy + PartialEq + Send + 'static;
    /// What a worker makes of a unit.
    type Made: Send + 'static;
    /// The unit after `key`, told from the input alone; `None`: not known,
    /// or none follows.
    fn next(&self, key: &Self::Key) -> Option<Self::Key>;
    /// Makes `key`'s unit as the first pass would; `None`: the first pass
    /// makes it itself (it could not be made here, or `stop` was raised).
    fn make(&self, key: &Self::Key, stop: &AtomicBool) -> Option<Self::Made>;
}

/// What a worker made of one planned unit.
enum Slot<M> {
    /// Not started: the first pass, when it gets there first, makes it
    /// itself.
    Queued,
    Running,
    Done(Option<M>),
}

struct Job<K, M> {
    key: K,
    slot: Slot<M>,
}

struct State<K, M> {
    /// The units planned and not taken yet, in order.
    jobs: VecDeque<Job<K, M>>,
    /// The unit planning goes on from; `None` when no next one is known.
    tail: Option<K>,
    /// Whether a worker is planning the unit after `tail`.
    planning: bool,
    /// Raised each time planning starts again, so that what a worker
    /// planned or made for the older plan is dropped.
    epoch: u64,
}

struct Shared<P: Plan> {
    plan: P,
    state: Mutex<State<P::Key, P::Made>>,
    cv: Condvar,
    stop: AtomicBool,
    /// Units planned and not taken, at most: one per thread and one done
    /// ahead.
    horizon: usize,
}

impl<P: Plan> Shared<P> {
    fn lock(&self) -> MutexGuard<'_, State<P::Key, P::Made>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Workers making a stream's units ahead of its first pass. Dropping it
/// stops them.
pub(crate) struct Ahead<P: Plan> {
    shared: Arc<Shared<P>>,
    /// The process it was started in: a forked child has no workers.
    pid: u32,
    /// Units handed over, and units the first pass made itself.
    pub(crate) taken: u64,
    pub(crate) passed: u64,
}

impl<P: Plan> Ahead<P> {
    /// Starts `threads` workers over `input`, if it is worth it: more
    /// than one thread, and the whole input there and cheap to read.
    pub(crate) fn start(input: &Data, plan: P, threads: usize) -> Option<Ahead<P>> {
        if threads < 2 || !input.is_final() || !cheap_to_read(input) {
            return None;
        }
        let shared = Arc::new(Shared {
            plan,
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
        let spawned = super::workers::spawn(threads, "pparse-ahead", &shared, work::<P>);
        (spawned > 0).then(|| Ahead {
            shared,
            pid: std::process::id(),
            taken: 0,
            passed: 0,
        })
    }

    /// The first pass reaches the unit `key`: what a worker made of it, if
    /// it was planned there and made (waiting for a worker on it); `None`,
    /// the first pass makes it itself. Units planned before it are
    /// dropped; if it was not planned, planning starts again after it.
    pub(crate) fn take(&mut self, key: &P::Key) -> Option<P::Made> {
        if self.pid != std::process::id() || self.shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        let sh = &*self.shared;
        let mut st = sh.lock();
        let Some(i) = st.jobs.iter().position(|j| j.key == *key) else {
            // Planned elsewhere, or not yet: plan again from here.
            st.jobs.clear();
            st.tail = Some(*key);
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
                    return made;
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

impl<P: Plan> Drop for Ahead<P> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a worker does next.
enum Task<K> {
    Make(K, u64),
    Plan(K, u64),
}

/// A worker: makes the first unit planned and not started, or else plans
/// the next one, until stopped.
fn work<P: Plan>(sh: &Shared<P>) {
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
                    break Task::Make(j.key, epoch);
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
            Task::Make(key, epoch) => {
                // A panic is a bug, but must not leave the first pass
                // waiting: the unit is then its to make.
                let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    sh.plan.make(&key, &sh.stop)
                }))
                .unwrap_or(None);
                let mut st = sh.lock();
                if st.epoch == epoch
                    && let Some(j) = st.jobs.iter_mut().find(|j| j.key == key)
                {
                    j.slot = Slot::Done(made);
                }
                sh.cv.notify_all();
            }
            Task::Plan(from, epoch) => {
                let next =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sh.plan.next(&from)))
                        .unwrap_or(None);
                let mut st = sh.lock();
                st.planning = false;
                if st.epoch == epoch {
                    st.tail = next;
                    if let Some(key) = next {
                        st.jobs.push_back(Job {
                            key,
                            slot: Slot::Queued,
                        });
                    }
                }
                sh.cv.notify_all();
            }
        }
    }
}
