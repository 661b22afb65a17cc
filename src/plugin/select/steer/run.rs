//! The `select_p_job_test` hook's driver: read the call once ([`read::snapshot`]), let the
//! core's state machine decide each step ([`gputopo_core::steer::call`]), carry the steps
//! out (rewrite the candidate bitmap, call cons_tres, read its selection), and write the
//! final placement back once ([`write::placement`]).
//!
//! Invariants (the rules themselves are the core's, unit-tested there):
//! - TEST_ONLY and RESV calls, reservation test jobs (JobId 0) and jobs without a GPU or
//!   shared request are forwarded unchanged: a transient fault never makes a job "never
//!   runnable".
//! - The last try is always every healthy candidate cons_tres was offered, so a job that
//!   could run without gputopo still runs (unless only faulty GPUs would serve it).
//! - cons_tres is called at most `MAX_TRIES + MAX_EXCLUSIONS + 1` times per hook call; the
//!   candidate bitmap is slurmctld's scratch copy and is rewritten in place before each try.
//! - No lock of the plugin is held across a call into cons_tres: the model cache is locked
//!   while the snapshot is read, the rank-key memo while the tiers are planned.

use std::ffi::c_int;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Instant;

use gputopo_core::config::SelectConfig;
use gputopo_core::steer::call::{self, Ctx, Event, Outcome, Reply, Snapshot};
use gputopo_core::steer::tries;

use crate::ffi;
use crate::plugin::select::steer::decision_log::emit;
use crate::plugin::select::steer::explain;
use crate::plugin::select::steer::read::{self, Call};
use crate::plugin::select::steer::state::{Stats, SteerState};
use crate::plugin::select::steer::write;
use crate::slurm::bitmap::{BitmapMut, NodeIndex};
use crate::slurm::job::JobView;
use crate::slurm::node;

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
    let stock_before = st.stats.stock_ns.load(Ordering::Relaxed);
    let rc = steer(st, &forward, job, &mut bitmap, call);
    let total = started.elapsed().as_nanos() as u64;
    let stock = st
        .stats
        .stock_ns
        .load(Ordering::Relaxed)
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
    let Some(mode) = tries::mode_of(call.mode, job.id().0, any, now) else {
        return timed(st, forward);
    };
    let facts = read::job_facts(job, &call, mode);
    if !facts.steered(&cfg) {
        return timed(st, forward);
    }
    let snap = read::snapshot(st, &cfg, job, facts, bitmap);
    if let Some(list) = call.candidates {
        crate::plugin::select::steer::preempt::order_candidates(st, &cfg, &snap, list);
    }
    drive(st, forward, job, bitmap, &cfg, call, &snap)
}

/// Runs the core's state machine over `snap`, carrying out its steps, then writes back.
fn drive(
    st: &SteerState,
    forward: &impl Fn() -> c_int,
    job: &mut JobView<'_>,
    bitmap: &mut BitmapMut<'_, NodeIndex>,
    cfg: &SelectConfig,
    call: Call<'_>,
    snap: &Snapshot,
) -> c_int {
    let ctx = Ctx {
        cfg,
        engine: &st.engine,
        log: cfg.log_decisions || crate::slurm::conf::debug_select_or_gres(),
        multiple_sharing: crate::slurm::conf::multiple_sharing_gres_pj(),
    };
    let machine = {
        let mut keys = st.keys.lock().unwrap_or_else(PoisonError::into_inner);
        call::Call::start(snap, ctx, &mut keys)
    };
    let will_run = matches!(snap.job.mode, tries::Mode::WillRun { .. });
    let mut rc = ffi::SLURM_ERROR;
    let mut events = Vec::new();
    let mut tries = 0usize;
    let finish = call::run(
        machine,
        |offer| {
            write_bitmap(bitmap, offer);
            if tries > 0 {
                call.victims_out.inspect(|o| o.reset());
            }
            tries += 1;
            rc = timed(st, forward);
            if rc != ffi::SLURM_SUCCESS as c_int {
                Reply::Failed
            } else if will_run {
                Reply::Planned {
                    start: job.start_time(),
                }
            } else {
                Reply::Selected(read::selection(job, &call))
            }
        },
        |e| events.extend(e),
    );
    log_events(job, snap, cfg, &events);
    match finish.outcome {
        Outcome::Success => {
            if let Some(p) = &finish.placement {
                let replaced = write::placement(job, p);
                Stats::add(&st.stats.replaced, replaced as u64);
            }
        }
        // The release (an empty try) made cons_tres free its allocation; the job waits.
        Outcome::GiveUp => rc = ffi::SLURM_ERROR,
        Outcome::Failed => {}
    }
    if finish.outcome != Outcome::Success {
        call.victims_out.inspect(|o| o.reset());
        explain::pending(job, snap, cfg, &finish.withheld);
    }
    Stats::add(&st.stats.excluded, finish.excluded as u64);
    if finish.calls > 1 {
        Stats::add(&st.stats.extra_stock_calls, (finish.calls - 1) as u64);
    }
    debug_assert!(finish.calls <= call::MAX_TRIES + tries::MAX_EXCLUSIONS + 1);
    rc
}

/// Writes the call's log events through Slurm's log, each with its node's name.
fn log_events(job: &JobView<'_>, snap: &Snapshot, cfg: &SelectConfig, events: &[Event]) {
    let job_id = snap.job.id;
    for e in events {
        let name = e.node().map(|n| {
            snap.node(n)
                .and_then(|s| s.name().map(str::to_owned))
                .or_else(|| node::view(job, NodeIndex(n)).map(|v| v.name().to_owned()))
                .unwrap_or_else(|| "?".to_owned())
        });
        let line = e.line(job_id, name.as_deref().unwrap_or(""));
        match e {
            Event::NoGpuSelected { .. } => log::warn!("{line}"),
            Event::Skipped { .. } | Event::SkippedShares { .. } | Event::WidthMismatch { .. } => {
                log::debug!(target: "gputopo::select", "{line}");
            }
            Event::Decision(_) => emit(cfg.log_decisions, &line),
        }
    }
}
