//! GRES reservations (23.11+ `TRES=gres/gpu=N`): which GPUs of one node a job may get, as
//! cons_tres reads the reservation argument of `select_p_job_test` (`resv_exc_t`).
//!
//! Slurm's rules (24.11.5 src/plugins/select/cons_tres/gres_sock_list.c
//! `_can_use_gres_exc_topo`, lists filled by src/slurmctld/reservation.c `job_test_resv`):
//! - a job IN a reservation that holds part of a node gets `gres_list_inc`: only the GPUs the
//!   reservation holds on the node (its `gres_bit_alloc[node]`); none where that bitmap is
//!   missing;
//! - a job OUTSIDE overlapping reservations gets `gres_list_exc`: every GPU but the ones
//!   those reservations hold (nothing excluded where the bitmap is missing);
//! - both are matched to the job's request by GRES and exact type id; no entry for the
//!   request means no GPU constraint at all.
//!
//! The re-pick then chooses within [`of_type`]'s set (healthy first, never faulty,
//! best-connected). When the reading disagrees with cons_tres (its pick lies outside the
//! set), the plugin cannot know what cons_tres honoured: cons_tres's pick is the only
//! eligible set, kept when healthy, its node withheld when not (the behaviour before GRES
//! reservations were read).
//!
//! Where the rule applies ([`by_gpu`]): only to whole-GPU requests on nodes with topology
//! records. On a node without them a reservation holds a count, which cons_tres has already
//! applied; shared GRES (`shard`, `mps`) are not constrained by a `gres/gpu` reservation.

use crate::gpuset::GpuSet;

/// What reservations leave a job's GPU request on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// No reservation constrains this request here.
    Free,
    /// The job runs in a reservation that holds these GPUs of the node: only these.
    Only(GpuSet),
    /// Other reservations hold these GPUs of the node: every GPU but these.
    Except(GpuSet),
    /// The reservation's state could not be read for this node (unexpected sizes).
    Unknown,
}

/// What a GPU request asks for, as far as reservations of `gres/gpu` are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Whole GPUs (`--gres=gpu...`).
    Gpu,
    /// Shares of GPUs (`--gres=shard...`, `--gres=mps...`).
    Shared,
}

/// Whether a `gres/gpu` reservation constrains which GPUs of a node `request` may get, GPU by
/// GPU (Slurm 24.11.5):
/// - a whole-GPU request on a node with topology records: yes, each GPU is tested
///   (src/plugins/select/cons_tres/gres_sock_list.c:206, `_can_use_gres_exc_topo`);
/// - on a node without them (plain `File=` lines): no. The reservation holds a count there
///   (gres_select_filter.c:1816 sets no bits, so its `gres_bit_alloc[node]` is NULL), cons_tres
///   caps or reduces the job's count (gres_sock_list.c:123 `_handle_gres_exc_basic`, :86
///   `_by_type`), and the commit takes any free GPUs (src/stepmgr/gres_stepmgr.c:524-561): a
///   re-pick of as many other free GPUs keeps every count;
/// - a shared request: no. The reservation's list is searched by the request's own plugin id
///   (gres_sock_list.c:858 `gres_find_job_by_key_exact_type`), which a `gpu` entry never
///   matches, and a reserved GPU that no job holds is free for shares
///   (gres_sock_list.c:222 filters only GPUs allocated whole). Jobs outside the reservation may
///   take shares of its GPUs. (From 25.05 cons_tres itself gives a job inside a reservation
///   no GRES the reservation does not hold, gres_sock_list.c:83 in 25.05.8 to 26.05.3: such a
///   shard job is never placed, so there is nothing to re-pick.)
pub fn by_gpu(request: Request, topology_records: bool) -> bool {
    request == Request::Gpu && topology_records
}

