//! Background work for the explorer, so that the UI thread never waits on
//! I/O, decoding, loading or searching.
//!
//! Quick jobs (reading a page of bytes, loading a node's children,
//! highlighting the visible lines, one step of the pickle stepper) go to one
//! thread that takes the newest request first: when the user pages through a
//! file, the page on screen is read before the ones scrolled past. Long work
//! (searches, tensor tables, statistics, exports, run metrics) runs on
//! threads of its own, one per slot: it reports progress and stops when a
//! newer task of the same slot replaces it.
//!
//! Jobs are closures and results are values of any type, each addressed to
//! the part of the explorer that asked for it ([`To`]): the worker runs
//! none of their code, and the app routes a result with one `match` on its
//! address.

use std::any::{Any, TypeId};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};

use pparse::engine::Session;

/// Where a result goes: the part of the explorer that asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    /// The hex and text view (pages, highlighting).
    Hex,
    /// The node tree (children loaded).
    Nodes,
    /// The search running.
    Search,
    /// A save to a file.
    Save,
    /// The program value followed (`D`, `u`, `U`).
    Follow,
    /// The pickle stepper.
    Stepper,
    /// The tensor panel.
    Tensors,
    /// The metrics panel.
    Metrics,
    /// The diagnostics panel.
    Problems,
    /// The query panel.
    Query,
}

/// What a job made, of the type its part of the explorer reads.
pub type Payload = Box<dyn Any + Send>;

/// A result of background work and where it goes.
pub struct Done {
    /// The part that asked for it.
    pub to: To,
    /// What the job made.
    pub payload: Payload,
}

/// State the I/O thread keeps between jobs, one value per type (the pickle
/// stepper's last machine): see [`scratch`].
pub type Scratch = HashMap<TypeId, Box<dyn Any + Send>>;

/// The value of type `T` kept in `s`, made on first use.
pub fn scratch<T: Default + Send + 'static>(s: &mut Scratch) -> &mut T {
    s.entry(TypeId::of::<T>())
        .or_insert_with(|| Box::new(T::default()))
        .downcast_mut::<T>()
        .expect("keyed by its type")
}

type Run = Box<dyn FnOnce(&Session, &mut Scratch) -> Option<Payload> + Send>;

/// A quick request for the I/O thread.
pub struct Job {
    /// Jobs of one lane replace each other: only the newest waiting runs.
    lane: Option<&'static str>,
    to: To,
    run: Run,
}

impl Job {
    /// A job; its result (if any) is handed to the explorer, for `to`.
    pub fn new(
        to: To,
        run: impl FnOnce(&Session, &mut Scratch) -> Option<Payload> + Send + 'static,
    ) -> Job {
        Job {
            lane: None,
            to,
            run: Box::new(run),
        }
    }

    /// A job that makes the older waiting jobs of `lane` stale (only the
    /// newest step of the stepper is drawn).
    pub fn newest_of(
        lane: &'static str,
        to: To,
        run: impl FnOnce(&Session, &mut Scratch) -> Option<Payload> + Send + 'static,
    ) -> Job {
        Job {
            lane: Some(lane),
            to,
            run: Box::new(run),
        }
    }
}

struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

/// Handle to the background threads.
pub struct Worker {
    queue: Arc<Queue>,
    busy: Arc<AtomicU64>,
    session: Arc<Session>,
    done: Sender<Done>,
    task_gen: Arc<AtomicU64>,
    /// The stop flag of the running task of each slot.
    stops: Mutex<HashMap<&'static str, Arc<AtomicBool>>>,
}

impl Worker {
    pub(super) fn new(session: Arc<Session>, done: Sender<Done>) -> Worker {
        let queue = Arc::new(Queue {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        });
        let busy = Arc::new(AtomicU64::new(0));
        {
            let (queue, busy, session, done) =
                (queue.clone(), busy.clone(), session.clone(), done.clone());
            std::thread::Builder::new()
                .name("pparse-io".into())
                .spawn(move || io_loop(&queue, &busy, &session, &done))
                .expect("spawn worker");
        }
        Worker {
            queue,
            busy,
            session,
            done,
            task_gen: Arc::new(AtomicU64::new(0)),
            stops: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn submit(&self, job: Job) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.queue.jobs.lock().push_back(job);
        self.queue.ready.notify_one();
    }

    /// Jobs submitted and not finished (tests wait for 0).
    pub fn pending(&self) -> u64 {
        self.busy.load(Ordering::Acquire)
    }

    /// Stops the running task of `slot`, if any.
    pub fn stop(&self, slot: &'static str) {
        if let Some(flag) = self.stops.lock().get(slot) {
            flag.store(true, Ordering::Release);
        }
    }

    /// Runs `f` on its own thread, stopping the running task of `slot` (one
    /// kind of long work: a search, a table, an export); returns the task's
    /// id (ids grow, so stale reports can be told apart). `f` gets the
    /// session, its stop flag, a way to report (to `to`) and its id.
    pub fn spawn(
        &self,
        slot: &'static str,
        to: To,
        f: impl FnOnce(&Session, &AtomicBool, &dyn Fn(Payload), u64) + Send + 'static,
    ) -> u64 {
        let stop = Arc::new(AtomicBool::new(false));
        if let Some(old) = self.stops.lock().insert(slot, stop.clone()) {
            old.store(true, Ordering::Release);
        }
        let id = self.task_gen.fetch_add(1, Ordering::AcqRel) + 1;
        let (session, done, busy) = (self.session.clone(), self.done.clone(), self.busy.clone());
        busy.fetch_add(1, Ordering::AcqRel);
        std::thread::Builder::new()
            .name(format!("pparse-{slot}"))
            .spawn(move || {
                let report = |payload: Payload| {
                    let _ = done.send(Done { to, payload });
                };
                f(&session, &stop, &report, id);
                busy.fetch_sub(1, Ordering::AcqRel);
            })
            .expect("spawn task");
        id
    }
}

fn io_loop(queue: &Queue, busy: &AtomicU64, session: &Session, done: &Sender<Done>) {
    let mut scratch = Scratch::new();
    loop {
        let job = {
            let mut q = queue.jobs.lock();
            loop {
                // Newest first: the request for what is on screen now.
                if let Some(j) = q.pop_back() {
                    if let Some(lane) = j.lane {
                        let before = q.len();
                        q.retain(|o| o.lane != Some(lane));
                        busy.fetch_sub((before - q.len()) as u64, Ordering::AcqRel);
                    }
                    break j;
                }
                queue.ready.wait(&mut q);
            }
        };
        let to = job.to;
        let out = (job.run)(session, &mut scratch);
        let gone = out.is_some_and(|payload| done.send(Done { to, payload }).is_err());
        busy.fetch_sub(1, Ordering::AcqRel);
        if gone {
            return;
        }
    }
}
