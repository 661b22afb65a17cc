//! Synthetic workloads with documented distributions, for runs of any size.
//!
//! - **Sizes**: GPUs per node drawn from a weighted mix, by default 1: 40 %, 2: 25 %, 3: 5 %,
//!   4: 20 %, 8: 10 % (multi-GPU heavy, like the multigpu50 mix of the Alibaba trace but with
//!   more 2- and 4-GPU jobs, which is where intra-node placement matters). A share of the
//!   full-node jobs (default 10 %) spans 2 nodes.
//! - **Durations**: log-normal, median 30 min, σ = 1.5 (a heavy tail like the Philly and
//!   Helios traces: p90 ≈ 3.4 h), capped at 7 days.
//! - **Arrivals**: Poisson; the rate is set so that the offered load (GPU-seconds asked per
//!   second) is `load` × the cluster's GPUs (default 0.9).
//! - **Users**: uniform over 50 users.
//!
//! Everything is drawn from [`super::rng::Rng`] seeded by `seed`, so a seed fixes the workload.

use super::Job;
use super::rng::Rng;

/// Parameters of the synthetic generator.
#[derive(Clone, Debug)]
pub struct Synthetic {
    /// Number of jobs.
    pub jobs: usize,
    /// Seed.
    pub seed: u64,
    /// Offered load as a share of the cluster's GPUs.
    pub load: f64,
    /// (GPUs per node, weight).
    pub sizes: Vec<(u8, f64)>,
    /// Share of the largest-size jobs that span two nodes.
    pub multi_node: f64,
    /// Median duration, seconds.
    pub median_s: f64,
    /// Log-normal shape.
    pub sigma: f64,
    /// Duration cap, seconds.
    pub max_s: f64,
    /// Number of users.
    pub users: u32,
}

impl Synthetic {
    /// The documented defaults for `jobs` jobs and `seed`.
    pub fn new(jobs: usize, seed: u64) -> Self {
        Synthetic {
            jobs,
            seed,
            load: 0.9,
            sizes: vec![(1, 0.40), (2, 0.25), (3, 0.05), (4, 0.20), (8, 0.10)],
            multi_node: 0.1,
            median_s: 1800.0,
            sigma: 1.5,
            max_s: 7.0 * 86_400.0,
            users: 50,
        }
    }

    /// Draws the workload for a cluster of `cluster_gpus` GPUs.
    pub fn generate(&self, cluster_gpus: u64) -> Vec<Job> {
        let mut rng = Rng::derive(self.seed, 0x5E7);
        let weights: Vec<f64> = self.sizes.iter().map(|s| s.1).collect();
        let largest = self.sizes.iter().map(|s| s.0).max().unwrap_or(1);
        let mut jobs: Vec<Job> = (0..self.jobs)
            .map(|_| {
                let k = self.sizes.get(rng.weighted(&weights)).map_or(1, |s| s.0);
                let nodes = if k == largest && rng.f64() < self.multi_node {
                    2
                } else {
                    1
                };
                Job {
                    submit: 0.0,
                    duration: rng
                        .lognormal(self.median_s, self.sigma)
                        .min(self.max_s)
                        .max(1.0),
                    gpus_per_node: k,
                    nodes,
                    user: rng.below(u64::from(self.users.max(1))) as u32,
                }
            })
            .collect();
        let demand: f64 = jobs
            .iter()
            .map(|j| f64::from(j.gpus_per_node) * f64::from(j.nodes) * j.duration)
            .sum::<f64>()
            / self.jobs.max(1) as f64;
        let gap = demand / (self.load.max(1e-6) * cluster_gpus.max(1) as f64);
        let mut t = 0.0;
        for j in &mut jobs {
            j.submit = t;
            t += rng.exp(gap);
        }
        jobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_loaded_as_asked() {
        let g = Synthetic::new(5000, 42);
        let a = g.generate(800);
        assert_eq!(a, g.generate(800));
        assert_ne!(a, Synthetic::new(5000, 43).generate(800));
        let span = a.last().map(|j| j.submit).unwrap_or(0.0);
        let demand: f64 = a
            .iter()
            .map(|j| f64::from(j.gpus_per_node) * f64::from(j.nodes) * j.duration)
            .sum();
        let load = demand / span / 800.0;
        assert!((0.8..1.0).contains(&load), "{load}");
        let multi = a.iter().filter(|j| j.gpus_per_node >= 2).count() as f64 / 5000.0;
        assert!((0.55..0.65).contains(&multi), "{multi}");
        assert!(a.iter().any(|j| j.nodes == 2));
    }
}
