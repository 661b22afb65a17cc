//! The `select_p_job_test` hook's loop: narrow the candidate bitmap, call cons_tres, and on
//! RUN_NOW success re-pick the GPUs; widen on failure, exclude nodes that would hand out a
//! faulty GPU and ask again.
//!
//! Invariants (see `gputopo_core::steer` for the pure rules):
//! - TEST_ONLY and RESV calls, reservation test jobs (JobId 0) and jobs without a GPU request
//!   are forwarded unchanged: a transient fault never makes a job "never runnable".
//! - The last try is always every healthy candidate cons_tres was offered, so a job that
//!   could run without gputopo still runs (unless only faulty GPUs would serve it).
//! - cons_tres is called at most `MAX_TRIES` + `MAX_EXCLUSIONS` + 1 times per hook call; the
//!   candidate bitmap is slurmctld's scratch copy and is rewritten in place before each try.
//!
//! The loop itself (which nodes next, given cons_tres's last answer) is the core's state
//! machine [`gputopo_core::steer::tries`]; this file reads Slurm's state into it, makes the
//! calls and writes back.

use std::ffi::c_int;
use std::time::Instant;

use crate::ffi;
use crate::plugin::steer::explain;
use crate::plugin::steer::gpus::{JobRepick, repick_job};
use crate::plugin::steer::nodes::{self, MAX_TRIES, NodeFacts};
use crate::plugin::steer::shared;
use crate::plugin::steer::state::{Stats, SteerState};
use crate::plugin::steer::wide;
use crate::slurm::bitmap::{BitmapMut, NodeIndex};
use crate::slurm::gres::ResvGres;
use crate::slurm::job::JobView;
use gputopo_core::config::SelectConfig;
use gputopo_core::steer::tries;

/// Arguments of one `select_p_job_test` call that the hook reads.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// `max_nodes`.
    pub max_nodes: u32,
    /// `mode` (flag bits included).
    pub mode: u16,
    /// The call offers preemptable jobs: no narrowing (cons_tres may append preemptees to
    /// its output list on each successful try, and must see every node to plan preemption).
    pub preemption: bool,
    /// GRES reservations that constrain this job's GPUs (23.11+ `resv_exc_t` lists): the
    /// re-pick then chooses within what they allow ([`gputopo_core::steer::reserved`]).
    pub reserved: Option<ResvGres<'a>>,
}

/// Calls cons_tres through `forward`, timing it.
fn timed(st: &SteerState, forward: &impl Fn() -> c_int) -> c_int {
    let t = Instant::now();
    let rc = forward();
    Stats::add(&st.stats.stock_ns, t.elapsed().as_nanos() as u64);
    rc
}

fn write_bitmap(bitmap: &mut BitmapMut<'_, NodeIndex>, nodes: &[usize]) {
    // Offered nodes come from this call's bitmap, so every index is in range.
    let _ = bitmap.set_only(nodes.iter().copied().map(NodeIndex));
}

/// The hook body; `forward` calls cons_tres with the original arguments (the bitmap pointer
/// among them, whose contents this function rewrites before each call).
pub fn job_test(
    st: &SteerState,
    forward: impl Fn() -> c_int,
    job: &mut JobView<'_>,
    mut bitmap: BitmapMut<'_, NodeIndex>,
    call: Call<'_>,
) -> c_int {
    let started = Instant::now();
    let stock_before = st.stats.stock_ns.load(std::sync::atomic::Ordering::Relaxed);
    let rc = steer(st, &forward, job, &mut bitmap, call);
    let total = started.elapsed().as_nanos() as u64;
    let stock = st
        .stats
        .stock_ns
        .load(std::sync::atomic::Ordering::Relaxed)
        .saturating_sub(stock_before);
    Stats::add(&st.stats.own_ns, total.saturating_sub(stock));
    rc
}

