//! Slurm `topology/block` configuration from the NVLink domains the nodes published
//! (`nvlink_domain`, from each GPU's fabric cluster UUID and clique id).
//!
//! Why: on GB200-class racks one NVLink domain spans many nodes (an NVL72 rack is 18 nodes of
//! 4 GPUs), and a multi-node job is only as fast as its slowest link; `topology/block` keeps a
//! job inside one block when it fits. One block per domain, named `nvl1`, `nvl2`, ... in the
//! order the domains first appear; nodes without a domain are in no block (listed in a
//! comment), which Slurm treats as outside every block.

/// Nodes grouped by domain, in order of first appearance, and the nodes without one.
fn domains(nodes: &[(String, Option<String>)]) -> (Vec<(&str, Vec<&str>)>, Vec<&str>) {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut none = Vec::new();
    for (node, domain) in nodes {
        match domain.as_deref() {
            Some(d) => match groups.iter_mut().find(|(k, _)| *k == d) {
                Some((_, members)) => members.push(node),
                None => groups.push((d, vec![node])),
            },
            None => none.push(node.as_str()),
        }
    }
    (groups, none)
}

/// `topology.conf` for `plugin`: a header, one `<key>=nvl<k> Nodes=...` line per domain,
/// and a comment naming the nodes without a domain.
fn render(nodes: &[(String, Option<String>)], plugin: &str, key: &str) -> String {
    let (groups, none) = domains(nodes);
    let mut out = format!(
        "# topology.conf for TopologyPlugin=topology/{plugin}, written by gputopo topology-conf\n"
    );
    for (k, (domain, members)) in groups.iter().enumerate() {
        out.push_str(&format!(
            "# NVLink domain {domain}: {} nodes\n{key}=nvl{} Nodes={}\n",
            members.len(),
            k + 1,
            members.join(",")
        ));
    }
    if !none.is_empty() {
        out.push_str(&format!(
            "# no NVLink domain published: {}\n",
            none.join(",")
        ));
    }
    out
}

/// The `topology/block` `topology.conf` text for `(node, domain)` pairs (in `scontrol show
/// node` order): one block per domain.
pub fn block_conf(nodes: &[(String, Option<String>)]) -> String {
    render(nodes, "block", "BlockName")
}

/// The `topology/tree` `topology.conf` text, for releases without `topology/block` (it came
/// in Slurm 23.11; 22.05 has `topology/tree`): one leaf switch per domain and no switch above
/// them, so a job that fits in one domain is placed inside one leaf, and one that does not
/// cannot be placed across domains (tree schedules only within connected switches).
pub fn tree_conf(nodes: &[(String, Option<String>)]) -> String {
    render(nodes, "tree", "SwitchName")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_block_per_domain_in_order_of_appearance() {
        let d = |s: &str| Some(s.to_string());
        let nodes = vec![
            ("r1n1".to_string(), d("aa.1")),
            ("r2n1".to_string(), d("bb.1")),
            ("r1n2".to_string(), d("aa.1")),
            ("login".to_string(), None),
        ];
        assert_eq!(
            block_conf(&nodes),
            "# topology.conf for TopologyPlugin=topology/block, written by gputopo topology-conf\n\
             # NVLink domain aa.1: 2 nodes\nBlockName=nvl1 Nodes=r1n1,r1n2\n\
             # NVLink domain bb.1: 1 nodes\nBlockName=nvl2 Nodes=r2n1\n\
             # no NVLink domain published: login\n"
        );
    }

    #[test]
    fn a_tree_has_one_leaf_switch_per_domain() {
        let d = |s: &str| Some(s.to_string());
        let nodes = vec![
            ("n1".to_string(), d("aa.1")),
            ("n2".to_string(), d("bb.1")),
            ("n3".to_string(), d("aa.1")),
        ];
        assert_eq!(
            tree_conf(&nodes),
            "# topology.conf for TopologyPlugin=topology/tree, written by gputopo topology-conf\n\
             # NVLink domain aa.1: 2 nodes\nSwitchName=nvl1 Nodes=n1,n3\n\
             # NVLink domain bb.1: 1 nodes\nSwitchName=nvl2 Nodes=n2\n"
        );
    }
}
