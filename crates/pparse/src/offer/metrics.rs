//! Metrics of a run: each metric's values against their steps, kept in
//! bounded memory, and what a pass over a log of them found. A format that
//! holds such logs offers a [`super::MetricsScan`] that fills these.

use std::collections::HashMap;

/// Metric names listed at most; values of further names are only counted.
pub const MAX_NAMES: usize = 10_000;
/// Buckets kept per series: up to twice as many points are plotted.
pub const MAX_BUCKETS: usize = 50_000;
/// The explorer's default budget: buckets kept over all series by a first
/// pass over a log before it gives them up for reads of one metric at a time.
pub const SERIES_BUDGET: usize = 500_000;

/// Min and max of `n` consecutive values, each with its step.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    n: u64,
    lo: (f64, f64),
    hi: (f64, f64),
}

fn merge(a: Bucket, b: Bucket) -> Bucket {
    Bucket {
        n: a.n + b.n,
        lo: if b.lo.1 < a.lo.1 { b.lo } else { a.lo },
        hi: if b.hi.1 > a.hi.1 { b.hi } else { a.hi },
    }
}

/// One metric's values against their steps.
#[derive(Clone, Debug)]
pub struct Series {
    buckets: Vec<Bucket>,
    /// Values per bucket (a power of two).
    pub width: u64,
    /// The points to plot, ordered by step (set by [`Series::finish`]).
    pub points: Vec<(f64, f64)>,
    /// Every value, NaN and infinities included.
    pub count: u64,
    /// NaN values.
    pub nan: u64,
    /// Infinite values.
    pub inf: u64,
    /// Of the finite values.
    pub min: f64,
    /// See `min`.
    pub max: f64,
    /// The value of the last record holding the metric.
    pub last: f64,
    /// Lowest and highest step of any value.
    pub steps: Option<(f64, f64)>,
}

impl Default for Series {
    fn default() -> Series {
        Series {
            buckets: Vec::new(),
            width: 1,
            points: Vec::new(),
            count: 0,
            nan: 0,
            inf: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            last: f64::NAN,
            steps: None,
        }
    }
}

impl Series {
    /// Adds a value at `step`; past [`MAX_BUCKETS`] buckets, neighbours merge.
    pub fn push(&mut self, step: f64, v: f64) {
        self.count += 1;
        self.last = v;
        self.steps = Some(match self.steps {
            Some((a, b)) => (a.min(step), b.max(step)),
            None => (step, step),
        });
        if v.is_nan() {
            self.nan += 1;
            return;
        }
        if v.is_infinite() {
            self.inf += 1;
            return;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let p = (step, v);
        match self.buckets.last_mut() {
            Some(b) if b.n < self.width => *b = merge(*b, Bucket { n: 1, lo: p, hi: p }),
            _ => self.buckets.push(Bucket { n: 1, lo: p, hi: p }),
        }
        if self.buckets.len() > MAX_BUCKETS {
            // Pairs of neighbours become one: only the last can be partial.
            self.buckets = self
                .buckets
                .chunks(2)
                .map(|c| {
                    c.iter()
                        .copied()
                        .reduce(merge)
                        .expect("chunks are not empty")
                })
                .collect();
            self.width *= 2;
        }
    }

    /// Buckets held (what the memory budget counts).
    pub fn held(&self) -> usize {
        self.buckets.len()
    }

    /// Finite values.
    pub fn finite(&self) -> u64 {
        self.count - self.nan - self.inf
    }

    /// Whether values were merged into min/max buckets.
    pub fn downsampled(&self) -> bool {
        self.width > 1
    }

    /// Makes the points to plot and drops the buckets.
    pub fn finish(&mut self) {
        let mut pts = Vec::with_capacity(self.buckets.len() * 2);
        for b in &self.buckets {
            let (a, c) = if b.lo.0 <= b.hi.0 {
                (b.lo, b.hi)
            } else {
                (b.hi, b.lo)
            };
            pts.push(a);
            if b.n > 1 && c != a {
                pts.push(c);
            }
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.points = pts;
        self.buckets = Vec::new();
    }
}

/// What a pass over a log found.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    /// Metric names with their number of values: user metrics by name, then
    /// the `_` ones (`_step`, `_runtime`, ...).
    pub names: Vec<(String, u64)>,
    /// Values of names past [`MAX_NAMES`], not listed.
    pub unlisted: u64,
    /// Records read.
    pub records: u64,
    /// History records among them.
    pub history: u64,
    /// Damage in the log, and records that do not decode.
    pub damaged: u64,
    /// The series read (finished), by name.
    pub series: HashMap<String, Series>,
    /// `series` holds every listed name.
    pub every_series: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_series_keep_their_extremes_in_bounded_memory() {
        let mut s = Series::default();
        let n = 1_000_003u64;
        for i in 0..n {
            let v = if i == 777_777 {
                1e6
            } else if i == 5 {
                -1e6
            } else if i == 42 {
                f64::NAN
            } else {
                (i % 100) as f64
            };
            s.push(i as f64, v);
            assert!(s.held() <= MAX_BUCKETS);
        }
        assert!(s.downsampled());
        s.finish();
        assert!(s.points.len() <= 2 * MAX_BUCKETS);
        assert!(s.points.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(s.points.contains(&(777_777.0, 1e6)));
        assert!(s.points.contains(&(5.0, -1e6)));
        assert_eq!((s.count, s.nan, s.inf), (n, 1, 0));
        assert_eq!((s.min, s.max), (-1e6, 1e6));
        assert_eq!(s.steps, Some((0.0, (n - 1) as f64)));
        // A short series is kept whole.
        let mut t = Series::default();
        for i in 0..10 {
            t.push(9.0 - i as f64, i as f64);
        }
        t.finish();
        assert_eq!(t.points.len(), 10);
        assert_eq!(t.points[0], (0.0, 9.0));
        assert_eq!(t.last, 9.0);
    }
}
