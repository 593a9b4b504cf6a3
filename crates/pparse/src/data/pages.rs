//! A growable buffer in an anonymous memory mapping of its own: the
//! buffers of what workers decode ahead (`inflate::parallel`'s pieces,
//! `blocks::ahead`'s blocks).
//!
//! A piece's output is tens of MiB, made and freed by worker threads. On
//! the heap, such buffers stayed in those threads' arenas after they were
//! freed (two threads on a 241 MB tar.gz held 190 MiB resident where their
//! pieces needed 100), and growing one copied it. A mapping is reserved at
//! the most a piece may hold, costs memory only for the pages written,
//! never moves, and is returned whole when dropped; and the heap's count
//! (`--io-stats`) is not swollen by address space nobody wrote.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;
use memmap2::MmapMut;

/// Values of `T` in a mapping: `len` of them, in room for `capacity`.
pub(crate) struct Pages<T> {
    map: Option<MmapMut>,
    len: usize,
    /// The most values ever held: how far its pages were written.
    written: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> Pages<T> {
    /// An empty buffer that maps nothing yet.
    pub(crate) fn new() -> Pages<T> {
        Pages {
            map: None,
            len: 0,
            written: 0,
            _t: PhantomData,
        }
    }

    /// Values it can hold without moving.
    pub(crate) fn capacity(&self) -> usize {
        self.map
            .as_ref()
            .map_or(0, |m| m.len() / std::mem::size_of::<T>())
    }

    /// The most values it ever held (its pages written so far).
    pub(crate) fn written(&self) -> usize {
        self.written
    }

    /// Makes room for `cap` values in all, moving the values to a larger
    /// mapping if this one is smaller.
    pub(crate) fn reserve(&mut self, cap: usize) {
        if cap <= self.capacity() {
            return;
        }
        let bytes = cap
            .checked_mul(std::mem::size_of::<T>())
            .expect("a buffer size that fits the address space");
        // A failed map is the heap's out-of-memory: Vec aborts there; a
        // worker's panic only makes the consumer decode the piece itself.
        let mut map = MmapMut::map_anon(bytes).expect("an anonymous mapping");
        if let Some(old) = &self.map {
            let n = self.len * std::mem::size_of::<T>();
            map[..n].copy_from_slice(&old[..n]);
        }
        self.written = self.len;
        self.map = Some(map);
    }

    /// Forgets its values, keeping its room and written pages.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// The `n` values after its last, to be written and then kept with
    /// [`Pages::advance`]: zero, or what an earlier use left there.
    pub(crate) fn spare(&mut self, n: usize) -> &mut [T] {
        let want = self.len.saturating_add(n);
        if want > self.capacity() {
            self.reserve(want.max(self.capacity().saturating_mul(2)));
        }
        let len = self.len;
        &mut self.all_mut()[len..want]
    }

    /// Keeps `n` more values, written through [`Pages::spare`].
    pub(crate) fn advance(&mut self, n: usize) {
        assert!(self.len + n <= self.capacity());
        self.len += n;
        self.written = self.written.max(self.len);
    }

    fn all_mut(&mut self) -> &mut [T] {
        match &mut self.map {
            Some(m) => bytemuck::cast_slice_mut(&mut m[..]),
            None => &mut [],
        }
    }
}

impl<T: Pod> Deref for Pages<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.map {
            Some(m) => &bytemuck::cast_slice(&m[..])[..self.len],
            None => &[],
        }
    }
}

impl<T: Pod> DerefMut for Pages<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let len = self.len;
        &mut self.all_mut()[..len]
    }
}

impl<T: Pod> Default for Pages<T> {
    fn default() -> Self {
        Pages::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_keep_their_values_when_they_grow_and_their_pages_when_cleared() {
        let mut p = Pages::<u16>::new();
        assert!(p.is_empty() && p.capacity() == 0);
        p.spare(3).copy_from_slice(&[1, 2, 3]);
        p.advance(3);
        // Past its room: it moves to a larger mapping, values kept.
        let cap = p.capacity();
        p.spare(cap).fill(7);
        p.advance(cap);
        assert_eq!(&p[..3], &[1, 2, 3]);
        assert!(p[3..].iter().all(|&v| v == 7) && p.len() == cap + 3);
        assert!(p.capacity() >= cap + 3);
        p.clear();
        assert!(p.is_empty());
        assert_eq!(p.written(), cap + 3);
        p.spare(2).copy_from_slice(&[5, 6]);
        p.advance(1);
        assert_eq!(&p[..], &[5]);
    }
}
