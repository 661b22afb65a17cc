//! Throttled-GPU scenario (issue 13 item 8): a share of the GPUs runs slower because it is hot
//! or power-capped, and a multi-GPU job runs at its slowest GPU's speed.
//!
//! # Model
//! - **Time** in health checks (`HealthCheckInterval`, one step each). Each GPU throttles and
//!   recovers on its own two-state Markov chain: a throttle spell lasts `mean_spell` checks on
//!   average and `throttled_share` of the GPUs are throttled at any time (the chain's steady
//!   state, also its start). The trajectory is drawn once per seed, independently of the
//!   placements, so every policy sees the same hardware.
//! - **Speed**: a throttled GPU runs at `throttled_speed`; each step a running job advances by
//!   the speed of its slowest GPU in that step. Its slowdown is its run time over its ideal
//!   run time (1.0 = never slowed). The interconnect is not counted here (`sim::comm` does
//!   that in the main evaluation): only heat.
//! - **Jobs**: Poisson arrivals at `load` of the GPUs, sizes 1/2/4/8 GPUs on one node
//!   ([`SIZES`]), exponential ideal run times (mean `mean_duration` checks, at least 1), strict
//!   FIFO (the queue head starts as soon as some node has enough free GPUs).
//! - **What the policies see**: the telemetry-aware policy sees only what the agent publishes,
//!   computed by the agent's own rules: each check it turns the GPU's clock-event reasons
//!   ([`telemetry::signals`]) into the sustained `degraded` verdict through the hysteresis
//!   ([`Track::step`], `TelemetryRaiseChecks=2`, `TelemetryClearChecks=3`) and the warm set
//!   `w` ([`telemetry::warm`]: throttling now, not sustained yet; held by its own hysteresis,
//!   `WarmRaiseChecks=1`, `WarmClearChecks=3`), and the scheduler uses the
//!   previous check's publication (the agent reports once per interval, so a spell is seen
//!   late and its end later still).
//!
//! # Policies
//! - **stock**: cons_tres: the lowest-index node with enough free GPUs, cons_tres's GPU pick
//!   ([`SlurmGreedy`]). It knows nothing of throttling.
//! - **health-only**: gputopo without telemetry (its health verdicts come from ECC, XIDs and
//!   the like, and this scenario has no such faults): the plugin's node ranking
//!   ([`narrow::rank`], through the [`KeyMemo`] the plugin uses) and GPU re-pick ([`repick`]).
//! - **telemetry-aware**: the same with the agent's published `degraded` GPUs (used last) and
//!   `w` GPUs (`PreferCool`: cooler sets and nodes among equally good ones, [`prefer_cool`]).
//!
//! Deterministic for a seed.

use crate::baseline::slurm_greedy::SlurmGreedy;
use crate::sim::rng::Rng;
use gputopo_core::gpuset::GpuSet;
use gputopo_core::health::Reading;
use gputopo_core::health::telemetry::{self, Telemetry, TelemetryPolicy, Track, reason_bits};
use gputopo_core::placement::engine::Gputopo;
use gputopo_core::placement::{Policy, Prepared, Request};
use gputopo_core::steer::HealthMasks;
use gputopo_core::steer::cool::prefer_cool;
use gputopo_core::steer::key_memo::KeyMemo;
use gputopo_core::steer::narrow::{self, Candidate};
use gputopo_core::steer::repick::{Constraints, NodeInput, repick};
use gputopo_core::topology::NodeTopology;
use std::collections::VecDeque;

/// Job sizes (GPUs on one node) and their shares.
pub const SIZES: [(usize, f64); 4] = [(1, 0.25), (2, 0.35), (4, 0.3), (8, 0.1)];

/// One scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Nodes (all of one topology).
    pub nodes: usize,
    /// Health checks during which jobs arrive (the run goes on until they finish).
    pub checks: usize,
    /// Share of GPUs throttled at any time.
    pub throttled_share: f64,
    /// Mean length of a throttle spell, in checks.
    pub mean_spell: f64,
    /// Speed of a throttled GPU (0.6: 60 % clocks).
    pub throttled_speed: f64,
    /// Offered load, a share of the GPUs.
    pub load: f64,
    /// Mean ideal run time of a job, in checks.
    pub mean_duration: f64,
    /// RNG seed.
    pub seed: u64,
}

/// Which placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Stock cons_tres.
    Stock,
    /// gputopo, health verdicts only (no telemetry).
    HealthOnly,
    /// gputopo with the agent's telemetry verdicts and warm set.
    TelemetryAware,
}

