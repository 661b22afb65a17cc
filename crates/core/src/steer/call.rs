//! One `select_p_job_test` call as a pure state machine over a snapshot of Slurm's state.
//!
//! The plugin reads the job and every candidate node once ([`Snapshot`]); [`Call::start`]
//! decides the health pre-filter and the tiers; then each [`Call::step`] takes cons_tres's
//! [`Reply`] to the last offer and says what to do next ([`Step`]): offer cons_tres exactly
//! these nodes, release the allocation it built (give-up), or finish, with the
//! [`Placement`] to write back once. The plugin only reads, forwards and writes; every rule
//! lives here and is unit-tested against fake cons_tres closures (`call/tests.rs`).
//!
//! The loop itself is [`super::tries`] (widening, WILL_RUN's "starts now", exclusion rounds,
//! give-up); the re-pick of a RUN_NOW success is [`judge`]. cons_tres is called at most
//! `MAX_TRIES + tries::MAX_EXCLUSIONS + 1` times per call.

mod answer;
mod events;
mod judge;
mod plan;
mod shares;
mod snapshot;

pub use super::tries::{CallMode, Mode, Outcome, mode_of};
pub use answer::{
    Chosen, GpuPicks, Pick, Reply, Selection, SharedPick, SharedPicks, SharingRecord,
};
pub use events::Event;
pub use judge::{GpuWrite, Placement, Verdict, judge};
pub use plan::{Start, candidate, filter_rule, start};
pub use shares::SharedWrite;
pub use snapshot::{
    GpuNeed, Gpus, JobFacts, Modelled, NodeSharing, NodeState, ShareNeed, Snapshot,
};

use super::key_memo::KeyMemos;
use super::tries::{Answer, Tries};
use crate::config::SelectConfig;
use crate::placement::engine::Gputopo;

/// Most cons_tres calls node steering may cost per call (the final, full try included).
pub const MAX_TRIES: usize = 3;

/// What the decisions of one call read besides the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The select settings (`gputopo.conf`).
    pub cfg: &'a SelectConfig,
    /// The placement engine (interns per-topology tables).
    pub engine: &'a Gputopo,
    /// Describe every decision ([`Event::Decision`]): `LogDecisions=yes`, or Slurm's
    /// `DebugFlags` has `SelectType` or `Gres`.
    pub log: bool,
    /// `SelectTypeParameters=MULTIPLE_SHARING_GRES_PJ`: a job's shares may come from several
    /// devices of a node.
    pub multiple_sharing: bool,
}

/// What the plugin does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Rewrite the candidate bitmap to exactly these nodes, call cons_tres, and pass its
    /// answer to [`Call::step`].
    Offer(Vec<usize>),
    /// Give-up: call cons_tres on no node at all (so that it releases the allocation it
    /// built, never leaving one with a faulty GPU behind), then [`Call::step`] with any
    /// reply.
    Release,
    /// Done.
    Finish(Finish),
}

/// How a call ended and what to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// The loop's end: success returns cons_tres's last answer, otherwise failure.
    pub outcome: Outcome,
    /// On a RUN_NOW success: the selections and the placement note to write.
    pub placement: Option<Placement>,
    /// Nodes withheld for health (pre-filter and exclusions), for the job's pending note.
    pub withheld: Vec<usize>,
    /// cons_tres calls made (the give-up's release included).
    pub calls: usize,
    /// Nodes excluded by exclusion rounds (counted once per round).
    pub excluded: usize,
}

/// The state of one call between tries.
#[derive(Debug)]
pub struct Call<'s> {
    snap: &'s Snapshot,
    ctx: Ctx<'s>,
    tries: Tries,
    events: Vec<Event>,
    excluded: usize,
    placement: Option<Placement>,
    /// The give-up's release call was asked for.
    releasing: bool,
}

impl<'s> Call<'s> {
    /// Plans the call over `snap` (pre-filter and tiers; rank keys through `keys`).
    pub fn start(snap: &'s Snapshot, ctx: Ctx<'s>, keys: &mut KeyMemos) -> Self {
        let mut events = Vec::new();
        let Start { tiers, withheld } = plan::start(snap, &ctx, keys, &mut events);
        Call {
            snap,
            ctx,
            tries: Tries::new(tiers, withheld, snap.job.mode),
            events,
            excluded: 0,
            placement: None,
            releasing: false,
        }
    }

    /// The next step, given cons_tres's reply to the last one (`None` before the first).
    pub fn step(&mut self, reply: Option<Reply>) -> Step {
        if self.releasing {
            return self.finish(Outcome::GiveUp);
        }
        if let Some(reply) = reply {
            let answer = self.answer(reply);
            if let Some(outcome) = self.tries.answer(answer) {
                if outcome == Outcome::GiveUp {
                    self.releasing = true;
                    return Step::Release;
                }
                return self.finish(outcome);
            }
        }
        match self.tries.offer() {
            Some(nodes) => Step::Offer(nodes),
            None => self.finish(Outcome::Failed),
        }
    }

    /// Takes the log events so far (the plugin writes them as they come).
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn answer(&mut self, reply: Reply) -> Answer {
        match reply {
            Reply::Failed => Answer::Failed,
            Reply::Planned { start } => Answer::Planned { start },
            Reply::Selected(sel) => match judge(self.snap, &sel, &self.ctx, &mut self.events) {
                Verdict::Place(p) => {
                    self.placement = Some(p);
                    Answer::Placed
                }
                Verdict::Exclude(nodes) => {
                    self.excluded += nodes.len();
                    Answer::Exclude(nodes)
                }
            },
        }
    }

    fn finish(&mut self, outcome: Outcome) -> Step {
        let calls = self.tries.calls() + usize::from(self.releasing);
        Step::Finish(Finish {
            outcome,
            placement: match outcome {
                Outcome::Success => self.placement.take(),
                _ => None,
            },
            withheld: self.tries.excluded().to_vec(),
            calls,
            excluded: self.excluded,
        })
    }
}

/// Runs a started call to its end: `cons_tres` is offered exactly the given nodes and
/// answers (the give-up's release is an offer of no node, its reply ignored); `on_events`
/// gets the log events as they come.
pub fn run(
    mut call: Call<'_>,
    mut cons_tres: impl FnMut(&[usize]) -> Reply,
    mut on_events: impl FnMut(Vec<Event>),
) -> Finish {
    let mut reply = None;
    loop {
        let step = call.step(reply.take());
        let events = call.take_events();
        if !events.is_empty() {
            on_events(events);
        }
        match step {
            Step::Offer(nodes) => reply = Some(cons_tres(&nodes)),
            Step::Release => reply = Some(cons_tres(&[])),
            Step::Finish(f) => return f,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
