//! The control loop of `select_p_job_test` as a pure state machine: which nodes to offer
//! cons_tres next, given what it answered last.
//!
//! The plugin reads Slurm's state once (candidates, their GPUs, health), plans the tiers
//! ([`super::narrow::plan`], best first, the last = every healthy candidate), and then runs
//! [`run`] with a closure that writes the candidate bitmap, calls cons_tres and, on a RUN_NOW
//! success, re-picks the GPUs. The rules, unit-tested here against fake cons_tres closures:
//!
//! - **Widening.** A failed try moves to the next tier; failing the last tier is the answer.
//! - **WILL_RUN.** A narrowed success counts only when it lets the job start now; otherwise
//!   the next (wider) tier is tried, so a later start on preferred nodes never delays a job
//!   the full set could start at once. The last tier's answer is always taken.
//! - **Exclusion.** A RUN_NOW success whose pick would hand out a faulty GPU with no valid
//!   alternative names the nodes to exclude; the same tier is tried again without them.
//! - **Give-up.** After [`MAX_EXCLUSIONS`] exclusion rounds the job waits for this cycle: the
//!   caller makes one more cons_tres call on no node at all, so that cons_tres releases the
//!   allocation it built (never leave one with a faulty GPU behind), and reports failure.
//!
//! cons_tres is called at most `tiers + MAX_EXCLUSIONS + 1` times per hook call.

/// Most exclude-and-retry rounds after cons_tres picked a faulty GPU.
pub const MAX_EXCLUSIONS: usize = 4;

/// The `select_p_job_test` mode the loop runs for (TEST_ONLY and RESV are not steered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Allocate now: successes are re-picked and may exclude nodes.
    RunNow,
    /// Backfill planning: successes carry a start time.
    WillRun {
        /// The current time (seconds since the epoch), to tell "starts now".
        now: i64,
    },
}

/// The base mode of a `select_p_job_test` call (Slurm's `SELECT_MODE_*`, flag bits off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallMode {
    /// `SELECT_MODE_RUN_NOW`.
    RunNow,
    /// `SELECT_MODE_TEST_ONLY`: "could it ever run".
    TestOnly,
    /// `SELECT_MODE_WILL_RUN`: backfill planning, `--test-only`.
    WillRun,
    /// `SELECT_MODE_RESV`: a reservation's node choice.
    Resv,
    /// A value this build does not know.
    Other,
}

/// Which loop a call gets; `None`: forward it to cons_tres unchanged.
///
/// Only RUN_NOW and WILL_RUN are steered: TEST_ONLY must never be refused for a transient
/// fault (the job would be "never runnable"), RESV picks nodes for a reservation, not GPUs
/// for a job, and an unknown mode is cons_tres's alone. Reservation test jobs (JobId 0) and
/// calls with every behaviour switched off are forwarded too. `now` is the time a WILL_RUN
/// answer is compared with.
pub fn mode_of(call: CallMode, job_id: u32, any_behaviour: bool, now: i64) -> Option<Mode> {
    if job_id == 0 || !any_behaviour {
        return None;
    }
    match call {
        CallMode::RunNow => Some(Mode::RunNow),
        CallMode::WillRun => Some(Mode::WillRun { now }),
        CallMode::TestOnly | CallMode::Resv | CallMode::Other => None,
    }
}

/// What one try produced (cons_tres's answer, and on RUN_NOW the re-pick's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// cons_tres found no allocation on the offered nodes.
    Failed,
    /// WILL_RUN success: the start time cons_tres planned.
    Planned {
        /// Planned start (seconds since the epoch).
        start: i64,
    },
    /// RUN_NOW success with healthy GPUs on every node: final.
    Placed,
    /// RUN_NOW success, but these nodes could only serve the job with a faulty GPU.
    Exclude(Vec<usize>),
}

/// How the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// cons_tres's last answer is a success to return.
    Success,
    /// Every try failed: return cons_tres's failure.
    Failed,
    /// Too many exclusions: release cons_tres's allocation (one call on no node) and fail.
    GiveUp,
}

/// The loop's state between tries.
#[derive(Clone, Debug)]
pub struct Tries {
    tiers: Vec<Vec<usize>>,
    tier: usize,
    excluded: Vec<usize>,
    exclusions: usize,
    calls: usize,
    mode: Mode,
}