impl View {
    /// The three, in report order.
    pub const ALL: [View; 3] = [View::Stock, View::HealthOnly, View::TelemetryAware];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            View::Stock => "stock cons_tres",
            View::HealthOnly => "gputopo, health only",
            View::TelemetryAware => "gputopo, telemetry-aware",
        }
    }
}

/// Results of one policy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Per finished job: (GPUs, slowdown), in job order.
    pub jobs: Vec<(usize, f64)>,
    /// Checks waited in the queue, summed over finished jobs.
    pub wait_checks: u64,
}

impl Outcome {
    /// Slowdowns of the jobs with at least `min_gpus` GPUs, sorted.
    fn sorted(&self, min_gpus: usize) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .jobs
            .iter()
            .filter(|(k, _)| *k >= min_gpus)
            .map(|j| j.1)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// Jobs with at least `min_gpus` GPUs.
    pub fn count(&self, min_gpus: usize) -> usize {
        self.sorted(min_gpus).len()
    }

    /// Mean slowdown of the jobs with at least `min_gpus` GPUs (1.0 when none).
    pub fn mean(&self, min_gpus: usize) -> f64 {
        let v = self.sorted(min_gpus);
        if v.is_empty() {
            return 1.0;
        }
        v.iter().sum::<f64>() / v.len() as f64
    }

    /// 95th-percentile slowdown (nearest rank) of the jobs with at least `min_gpus` GPUs.
    pub fn p95(&self, min_gpus: usize) -> f64 {
        let v = self.sorted(min_gpus);
        let rank = (v.len() as f64 * 0.95).ceil() as usize;
        v.get(rank.saturating_sub(1)).copied().unwrap_or(1.0)
    }

    /// Share of the jobs with at least `min_gpus` GPUs that were slowed at all.
    pub fn slowed_share(&self, min_gpus: usize) -> f64 {
        let v = self.sorted(min_gpus);
        v.iter().filter(|&&s| s > 1.0 + 1e-9).count() as f64 / v.len().max(1) as f64
    }

    /// Mean wait in the queue, in checks.
    pub fn mean_wait(&self) -> f64 {
        self.wait_checks as f64 / self.jobs.len().max(1) as f64
    }
}

/// One job: submission check, GPUs, ideal run time in checks.
#[derive(Clone, Copy, Debug)]
struct Job {
    submit: usize,
    gpus: usize,
    duration: u32,
}

/// The three policies over the same jobs and the same throttle trajectory, in [`View::ALL`]
/// order.
pub fn run(topo: &NodeTopology, s: &Scenario) -> [Outcome; 3] {
    let jobs = jobs(topo, s);
    // Enough steps for the queue to drain at any sane load; a job still running at the end
    // is left out of every policy's figures alike.
    let horizon = s.checks * 3 + 100;
    let throttle = trajectory(topo, s, horizon);
    View::ALL.map(|v| simulate(topo, s, &jobs, &throttle, horizon, v))
}

/// Throttled GPUs per step and node.
fn trajectory(topo: &NodeTopology, s: &Scenario, steps: usize) -> Vec<Vec<GpuSet>> {
    let mut rng = Rng::derive(s.seed, 1);
    let off = 1.0 / s.mean_spell.max(1.0);
    let share = s.throttled_share.clamp(0.0, 0.99);
    let on = share * off / (1.0 - share);
    let gpus = topo.len();
    let mut now: Vec<GpuSet> = (0..s.nodes)
        .map(|_| pick(gpus, |_| rng.f64() < share))
        .collect();
    let mut out = Vec::with_capacity(steps);
    for _ in 0..steps {
        out.push(now.clone());
        for node in &mut now {
            let was = *node;
            *node = pick(gpus, |g| {
                let p = if was.contains(g) { 1.0 - off } else { on };
                rng.f64() < p
            });
        }
    }
    out
}

fn pick(gpus: usize, mut f: impl FnMut(usize) -> bool) -> GpuSet {
    let mut set = GpuSet::EMPTY;
    for g in 0..gpus {
        if f(g) {
            set.insert(g);
        }
    }
    set
}