/// The GPUs the re-pick may choose from on a node: `of_type` (the request's type) within
/// what `reserved` allows; cons_tres's `stock` pick alone when that set does not hold it
/// (see the module docs).
pub fn of_type(of_type: GpuSet, stock: GpuSet, reserved: Reserved) -> GpuSet {
    let allowed = match reserved {
        Reserved::Free => of_type,
        Reserved::Only(held) => of_type.intersection(held),
        Reserved::Except(held) => of_type.difference(held),
        Reserved::Unknown => return stock,
    };
    if stock.is_subset(allowed) {
        allowed
    } else {
        stock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> GpuSet {
        GpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn a_job_in_a_reservation_chooses_among_the_reserved_gpus() {
        let all = GpuSet::first_n(8);
        // Reservation holds 4-7; cons_tres picked 5.
        assert_eq!(
            of_type(all, set("5"), Reserved::Only(set("4-7"))),
            set("4-7")
        );
        // Typed request: only the reserved GPUs of that type.
        assert_eq!(
            of_type(set("0-5"), set("4"), Reserved::Only(set("4-7"))),
            set("4-5")
        );
    }

    #[test]
    fn a_job_outside_never_gets_reserved_gpus() {
        let all = GpuSet::first_n(8);
        assert_eq!(
            of_type(all, set("0"), Reserved::Except(set("4-7"))),
            set("0-3")
        );
    }

    #[test]
    fn no_reservation_leaves_the_type() {
        assert_eq!(of_type(set("0-3"), set("1"), Reserved::Free), set("0-3"));
    }

    #[test]
    fn only_whole_gpus_on_nodes_with_topology_records_are_constrained_gpu_by_gpu() {
        assert!(by_gpu(Request::Gpu, true));
        assert!(!by_gpu(Request::Gpu, false), "a count on plain nodes");
        assert!(!by_gpu(Request::Shared, true), "shards: other plugin id");
        assert!(!by_gpu(Request::Shared, false));
    }

    #[test]
    fn a_disagreement_with_cons_tres_keeps_its_pick_only() {
        let all = GpuSet::first_n(8);
        // cons_tres picked 1, which the reading says is not reserved for the job.
        assert_eq!(of_type(all, set("1"), Reserved::Only(set("4-7"))), set("1"));
        assert_eq!(
            of_type(all, set("5"), Reserved::Except(set("4-7"))),
            set("5")
        );
        // Nothing allowed (no bitmap for the node): cons_tres's pick only.
        assert_eq!(
            of_type(all, set("2"), Reserved::Only(GpuSet::EMPTY)),
            set("2")
        );
        assert_eq!(of_type(all, set("2,3"), Reserved::Unknown), set("2,3"));
    }

    /// The whole rule, through the re-pick: the reservation's healthy free GPUs replace a
    /// faulty pick; when none is left the node is withheld, never a faulty GPU handed out.
    #[test]
    fn the_repick_stays_within_the_reservation() {
        use crate::steer::HealthMasks;
        use crate::steer::oracle::{BruteForce, dgx1v, node_input};
        use crate::steer::repick::{Decision, ReplaceReason, repick};
        let t = dgx1v();
        let health = HealthMasks {
            faulty: set("5"),
            ..HealthMasks::ALL_OK
        };
        // GPU 4 taken by an earlier job of the reservation; cons_tres picked faulty 5.
        let mut input = node_input(&t, &[5], &[0, 1, 2, 3, 5, 6, 7]);
        input.health = health;
        input.constraints.of_type = of_type(t.all(), set("5"), Reserved::Only(set("4-7")));
        match repick(&BruteForce, &input) {
            Decision::Replace { set: got, why, .. } => {
                assert_eq!(why, ReplaceReason::AvoidsFaulty);
                assert!(got.is_subset(set("6,7")), "outside the reservation: {got}");
            }
            d => panic!("not replaced: {d:?}"),
        }
        // 6 and 7 taken too: only the faulty reserved GPU is left, the node is withheld.
        let mut input = node_input(&t, &[5], &[0, 1, 2, 3, 5]);
        input.health = health;
        input.constraints.of_type = of_type(t.all(), set("5"), Reserved::Only(set("4-7")));
        assert!(matches!(
            repick(&BruteForce, &input),
            Decision::ExcludeNode(_)
        ));
    }
}
