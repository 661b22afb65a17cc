//! A digest of what a node's GPU model is built from, by content.

use std::hash::{Hash, Hasher};

use super::NodeGres;

impl NodeGres<'_> {
    /// A digest of the content the topology model is built from: the GPU count, every
    /// topology record (type id, its GPUs, its cores) and the `Links=` matrix. Two GRES
    /// states with the same digest give the same model, wherever Slurm keeps them. It reads
    /// every record's bits, so the select hook computes it only when the node's cheap
    /// signature ([`NodeGres::content_key`], registration time) changed.
    pub fn content_digest(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.count().hash(&mut h);
        for (type_id, gpus, cores) in self.records_wide() {
            type_id.hash(&mut h);
            gpus.hash(&mut h);
            cores
                .map(|b| b.iter_set().map(|c| c.0).collect::<Vec<_>>())
                .hash(&mut h);
        }
        self.links().hash(&mut h);
        h.finish()
    }
}