/// Poisson arrivals at the scenario's load.
fn jobs(topo: &NodeTopology, s: &Scenario) -> Vec<Job> {
    let mut rng = Rng::derive(s.seed, 2);
    let weights: Vec<f64> = SIZES.iter().map(|z| z.1).collect();
    let mean_gpus: f64 = SIZES.iter().map(|(k, w)| *k as f64 * w).sum();
    let rate = s.load * (s.nodes * topo.len()) as f64 / (mean_gpus * s.mean_duration);
    let mut out = Vec::new();
    let mut t = rng.exp(1.0 / rate);
    while t < s.checks as f64 {
        let gpus = SIZES[rng.weighted(&weights)].0.min(topo.len());
        let duration = rng.exp(s.mean_duration).ceil().max(1.0) as u32;
        out.push(Job {
            submit: t as usize,
            gpus,
            duration,
        });
        t += rng.exp(1.0 / rate);
    }
    out
}

/// What the agent published for a node: (degraded, warm).
type Published = (GpuSet, GpuSet);

/// The agent's health check of one node: each GPU's clock-event reasons through the real
/// telemetry rule and hysteresis (tracks 0-4: the signals; 5: the warm set `w`).
fn check(
    throttled: GpuSet,
    gpus: usize,
    tracks: &mut [[Track; 6]],
    p: &TelemetryPolicy,
) -> Published {
    let (mut degraded, mut warm) = (GpuSet::EMPTY, GpuSet::EMPTY);
    for (g, track) in tracks.iter_mut().enumerate().take(gpus) {
        let bits = if throttled.contains(g) {
            reason_bits::HW_SLOWDOWN
        } else {
            0
        };
        let t = Telemetry {
            clock_events: Reading::Value(bits),
            ..Telemetry::default()
        };
        for (i, (signal, seen)) in telemetry::signals(&t, p).into_iter().enumerate() {
            track[i] = track[i].step(seen, &p.for_signal(signal));
        }
        let w = &mut track[5];
        *w = w.step(telemetry::warm_seen(&t, p), &telemetry::warm_policy(p));
        if track[..5].iter().any(|x| x.on) {
            degraded.insert(g);
        } else if track[5].on {
            warm.insert(g);
        }
    }
    (degraded, warm)
}

fn simulate(
    topo: &NodeTopology,
    s: &Scenario,
    jobs: &[Job],
    throttle: &[Vec<GpuSet>],
    horizon: usize,
    view: View,
) -> Outcome {
    let engine = Gputopo::new();
    let Some(tables) = engine.handle(topo) else {
        return Outcome::default();
    };
    let prepared = Prepared::new(&engine, [(topo, tables)]);
    let mut memo = KeyMemo::default();
    let policy = TelemetryPolicy::default();
    let gpus = topo.len();
    let mut tracks = vec![vec![[Track::default(); 6]; gpus]; s.nodes];
    let mut published: Vec<Published> = vec![(GpuSet::EMPTY, GpuSet::EMPTY); s.nodes];
    let mut alloc = vec![GpuSet::EMPTY; s.nodes];
    // Running jobs: (job, node, GPUs, start, progress).
    let mut running: Vec<(usize, usize, GpuSet, usize, f64)> = Vec::new();
    let mut queue = VecDeque::new();
    let mut out = Outcome::default();
    let mut done = vec![None; jobs.len()];
    let mut next = 0;
    for (t, throttled) in throttle.iter().enumerate().take(horizon) {
        while jobs.get(next).is_some_and(|j| j.submit <= t) {
            queue.push_back(next);
            next += 1;
        }
        while let Some(&j) = queue.front() {
            let k = jobs[j].gpus;
            let Some((node, set)) = place(topo, &prepared, &mut memo, &alloc, &published, k, view)
            else {
                break;
            };
            queue.pop_front();
            alloc[node] = alloc[node].union(set);
            out.wait_checks += (t - jobs[j].submit) as u64;
            running.push((j, node, set, t, 0.0));
        }
        running.retain_mut(|(j, node, set, start, progress)| {
            let slow = !set.intersection(throttled[*node]).is_empty();
            *progress += if slow { s.throttled_speed } else { 1.0 };
            let ideal = f64::from(jobs[*j].duration);
            if *progress + 1e-9 < ideal {
                return true;
            }
            alloc[*node] = alloc[*node].difference(*set);
            done[*j] = Some((t + 1 - *start) as f64 / ideal);
            false
        });
        for (node, p) in published.iter_mut().enumerate() {
            *p = check(throttled[node], gpus, &mut tracks[node], &policy);
        }
        if next == jobs.len() && queue.is_empty() && running.is_empty() {
            break;
        }
    }
    out.jobs = jobs
        .iter()
        .zip(done)
        .filter_map(|(j, d)| Some((j.gpus, d?)))
        .collect();
    out
}

