//! Latency samples and their summary: every timed operation's duration is kept (in
//! nanoseconds), the samples of all workers are merged, and percentiles are taken by the
//! nearest-rank method on the sorted set, so p50/p99 are durations that really occurred.

use std::time::Duration;

/// Durations of one worker's operations, in nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    nanos: Vec<u64>,
}

impl Samples {
    pub fn with_capacity(n: usize) -> Self {
        Samples {
            nanos: Vec::with_capacity(n),
        }
    }

    pub fn record(&mut self, d: Duration) {
        self.nanos
            .push(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    /// Appends another worker's samples.
    pub fn merge(&mut self, other: Samples) {
        self.nanos.extend(other.nanos);
    }

    /// Sorts the samples and summarises them.
    pub fn summarize(mut self) -> Summary {
        self.nanos.sort_unstable();
        let n = self.nanos.len();
        if n == 0 {
            return Summary::default();
        }
        let sum: u128 = self.nanos.iter().map(|&v| u128::from(v)).sum();
        Summary {
            count: n as u64,
            mean_us: sum as f64 / n as f64 / 1000.0,
            p50_us: nearest_rank(&self.nanos, 50.0) as f64 / 1000.0,
            p99_us: nearest_rank(&self.nanos, 99.0) as f64 / 1000.0,
            max_us: self.nanos[n - 1] as f64 / 1000.0,
        }
    }
}

/// Count, mean and percentiles of a set of samples, in microseconds. All zero when empty.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// The nearest-rank `p`-th percentile (0 < p <= 100) of ascending `sorted`: the smallest
/// value with at least p% of the samples at or below it. Empty input gives 0.
pub fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50.0), 50);
        assert_eq!(nearest_rank(&v, 99.0), 99);
        assert_eq!(nearest_rank(&v, 100.0), 100);
        assert_eq!(nearest_rank(&v, 0.5), 1);
    }

    #[test]
    fn nearest_rank_small_sets() {
        assert_eq!(nearest_rank(&[], 50.0), 0);
        assert_eq!(nearest_rank(&[7], 50.0), 7);
        assert_eq!(nearest_rank(&[7], 99.0), 7);
        // Two samples: p50 is the first (rank ceil(1.0) = 1), p99 the second.
        assert_eq!(nearest_rank(&[3, 9], 50.0), 3);
        assert_eq!(nearest_rank(&[3, 9], 99.0), 9);
        // Ten samples: p99 is the maximum, p50 the fifth.
        let v: Vec<u64> = (10..20).collect();
        assert_eq!(nearest_rank(&v, 99.0), 19);
        assert_eq!(nearest_rank(&v, 50.0), 14);
    }

    #[test]
    fn summary_merges_workers_and_sorts() {
        let mut a = Samples::default();
        let mut b = Samples::default();
        // Worker a saw 1..=50 µs in descending order, worker b 51..=100 µs.
        for us in (1..=50u64).rev() {
            a.record(Duration::from_micros(us));
        }
        for us in 51..=100u64 {
            b.record(Duration::from_micros(us));
        }
        a.merge(b);
        let s = a.summarize();
        assert_eq!(s.count, 100);
        assert_eq!(s.p50_us, 50.0);
        assert_eq!(s.p99_us, 99.0);
        assert_eq!(s.max_us, 100.0);
        assert!((s.mean_us - 50.5).abs() < 1e-9);
    }

    #[test]
    fn sub_microsecond_precision_is_kept() {
        let mut s = Samples::default();
        s.record(Duration::from_nanos(1500));
        let sum = s.summarize();
        assert_eq!(sum.p50_us, 1.5);
    }

    #[test]
    fn empty_summary_is_zero() {
        assert_eq!(Samples::default().summarize(), Summary::default());
    }
}
