//! `priority/gputopo`: Slurm's multifactor priority, plus age and fair share without slurmdbd.
//!
//! The same `.so` as `select/gputopo`, installed a second time as `priority_gputopo.so` (see
//! [`crate::plugin::export`]): this file is the role and the entry-point table, one line per
//! `priority_p_*` of the release's `syms[]` (22.05 src/common/slurm_priority.c: 6; 23.11
//! src/interfaces/priority.c: 7, `recover` but no `thread_start`, the factor list still takes
//! the request; 24.05 to 25.05: 8; 25.11+: 7, without `calc_fs_factor`).
//! `priority_p_calc_fs_factor` takes `long double`s and lives in the C shim
//! `slurm-headers/priority_shim.c` (built only while the release has it).
//!
//! The role does nothing unless slurm.conf says `PriorityType=priority/gputopo` and the process
//! is slurmctld (sshare and every other client load the file too; 24.11's sshare fatals if the
//! plugin does not load, so `init` must stay trivial there). The math is
//! [`gputopo_core::priority`]; [`state`] holds config and ledger; [`recalc`] is the loop.

pub mod dbd;
pub mod ended;
pub mod recalc;
pub mod state;

use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::ffi;
use crate::plugin::PluginError;
use crate::plugin::lifecycle::Role;
use crate::slurm::EntryPtr;
use crate::slurm::conf::in_slurmctld;
use crate::slurm::prio::{self, job::JobRecord, sprio};
#[cfg(priority_abi = "22.05")]
use crate::slurm::prio::{CtldLock, CtldLocks, job::JobsLocked};

/// True where multifactor starts its decay thread in `init` because `syms[]` has no
/// `priority_p_thread_start` (22.05; 23.11.4 priority_multifactor.c:1776 and
/// src/interfaces/priority.c:61-69).
const THREAD_FROM_INIT: bool = cfg!(any(priority_abi = "22.05", priority_abi = "23.11"));
use state::{STATE, Scratch, compute};

/// The priority role.
pub static ROLE: PriorityRole = PriorityRole;

/// Whether the role's work (ledger, loop) is running in this process.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Whether this process has seen its first `init` (see [`defer_loop`]).
static FIRST_INIT_SEEN: AtomicBool = AtomicBool::new(false);

/// The loop waits for the priority plugin's own `init` ([`defer_loop`]).
static LOOP_DEFERRED: AtomicBool = AtomicBool::new(false);

/// Whether the loop of 22.05/23.11 (started from `init`) must wait for the next `init`: with
/// slurmdbd, when this first `init` is `select_g_init`'s (SelectType is ours too). slurmctld
/// initialises the select plugin before it reads associations and jobs (22.05.8
/// controller.c:508) and the priority plugin after (:733); the loop's start takes the
/// run-seconds of the running jobs just loaded down to the last pass, as multifactor's thread
/// does when its `init` creates it.
fn defer_loop(with_dbd: bool) -> bool {
    let first = !FIRST_INIT_SEEN.swap(true, Ordering::SeqCst);
    first && with_dbd && prio::select_type_is_gputopo()
}

/// See the module docs.
#[derive(Debug)]
pub struct PriorityRole;

fn active() -> bool {
    in_slurmctld() && prio::priority_type_is_gputopo()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Role for PriorityRole {
    type Error = PluginError;

    fn name(&self) -> &'static str {
        "priority"
    }

    fn start(&self) -> Result<(), PluginError> {
        if !active() || RUNNING.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let with_dbd = prio::with_slurmdbd();
        *STATE
            .with_dbd
            .write()
            .unwrap_or_else(PoisonError::into_inner) = with_dbd;
        // The ledger is loaded by the first pass that finds this slurmctld in control
        // (recalc::ensure_ledger), not here: a backup initialises its plugins in standby.
        *STATE.ext.lock().unwrap_or_else(PoisonError::into_inner) = None;
        STATE.reload();
        if !prio::site_factor::init() {
            RUNNING.store(false, Ordering::SeqCst);
            return Err(PluginError::SiteFactor);
        }
        if with_dbd {
            dbd::load_clock();
        } else {
            log::info!(
                "no slurmdbd: age counts from eligible time and fair share from gputopo's usage ledger"
            );
        }
        if THREAD_FROM_INIT {
            // No priority_p_thread_start: multifactor starts its thread in init and seeds the
            // factors for sprio right away.
            if defer_loop(with_dbd) {
                LOOP_DEFERRED.store(true, Ordering::SeqCst);
            } else {
                recalc::start_thread();
            }
        }
        Ok(())
    }

    /// Stops the loop. Without slurmdbd one last pass then charges running jobs up to now and
    /// writes the ledger, so an orderly stop loses no usage; with slurmdbd nothing is charged
    /// (as with multifactor: the next start charges running jobs from the last pass, and
    /// association usage is saved by slurmctld). Idempotent.
    fn stop(&self) {
        if !RUNNING.swap(false, Ordering::SeqCst) {
            return;
        }
        recalc::stop_thread();
        if STATE.with_dbd() {
            log::info!("priority role stopped");
        } else {
            let _ = recalc::pass(false);
            *STATE.ext.lock().unwrap_or_else(PoisonError::into_inner) = None;
            log::info!("priority role stopped; usage ledger saved");
        }
        prio::site_factor::fini();
    }

    /// `priority_g_fini` is the only end production slurmctld signals (it never calls the
    /// select plugin's `fini`), so the priority role stops on any `fini` in slurmctld.
    fn release(&self) {
        if in_slurmctld() {
            self.stop();
        }
    }

    /// 24.11 initialises the priority plugin again after a failed re-exec reconfigure; on 22.05
    /// this is the priority plugin's own `init` when SelectType is ours too (see
    /// `defer_loop`).
    fn reacquire(&self) -> Result<(), PluginError> {
        self.start()?;
        if LOOP_DEFERRED.swap(false, Ordering::SeqCst) {
            recalc::start_thread();
        }
        Ok(())
    }
}

