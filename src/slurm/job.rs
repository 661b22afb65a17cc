//! View of a slurmctld `job_record_t` for the select hooks ([`JobView`]) and of the resources
//! cons_tres gave it ([`JobResources`]).
//!
//! Read-only except through [`JobView::gres_requests`], whose [`JobGres`] may rewrite the
//! per-node GPU selection before Slurm commits it. Field layout comes from bindgen for the
//! exact release; the one semantic difference between releases (`whole_node`) is absorbed in
//! [`JobView::whole_node`].

use crate::ffi;
use crate::slurm::EntryPtr;
use crate::slurm::bitmap::{BitmapRef, NodeIndex};
use crate::slurm::gres::{self, CoreIndex, JobGres, ResvGres};
use crate::slurm::list::ListRef;

/// A job id as Slurm prints it (`JobId=12`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlurmJobId(pub u32);

impl std::fmt::Display for SlurmJobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A job record borrowed for one entry-point call.
#[doc(alias = "job_record_t")]
#[derive(Debug)]
pub struct JobView<'call> {
    job: EntryPtr<'call, ffi::job_record_t>,
}

impl<'call> JobView<'call> {
    /// Wraps the job pointer of an entry-point call.
    pub fn new(job: EntryPtr<'call, ffi::job_record_t>) -> Self {
        Self { job }
    }

    fn record(&self) -> &ffi::job_record_t {
        // SAFETY: EntryPtr guarantees a live job_record_t for 'call; slurmctld holds the job
        // write lock during select_p_* calls, so no other thread mutates it while we read.
        unsafe { &*self.job.as_ptr() }
    }

    /// The job id (`job_record_t.job_id`); 0 for the fake jobs reservations test with.
    pub fn id(&self) -> SlurmJobId {
        SlurmJobId(self.record().job_id)
    }

    /// The job's name (`--job-name`), if set and UTF-8.
    #[cfg(feature = "test-panic")]
    pub fn name(&self) -> Option<&str> {
        let raw = self.record().name;
        if raw.is_null() {
            return None;
        }
        // SAFETY: a non-null NUL-terminated string owned by the job record (job lock held).
        unsafe { std::ffi::CStr::from_ptr(raw) }.to_str().ok()
    }
}

/// `job_details_t`; bindgen names the 22.05 struct by its tag.
#[cfg(select_abi = "22.05")]
type JobDetails = ffi::job_details;
#[cfg(not(select_abi = "22.05"))]
type JobDetails = ffi::job_details_t;

/// `job_record_t.job_state` base bits (`JOB_STATE_BASE` in slurm/slurm.h, both releases).
const JOB_STATE_BASE: u32 = 0xff;
/// `JOB_RUNNING` (enum job_states in slurm/slurm.h, both releases).
const JOB_RUNNING: u32 = 1;
/// `GRES_ENFORCE_BIND` job `bit_flags` bit (`--gres-flags=enforce-binding`; slurm/slurm.h,
/// `SLURM_BIT(4)` in 22.05 and 24.11).
const GRES_ENFORCE_BIND: u64 = 1 << 4;
/// `WHOLE_NODE_REQUIRED` in `job_details.whole_node` (src/slurmctld/slurmctld.h in 22.05,
/// src/common/job_record.h in 24.11): the job gets every GRES of its nodes.
const WHOLE_NODE_REQUIRED: u8 = 0x01;

impl<'call> JobView<'call> {
    fn details(&self) -> Option<&JobDetails> {
        // SAFETY: details is null or the job's live details record (job write lock held).
        unsafe { self.record().details.as_ref() }
    }

    /// True for a job in state RUNNING (set by select_nodes() just before the commit).
    pub fn is_running(&self) -> bool {
        self.record().job_state & JOB_STATE_BASE == JOB_RUNNING
    }

    /// True when the job already has a committed GRES allocation (`gres_list_alloc`).
    pub fn has_gres_alloc(&self) -> bool {
        !self.record().gres_list_alloc.is_null()
    }

    /// `--gres-flags=enforce-binding`: GPUs must be bound to the job's cores.
    pub fn enforce_binding(&self) -> bool {
        self.record().bit_flags & GRES_ENFORCE_BIND != 0
    }