fn steer(
    st: &SteerState,
    forward: &impl Fn() -> c_int,
    job: &mut JobView<'_>,
    bitmap: &mut BitmapMut<'_, NodeIndex>,
    call: Call<'_>,
) -> c_int {
    let cfg = st.config();
    let any = cfg.health_aware || cfg.topology_aware || cfg.node_ranking;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let Some(mode) = tries::mode_of(call_mode(call.mode), job.id().0, any, now) else {
        return timed(st, forward);
    };
    let run_now = mode == tries::Mode::RunNow;
    let Some(need) = nodes::gpu_need(job, call.max_nodes) else {
        let Some(tiers) = shared::tiers(job, bitmap, &cfg, call) else {
            return timed(st, forward);
        };
        let mode = tries::Mode::RunNow; // (shared::tiers: RUN_NOW only)
        return drive(
            st,
            forward,
            job,
            bitmap,
            &cfg,
            call,
            tiers,
            Vec::new(),
            mode,
        );
    };
    let mut offered: Vec<NodeIndex> = Vec::with_capacity(bitmap.count());
    offered.extend(bitmap.iter_set());
    let (facts, opaque) = nodes::gather(st, &cfg, job, &offered, need);
    let required = job.required_nodes();
    let whole = job.whole_node();
    let excluded: Vec<NodeIndex> = if cfg.health_aware {
        let mut out = nodes::unhealthy(&facts, need, run_now, whole, &required, job.id().0);
        let rule = nodes::filter_rule(need, run_now, whole);
        out.extend(wide::unhealthy(
            st, &cfg, job, &opaque, need, rule, &required,
        ));
        out
    } else {
        Vec::new()
    };
    let mut healthy = facts;
    if !excluded.is_empty() {
        healthy.retain(|f| !excluded.contains(&f.index));
    }
    // Usually every node is ranked (Slurm knows the topology): no partition to build then.
    let (ranked, unranked): (Vec<_>, Vec<_>) = if healthy.iter().all(|f| f.ranked) {
        (healthy, Vec::new())
    } else {
        healthy.into_iter().partition(|f| f.ranked)
    };
    let ids = |v: &[NodeFacts]| v.iter().map(|f| f.index.0).collect::<Vec<_>>();
    let opaque_ids: Vec<usize> = opaque.iter().map(|n| n.0).collect();
    let required_ids: Vec<usize> = required.iter().map(|n| n.0).collect();
    let steering = tries::Steering {
        node_ranking: cfg.node_ranking,
        whole_node: whole,
        preemption: call.preemption,
    };
    let tiers = tries::tiers(
        steering,
        &ids(&ranked),
        &ids(&unranked),
        &opaque_ids,
        &required_ids,
        || {
            nodes::plan(st, &ranked, need, job.min_nodes(), &required)
                .into_iter()
                .map(|t| t.into_iter().map(|n| n.0).collect())
                .collect()
        },
    );
    drive(st, forward, job, bitmap, &cfg, call, tiers, excluded, mode)
}

/// The base mode of a call, for [`tries::mode_of`].
fn call_mode(mode: u16) -> tries::CallMode {
    match u32::from(mode) & ffi::SELECT_MODE_BASE {
        ffi::SELECT_MODE_RUN_NOW => tries::CallMode::RunNow,
        ffi::SELECT_MODE_TEST_ONLY => tries::CallMode::TestOnly,
        ffi::SELECT_MODE_WILL_RUN => tries::CallMode::WillRun,
        ffi::SELECT_MODE_RESV => tries::CallMode::Resv,
        _ => tries::CallMode::Other,
    }
}

/// Runs the tries of one call (`tiers` of node indices, `excluded` never offered) and makes
/// the give-up release; on each RUN_NOW success the GPU and shared-GRES re-picks decide.
#[allow(clippy::too_many_arguments)]
fn drive(
    st: &SteerState,
    forward: &impl Fn() -> c_int,
    job: &mut JobView<'_>,
    bitmap: &mut BitmapMut<'_, NodeIndex>,
    cfg: &SelectConfig,
    call: Call<'_>,
    tiers: Vec<Vec<usize>>,
    mut excluded: Vec<NodeIndex>,
    mode: tries::Mode,
) -> c_int {
    let will_run = matches!(mode, tries::Mode::WillRun { .. });
    excluded.sort_unstable();
    let plan = tries::Tries::new(tiers, excluded.iter().map(|n| n.0).collect(), mode);
    let mut rc = ffi::SLURM_ERROR;
    let mut withheld = excluded;
    let (outcome, mut calls) = tries::run(plan, |offer| {
        write_bitmap(bitmap, offer);
        rc = timed(st, forward);
        if rc != ffi::SLURM_SUCCESS as c_int {
            tries::Answer::Failed
        } else if will_run {
            tries::Answer::Planned {
                start: job.start_time(),
            }
        } else {
            match repick_all(st, cfg, job, call.reserved.as_ref()) {
                JobRepick::Done { .. } => tries::Answer::Placed,
                JobRepick::Exclude(nodes) => {
                    withheld.extend(&nodes);
                    tries::Answer::Exclude(nodes.into_iter().map(|n| n.0).collect())
                }
            }
        }
    });
    if outcome == tries::Outcome::GiveUp {
        // Wait for this cycle without leaving an allocation with a faulty GPU behind: an
        // empty try makes cons_tres fail and free job_resrcs.
        write_bitmap(bitmap, &[]);
        let _ = timed(st, forward);
        calls += 1;
        rc = ffi::SLURM_ERROR;
    }
    if outcome != tries::Outcome::Success {
        explain::pending(st, cfg, job, &withheld);
    }
    if calls > 1 {
        Stats::add(&st.stats.extra_stock_calls, (calls - 1) as u64);
    }
    debug_assert!(calls <= MAX_TRIES + tries::MAX_EXCLUSIONS + 1);
    rc
}

/// Both re-picks of a RUN_NOW success: whole GPUs ([`repick_job`]) and shared GRES
/// ([`shared::repick_shared`]); the nodes either excludes, else the writes of both.
fn repick_all(
    st: &SteerState,
    cfg: &SelectConfig,
    job: &mut JobView<'_>,
    reserved: Option<&ResvGres<'_>>,
) -> JobRepick {
    match repick_job(st, cfg, job, reserved) {
        JobRepick::Done { replaced } => match shared::repick_shared(st, cfg, job) {
            JobRepick::Done { replaced: more } => JobRepick::Done {
                replaced: replaced + more,
            },
            exclude => exclude,
        },
        exclude => exclude,
    }
}