impl Tries {
    /// A loop over `tiers` (each sorted; the last is the full set), with `excluded` nodes
    /// (the health pre-filter's) never offered.
    pub fn new(tiers: Vec<Vec<usize>>, excluded: Vec<usize>, mode: Mode) -> Self {
        Tries {
            tiers,
            tier: 0,
            excluded,
            exclusions: 0,
            calls: 0,
            mode,
        }
    }

    /// The nodes of the next try, `None` when the tiers are used up.
    pub fn offer(&mut self) -> Option<Vec<usize>> {
        let tier = self.tiers.get(self.tier)?;
        self.calls += 1;
        if self.excluded.is_empty() {
            return Some(tier.clone());
        }
        Some(
            tier.iter()
                .copied()
                .filter(|n| !self.excluded.contains(n))
                .collect(),
        )
    }

    /// Feeds the answer to the last offer: `Some(outcome)` when the loop is done, `None`
    /// when [`Tries::offer`] has the next try.
    pub fn answer(&mut self, answer: Answer) -> Option<Outcome> {
        let is_final = self.tier + 1 >= self.tiers.len();
        match answer {
            Answer::Failed => self.widen(),
            Answer::Planned { start } => match self.mode {
                Mode::WillRun { now } if !is_final && start > now => self.widen(),
                _ => Some(Outcome::Success),
            },
            Answer::Placed => Some(Outcome::Success),
            Answer::Exclude(nodes) => {
                self.exclusions += 1;
                self.excluded.extend(nodes);
                (self.exclusions > MAX_EXCLUSIONS).then_some(Outcome::GiveUp)
            }
        }
    }

    fn widen(&mut self) -> Option<Outcome> {
        self.tier += 1;
        (self.tier >= self.tiers.len()).then_some(Outcome::Failed)
    }

    /// cons_tres calls made so far (tries offered; the give-up release not included).
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Nodes excluded so far (pre-filter and exclusion rounds).
    pub fn excluded(&self) -> &[usize] {
        &self.excluded
    }
}

/// Which steering a call allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steering {
    /// `NodeRanking=yes`.
    pub node_ranking: bool,
    /// Whole-node or exclusive job: every GPU of a node goes to it, so node order by GPU
    /// fit means nothing; cons_tres decides on the full set.
    pub whole_node: bool,
    /// The call offers preemptable jobs: cons_tres must see every node to plan preemption
    /// (and appends preemptees to its output list on each successful try).
    pub preemption: bool,
}

/// The tiers of one call. `ranked` are the healthy candidates gputopo models with a
/// topology, `unranked` the healthy ones whose topology Slurm does not know, `opaque` the
/// ones gputopo cannot model; `plan` ranks `ranked` into tiers ([`super::narrow::plan`]).
/// Unranked and opaque nodes join only the final try, where cons_tres alone decides; a
/// required node among them (it would be missing from the narrowed tries), a whole-node job
/// or a preemption call gives one try with every node.
pub fn tiers(
    steering: Steering,
    ranked: &[usize],
    unranked: &[usize],
    opaque: &[usize],
    required: &[usize],
    plan: impl FnOnce() -> Vec<Vec<usize>>,
) -> Vec<Vec<usize>> {
    let outside = |r: &usize| unranked.contains(r) || opaque.contains(r);
    let steer = steering.node_ranking
        && !steering.whole_node
        && !steering.preemption
        && !required.iter().any(outside)
        && !ranked.is_empty();
    let mut tiers = if steer { plan() } else { Vec::new() };
    if tiers.is_empty() {
        tiers.push(ranked.to_vec());
    }
    if let Some(last) = tiers.last_mut() {
        last.extend(unranked.iter().chain(opaque).copied());
        sort_dedup(last);
    }
    tiers
}

/// Sorts and dedups `nodes`; nothing to do (one pass to see it) when they are strictly
/// ascending already, as a plan's tiers are.
pub(super) fn sort_dedup(nodes: &mut Vec<usize>) {
    if !nodes.is_sorted_by(|a, b| a < b) {
        nodes.sort_unstable();
        nodes.dedup();
    }
}

/// Runs the loop: `try_nodes` offers cons_tres exactly the given nodes and reports what
/// happened. Returns how it ended and the number of tries.
pub fn run(mut tries: Tries, mut try_nodes: impl FnMut(&[usize]) -> Answer) -> (Outcome, usize) {
    while let Some(nodes) = tries.offer() {
        let answer = try_nodes(&nodes);
        if let Some(outcome) = tries.answer(answer) {
            return (outcome, tries.calls());
        }
    }
    (Outcome::Failed, tries.calls())
}

#[cfg(test)]
mod tests;
