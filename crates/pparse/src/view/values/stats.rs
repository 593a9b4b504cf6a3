//! Statistics over a whole tensor (counts, min, max, mean, spread and a
//! histogram computed as NumPy does), cancellable and with progress, for
//! tensors too large to look at element by element.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use super::decode::decode_at;
use super::walk::{Item, Plan, walk};
use crate::data::Source;
use crate::offer::tensor::Tensor;

/// Statistics over a tensor's elements, as `as_f64` values (complex: the
/// modulus). `count + nan + inf + missing` is the number of elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Finite values: the ones min, max, mean, std and the histogram are over.
    pub count: u64,
    /// NaN values.
    pub nan: u64,
    /// Infinite values, either sign.
    pub inf: u64,
    /// NaN when `count` is 0.
    pub min: f64,
    /// NaN when `count` is 0.
    pub max: f64,
    /// NaN when `count` is 0.
    pub mean: f64,
    /// Population standard deviation (ddof = 0).
    pub std: f64,
    /// Counts of `bins` equal bins over `[min, max]` (the last bin closed), as
    /// `numpy.histogram(x, bins, range=(min, max))` computes them (a range
    /// of one value becomes `[v − 0.5, v + 0.5]`). All zero when `count` is 0.
    pub hist: Vec<u64>,
    /// Elements whose bytes are not there.
    pub missing: u64,
}

/// Neumaier's compensated sum.
#[derive(Default)]
struct Sum {
    sum: f64,
    c: f64,
}

impl Sum {
    #[inline]
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.c += (self.sum - t) + x;
        } else {
            self.c += (x - t) + self.sum;
        }
        self.sum = t;
    }
    fn total(&self) -> f64 {
        self.sum + self.c
    }
}

/// Equal-width bins as numpy.histogram builds them.
struct Bins {
    first: f64,
    last: f64,
    n: usize,
    edges: Vec<f64>,
}

impl Bins {
    fn new(min: f64, max: f64, n: usize) -> Bins {
        let (first, last) = if min == max {
            (min - 0.5, max + 0.5)
        } else {
            (min, max)
        };
        // numpy.linspace(first, last, n + 1): i·step + first, last exact.
        let delta = last - first;
        let div = n as f64;
        let step = delta / div;
        let mut edges: Vec<f64> = (0..=n)
            .map(|i| {
                let i = i as f64;
                if step == 0.0 {
                    i / div * delta + first
                } else {
                    i * step + first
                }
            })
            .collect();
        if let Some(e) = edges.last_mut() {
            *e = last;
        }
        Bins {
            first,
            last,
            n,
            edges,
        }
    }

    /// The bin of `x`, as numpy's histogram finds it.
    #[inline]
    fn index(&self, x: f64) -> Option<usize> {
        if self.n == 0 || !(x >= self.first && x <= self.last) {
            return None;
        }
        let f = (x - self.first) / (self.last - self.first) * self.n as f64;
        // A float-to-int cast saturates (NaN gives 0), like numpy's intp cast
        // for every value reachable here.
        let mut i = (f as usize).min(self.n);
        if i == self.n {
            i -= 1;
        }
        if x < self.edges[i] && i > 0 {
            i -= 1;
        }
        if i + 1 < self.n && x >= self.edges[i + 1] {
            i += 1;
        }
        Some(i)
    }
}

/// Elements between two looks at the cancel flag and progress reports.
const TICK: u64 = 1 << 16;

/// Statistics of a tensor's values, in two passes over its bytes: counts,
/// min, max and mean, then the spread and the histogram of `bins` bins.
/// NaN and infinite values are counted, and left out of everything else.
///
/// `progress(done, total)` is called now and then with elements visited so
/// far over both passes (`total` is twice the element count). Setting
/// `cancel` stops the work at the next check with an `Interrupted` error.
/// Read errors of the source are returned; missing bytes are not errors.
pub fn stats(
    t: &Tensor,
    data: &dyn Source,
    bins: usize,
    cancel: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> io::Result<Stats> {
    let decoded = super::varints::raw(t, data, u64::MAX);
    let (t, data) = super::varints::as_raw(t, data, &decoded);
    let p = Plan::new(t, data);
    let total = p.numel.saturating_mul(2);
    let cancelled = || io::Error::new(io::ErrorKind::Interrupted, "statistics cancelled");
    let mut done = 0u64;
    let mut next = 0u64;
    // Counts `n` more elements; false when cancelled.
    let mut tick = |n: u64| -> bool {
        done = done.saturating_add(n);
        if done >= next {
            next = done.saturating_add(TICK);
            if cancel.load(Ordering::Relaxed) {
                return false;
            }
            progress(done.min(total), total);
        }
        true
    };
    let mut s = Stats {
        count: 0,
        nan: 0,
        inf: 0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        mean: f64::NAN,
        std: f64::NAN,
        hist: vec![0; bins],
        missing: 0,
    };
    let mut sum = Sum::default();
    let (dtype, be) = (p.dtype, p.be);
    if !tick(0) {
        return Err(cancelled());
    }
    let finished = walk(&p, data, 0, p.numel, true, true, |item| {
        match item {
            Item::Here(bytes, bit) => match decode_at(dtype, bytes, bit, be) {
                Some(v) => {
                    let x = v.as_f64();
                    if x.is_nan() {
                        s.nan += 1;
                    } else if x.is_infinite() {
                        s.inf += 1;
                    } else {
                        s.count += 1;
                        s.min = s.min.min(x);
                        s.max = s.max.max(x);
                        sum.add(x);
                    }
                }
                None => s.missing += 1,
            },
            Item::Gone(n) => {
                s.missing += n;
                return tick(n);
            }
        }
        tick(1)
    })?;
    if !finished {
        return Err(cancelled());
    }
    if s.count == 0 {
        s.min = f64::NAN;
        s.max = f64::NAN;
        progress(total, total);
        return Ok(s);
    }
    let mean = sum.total() / s.count as f64;
    s.mean = mean;
    let hist = Bins::new(s.min, s.max, bins);
    let mut sq = Sum::default();
    let mut counts = vec![0u64; bins];
    let finished = walk(&p, data, 0, p.numel, true, true, |item| match item {
        Item::Here(bytes, bit) => {
            if let Some(v) = decode_at(dtype, bytes, bit, be) {
                let x = v.as_f64();
                if x.is_finite() {
                    let d = x - mean;
                    sq.add(d * d);
                    if let Some(i) = hist.index(x) {
                        counts[i] += 1;
                    }
                }
            }
            tick(1)
        }
        Item::Gone(n) => tick(n),
    })?;
    if !finished {
        return Err(cancelled());
    }
    s.std = (sq.total() / s.count as f64).sqrt();
    s.hist = counts;
    progress(total, total);
    Ok(s)
}
