//! Background work for the explorer, so that the UI thread never waits on
//! I/O, decoding, loading or searching.
//!
//! Quick jobs (reading a page of bytes, loading a node's children,
//! highlighting the visible lines, one step of the pickle stepper) go to one
//! thread that takes the newest request first: when the user pages through a
//! file, the page on screen is read before the ones scrolled past. Long work
//! (searches, tensor tables, statistics, exports, run metrics) runs on threads of its own,
//! one per [`Slot`]: it reports progress and stops when a newer task of the
//! same slot replaces it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};

use crate::data::Data;
use crate::engine::Session;
use crate::extraction::ExtId;

/// Bytes per cached page of the hex and text views.
pub const PAGE: u64 = 4096;

/// A request.
pub enum Job {
    /// Read page `page` of an extraction's bytes.
    Page { ext: ExtId, data: Data, page: u64 },
    /// Load the children of a node.
    Load { ext: ExtId, path: Vec<usize> },
    /// Highlight text lines (see `text.rs`).
    Highlight(Box<super::text::HighlightJob>),
    /// Run the pickle stepper to an opcode (see `stepper.rs`).
    Step(Box<crate::view::stepper::StepRequest>),
}

/// A result.
pub enum Done {
    Page {
        ext: ExtId,
        page: u64,
        bytes: Arc<Vec<u8>>,
    },
    Loaded {
        ext: ExtId,
        path: Vec<usize>,
    },
    Highlighted(Box<super::text::Highlighted>),
    Search(SearchEvent),
    Stepped(Box<crate::view::stepper::StepResult>),
    /// A tensor panel's report (see `tensorview.rs`).
    Tensors(super::tensorview::Report),
    /// A metrics panel's report (see `metrics.rs`).
    Metrics(super::metrics::Report),
}

/// Kinds of long work; a new task stops the running one of its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Search,
    Table,
    Stats,
    Export,
    /// Reading a W&B log's history (see `metrics.rs`).
    Metrics,
}

/// Progress and results of a background search.
pub enum SearchEvent {
    Progress {
        id: u64,
        done: u64,
        total: u64,
    },
    /// A byte match (hex search) at this offset.
    Offset {
        id: u64,
        ext: ExtId,
        at: u64,
    },
    /// Tree matches, in tree order.
    Exts {
        id: u64,
        hits: Vec<ExtId>,
    },
    Nodes {
        id: u64,
        ext: ExtId,
        hits: Vec<Vec<usize>>,
    },
    /// The search ended without a (further) match.
    NotFound {
        id: u64,
    },
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
    stops: Mutex<[Arc<AtomicBool>; 5]>,
}

impl Worker {
    pub fn new(session: Arc<Session>, done: Sender<Done>) -> Worker {
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
            stops: Mutex::new(Default::default()),
        }
    }

    pub fn submit(&self, job: Job) {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.queue.jobs.lock().push_back(job);
        self.queue.ready.notify_one();
    }

    /// Jobs submitted and not finished (tests wait for 0).
    pub fn pending(&self) -> u64 {
        self.busy.load(Ordering::Acquire)
    }

    /// Stops the running search, if any.
    pub fn stop_search(&self) {
        self.stop(Slot::Search);
    }

    /// Stops the running task of `slot`, if any.
    pub fn stop(&self, slot: Slot) {
        self.stops.lock()[slot as usize].store(true, Ordering::Release);
    }

    /// Runs a search on its own thread, replacing any running one; returns
    /// its id. `f` gets the session, a stop flag and a way to report.
    pub fn search(
        &self,
        f: impl FnOnce(&Session, &AtomicBool, &dyn Fn(SearchEvent), u64) + Send + 'static,
    ) -> u64 {
        self.spawn(Slot::Search, move |s, stop, report, id| {
            f(s, stop, &|e| report(Done::Search(e)), id)
        })
    }

    /// Runs `f` on its own thread, stopping the running task of `slot`;
    /// returns the task's id (ids grow, so stale reports can be told apart).
    pub fn spawn(
        &self,
        slot: Slot,
        f: impl FnOnce(&Session, &AtomicBool, &dyn Fn(Done), u64) + Send + 'static,
    ) -> u64 {
        let stop = Arc::new(AtomicBool::new(false));
        {
            let mut stops = self.stops.lock();
            stops[slot as usize].store(true, Ordering::Release);
            stops[slot as usize] = stop.clone();
        }
        let id = self.task_gen.fetch_add(1, Ordering::AcqRel) + 1;
        let (session, done, busy) = (self.session.clone(), self.done.clone(), self.busy.clone());
        busy.fetch_add(1, Ordering::AcqRel);
        std::thread::Builder::new()
            .name(format!("pparse-{slot:?}").to_lowercase())
            .spawn(move || {
                let report = |d: Done| {
                    let _ = done.send(d);
                };
                f(&session, &stop, &report, id);
                busy.fetch_sub(1, Ordering::AcqRel);
            })
            .expect("spawn task");
        id
    }
}

fn io_loop(queue: &Queue, busy: &AtomicU64, session: &Session, done: &Sender<Done>) {
    let mut steps = crate::view::stepper::StepCache::default();
    loop {
        let job = {
            let mut q = queue.jobs.lock();
            loop {
                // Newest first: the request for what is on screen now.
                if let Some(j) = q.pop_back() {
                    if matches!(j, Job::Step(_)) {
                        // Older steps are stale: only the newest is drawn.
                        let before = q.len();
                        q.retain(|o| !matches!(o, Job::Step(_)));
                        busy.fetch_sub((before - q.len()) as u64, Ordering::AcqRel);
                    }
                    break j;
                }
                queue.ready.wait(&mut q);
            }
        };
        let out = match job {
            Job::Page { ext, data, page } => {
                let mut buf = vec![0u8; PAGE as usize];
                let n = data.read_at(page * PAGE, &mut buf).unwrap_or(0);
                buf.truncate(n);
                Some(Done::Page {
                    ext,
                    page,
                    bytes: Arc::new(buf),
                })
            }
            Job::Load { ext, path } => {
                session.load(ext, &path);
                Some(Done::Loaded { ext, path })
            }
            Job::Highlight(h) => Some(Done::Highlighted(Box::new(h.run()))),
            Job::Step(r) => Some(Done::Stepped(Box::new(r.run(&mut steps)))),
        };
        let gone = out.is_some_and(|o| done.send(o).is_err());
        busy.fetch_sub(1, Ordering::AcqRel);
        if gone {
            return;
        }
    }
}
