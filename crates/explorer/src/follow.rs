//! Following a program's values: `D` goes from a use to the op that
//! defines the value, `u` and `U` step through its uses. Where a value is
//! defined and used comes from its format's program offer
//! ([`pparse::offer::program`]), read in the background; stepping again is
//! at once while the cursor stays on the value's places.

use crate::panel::Reply;
use crate::worker::{To, Worker};
use pparse::engine::Session;
use pparse::extraction::ExtId;
use pparse::offer::program::ValueLinks;

const SLOT: &str = "values";

/// What the user asked of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Definition,
    /// The next use (`true`) or the previous one.
    Use(bool),
}

/// A value's links, read in the background.
pub struct FollowDone {
    id: u64,
    ext: ExtId,
    at: u64,
    want: Want,
    links: Option<ValueLinks>,
}

/// The value being followed.
#[derive(Default)]
pub struct Follow {
    links: Option<(ExtId, ValueLinks)>,
    /// The task whose answer is awaited.
    id: u64,
}

impl Follow {
    /// Goes to the op that defines the value at `at` (or, if the cursor is
    /// on one of the followed value's places, that value).
    pub fn definition(
        &mut self,
        ext: ExtId,
        at: u64,
        cursor: u64,
        session: &Session,
        worker: &Worker,
    ) -> Reply {
        match self.known(ext, at, cursor) {
            Some(l) => definition(ext, l),
            None => self.ask(ext, at, Want::Definition, session, worker),
        }
    }

    /// Goes to the next (`forward`) or previous use of the value.
    pub fn step(
        &mut self,
        ext: ExtId,
        at: u64,
        cursor: u64,
        forward: bool,
        session: &Session,
        worker: &Worker,
    ) -> Reply {
        match self.known(ext, at, cursor) {
            Some(l) => step(ext, l, cursor.max(at), forward),
            None => self.ask(ext, at, Want::Use(forward), session, worker),
        }
    }

    /// The followed value, if `at` or `cursor` is one of its places.
    fn known(&self, ext: ExtId, at: u64, cursor: u64) -> Option<&ValueLinks> {
        let (x, l) = self.links.as_ref()?;
        let place = |o: u64| {
            l.uses.iter().any(|u| u.start == o)
                || l.def
                    .is_some_and(|(op, name)| op.start == o || name.start == o)
        };
        (*x == ext && (place(at) || place(cursor))).then_some(l)
    }

    fn ask(
        &mut self,
        ext: ExtId,
        at: u64,
        want: Want,
        session: &Session,
        worker: &Worker,
    ) -> Reply {
        let found = {
            let t = session.tree();
            t.get(ext).and_then(|e| {
                let offer = pparse::parsers::format_of(e)?.offers.program?;
                Some((offer, e.data()))
            })
        };
        let Some((offer, data)) = found else {
            return say(
                "values are followed in a program: select an op or operand of a printed Paddle program",
            );
        };
        self.links = None;
        self.id = worker.spawn(SLOT, To::Follow, move |_, stop, report, id| {
            let links = (offer.value)(&*data, at, stop);
            if !stop.load(std::sync::atomic::Ordering::Relaxed) {
                report(Box::new(FollowDone {
                    id,
                    ext,
                    at,
                    want,
                    links,
                }));
            }
        });
        say("following the value…")
    }

    /// The links came back: does what was asked.
    pub fn on_done(&mut self, d: FollowDone, shown: ExtId) -> Reply {
        if d.id != self.id || d.ext != shown {
            return Reply::default();
        }
        let Some(links) = d.links else {
            return say("no value here: select an operand, a result or an op");
        };
        let r = match d.want {
            Want::Definition => definition(d.ext, &links),
            Want::Use(forward) => step(d.ext, &links, d.at, forward),
        };
        self.links = Some((d.ext, links));
        r
    }
}

fn say(msg: &str) -> Reply {
    Reply {
        say: Some(msg.into()),
        ..Reply::default()
    }
}

fn uses_text(l: &ValueLinks) -> String {
    let n = l.uses.len() as u64 + l.more_uses;
    match n {
        0 => "no uses".into(),
        1 => "1 use".into(),
        n => format!("{n} uses"),
    }
}

/// Moves to `offset` and selects what is there.
fn go(ext: ExtId, offset: u64, msg: String) -> Reply {
    Reply {
        say: Some(msg),
        cursor: Some((ext, offset)),
        follow: Some(offset),
        ..Reply::default()
    }
}

fn definition(ext: ExtId, l: &ValueLinks) -> Reply {
    match l.def {
        Some((op, _)) => go(
            ext,
            op.start,
            format!(
                "{}: defined here ({}; u / U: next / previous use)",
                l.name,
                uses_text(l)
            ),
        ),
        None => say(&format!("{} is never defined in its program", l.name)),
    }
}

/// The use after (or before) `from`, wrapping around as `n` does.
fn step(ext: ExtId, l: &ValueLinks, from: u64, forward: bool) -> Reply {
    let n = l.uses.len();
    if n == 0 {
        return say(&format!("{} has no uses", l.name));
    }
    let (i, wrapped) = if forward {
        match l.uses.iter().position(|u| u.start > from) {
            Some(i) => (i, false),
            None => (0, true),
        }
    } else {
        match l.uses.iter().rposition(|u| u.start < from) {
            Some(i) => (i, false),
            None => (n - 1, true),
        }
    };
    let all = n as u64 + l.more_uses;
    let mut msg = format!("{}: use {} of {}", l.name, i + 1, all);
    if l.more_uses > 0 {
        msg.push_str(&format!(" (the first {n} are stepped through)"));
    }
    if wrapped {
        msg.push_str(if forward {
            " (wrapped to the first)"
        } else {
            " (wrapped to the last)"
        });
    }
    go(ext, l.uses[i].start, msg)
}
