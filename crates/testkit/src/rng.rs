//! The seeded PRNG of the tests: xorshift64 (shifts 13, 7, 17), small and the same sequence
//! on every machine, so a failure replays from its seed. It must never change its sequence:
//! tests' expectations (and stored seeds) depend on it.

/// Xorshift64 over a non-zero state (a zero state stays zero; callers pass `seed | 1`).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next value: the state after one xorshift step.
    #[allow(
        clippy::should_implement_trait,
        reason = "an infinite stream, not an Iterator"
    )]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n` (n > 0; modulo bias ignored).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with a probability of `pct` percent.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// `SHALE_SEED` alone when set (to replay a failure), else `default_count` random seeds.
#[allow(
    clippy::expect_used,
    reason = "a test setting: a SHALE_SEED that is not a number stops the run loudly"
)]
pub fn seeds(default_count: usize) -> Vec<u64> {
    match std::env::var("SHALE_SEED") {
        Ok(s) => vec![s.parse().expect("SHALE_SEED is a number")],
        Err(_) => (0..default_count).map(|_| rand::random()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_never_changes() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            assert_eq!(r.next(), x);
        }
        let mut r = Rng(1);
        assert_eq!(r.next(), 1082269761);
    }
}
