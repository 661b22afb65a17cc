//! The simulated cluster: which topology each node has, and per-node allocation and health
//! state with the indexes node choice needs at 10,000-node scale.
//!
//! Nodes are numbered in the order of [`ClusterSpec::groups`]. Three indexes follow every
//! change of a node's *visible* free set (what the policy may use: unallocated, and healthy
//! when health-aware) in O(log nodes): a histogram of free counts (can a job fit at all?), a
//! max segment tree over free counts (the lowest-index node with ≥ k free, for first-fit
//! node choice), and buckets of nodes by (topology, free mask) (for the engine's ranking, which
//! only needs one representative per distinct state). A fourth histogram counts the truly
//! usable GPUs (unallocated and healthy) for the stranded-GPU metric.

use gputopo_core::gpuset::MAX_GPUS;
use gputopo_core::topology::NodeTopology;
use std::collections::{BTreeMap, BTreeSet};

/// Node counts × topologies.
#[derive(Clone, Debug, Default)]
pub struct ClusterSpec {
    /// `(count, topology)` groups, in node order.
    pub groups: Vec<(u32, NodeTopology)>,
}

impl ClusterSpec {
    /// Total nodes.
    pub fn node_count(&self) -> u32 {
        self.groups.iter().map(|g| g.0).sum()
    }

    /// Total GPUs.
    pub fn gpu_count(&self) -> u64 {
        self.groups
            .iter()
            .map(|(c, t)| u64::from(*c) * t.len() as u64)
            .sum()
    }

    /// GPUs of the largest node.
    pub fn max_gpus_per_node(&self) -> usize {
        self.groups.iter().map(|g| g.1.len()).max().unwrap_or(0)
    }

    /// `64xdgx1v,16xhgx-h100`-style description.
    pub fn describe(&self) -> String {
        let v: Vec<String> = self
            .groups
            .iter()
            .map(|(c, t)| format!("{c}x{}", t.name))
            .collect();
        v.join(",")
    }
}

/// Max segment tree over per-node visible free counts.
#[derive(Debug)]
struct SegTree {
    size: usize,
    t: Vec<u8>,
}

impl SegTree {
    fn new(n: usize) -> Self {
        let size = n.next_power_of_two().max(1);
        SegTree {
            size,
            t: vec![0; 2 * size],
        }
    }

    fn set(&mut self, i: usize, v: u8) {
        let mut p = i + self.size;
        self.t[p] = v;
        while p > 1 {
            p /= 2;
            self.t[p] = self.t[2 * p].max(self.t[2 * p + 1]);
        }
    }

    /// Lowest index ≥ `from` whose value is ≥ `k`.
    fn first_at_least(&self, from: usize, k: u8) -> Option<usize> {
        self.descend(1, 0, self.size, from, k)
    }

    fn descend(&self, p: usize, lo: usize, hi: usize, from: usize, k: u8) -> Option<usize> {
        if hi <= from || self.t[p] < k {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.descend(2 * p, lo, mid, from, k)
            .or_else(|| self.descend(2 * p + 1, mid, hi, from, k))
    }
}

/// Allocation and health state of every node, with its indexes.
#[derive(Debug)]
pub(crate) struct State {
    /// Topology (group) index of each node.
    pub topo_of: Vec<u16>,
    /// All-GPU mask of each group.
    all: Vec<u32>,
    /// Allocated GPUs per node.
    pub alloc: Vec<u32>,
    /// Faulty GPUs per node.
    pub faulty: Vec<u32>,
    /// Whether faulty GPUs are hidden from the policy.
    aware: bool,
    vis_hist: [u32; MAX_GPUS + 1],
    /// Per-node count of GPUs the policy could ever use (healthy when aware).
    cap_hist: [u32; MAX_GPUS + 1],
    usable_hist: [u32; MAX_GPUS + 1],
    seg: SegTree,
    buckets: BTreeMap<(u16, u32), BTreeSet<u32>>,
}

impl State {
    pub fn new(spec: &ClusterSpec, aware: bool) -> Self {
        let mut topo_of = Vec::with_capacity(spec.node_count() as usize);
        for (gi, (count, _)) in spec.groups.iter().enumerate() {
            topo_of.extend(std::iter::repeat_n(gi as u16, *count as usize));
        }
        let all: Vec<u32> = spec.groups.iter().map(|g| g.1.all().bits()).collect();
        let n = topo_of.len();
        let mut s = State {
            alloc: vec![0; n],
            faulty: vec![0; n],
            aware,
            vis_hist: [0; MAX_GPUS + 1],
            cap_hist: [0; MAX_GPUS + 1],
            usable_hist: [0; MAX_GPUS + 1],
            seg: SegTree::new(n),
            buckets: BTreeMap::new(),
            all,
            topo_of,
        };
        for node in 0..n {
            let (v, u) = (s.visible(node), s.usable(node));
            s.index_add(node, v, u);
        }
        s
    }

    pub fn nodes(&self) -> usize {
        self.topo_of.len()
    }

    /// Free GPUs the policy may use on `node`.
    pub fn visible(&self, node: usize) -> u32 {
        let free = self.all[self.topo_of[node] as usize] & !self.alloc[node];
        if self.aware {
            free & !self.faulty[node]
        } else {
            free
        }
    }