    /// Whole-node allocation (`--exclusive`, OverSubscribe=EXCLUSIVE): Slurm gives the job
    /// every GPU of its nodes (`gres_*_job_alloc_whole_node`), so there is nothing to choose.
    /// 22.05 compares `whole_node == 1` (its values are an enum: 3 is MCS), 24.11 tests the bit.
    pub fn whole_node(&self) -> bool {
        self.details().is_some_and(|d| {
            if cfg!(select_abi = "22.05") {
                d.whole_node == WHOLE_NODE_REQUIRED
            } else {
                d.whole_node & WHOLE_NODE_REQUIRED != 0
            }
        })
    }

    /// The job's minimum node count (at least 1).
    pub fn min_nodes(&self) -> usize {
        self.details().map_or(1, |d| d.min_nodes.max(1) as usize)
    }

    /// Nodes the job requires (`--nodelist`), ascending.
    pub fn required_nodes(&self) -> Vec<NodeIndex> {
        let Some(d) = self.details() else {
            return Vec::new();
        };
        // SAFETY: req_node_bitmap is null or the job's live bitmap, unchanged during the call.
        unsafe { BitmapRef::<NodeIndex>::from_raw(d.req_node_bitmap) }
            .map(|b| b.iter_set().collect())
            .unwrap_or_default()
    }

    /// `start_time` (WILL_RUN sets it to the expected start).
    pub fn start_time(&self) -> i64 {
        self.record().start_time
    }

    /// The job's GRES requests (`gres_list_req`), including the per-node selection arrays
    /// cons_tres fills in `select_p_job_test`.
    pub fn gres_requests(&mut self) -> Vec<JobGres<'call>> {
        // SAFETY: the job's live gres_list_req; the hook runs inside the select call with the
        // job write lock held, so it may rewrite the selection arrays (see JobGres).
        unsafe { gres::job_requests(self.record().gres_list_req) }
    }

    /// The resources cons_tres allocated (`job_resrcs`), after a successful job_test.
    pub fn resources(&self) -> Option<JobResources<'call>> {
        // SAFETY: job_resrcs is null or the job's live job_resources_t.
        let res = unsafe { self.record().job_resrcs.as_ref() }?;
        Some(JobResources { res })
    }
}

impl JobView<'_> {
    /// `system_comment` (`SystemComment=` in `scontrol show job`); `Ok(None)` when unset, an
    /// error when it is not UTF-8.
    pub fn system_comment(&self) -> Result<Option<String>, std::str::Utf8Error> {
        let p = self.record().system_comment;
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: a non-null system_comment is the NUL-terminated, xmalloc'ed string the job
        // owns; the job write lock is held for the whole select call.
        let text = unsafe { std::ffi::CStr::from_ptr(p) };
        text.to_str().map(|t| Some(t.to_owned()))
    }

    /// Replaces `system_comment` by `text` (an empty `text` clears it). The new string comes
    /// from Slurm's allocator (`xstrdup`) and the old one goes back to it (`xfree`), since
    /// slurmctld frees the field with the job. A `text` with a NUL byte is not written.
    pub fn set_system_comment(&mut self, text: &str) {
        let new = if text.is_empty() {
            std::ptr::null_mut()
        } else {
            let Ok(c) = std::ffi::CString::new(text) else {
                return;
            };
            // SAFETY: xstrdup copies the NUL-terminated string into Slurm's allocator.
            unsafe { ffi::slurm_xstrdup(c.as_ptr()) }
        };
        let rec = self.job.as_ptr();
        // SAFETY: EntryPtr points to the live job record; the select call holds the job write
        // lock, so nothing else reads or writes the field meanwhile.
        let field = unsafe { &mut (*rec).system_comment };
        let mut old = std::mem::replace(field, new).cast::<std::ffi::c_void>();
        // SAFETY: the old value is null or xmalloc'ed and owned by the job, now unreferenced.
        unsafe { ffi::slurm_xfree(&mut old) };
    }
}

/// A job's allocated resources (`job_resources_t`): nodes and cores.
#[doc(alias = "job_resources_t")]
#[derive(Debug)]
pub struct JobResources<'call> {
    res: &'call ffi::job_resources_t,
}

impl<'call> JobResources<'call> {
    /// The allocated nodes, in node-table order (their position is the job node index).
    pub fn nodes(&self) -> Vec<NodeIndex> {
        // SAFETY: node_bitmap is null or the live bitmap of this job_resources_t.
        unsafe { BitmapRef::<NodeIndex>::from_raw(self.res.node_bitmap) }
            .map(|b| b.iter_set().collect())
            .unwrap_or_default()
    }