/// The node and GPUs `view` gives a job of `k` GPUs now, if any node has room.
fn place(
    topo: &NodeTopology,
    prepared: &Prepared<'_>,
    memo: &mut KeyMemo,
    alloc: &[GpuSet],
    published: &[Published],
    k: usize,
    view: View,
) -> Option<(usize, GpuSet)> {
    let free = |n: usize| topo.all().difference(alloc[n]);
    let stock = |n: usize| SlurmGreedy::V24_11.choose(topo, free(n), &Request::new(k));
    if view == View::Stock {
        let node = (0..alloc.len()).find(|&n| free(n).len() >= k)?;
        return Some((node, stock(node)?));
    }
    let aware = view == View::TelemetryAware;
    let masks = |n: usize| HealthMasks {
        faulty: GpuSet::EMPTY,
        degraded: if aware { published[n].0 } else { GpuSet::EMPTY },
    };
    let warm = |n: usize| if aware { published[n].1 } else { GpuSet::EMPTY };
    let cands: Vec<Candidate<'_>> = (0..alloc.len())
        .filter(|&n| free(n).len() >= k)
        .map(|n| Candidate {
            node: n,
            topo,
            free: free(n),
            of_type: topo.all(),
            health: masks(n),
            weight: 0,
            warm: warm(n),
        })
        .collect();
    let ranked = narrow::rank_with(&cands, |_, c| {
        memo.key(c, k, || narrow::node_key(prepared, c, k))
    });
    let node = ranked.first()?.0;
    let picked = stock(node)?;
    let input = NodeInput {
        topo,
        stock: picked,
        constraints: Constraints {
            allocated: alloc[node],
            ..Constraints::none(topo)
        },
        health: masks(node),
        near: GpuSet::EMPTY,
        whole_node: false,
    };
    let mut decision = repick(prepared, &input);
    if !warm(node).is_empty() {
        decision = prefer_cool(prepared, &input, decision, warm(node));
    }
    Some((node, decision.final_set(picked)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gputopo_core::fixtures::hgx_h100;

    fn scenario(seed: u64) -> Scenario {
        Scenario {
            nodes: 8,
            checks: 600,
            throttled_share: 0.1,
            mean_spell: 20.0,
            throttled_speed: 0.6,
            load: 0.7,
            mean_duration: 20.0,
            seed,
        }
    }

    #[test]
    fn telemetry_slows_jobs_least_and_runs_are_deterministic() {
        let t = hgx_h100();
        let [stock, health, aware] = run(&t, &scenario(3));
        assert!(stock.count(1) > 400, "{}", stock.count(1));
        // Same jobs finished under each policy (nothing is left running).
        assert_eq!(
            (health.count(1), aware.count(1)),
            (stock.count(1), stock.count(1))
        );
        assert!(
            aware.mean(2) < health.mean(2),
            "{} vs {}",
            aware.mean(2),
            health.mean(2)
        );
        assert!(aware.mean(2) < stock.mean(2));
        assert!(aware.slowed_share(2) < stock.slowed_share(2));
        assert!(stock.jobs.iter().all(|j| j.1 >= 1.0));
        assert_eq!(run(&t, &scenario(3))[2], aware, "deterministic");
    }

    #[test]
    fn without_throttling_nothing_is_slowed() {
        let s = Scenario {
            throttled_share: 0.0,
            ..scenario(1)
        };
        for o in run(&hgx_h100(), &s) {
            assert_eq!((o.mean(1), o.p95(1), o.slowed_share(1)), (1.0, 1.0, 0.0));
        }
    }

    #[test]
    fn the_agent_publishes_a_sustained_throttle_as_degraded_and_a_new_one_as_warm() {
        let p = TelemetryPolicy::default();
        let mut tracks = vec![[Track::default(); 6]; 2];
        let hot = GpuSet::EMPTY.with(1);
        assert_eq!(check(hot, 2, &mut tracks, &p), (GpuSet::EMPTY, hot));
        assert_eq!(check(hot, 2, &mut tracks, &p), (hot, GpuSet::EMPTY));
        // Clearing takes three clean checks.
        for _ in 0..2 {
            assert_eq!(check(GpuSet::EMPTY, 2, &mut tracks, &p).0, hot);
        }
        assert_eq!(check(GpuSet::EMPTY, 2, &mut tracks, &p).0, GpuSet::EMPTY);
    }
}
