//! The priority role's state: configuration snapshot and gputopo's usage ledger.
//!
//! Lock order (never reversed): slurmctld locks → [`State::ext`] → assoc_mgr locks.
//! `priority_p_set` and `priority_p_job_end` run with the slurmctld job write lock held by
//! Slurm; the recalculation thread takes that lock itself before touching [`State::ext`].

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

use gputopo_core::priority::ledger::{Ledger, UNVERIFIED_ACCOUNT, UsageCharge, UsageWeights};
use gputopo_core::priority::ledger_file;
use gputopo_core::priority::recalc::{array_len, eligible_time, ledger_charge_secs};
use gputopo_core::priority::reset::{ResetPeriod, ResetSchedule};
use gputopo_core::priority::{ClusterInput, Flags, JobPriority, PriorityConfig, job_priority_into};

use super::ended::LedgerJob;
use crate::slurm::prio::job::{InputBuf, JobRecord};
use crate::slurm::prio::{self};

/// gputopo's extension state (used only without slurmdbd).
#[derive(Debug)]
pub struct Extension {
    /// The ledger (None until loaded).
    pub ledger: Ledger,
    /// Fair-share factor per uid from the last recalculation (without slurmdbd every ledger
    /// entry is a user's: [`UNVERIFIED_ACCOUNT`]). Looked up once per job per pass.
    pub fairshare: HashMap<u32, f64>,
    /// Where the ledger lives.
    pub dir: Option<PathBuf>,
    /// Index of `gres/gpu` in the TRES arrays.
    pub gpu_index: Option<usize>,
    /// `PriorityUsageResetPeriod`'s schedule for the ledger, made afresh at each start and
    /// reconfigure, as multifactor's decay thread makes its own.
    pub reset: ResetSchedule,
    /// Users with pending jobs, gathered by the pass's walk (kept between passes for its
    /// allocation).
    pub pending: BTreeSet<u32>,
}

/// Everything the role keeps between calls.
#[derive(Debug)]
pub struct State {
    /// Current weights and flags (replaced on reconfigure).
    pub cfg: RwLock<Option<Arc<PriorityConfig>>>,
    /// Whether slurmctld uses slurmdbd (fixed at start).
    pub with_dbd: RwLock<bool>,
    /// The extension.
    pub ext: Mutex<Option<Extension>>,
    /// Set to stop the recalculation thread.
    pub stop: (Mutex<bool>, Condvar),
    /// The recalculation thread.
    pub thread: Mutex<Option<JoinHandle<()>>>,
}

/// The TRES count the TRES weights were last parsed for (parse once per TRES table).
static TRES_SEEN: AtomicUsize = AtomicUsize::new(0);

/// The one state of this process.
pub static STATE: State = State {
    cfg: RwLock::new(None),
    with_dbd: RwLock::new(false),
    ext: Mutex::new(None),
    stop: (Mutex::new(false), Condvar::new()),
    thread: Mutex::new(None),
};

const _: () = {
    const fn assert_sync<T: Send + Sync>() {}
    assert_sync::<State>();
};