    /// Cores of the `job_node`-th allocated node (`get_job_resources_offset` layout: nodes'
    /// core ranges concatenated, each `sockets_per_node[k] * cores_per_socket[k]` wide, the
    /// k-th shape repeated `sock_core_rep_count[k]` times).
    pub fn cores_on(&self, job_node: usize) -> Vec<CoreIndex> {
        let nhosts = self.res.nhosts as usize;
        if job_node >= nhosts {
            return Vec::new();
        }
        let r = self.res;
        if r.sock_core_rep_count.is_null()
            || r.sockets_per_node.is_null()
            || r.cores_per_socket.is_null()
        {
            return Vec::new();
        }
        let (mut offset, mut seen, mut k) = (0usize, 0usize, 0usize);
        let width = loop {
            // The three arrays have one entry per distinct node shape and their repetition
            // counts sum to nhosts (job_resources.c build_job_resources); `seen < nhosts`
            // keeps k within them.
            // SAFETY: see above; non-null was checked, so entry k is in bounds and initialised.
            let reps = unsafe { *r.sock_core_rep_count.wrapping_add(k) } as usize;
            // SAFETY: as above.
            let socks = usize::from(unsafe { *r.sockets_per_node.wrapping_add(k) });
            // SAFETY: as above.
            let cps = usize::from(unsafe { *r.cores_per_socket.wrapping_add(k) });
            let w = socks * cps;
            if job_node < seen + reps {
                offset += (job_node - seen) * w;
                break w;
            }
            offset += reps * w;
            seen += reps;
            k += 1;
            if reps == 0 || seen >= nhosts {
                return Vec::new();
            }
        };
        // SAFETY: core_bitmap is null or the live bitmap of this job_resources_t.
        let Some(bits) = (unsafe { BitmapRef::<CoreIndex>::from_raw(self.res.core_bitmap) }) else {
            return Vec::new();
        };
        (0..width)
            .filter(|c| bits.contains(CoreIndex(offset + c)))
            .map(CoreIndex)
            .collect()
    }
}

/// True when a `select_p_job_test` call offers preemptable jobs (`preemptee_candidates` is a
/// non-empty list): cons_tres may then plan an allocation on GPUs still in use.
pub fn offers_preemption(candidates: Option<&EntryPtr<'_, ffi::xlist>>) -> bool {
    candidates.is_some_and(|c| {
        // SAFETY: EntryPtr vouches that the list argument is live for the call; its elements
        // are job records we do not touch (only the count is read).
        unsafe { ListRef::<ffi::job_record_t>::from_raw(c.as_ptr()) }.is_some_and(|l| !l.is_empty())
    })
}

/// The reservation argument of a `select_p_job_test` call: 22.05 passes `exc_core_bitmap`
/// (no GRES reservations), 23.11+ a `resv_exc_t` whose `gres_list_exc`/`gres_list_inc` name
/// GPUs that reservations take away from, or limit, this job (see [`ResvGres`]).
pub trait ReservationArg {
    /// The GRES list that constrains this job's GPUs in this call, `None` when none does.
    fn gres<'a>(arg: &EntryPtr<'a, Self>) -> Option<ResvGres<'a>>
    where
        Self: Sized;
}

impl ReservationArg for ffi::bitstr_t {
    fn gres<'a>(_: &EntryPtr<'a, Self>) -> Option<ResvGres<'a>> {
        None
    }
}

#[cfg(not(select_abi = "22.05"))]
impl ReservationArg for ffi::resv_exc_t {
    fn gres<'a>(arg: &EntryPtr<'a, Self>) -> Option<ResvGres<'a>> {
        // SAFETY: EntryPtr vouches for the live resv_exc_t argument of this call.
        let r = unsafe { &*arg.as_ptr() };
        // cons_tres reads the exclusion list first (gres_sock_list_create); job_test_resv
        // sets at most one of the two.
        // SAFETY: the reservation lists are null or live gres_state_t lists for the call.
        unsafe { ResvGres::new(r.gres_list_exc, false) }
            // SAFETY: as above.
            .or_else(|| unsafe { ResvGres::new(r.gres_list_inc, true) })
    }
}
