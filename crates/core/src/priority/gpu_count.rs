//! How many GPUs a job that ran held, for charging the usage ledger.
//!
//! In GPU equivalents: whole GPUs count one each, and a job of shared GRES (`shard`, `mps`)
//! counts the part of each GPU its shares are ([`shared_gpu_share`]): 2 of a GPU's 4 shards
//! are half a GPU, 25 of its 100 MPS shares a quarter. Without this a shard user's usage would
//! be nothing, and shards the free way to use GPUs.
//!
//! Slurm's own count of a job's GPUs (`total_gres` of its allocated GRES, the per-node counts
//! and bitmaps) is the answer while the job runs. After a backup controller has taken over,
//! Slurm zeroes those for jobs that end there (seen on 22.05.8 with stock cons_tres:
//! `scontrol show job -d` says `JOB_GRES=gpu:v100:0`), so a job's request is the fallback: what
//! cons_tres must have allocated to start it.

/// A job's GPU request as Slurm keeps it (`gres_list_req`), with the job's node and task counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuRequest {
    /// `--gpus` (`gres_per_job`).
    pub per_job: u64,
    /// `--gres=gpu:N` / `--gpus-per-node` (`gres_per_node`).
    pub per_node: u64,
    /// `--gpus-per-task` (`gres_per_task`).
    pub per_task: u64,
    /// `--gpus-per-socket` (`gres_per_socket`): the socket count is not kept, so it counts
    /// once per node, the least the job can have held.
    pub per_socket: u64,
    /// Nodes the job ran on.
    pub nodes: u64,
    /// Tasks of the job.
    pub tasks: u64,
}

impl GpuRequest {
    /// The least number of GPUs the job held if it ran with this request.
    pub fn minimum(&self) -> u64 {
        let nodes = self.nodes.max(1);
        if self.per_job > 0 {
            self.per_job
        } else if self.per_node > 0 {
            self.per_node.saturating_mul(nodes)
        } else if self.per_task > 0 {
            self.per_task.saturating_mul(self.tasks.max(1))
        } else {
            self.per_socket.saturating_mul(nodes)
        }
    }
}

/// The GPUs to charge: Slurm's allocated count where it has one, else the sum of the
/// requests' minimums (one request per GPU type asked for, e.g. `gpu:a100:1,gpu:v100:2`).
pub fn charged_gpus(allocated: u64, requests: &[GpuRequest]) -> u64 {
    if allocated > 0 {
        allocated
    } else {
        requests.iter().map(GpuRequest::minimum).sum()
    }
}

/// A job's shares of one sharing record (one GPU's `shard` or `mps` record): `held` of the
/// record's `avail` shares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SharedHeld {
    /// Shares the job holds on the record.
    pub held: u64,
    /// Shares the record has (`topo_gres_cnt_avail`): the whole GPU.
    pub avail: u64,
}

/// The GPU equivalents of a job's shared GRES: `held / avail` summed over the records it
/// holds shares of (a record without shares counts nothing).
pub fn shared_gpu_share(held: &[SharedHeld]) -> f64 {
    held.iter()
        .filter(|h| h.avail > 0)
        .map(|h| h.held as f64 / h.avail as f64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_parts_of_their_gpu() {
        let h = |held, avail| SharedHeld { held, avail };
        assert_eq!(shared_gpu_share(&[h(2, 4)]), 0.5, "2 of 4 shards");
        assert_eq!(shared_gpu_share(&[h(25, 100)]), 0.25, "25 % MPS");
        assert_eq!(shared_gpu_share(&[h(4, 4), h(1, 4)]), 1.25, "over two GPUs");
        assert_eq!(shared_gpu_share(&[h(3, 0)]), 0.0, "a record without shares");
        assert_eq!(shared_gpu_share(&[]), 0.0);
    }

    #[test]
    fn allocated_count_wins() {
        let r = GpuRequest {
            per_node: 1,
            nodes: 1,
            ..Default::default()
        };
        assert_eq!(charged_gpus(2, &[r]), 2);
    }

    #[test]
    fn zeroed_allocation_falls_back_to_the_request() {
        let per_node = GpuRequest {
            per_node: 2,
            nodes: 3,
            ..Default::default()
        };
        assert_eq!(charged_gpus(0, &[per_node]), 6);
        let per_job = GpuRequest {
            per_job: 5,
            per_node: 1,
            nodes: 2,
            ..Default::default()
        };
        assert_eq!(charged_gpus(0, &[per_job]), 5, "--gpus is the job's total");
        let per_task = GpuRequest {
            per_task: 1,
            tasks: 4,
            nodes: 2,
            ..Default::default()
        };
        assert_eq!(charged_gpus(0, &[per_task]), 4);
        let per_socket = GpuRequest {
            per_socket: 2,
            nodes: 2,
            ..Default::default()
        };
        assert_eq!(charged_gpus(0, &[per_socket]), 4);
        assert_eq!(
            charged_gpus(0, &[per_node, per_job]),
            11,
            "two typed requests add up"
        );
    }

    #[test]
    fn no_gpu_request_charges_none() {
        assert_eq!(charged_gpus(0, &[]), 0);
        assert_eq!(charged_gpus(0, &[GpuRequest::default()]), 0);
    }
}
