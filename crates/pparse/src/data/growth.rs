//! Which growing sources grew, so that the engine wakes only the parsers
//! waiting on them. A decoded stream grows while a parser steps on the
//! engine thread; that thread records each stream that grew (and each that
//! was finished) and, after every step, looks at the jobs waiting on those
//! streams and no others. Checking every waiting job after every step made
//! a zip of n deflated entries (n children waiting for their bytes) cost
//! n² checks.

use std::cell::RefCell;

use super::source::{Data, Recipe};

thread_local! {
    static GREW: RefCell<Option<Vec<usize>>> = const { RefCell::new(None) };
}

/// Starts recording on this thread which sources grow (the engine thread
/// calls it once; other threads record nothing).
pub fn record() {
    GREW.with(|g| *g.borrow_mut() = Some(Vec::new()));
}

/// The sources that grew on this thread since the last call, by
/// [`key`]; each at most once in a row.
pub fn take() -> Vec<usize> {
    GREW.with(|g| {
        g.borrow_mut()
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    })
}

/// Called by a source when it gained bytes or was finished.
pub(super) fn grew<T>(src: &T) {
    let k = src as *const T as *const () as usize;
    GREW.with(|g| {
        if let Ok(mut g) = g.try_borrow_mut()
            && let Some(v) = g.as_mut()
            && v.last() != Some(&k)
        {
            v.push(k);
        }
    });
}

/// The source whose growth makes `data` grow: `data` itself, or the
/// source it is a window of (through windows of windows), as a key that
/// [`take`] reports. Valid while `data` is alive.
pub fn key(data: &Data) -> usize {
    let mut d = data;
    while let Recipe::Slice { of, .. } = d.recipe() {
        d = of;
    }
    std::sync::Arc::as_ptr(d) as *const () as usize
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::{InflateSource, MemSource, Range, SliceSource};

    #[test]
    fn a_window_is_keyed_by_the_stream_it_shows() {
        record();
        let stream = InflateSource::new(Arc::new(MemSource::new(Vec::new())), "test");
        let as_data: Data = stream.clone();
        let window: Data = Arc::new(SliceSource::new(as_data.clone(), Range::new(0, 10)));
        let inner: Data = Arc::new(SliceSource::new(window.clone(), Range::new(2, 4)));
        assert_eq!(key(&inner), key(&as_data));
        assert_eq!(key(&window), key(&as_data));
        let _ = take();
        stream.finish();
        assert_eq!(take(), vec![key(&as_data)]);
        assert!(take().is_empty());
    }
}
