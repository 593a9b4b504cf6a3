//! A vector that grows in fixed chunks.
//!
//! `Vec` doubles its buffer: with a million extractions of a few hundred
//! bytes each, the last doubling reserves hundreds of MB that are never
//! used, and the copy holds old and new buffers at once. Growing by whole
//! chunks wastes at most one chunk and never moves an element, so indexes
//! and memory stay predictable at ten million members.

use std::ops::{Index, IndexMut};

/// Elements per chunk.
const CHUNK: usize = 16 * 1024;

/// See the module docs.
pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    /// An empty vector.
    pub fn new() -> Self {
        Self::default()
    }
    /// Elements held.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Appends an element; no element already held moves.
    pub fn push(&mut self, value: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        if let Some(last) = self.chunks.last_mut() {
            last.push(value);
        }
        self.len += 1;
    }
    /// Element `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i / CHUNK)?.get(i % CHUNK)
    }
    /// Element `i`, mutable, if there is one.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.chunks.get_mut(i / CHUNK)?.get_mut(i % CHUNK)
    }
    /// The elements in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl<'a, T> IntoIterator for &'a Chunked<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut c = Chunked::new();
        for x in iter {
            c.push(x);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_index_iterate_across_chunks() {
        let n = CHUNK * 2 + 5;
        let mut c: Chunked<usize> = (0..n).collect();
        assert_eq!(c.len(), n);
        assert_eq!(c[CHUNK], CHUNK);
        assert_eq!(c.get(n), None);
        c[n - 1] = 7;
        assert_eq!(c.get(n - 1), Some(&7));
        assert_eq!(c.iter().count(), n);
        assert_eq!(c.iter().rev().nth(1), Some(&(n - 2)));
        assert!(c.chunks.iter().all(|ch| ch.capacity() == CHUNK));
    }
}
