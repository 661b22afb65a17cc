//! `slurm-greedy`: a model of stock `select/cons_tres`'s GPU pick for `--gres=gpu:K`.
//!
//! The evaluation compares gputopo with what Slurm does today, so this module reproduces the
//! per-node index choice of `_set_node_bits` in two releases, including its quirks, and is
//! tested against picks observed on a real slurmctld (`stock-gpu-picks.md`):
//!
//! - **24.11** (`gres_select_filter.c`, unchanged through 26.05): GPUs are taken socket by
//!   socket (the sockets holding the job's cores first, `used_cores × K / used_core_cnt` each,
//!   then GPUs without affinity, then more from the used sockets, then, unless
//!   `enforce-binding`, the other sockets). Candidates are visited in `sorted_gres` order. After
//!   each pick the NVLink counts to the picked GPU are added to `links_cnt` and the candidates
//!   are re-sorted **ascending** (`_compare_gres_by_links` returns `a - b`, a stable sort in
//!   glibc), and the scan restarts with `i = 0` followed by the loop's `i++`, so the first
//!   sorted entry is skipped.
//! - **22.05** (`cons_common/gres_select_filter.c`): one GPU (the lowest free index) per used
//!   socket first; the link counts of those first picks only are summed; then link levels are
//!   swept from the best count (scaled to at most 4 levels) down to 0, taking the lowest index
//!   at or above the level, used sockets first, then the other sockets.
//!
//! `Links=` is assumed to carry [`gputopo_core::topology::Link::nvlinks`] (what gputopo's gres.conf
//! renderer writes); GPUs without a socket are Slurm's "any socket" GPUs.
//!
//! Where the job's cores are: cons_tres chooses them before the GPUs. The [`Policy`] form
//! places the job's single core on the socket of the `near` GPUs when the request names some,
//! else on the socket with the most free GPUs (ties: the lowest socket). That rule reproduces
//! every observed row; [`pick`] takes an explicit per-socket core count for the other cases.
//!
//! `required` GPUs (not a cons_tres notion) are treated as already selected before the scan.

use gputopo_core::gpuset::GpuSet;
use gputopo_core::placement::{self, Policy, Request};
use gputopo_core::topology::NodeTopology;

/// Which cons_tres release to model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlurmRelease {
    /// Slurm 22.05 (Debian 12): one GPU per socket, then a link-level sweep.
    V22_05,
    /// Slurm 24.05 to 26.05: the ascending `links_cnt` sort with the `i = 0; i++` skip.
    V24_11,
}

/// The stock cons_tres policy of one release.
#[derive(Clone, Copy, Debug)]
pub struct SlurmGreedy {
    /// The release modelled.
    pub release: SlurmRelease,
}

impl SlurmGreedy {
    /// The 24.11 model (`slurm-greedy`).
    pub const V24_11: SlurmGreedy = SlurmGreedy {
        release: SlurmRelease::V24_11,
    };
    /// The 22.05 model (`slurm-greedy-22.05`).
    pub const V22_05: SlurmGreedy = SlurmGreedy {
        release: SlurmRelease::V22_05,
    };
}

impl Policy for SlurmGreedy {
    type Score = placement::Score;

    /// The engine's quality: the evaluation compares every policy's sets on one scale.
    fn score(&self, topo: &NodeTopology, set: GpuSet) -> placement::Score {
        placement::score(topo, set)
    }

    fn name(&self) -> &'static str {
        match self.release {
            SlurmRelease::V24_11 => "slurm-greedy",
            SlurmRelease::V22_05 => "slurm-greedy-22.05",
        }
    }

    fn choose(&self, topo: &NodeTopology, free: GpuSet, req: &Request) -> Option<GpuSet> {
        let cores = default_cores(topo, free, req.near);
        let job = Job {
            count: req.count,
            required: req.required,
            cores_on_socket: &cores,
            enforce_binding: false,
        };
        pick(self.release, topo, free, &job)
    }
}