/// `priority_p_set`: the job's priority at submit/update (job write lock held by Slurm).
fn set(_last_prio: u32, job: Option<EntryPtr<'_, ffi::job_record_t>>) -> Result<u32, PluginError> {
    let Some(job) = job else { return Ok(1) };
    let mut job = JobRecord::from_entry(job);
    // First, so a change of the site factor is in the sum (multifactor's order).
    prio::site_factor::set(&mut job);
    let cfg = STATE.config();
    let ext = STATE.ext.lock().unwrap_or_else(PoisonError::into_inner);
    let ext = if STATE.with_dbd() { None } else { ext.as_ref() };
    let _assoc = prio::AssocLock::read_assoc_qos();
    let mut scratch = Scratch::read();
    let p = compute(&mut job, &cfg, ext, now(), &mut scratch);
    log::debug!("initial priority for job {} is {p}", job.id());
    Ok(p)
}

/// `priority_p_reconfig`: reread the weights; with slurmdbd, what multifactor's reconfigure
/// does to usage ([`dbd::reconfigured`]).
fn reconfig(assoc_clear: bool) -> Result<(), PluginError> {
    if active() {
        STATE.reload();
        if STATE.with_dbd() {
            dbd::reconfigured(assoc_clear);
        }
        prio::site_factor::reconfig();
    }
    Ok(())
}

/// `priority_p_set_assoc_usage`: with classic fair share multifactor sets `usage_norm`,
/// `usage_efctv` (and from 25.11 `fs_factor`) here; gputopo computes every association's in its
/// loop, so this is a no-op. Slurm calls it only for a `usage_efctv` of NO_VAL (25.11.7
/// src/common/assoc_mgr.c:3647, src/slurmctld/job_mgr.c:7064), which gputopo never leaves.
fn set_assoc_usage(
    _assoc: Option<EntryPtr<'_, ffi::slurmdb_assoc_rec_t>>,
) -> Result<(), PluginError> {
    Ok(())
}

/// `priority_p_job_end` (Slurm calls it with the job write lock held, only with enforced
/// limits and a valid association): with slurmdbd, multifactor's charge of the job's end
/// ([`dbd::job_end`]). Without slurmdbd Slurm never calls it (it clears the enforcement); the
/// ledger charges ended jobs itself.
fn job_end(job: Option<EntryPtr<'_, ffi::job_record_t>>) -> Result<(), PluginError> {
    let Some(job) = job else { return Ok(()) };
    if active() && STATE.with_dbd() {
        dbd::job_end(&mut JobRecord::from_entry(job), now());
    }
    Ok(())
}

/// `select_p_job_fini` of the select role, for the usage ledger (without slurmdbd): notes the
/// ending job before cons_tres releases its resources ([`ended`]), then forwards. The note
/// can never keep the forward from happening (its panic is caught here). Slurm holds the job
/// and node write locks; no other lock is taken.
pub fn job_fini(
    forward: impl FnOnce() -> std::ffi::c_int,
    job: Option<EntryPtr<'_, ffi::job_record_t>>,
) -> std::ffi::c_int {
    if let Some(job) = job.filter(|_| RUNNING.load(Ordering::SeqCst) && !STATE.with_dbd()) {
        let job = JobRecord::from_entry(job);
        let noted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ended::note(&job, now());
        }));
        if noted.is_err() {
            log::error!(
                "job {}: noting its end for the usage ledger failed; the next pass charges it if its record is still there",
                job.id()
            );
        }
    }
    forward()
}

