//! What the evaluation measures, per policy, and how.
//!
//! - **optimal share**: of the multi-GPU node allocations, the share whose quality
//!   ([`gputopo_core::placement::engine::score`]: bottleneck, then aggregate GB/s) equals the best
//!   quality the engine finds among the node's free healthy GPUs at that moment.
//! - **interconnect score**: mean and worst bottleneck (GB/s per direction, the engine's
//!   per-pair estimate) of the multi-GPU node allocations.
//! - **stranded GPUs** (after FGD, ATC'23): free healthy GPUs on nodes that have fewer free
//!   GPUs than a waiting job wants per node, weighted by the share of waiting jobs of each
//!   size, averaged over time (0 while nothing waits).
//! - **queueing delay**: start − submit, mean and p95, over the jobs that started.
//! - **completion time**: end − submit under the slowdown model of [`super::comm`]; and the
//!   slowdown factors of multi-GPU jobs (mean, p75, worst).
//! - **unrunnable**: queued jobs dropped once faults left too few healthy GPUs to ever host
//!   them (health-aware runs only; otherwise a strict FIFO queue would stall for good).
//! - **faulty allocations**: jobs given a GPU that was faulty when they started.
//! - **decisions per second**: placement attempts (queue-head jobs tried, started or not)
//!   divided by the wall time spent in them (node choice and GPU choice).

/// Results of one policy on one workload.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Policy name.
    pub policy: String,
    /// Jobs in the workload (after rejecting those that can never fit).
    pub jobs: u64,
    /// Jobs rejected at load time (bigger than the cluster allows).
    pub rejected: u64,
    /// Jobs that started.
    pub started: u64,
    /// Jobs dropped from the queue because faults left too few healthy GPUs for them.
    pub unrunnable: u64,
    /// Multi-GPU node allocations (one per node of a job with ≥ 2 GPUs per node).
    pub multi_gpu_allocs: u64,
    /// Of those, the ones at the best achievable quality.
    pub optimal_allocs: u64,
    /// `optimal_allocs / multi_gpu_allocs` (1 when there is none).
    pub optimal_share: f64,
    /// Mean bottleneck (GB/s) of multi-GPU node allocations.
    pub mean_bottleneck_gbps: f64,
    /// Worst bottleneck (GB/s) of multi-GPU node allocations.
    pub worst_bottleneck_gbps: f64,
    /// Time-averaged stranded GPUs.
    pub stranded_gpus: f64,
    /// Time-averaged share of healthy GPUs allocated.
    pub utilization: f64,
    /// Mean queueing delay, seconds.
    pub wait_mean_s: f64,
    /// 95th percentile queueing delay, seconds.
    pub wait_p95_s: f64,
    /// Mean queueing delay of jobs with 4 or more GPUs per node (the ones fragmentation
    /// delays), seconds.
    pub wait_large_mean_s: f64,
    /// Mean completion time (end − submit), seconds.
    pub jct_mean_s: f64,
    /// 95th percentile completion time, seconds.
    pub jct_p95_s: f64,
    /// Mean slowdown factor of multi-GPU jobs (1 = ideal set).
    pub slowdown_mean: f64,
    /// 75th percentile slowdown of multi-GPU jobs.
    pub slowdown_p75: f64,
    /// Worst slowdown of multi-GPU jobs.
    pub slowdown_max: f64,
    /// Jobs given a faulty GPU.
    pub faulty_allocs: u64,
    /// GPU faults that happened during the run.
    pub faults: u64,
    /// Time of the last job end, seconds.
    pub makespan_s: f64,
    /// Placement attempts.
    pub decisions: u64,
    /// Placement attempts per wall-clock second.
    pub decisions_per_s: f64,
    /// Wall-clock seconds of the whole simulation.
    pub wall_s: f64,
}

/// The `p`-quantile (0..=1) of `v` by nearest rank; 0 for an empty slice. Sorts `v`.
pub fn quantile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Running sums while a simulation goes.
#[derive(Debug, Default)]
pub(crate) struct Acc {
    pub waits: Vec<f64>,
    /// Waits of jobs with 4 or more GPUs per node.
    pub large_waits: Vec<f64>,
    pub jcts: Vec<f64>,
    pub slowdowns: Vec<f64>,
    pub multi: u64,
    pub optimal: u64,
    pub bottleneck_sum: f64,
    pub bottleneck_min: Option<u32>,
    pub stranded_area: f64,
    pub busy_area: f64,
    pub healthy_area: f64,
    pub faulty_allocs: u64,
    pub faults: u64,
    pub unrunnable: u64,
    pub decisions: u64,
    pub decision_ns: u128,
    pub makespan: f64,
}

impl Acc {
    /// Records a multi-GPU node allocation.
    pub fn allocation(&mut self, bottleneck: u32, optimal: bool) {
        self.multi += 1;
        self.optimal += u64::from(optimal);
        self.bottleneck_sum += f64::from(bottleneck);
        self.bottleneck_min = Some(
            self.bottleneck_min
                .map_or(bottleneck, |m| m.min(bottleneck)),
        );
    }

    pub fn finish(mut self, policy: &str, jobs: u64, rejected: u64, wall_s: f64) -> Summary {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let mean = |v: &[f64]| ratio(v.iter().sum(), v.len() as f64);
        Summary {
            policy: policy.to_string(),
            jobs,
            rejected,
            started: self.waits.len() as u64,
            unrunnable: self.unrunnable,
            multi_gpu_allocs: self.multi,
            optimal_allocs: self.optimal,
            optimal_share: if self.multi == 0 {
                1.0
            } else {
                self.optimal as f64 / self.multi as f64
            },
            mean_bottleneck_gbps: ratio(self.bottleneck_sum, self.multi as f64),
            worst_bottleneck_gbps: f64::from(self.bottleneck_min.unwrap_or(0)),
            stranded_gpus: ratio(self.stranded_area, self.makespan),
            utilization: ratio(self.busy_area, self.healthy_area),
            wait_mean_s: mean(&self.waits),
            wait_p95_s: quantile(&mut self.waits, 0.95),
            wait_large_mean_s: mean(&self.large_waits),
            jct_mean_s: mean(&self.jcts),
            jct_p95_s: quantile(&mut self.jcts, 0.95),
            slowdown_mean: if self.slowdowns.is_empty() {
                1.0
            } else {
                mean(&self.slowdowns)
            },
            slowdown_p75: quantile(&mut self.slowdowns, 0.75).max(1.0),
            slowdown_max: self.slowdowns.iter().copied().fold(1.0, f64::max),
            faulty_allocs: self.faulty_allocs,
            faults: self.faults,
            makespan_s: self.makespan,
            decisions: self.decisions,
            decisions_per_s: ratio(self.decisions as f64, self.decision_ns as f64 / 1e9),
            wall_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_summary() {
        let mut v = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&mut v, 0.5), 3.0);
        assert_eq!(quantile(&mut v, 0.95), 5.0);
        assert_eq!(quantile(&mut [], 0.5), 0.0);
        let mut a = Acc::default();
        a.allocation(50, true);
        a.allocation(10, false);
        a.waits = vec![0.0, 10.0];
        a.slowdowns = vec![1.0, 1.5];
        let s = a.finish("x", 2, 0, 0.1);
        assert_eq!(s.optimal_share, 0.5);
        assert_eq!(s.mean_bottleneck_gbps, 30.0);
        assert_eq!(s.worst_bottleneck_gbps, 10.0);
        assert_eq!(s.wait_mean_s, 5.0);
        assert_eq!(s.slowdown_max, 1.5);
    }
}