impl State {
    /// The current configuration (Slurm defaults before start).
    pub fn config(&self) -> Arc<PriorityConfig> {
        // slurmctld_tres_cnt is still 0 when plugins are initialised: pick the TRES weights up
        // as soon as the TRES table exists.
        let missing_tres = self
            .cfg
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|c| c.tres_weights.is_none());
        let tres_cnt = prio::tres_count();
        if missing_tres
            && prio::tres_weights_configured()
            && tres_cnt > 0
            && TRES_SEEN.swap(tres_cnt, Ordering::Relaxed) != tres_cnt
        {
            self.reload();
        }
        self.cfg
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| Arc::new(PriorityConfig::slurm_default(prio::RELEASE)))
    }

    /// Rereads `slurm_conf` (start and reconfigure).
    pub fn reload(&self) {
        let cfg = prio::priority_config();
        prio::set_fs_damp_factor(cfg.damp_factor);
        log::info!(
            "weights age={} assoc={} fairshare={} jobsize={} partition={} qos={} tres={:?} maxage={}s favorsmall={} flags={:#x}",
            cfg.weights.age,
            cfg.weights.assoc,
            cfg.weights.fairshare,
            cfg.weights.job_size,
            cfg.weights.partition,
            cfg.weights.qos,
            cfg.tres_weights,
            cfg.max_age_secs,
            cfg.favor_small,
            cfg.flags.0
        );
        *self.cfg.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(cfg));
        let (_, half_life) = prio::periods();
        if let Some(ext) = self
            .ext
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            ext.ledger.set_half_life(half_life);
            ext.gpu_index = prio::gpu_tres_index();
            ext.reset = reset_schedule();
        }
    }

    /// Whether slurmdbd is configured.
    pub fn with_dbd(&self) -> bool {
        *self.with_dbd.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fresh `PriorityUsageResetPeriod` schedule from slurm.conf.
pub fn reset_schedule() -> ResetSchedule {
    ResetSchedule::new(ResetPeriod::from_slurm(prio::reset_period()))
}

/// Loads (or starts) the ledger from StateSaveLocation. A file that cannot be read, or is
/// corrupt and cannot be set aside, switches persistence off (logged at error) rather than
/// being replaced by an empty ledger.
pub fn load_extension(now: i64) -> Extension {
    let (_, half_life) = prio::periods();
    let mut dir = prio::state_save_location();
    let ledger = match dir.as_deref().map(|d| ledger_file::load(d, half_life, now)) {
        Some(Ok(loaded)) => {
            if loaded.recovered {
                log::info!("usage ledger recovered ({} entries)", loaded.ledger.len());
            }
            if let Some((aside, reason)) = &loaded.set_aside {
                log::error!(
                    "usage ledger is corrupt ({reason}); moved to {} and starting empty",
                    aside.display()
                );
            }
            if let Some(t) = loaded.clamped_from {
                log::error!("usage ledger's last decay time {t} is in the future; using {now}");
            }
            let mut ledger = loaded.ledger;
            let merged = ledger.fold_accounts();
            if merged > 0 {
                log::info!(
                    "usage ledger: {merged} per-account entries merged into their users (accounts are not recognised without slurmdbd)"
                );
            }
            ledger
        }
        None => Ledger::new(half_life, now),
        Some(Err(e)) => {
            log::error!("{e}; the usage ledger is not persisted until this is fixed");
            dir = None;
            Ledger::new(half_life, now)
        }
    };
    Extension {
        ledger,
        fairshare: HashMap::new(),
        dir,
        gpu_index: prio::gpu_tres_index(),
        reset: reset_schedule(),
        pending: BTreeSet::new(),
    }
}

/// A copy of the ledger taken under the locks, written after they are released.
#[derive(Debug)]
pub struct Snapshot {
    dir: PathBuf,
    text: String,
    last_decay: i64,
}

/// Serialises this process's writers (24.11's `priority_p_recover` pass and the loop's first
/// pass can end together) and remembers the newest `last_decay` written, so an older snapshot
/// never replaces a newer one. (Another controller's writes use their own temporary file:
/// `state_file::write`.)
static WRITTEN: Mutex<i64> = Mutex::new(i64::MIN);

impl Snapshot {
    /// Writes the snapshot (crash-safe, 0600, owned by SlurmUser) unless a newer one was
    /// written already; errors are logged and the previous file stays. Call with no slurmctld
    /// lock held.
    pub fn write(self) {
        let mut written = WRITTEN.lock().unwrap_or_else(PoisonError::into_inner);
        if self.last_decay < *written {
            return;
        }
        match ledger_file::write(&self.dir, &self.text, Some(prio::slurm_user_id())) {
            Ok(()) => *written = self.last_decay,
            Err(e) => log::error!("{e}"),
        }
    }
}

impl Extension {
    /// Charges a job for the part of `[start, end]` (end: `until` while it runs) after the
    /// ledger's last decay, from the job's own start/end times, so a job that started and
    /// ended between two passes is charged in full and none is charged twice.
    pub fn charge(&mut self, job: &LedgerJob, until: i64) {
        let Some(run_secs) = ledger_charge_secs(job.times, self.ledger.last_decay(), until) else {
            return;
        };
        self.ledger.charge(&UsageCharge {
            account: UNVERIFIED_ACCOUNT.to_string(),
            user: job.uid.to_string(),
            gpus: job.gpus,
            billing: job.billing,
            run_secs,
        });
    }

    /// Recomputes the fair-share factors for every ledger entry plus the [`Self::pending`]
    /// users (then forgets those for the next walk).
    pub fn refresh_fairshare(&mut self) {
        let names: Vec<String> = self.pending.iter().map(u32::to_string).collect();
        self.pending.clear();
        let extra = names.iter().map(|u| (UNVERIFIED_ACCOUNT, u.as_str()));
        self.fairshare = self
            .ledger
            .fair_share(UsageWeights::default(), extra)
            .0
            .into_iter()
            .filter(|((account, _), _)| account == UNVERIFIED_ACCOUNT)
            .filter_map(|((_, user), f)| Some((user.parse().ok()?, f)))
            .collect();
    }

    /// The fair-share factor of a user (see [`UNVERIFIED_ACCOUNT`]); a user not yet ranked is
    /// treated as unused (1).
    pub fn fairshare_of(&self, uid: u32) -> f64 {
        self.fairshare.get(&uid).copied().unwrap_or(1.0)
    }

    /// The ledger as it is now, to [`Snapshot::write`] once the locks are released; `None`
    /// when the ledger is not persisted.
    pub fn snapshot(&self) -> Option<Snapshot> {
        Some(Snapshot {
            dir: self.dir.clone()?,
            text: self.ledger.to_json(),
            last_decay: self.ledger.last_decay(),
        })
    }
}

/// What one pass reads from slurmctld once for all its jobs, and the buffers every job's
/// computation reuses (so a pass allocates nothing per job).
#[derive(Debug)]
pub struct Scratch<'a> {
    tres_cnt: usize,
    cluster: ClusterInput,
    last_part_update: i64,
    input: InputBuf<'a>,
    out: JobPriority,
}