/// One job's request on one node, as cons_tres sees it when it picks GPU indices.
#[derive(Clone, Copy, Debug)]
pub struct Job<'a> {
    /// GPUs wanted (`--gres=gpu:K`).
    pub count: usize,
    /// GPUs already selected before the scan (not a cons_tres notion; empty for stock).
    pub required: GpuSet,
    /// Cores the job holds on each socket of the node (index = socket).
    pub cores_on_socket: &'a [u32],
    /// `--gres-flags=enforce-binding`: never take GPUs from sockets without the job's cores.
    pub enforce_binding: bool,
}

/// Number of sockets Slurm would see: one more than the highest GPU socket, at least 1.
fn socket_count(topo: &NodeTopology) -> usize {
    topo.gpus()
        .iter()
        .filter_map(|g| g.socket)
        .max()
        .map_or(1, |s| s as usize + 1)
}

/// GPUs on socket `s`, or (for `None`) GPUs without socket affinity.
fn socket_gpus(topo: &NodeTopology, s: Option<usize>) -> GpuSet {
    topo.gpus()
        .iter()
        .filter(|g| g.socket.map(|x| x as usize) == s)
        .map(|g| g.index)
        .collect()
}

/// The job's cores per socket for the [`Policy`] form (see the module doc).
fn default_cores(topo: &NodeTopology, free: GpuSet, near: GpuSet) -> Vec<u32> {
    let n = socket_count(topo);
    let mut cores = vec![0u32; n];
    let near_sockets: Vec<usize> = near
        .iter()
        .filter_map(|g| topo.gpus().get(g).and_then(|g| g.socket))
        .map(|s| s as usize)
        .collect();
    if !near_sockets.is_empty() {
        for s in near_sockets {
            cores[s] = 1;
        }
        return cores;
    }
    let best = (0..n)
        .max_by_key(|&s| {
            (
                socket_gpus(topo, Some(s)).intersection(free).len(),
                std::cmp::Reverse(s),
            )
        })
        .unwrap_or(0);
    cores[best] = 1;
    cores
}

/// The GPUs cons_tres of `release` selects for `job` on a node with `free` GPUs, or `None`
/// when it cannot find `job.count` of them (cons_tres would not have chosen this node).
pub fn pick(
    release: SlurmRelease,
    topo: &NodeTopology,
    free: GpuSet,
    job: &Job<'_>,
) -> Option<GpuSet> {
    let free = free.intersection(topo.all());
    if job.count > free.len() || job.required.len() > job.count || !job.required.is_subset(free) {
        return None;
    }
    let set = match release {
        SlurmRelease::V24_11 => Scan24::new(topo, free, job).run(job),
        SlurmRelease::V22_05 => pick_22(topo, free, job),
    };
    (set.len() == job.count).then_some(set)
}

/// State of one `_set_node_bits` call in 24.11.
struct Scan24<'t> {
    topo: &'t NodeTopology,
    free: GpuSet,
    selected: GpuSet,
    links_cnt: Vec<i32>,
    sorted: Vec<usize>,
}

impl<'t> Scan24<'t> {
    fn new(topo: &'t NodeTopology, free: GpuSet, job: &Job<'_>) -> Self {
        let mut s = Scan24 {
            topo,
            free,
            selected: GpuSet::EMPTY,
            links_cnt: vec![0; topo.len()],
            sorted: (0..topo.len()).collect(),
        };
        for g in job.required.iter() {
            s.selected.insert(g);
            s.update_and_sort(g);
        }
        s
    }

    /// `_update_and_sort_by_links`.
    fn update_and_sort(&mut self, g: usize) {
        for l in 0..self.topo.len() {
            if l == g || !self.free.contains(l) {
                continue;
            }
            self.links_cnt[l] += i32::from(self.topo.link(g, l).nvlinks);
        }
        let keys = &self.links_cnt;
        self.sorted.sort_by_key(|&x| keys[x]); // stable, ascending, as glibc's qsort here
    }

