//! The state the engine thread and the sessions reading its results share:
//! the tree, the flags that end a parse, and change notifications. Apart
//! from both so that neither has to reach into the other.

use std::sync::atomic::{AtomicBool, AtomicU64};

use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::extraction::Tree;

/// A notification for a UI: something changed, or the parse is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The tree changed.
    Changed,
    /// The parse is over.
    Finished,
}

/// Held by the engine thread and by the session it reports to.
pub(super) struct Shared {
    pub(super) tree: RwLock<Tree>,
    pub(super) cancel: AtomicBool,
    pub(super) finished: AtomicBool,
    /// Signalled when the parse is over (waiters also poll, see `wait_until`).
    pub(super) over: Mutex<()>,
    pub(super) over_cv: Condvar,
    pub(super) events: Sender<Event>,
    pub(super) steps: AtomicU64,
    /// Set when the engine thread panicked: the parse is over, and readers
    /// must say so rather than wait for results that will never come.
    pub(super) failure: Mutex<Option<String>>,
}

impl Shared {
    pub(super) fn new(tree: Tree, events: Sender<Event>, finished: bool) -> Shared {
        Shared {
            tree: RwLock::new(tree),
            cancel: AtomicBool::new(false),
            finished: AtomicBool::new(finished),
            over: Mutex::new(()),
            over_cv: Condvar::new(),
            events,
            steps: AtomicU64::new(0),
            failure: Mutex::new(None),
        }
    }

    pub(super) fn notify(&self) {
        let _ = self.events.try_send(Event::Changed);
    }
}