impl Scratch<'_> {
    /// Reads the slurmctld globals the formula needs (TRES count, cluster size, partition
    /// update time). Caller holds the node and partition read locks.
    pub fn read() -> Self {
        Scratch {
            tres_cnt: prio::tres_count(),
            cluster: prio::cluster(),
            last_part_update: prio::last_part_update(),
            input: InputBuf::default(),
            out: JobPriority::default(),
        }
    }
}

/// Computes and stores one job's priority; returns it (multifactor's `_get_priority_internal`).
/// `ext` is `None` with slurmdbd (association fair share and accrue time are used as is).
pub fn compute<'a>(
    job: &mut JobRecord<'a>,
    cfg: &PriorityConfig,
    ext: Option<&Extension>,
    now: i64,
    s: &mut Scratch<'a>,
) -> u32 {
    if job.input_is_direct() {
        job.clear_factors();
        return job.priority();
    }
    if !job.has_details() {
        log::error!("job {} has no details, can't set priority", job.id());
        job.clear_factors();
        return 0;
    }
    job.sort_partitions(s.last_part_update);
    let (accrue, fairshare) = match ext {
        Some(ext) => {
            let (submit, begin) = job.submit_and_begin();
            (
                Some(eligible_time(cfg.flags, submit, begin)),
                ext.fairshare_of(job.user_id()),
            )
        }
        None => (
            None,
            job.assoc_fs_factor(cfg.flags.has(Flags::FAIR_TREE), cfg.damp_factor),
        ),
    };
    {
        let mut input = job.input(s.tres_cnt, accrue, fairshare, &mut s.input);
        if ext.is_some() && input.assoc.is_none() {
            // No associations without slurmdbd: the ledger's factor stands in for the
            // association's.
            input.assoc = Some(gputopo_core::priority::AssocInput {
                fairshare,
                ..Default::default()
            });
        }
        let len = array_len(cfg.release, input.partitions.len(), input.qos_list.len());
        let prev = len.and_then(|n| job.current_array(n, s.last_part_update));
        job_priority_into(cfg, s.cluster, &input, now, prev, &mut s.out);
    }
    if s.out.clamped {
        log::error!(
            "job {} priority exceeds 32 bits, reduced to 4294967295",
            job.id()
        );
    }
    job.store(&s.out, cfg.tres_weights.as_deref(), now, s.last_part_update);
    s.out.priority
}
