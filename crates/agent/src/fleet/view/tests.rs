use super::*;
use gputopo_core::health::LinkMatrix;

/// The cluster recorded on Slurm `release`: four DGX-1V nodes under select/gputopo
/// (tests/fixtures/scontrol/README.md says how).
pub(crate) fn recorded(release: &str) -> Cluster {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/scontrol")
        .join(release);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("recorded scontrol output");
    Cluster::read(&read("nodes.txt"), &read("jobs.txt"))
}

fn set(v: &[usize]) -> WideSet {
    v.iter().copied().collect()
}

#[test]
fn nodes_free_sets_and_stranded_gpus_of_the_recorded_cluster() {
    let c = recorded("22.05.8");
    let names: Vec<&str> = c.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2", "n3", "n4"]);
    let n = &c.nodes;
    assert!(n.iter().all(|n| n.gpus == 8 && n.accepting && n.room));
    assert_eq!(n[0].used, set(&[0, 1, 3, 4, 7]));
    assert_eq!(n[0].excluded(), set(&[5, 6]));
    assert_eq!(n[0].free(), set(&[2]));
    assert_eq!(n[1].free(), set(&[1, 4, 5, 6, 7]));
    // n4: XID 79 on GPU 1, and GPUs 2-7 have no NVML device (faulty since issue 27).
    assert_eq!(n[3].excluded(), set(&[1, 2, 3, 4, 5, 6, 7]));
    assert_eq!(n[3].free(), set(&[]));
    // n1 lost a GPU, so its agent measured no matrix; n4 (A100, no NVLink fixture) neither.
    // n2's telemetry fixture has the NVLinks between 6 and 7 down: {4,5,6} and {4,5,7}, not
    // all four.
    let max: Vec<Option<usize>> = n.iter().map(Node::free_nvlink_max).collect();
    assert_eq!(max, [None, Some(3), Some(2), None]);
    // Three jobs wait for 8 GPUs per node: every free GPU is stranded.
    assert_eq!(c.stranded_all(), [1, 5, 2, 0]);
    assert!(
        n.iter()
            .all(|n| !n.hostname.is_empty() && n.hostname != "(null)")
    );
}

#[test]
fn jobs_states_requests_and_notes() {
    let c = recorded("22.05.8");
    let by_id = |id: &str| c.jobs.iter().find(|j| j.id == id).expect("job");
    let j1 = by_id("1");
    assert_eq!(j1.state, JobState::Running);
    assert_eq!(j1.gpus_per_node, Some(2));
    assert_eq!(j1.gpus, vec![("n1".to_string(), set(&[0, 3]))]);
    let Some(Note::Placed { nodes, more: 0 }) = &j1.note else {
        panic!("{:?}", j1.note)
    };
    assert_eq!(
        (
            nodes[0].node.as_str(),
            nodes[0].link.as_deref(),
            nodes[0].optimal
        ),
        ("n1", Some("NV2"), Some(true))
    );
    let j4 = by_id("4");
    let Some(Note::Placed { nodes, .. }) = &j4.note else {
        panic!()
    };
    assert_eq!(nodes.len(), 2);
    assert_eq!(j4.gpus.len(), 2);
    // --gpus=3 on one node: TresPerJob.
    assert_eq!(by_id("5").gpus_per_node, Some(3));
    let j7 = by_id("7");
    assert_eq!(j7.state, JobState::Pending);
    assert!(matches!(&j7.note, Some(Note::Pending { withheld, more: 0 }) if withheld.len() == 1));
    assert_eq!(by_id("9").note, None);
}

#[test]
fn stranding_needs_a_waiting_job_or_a_full_node() {
    let node = |room: bool| Node {
        name: "n".into(),
        hostname: "n".into(),
        gpus: 4,
        used: set(&[0]),
        accepting: true,
        room,
        published: Published::Unpublished,
    };
    let c = Cluster::default();
    assert_eq!(c.stranded(&node(true), None), 0);
    assert_eq!(c.stranded(&node(true), Some(4)), 3);
    assert_eq!(c.stranded(&node(true), Some(3)), 0);
    assert_eq!(c.stranded(&node(false), None), 3);
    let down = Node {
        accepting: false,
        ..node(false)
    };
    assert_eq!(down.free(), set(&[]));
}