/// `priority_p_recover` (23.02+): seed factors for sprio at startup; never boosts (multifactor
/// returns 0 too).
#[cfg(not(priority_abi = "22.05"))]
fn recover(_prio_boost: u32) -> Result<u32, PluginError> {
    if active() {
        let _ = recalc::pass(true);
    }
    Ok(0)
}

/// `priority_p_thread_start` (24.05+): start the recalculation loop.
#[cfg(not(any(priority_abi = "22.05", priority_abi = "23.11")))]
fn thread_start() -> Result<(), PluginError> {
    if active() {
        recalc::start_thread();
    }
    Ok(())
}

/// `priority_p_get_priority_factors_list`, 24.05+: the caller holds the job/node/part read locks.
#[cfg(not(any(priority_abi = "22.05", priority_abi = "23.11")))]
fn factors_list(uid: u32) -> Result<*mut ffi::xlist, PluginError> {
    factors_list_filtered(uid, &sprio::Filter::default())
}

/// `priority_p_get_priority_factors_list`, 23.11: as 24.05's, plus the request filters of
/// pre-23.11 clients (the caller holds the read locks, 23.11.4 proc_req.c:1610-1626).
#[cfg(priority_abi = "23.11")]
fn factors_list(
    req: Option<EntryPtr<'_, ffi::priority_factors_request_msg_t>>,
    uid: u32,
) -> Result<*mut ffi::xlist, PluginError> {
    factors_list_filtered(uid, &sprio::Filter::from_entry(req))
}

/// The factor list under the caller's slurmctld read locks (23.11+).
#[cfg(not(priority_abi = "22.05"))]
fn factors_list_filtered(uid: u32, filter: &sprio::Filter) -> Result<*mut ffi::xlist, PluginError> {
    let cfg = STATE.config();
    let _assoc = prio::AssocLock::read_assoc_qos();
    Ok(sprio::factors_list_under_slurm_lock(
        &cfg,
        uid,
        filter,
        now(),
    ))
}

/// `priority_p_get_priority_factors_list`, 22.05: the plugin takes the read locks and filters.
#[cfg(priority_abi = "22.05")]
fn factors_list(
    req: Option<EntryPtr<'_, ffi::priority_factors_request_msg_t>>,
    uid: u32,
) -> Result<*mut ffi::xlist, PluginError> {
    let cfg = STATE.config();
    let Some(ctld) = CtldLock::acquire(CtldLocks::JobNodePartRead) else {
        return Ok(std::ptr::null_mut());
    };
    let filter = sprio::Filter::from_entry(req);
    let _assoc = prio::AssocLock::read_assoc_qos();
    let jobs = JobsLocked::new(&ctld);
    Ok(sprio::factors_list(&jobs, &cfg, uid, &filter, now()))
}

// One table for every release, a line per `priority_p_*` of its `syms[]` (see the module docs).
crate::own_entry_points! {
    fn priority_p_set(last_prio: u32, job_ptr: *mut ffi::job_record_t) -> u32, fail = 1
        => set;
    fn priority_p_reconfig(assoc_clear: bool) -> (), fail = ()
        => reconfig;
    fn priority_p_set_assoc_usage(assoc: *mut ffi::slurmdb_assoc_rec_t) -> (), fail = ()
        => set_assoc_usage;
    // 22.05 and 23.11 still pass the request (23.11.4 src/interfaces/priority.c:51-53).
    #[cfg(any(priority_abi = "22.05", priority_abi = "23.11"))]
    fn priority_p_get_priority_factors_list(req_msg: *mut ffi::priority_factors_request_msg_t, uid: u32)
        -> *mut ffi::xlist, fail = std::ptr::null_mut()
        => factors_list;
    #[cfg(not(any(priority_abi = "22.05", priority_abi = "23.11")))]
    fn priority_p_get_priority_factors_list(uid: u32) -> *mut ffi::xlist, fail = std::ptr::null_mut()
        => factors_list;
    fn priority_p_job_end(job_ptr: *mut ffi::job_record_t) -> (), fail = ()
        => job_end;
    #[cfg(not(priority_abi = "22.05"))]
    fn priority_p_recover(prio_boost: u32) -> u32, fail = 0
        => recover;
    #[cfg(not(any(priority_abi = "22.05", priority_abi = "23.11")))]
    fn priority_p_thread_start() -> (), fail = ()
        => thread_start;
}