    /// Free and healthy GPUs on `node`.
    pub fn usable(&self, node: usize) -> u32 {
        self.all[self.topo_of[node] as usize] & !self.alloc[node] & !self.faulty[node]
    }

    /// GPUs of `node` the policy could use once everything is released.
    fn capacity(&self, node: usize) -> u32 {
        let all = self.all[self.topo_of[node] as usize];
        if self.aware {
            all & !self.faulty[node]
        } else {
            all
        }
    }

    fn index_add(&mut self, node: usize, vis: u32, usable: u32) {
        self.cap_hist[self.capacity(node).count_ones() as usize] += 1;
        let c = vis.count_ones() as usize;
        self.vis_hist[c] += 1;
        self.usable_hist[usable.count_ones() as usize] += 1;
        self.seg.set(node, c as u8);
        self.buckets
            .entry((self.topo_of[node], vis))
            .or_default()
            .insert(node as u32);
    }

    fn index_remove(&mut self, node: usize, vis: u32, usable: u32) {
        self.cap_hist[self.capacity(node).count_ones() as usize] -= 1;
        self.vis_hist[vis.count_ones() as usize] -= 1;
        self.usable_hist[usable.count_ones() as usize] -= 1;
        let key = (self.topo_of[node], vis);
        if let Some(b) = self.buckets.get_mut(&key) {
            b.remove(&(node as u32));
            if b.is_empty() {
                self.buckets.remove(&key);
            }
        }
    }

    /// Changes a node's allocated and faulty masks, keeping the indexes right.
    pub fn update(&mut self, node: usize, alloc: u32, faulty: u32) {
        let (v, u) = (self.visible(node), self.usable(node));
        self.index_remove(node, v, u);
        self.alloc[node] = alloc;
        self.faulty[node] = faulty;
        let (v, u) = (self.visible(node), self.usable(node));
        self.index_add(node, v, u);
    }

    /// Nodes whose visible free count is at least `k`.
    pub fn nodes_with_at_least(&self, k: usize) -> u32 {
        self.vis_hist[k.min(MAX_GPUS)..].iter().sum()
    }

    /// Nodes that could host `k` GPUs once idle (faulty GPUs excluded when aware).
    pub fn nodes_able(&self, k: usize) -> u32 {
        self.cap_hist[k.min(MAX_GPUS)..].iter().sum()
    }

    /// Lowest-index node ≥ `from` with at least `k` visible free GPUs.
    pub fn first_fit(&self, from: usize, k: usize) -> Option<usize> {
        self.seg.first_at_least(from, k as u8)
    }

    /// Distinct (topology, visible free mask) states with at least `k` free GPUs, each with
    /// its nodes in ascending order; sorted by lowest node index.
    pub fn states_with_at_least(&self, k: usize) -> Vec<(u16, u32, &BTreeSet<u32>)> {
        let mut v: Vec<(u16, u32, &BTreeSet<u32>)> = self
            .buckets
            .iter()
            .filter(|((_, m), _)| m.count_ones() as usize >= k)
            .map(|((t, m), nodes)| (*t, *m, nodes))
            .collect();
        v.sort_by_key(|(_, _, nodes)| nodes.first().copied());
        v
    }

    /// Histogram of usable (free, healthy) GPU counts per node.
    pub fn usable_hist(&self) -> &[u32; MAX_GPUS + 1] {
        &self.usable_hist
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gputopo_core::topology::PcieLevel;

    #[test]
    fn indexes_follow_updates() {
        let spec = ClusterSpec {
            groups: vec![
                (3, NodeTopology::uniform("a", 4, PcieLevel::Pix).unwrap()),
                (2, NodeTopology::uniform("b", 8, PcieLevel::Pix).unwrap()),
            ],
        };
        assert_eq!(
            (
                spec.node_count(),
                spec.gpu_count(),
                spec.max_gpus_per_node()
            ),
            (5, 28, 8)
        );
        assert_eq!(spec.describe(), "3xa,2xb");
        let mut s = State::new(&spec, true);
        assert_eq!(s.nodes_with_at_least(5), 2);
        assert_eq!(s.first_fit(0, 5), Some(3));
        s.update(3, 0b1111, 0);
        assert_eq!(s.first_fit(0, 5), Some(4));
        assert_eq!(s.first_fit(0, 4), Some(0));
        assert_eq!(s.first_fit(1, 4), Some(1));
        s.update(4, 0, 0b1_0000);
        assert_eq!(s.first_fit(0, 8), None);
        assert_eq!(s.nodes_with_at_least(7), 1);
        assert_eq!((s.nodes_able(8), s.nodes_able(7)), (1, 2));
        let st = s.states_with_at_least(4);
        assert_eq!(st.len(), 3);
        assert_eq!(st[0].2.iter().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
        let unaware = State::new(&spec, false);
        let mut u = unaware;
        u.update(4, 0, 0b1);
        assert_eq!(u.visible(4), 0xFF);
        assert_eq!(u.usable(4), 0xFE);
        assert_eq!(u.usable_hist()[7], 1);
    }
}