    /// `_pick_gres_topo`: up to `want` GPUs from `bits`; returns how many it took.
    fn pick_topo(&mut self, want: usize, bits: GpuSet) -> usize {
        let mut still = want;
        let mut i = 0;
        while i < self.sorted.len() && still > 0 {
            let g = self.sorted[i];
            if bits.contains(g) && !self.selected.contains(g) && self.free.contains(g) {
                self.selected.insert(g);
                still -= 1;
                i = 0; // "Start over", but the loop's i++ follows
                self.update_and_sort(g);
            }
            i += 1;
        }
        want - still
    }

    fn run(mut self, job: &Job<'_>) -> GpuSet {
        let topo = self.topo;
        let sockets = socket_count(topo);
        let cores = |s: usize| job.cores_on_socket.get(s).copied().unwrap_or(0);
        let mut needed = job.count - job.required.len();
        let used_core_cnt: u32 = (0..sockets).map(cores).sum::<u32>().max(1);
        let per_core = needed as f32 / used_core_cnt as f32;
        for s in 0..sockets {
            if needed == 0 {
                break;
            }
            if cores(s) == 0 {
                continue;
            }
            let want = needed.min((cores(s) as f32 * per_core) as usize);
            needed -= self.pick_topo(want, socket_gpus(topo, Some(s)));
        }
        if needed > 0 {
            needed -= self.pick_topo(needed, socket_gpus(topo, None));
        }
        for s in 0..sockets {
            if needed > 0 && cores(s) > 0 {
                needed -= self.pick_topo(needed, socket_gpus(topo, Some(s)));
            }
        }
        if !job.enforce_binding {
            for s in 0..sockets {
                if needed > 0 && cores(s) == 0 {
                    needed -= self.pick_topo(needed, socket_gpus(topo, Some(s)));
                }
            }
        }
        self.selected
    }
}

