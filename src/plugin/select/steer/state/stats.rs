//! Counters of the select hooks, logged with the decision log and read by
//! `contrib/bench-select.sh`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters for the decision log and the benchmark (`contrib/bench-select.sh`).
#[derive(Debug, Default)]
pub struct Stats {
    /// `select_p_job_test` calls seen (all modes).
    pub calls: AtomicU64,
    /// Time spent in gputopo's own work inside those calls, excluding cons_tres (ns).
    pub own_ns: AtomicU64,
    /// Time spent inside cons_tres (ns).
    pub stock_ns: AtomicU64,
    /// Extra cons_tres calls made by narrowing and exclusion.
    pub extra_stock_calls: AtomicU64,
    /// GPU selections replaced by the engine's choice.
    pub replaced: AtomicU64,
    /// Nodes excluded because they would have handed out a faulty GPU.
    pub excluded: AtomicU64,
    /// Calls served by the degraded path after a panic ([`super::super::degraded`]).
    pub degraded_calls: AtomicU64,
    /// When the counters were last logged (seconds since the epoch).
    pub logged_at: AtomicU64,
}

impl Stats {
    /// True (at most once per `every_secs`) when the counters are due for a log line.
    pub fn due(&self, every_secs: u64) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.logged_at.load(Ordering::Relaxed);
        now >= last + every_secs
            && self
                .logged_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Adds `d` to a counter.
    pub fn add(counter: &AtomicU64, d: u64) {
        counter.fetch_add(d, Ordering::Relaxed);
    }

    /// One line for the log and `contrib/bench-select.sh`:
    /// `job_test calls=N own_us=.. stock_us=.. own_us_per_call=.. stock_us_per_call=.. ...`.
    pub fn summary(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let calls = g(&self.calls).max(1);
        format!(
            "job_test calls={} own_us={} stock_us={} own_us_per_call={:.1} stock_us_per_call={:.1} extra_stock_calls={} replaced={} excluded={} degraded_calls={}",
            g(&self.calls),
            g(&self.own_ns) / 1000,
            g(&self.stock_ns) / 1000,
            g(&self.own_ns) as f64 / 1000.0 / calls as f64,
            g(&self.stock_ns) as f64 / 1000.0 / calls as f64,
            g(&self.extra_stock_calls),
            g(&self.replaced),
            g(&self.excluded),
            g(&self.degraded_calls),
        )
    }
}