#[test]
fn node_states_that_take_no_job() {
    for s in [
        "IDLE",
        "MIXED",
        "ALLOCATED",
        "IDLE+PLANNED",
        "MIXED+COMPLETING",
    ] {
        assert!(accepting(s), "{s}");
    }
    for s in [
        "IDLE+DRAIN",
        "DOWN*",
        "IDLE*",
        "DOWN+NOT_RESPONDING",
        "MIXED+DRAIN",
        "FUTURE",
    ] {
        assert!(!accepting(s), "{s}");
    }
}

#[test]
fn tres_requests() {
    assert_eq!(tres_gpus("gres:gpu:2"), Some(2));
    assert_eq!(tres_gpus("gres/gpu:a100:4"), Some(4));
    assert_eq!(tres_gpus("cpu=1,gres/gpu:3"), Some(3));
    assert_eq!(tres_gpus("gres:shard:2"), None);
    assert_eq!(tres_gpus("gres/gpu"), None);
}

/// The matrix of `pairs` (NVLinked pairs) on `n` GPUs, through the public path (a topology
/// into published health).
fn matrix(n: usize, pairs: &[(usize, usize)]) -> LinkMatrix {
    use gputopo_core::topology::{NodeTopology, PcieLevel};
    let mut t = NodeTopology::uniform("x", n, PcieLevel::Sys).expect("a topology");
    for &(a, b) in pairs {
        t.set_nvlinks(a, b, 1).expect("a pair");
    }
    NodeHealth::new(vec![], Some(&t), vec![])
        .links
        .expect("a matrix from a topology")
}

#[test]
fn largest_clique_is_exact() {
    // A 4-cycle has no triangle; adding a chord makes two.
    let ring = matrix(4, &[(0, 1), (1, 2), (2, 3), (3, 0)]);
    assert_eq!(largest_clique(&ring, &set(&[0, 1, 2, 3])), 2);
    let chord = matrix(4, &[(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]);
    assert_eq!(largest_clique(&chord, &set(&[0, 1, 2, 3])), 3);
    assert_eq!(largest_clique(&chord, &set(&[1, 3])), 1);
    assert_eq!(largest_clique(&chord, &set(&[])), 0);
    // Indices past the matrix count alone.
    assert_eq!(largest_clique(&chord, &set(&[9])), 1);
    let full: Vec<(usize, usize)> = (0..8)
        .flat_map(|a| (a + 1..8).map(move |b| (a, b)))
        .collect();
    assert_eq!(largest_clique(&matrix(8, &full), &set(&[0, 2, 4, 5, 7])), 5);
}

#[test]
fn the_same_cluster_recorded_on_24_11() {
    // 24.11 writes `gres/gpu:2` in TresPerNode and orders some keys differently; the jobs
    // landed elsewhere than on 22.05 (select/cons_tres changed its node order).
    let c = recorded("24.11.5");
    let free: Vec<usize> = c.nodes.iter().map(|n| n.free().len()).collect();
    assert_eq!(free, [0, 6, 3, 0]);
    assert_eq!(c.nodes[0].excluded(), set(&[5, 6]));
    let per_node: Vec<Option<usize>> = c.jobs.iter().map(|j| j.gpus_per_node).collect();
    assert_eq!(
        per_node,
        [
            Some(2),
            Some(2 * 2),
            Some(1),
            Some(2),
            Some(3),
            Some(1),
            Some(8),
            Some(8),
            Some(8)
        ]
    );
    // A 1-GPU job waits (it asked for n1, which is full), so no free GPU is stranded.
    assert_eq!(c.stranded_all(), [0, 0, 0, 0]);
    let placed = c
        .jobs
        .iter()
        .filter(|j| matches!(j.note, Some(Note::Placed { .. })))
        .count();
    assert_eq!(placed, 5);
    for j in c.jobs.iter().filter(|j| j.state == JobState::Running) {
        let Some(Note::Placed { nodes, .. }) = &j.note else {
            panic!("job {} has no note", j.id)
        };
        let noted: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        let held: Vec<&str> = j.gpus.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(noted, held, "job {}", j.id);
    }
}