/// 22.05's `_set_node_bits`.
fn pick_22(topo: &NodeTopology, free: GpuSet, job: &Job<'_>) -> GpuSet {
    let n = topo.len();
    let sockets = socket_count(topo);
    let used = |s: usize| job.cores_on_socket.get(s).copied().unwrap_or(0) > 0;
    // Socket -1 ("any socket") first, then the real ones; as Option<usize>.
    let order: Vec<Option<usize>> = std::iter::once(None)
        .chain((0..sockets).map(Some))
        .collect();
    let mut selected = job.required;
    let mut links_cnt = vec![0i32; n];
    let add_links = |links_cnt: &mut Vec<i32>, g: usize| {
        for (l, c) in links_cnt.iter_mut().enumerate() {
            if l != g && free.contains(l) {
                *c += i32::from(topo.link(g, l).nvlinks);
            }
        }
    };
    for g in job.required.iter() {
        add_links(&mut links_cnt, g);
    }
    // First: one GPU per used socket (and one without affinity).
    for &s in &order {
        if selected.len() >= job.count {
            break;
        }
        if s.is_some_and(|s| !used(s)) {
            continue;
        }
        let cand = socket_gpus(topo, s).intersection(free).difference(selected);
        if let Some(g) = cand.first() {
            selected.insert(g);
            add_links(&mut links_cnt, g);
        }
    }
    let mut best = links_cnt.iter().copied().max().unwrap_or(0);
    if best > 4 {
        let div = (best + 3) / 4;
        for c in &mut links_cnt {
            *c /= div;
        }
        best = links_cnt.iter().copied().max().unwrap_or(0);
    }
    // Second: more on the used sockets, best-linked levels first; third: the other sockets.
    for other_sockets in [false, true] {
        if other_sockets && job.enforce_binding {
            break; // 22.05 filters these sockets out earlier; the effect is the same
        }
        for level in (0..=best).rev() {
            for &s in &order {
                if selected.len() >= job.count {
                    return selected;
                }
                let eligible = match s {
                    None => !other_sockets,
                    Some(s) => used(s) != other_sockets,
                };
                if !eligible {
                    continue;
                }
                let cand = socket_gpus(topo, s).intersection(free).difference(selected);
                for g in cand.iter().filter(|&g| links_cnt[g] >= level) {
                    if selected.len() >= job.count {
                        break;
                    }
                    selected.insert(g);
                }
            }
        }
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgx1v() -> NodeTopology {
        gputopo_core::fixtures::dgx1v()
    }

    fn set(s: &str) -> GpuSet {
        GpuSet::parse_list(s).unwrap()
    }

    fn choose(p: SlurmGreedy, free: &str, k: usize) -> GpuSet {
        let req = Request::new(k);
        p.choose(&dgx1v(), set(free), &req).unwrap()
    }

    fn with_cores(r: SlurmRelease, k: usize, cores: &[u32]) -> GpuSet {
        let job = Job {
            count: k,
            required: GpuSet::EMPTY,
            cores_on_socket: cores,
            enforce_binding: false,
        };
        pick(r, &dgx1v(), set("0-7"), &job).unwrap()
    }

    /// Every row of stock-gpu-picks.md: (free, K, 22.05 pick, 24.11 pick).
    const ROWS: &[(&str, usize, &str, &str)] = &[
        ("0-7", 2, "0,3", "0-1"),
        ("0-7", 4, "0-3", "0-3"),
        ("0-7", 3, "0-1,3", "0-2"),
        ("0,2,4-5", 2, "0,2", "0,2"),
        ("0,4-6", 2, "4-5", "4-5"),
        ("0-1,3", 2, "0,3", "0-1"),
        ("0-1,4", 2, "0-1", "0-1"),
    ];

    #[test]
    fn observed_single_picks() {
        for &(free, k, v22, v24) in ROWS {
            assert_eq!(
                choose(SlurmGreedy::V22_05, free, k),
                set(v22),
                "22.05 {free} K={k}"
            );
            assert_eq!(
                choose(SlurmGreedy::V24_11, free, k),
                set(v24),
                "24.11 {free} K={k}"
            );
        }
    }

    #[test]
    fn observed_four_pairs_in_a_row() {
        for (p, want) in [
            (SlurmGreedy::V22_05, ["0,3", "4,7", "1-2", "5-6"]),
            (SlurmGreedy::V24_11, ["0-1", "4-5", "2-3", "6-7"]),
        ] {
            let mut free = set("0-7");
            for w in want {
                let got = choose(p, &free.to_string(), 2);
                assert_eq!(got, set(w), "{}", p.name());
                free = free.difference(got);
            }
            assert!(p.choose(&dgx1v(), free, &Request::new(1)).is_none());
        }
    }

    #[test]
    fn observed_core_layouts() {
        // `-c12`: cores fill socket 0 (8) then 4 on socket 1.
        assert_eq!(with_cores(SlurmRelease::V22_05, 2, &[8, 4]), set("0,4"));
        assert_eq!(with_cores(SlurmRelease::V24_11, 2, &[8, 4]), set("0-1"));
        // `-n2 --ntasks-per-socket=1`: one core on each socket.
        assert_eq!(with_cores(SlurmRelease::V22_05, 2, &[1, 1]), set("0,4"));
        assert_eq!(with_cores(SlurmRelease::V24_11, 2, &[1, 1]), set("0,5"));
    }

    #[test]
    fn enforce_binding_and_spill_over() {
        let job = |enforce_binding| Job {
            count: 6,
            required: GpuSet::EMPTY,
            cores_on_socket: &[1, 0],
            enforce_binding,
        };
        for r in [SlurmRelease::V22_05, SlurmRelease::V24_11] {
            assert_eq!(
                pick(r, &dgx1v(), set("0-7"), &job(false)).map(GpuSet::len),
                Some(6)
            );
            assert_eq!(pick(r, &dgx1v(), set("0-7"), &job(true)), None);
        }
    }

    #[test]
    fn required_and_impossible() {
        let req = Request {
            count: 2,
            required: set("4"),
            near: GpuSet::EMPTY,
        };
        let got = SlurmGreedy::V24_11
            .choose(&dgx1v(), set("0-7"), &req)
            .unwrap();
        assert!(got.contains(4) && got.len() == 2);
        let req = Request::new(9);
        assert!(
            SlurmGreedy::V22_05
                .choose(&dgx1v(), set("0-7"), &req)
                .is_none()
        );
    }
}
