//! The preemption scenario of docs/results.md (issue 15 item 5): victims per preemption and
//! preemptor set quality, stock cons_tres's plan vs gputopo's, from
//! `gputopo_eval::sim::preempt` (its module docs give the model).
//!
//! `cargo run --release -p gputopo-eval --example preempt_sim -- [TRIALS] [SEED]`; run by
//! `contrib/results-preempt.sh`. Prints a Markdown table; deterministic for a seed.

use gputopo_core::topology::fixture;
use gputopo_eval::sim::preempt::{Outcome, Scenario, run};

fn main() {
    let mut args = std::env::args().skip(1);
    let trials = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let seed = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/topologies");
    println!(
        "| topology | preemptor GPUs | policy | preemptions | victims per preemption | best set | mean ring GB/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for name in ["dgx1v", "dgx1p", "pcie8", "hgx-h100"] {
        let path = format!("{dir}/{name}.topo");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let topo = fixture::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        for sizes in [vec![2], vec![4]] {
            let s = Scenario {
                nodes: 16,
                trials,
                sizes: sizes.clone(),
                two_gpu_share: 0.3,
                seed,
            };
            let (stock, ours) = run(&topo, &s);
            for (policy, o) in [("stock cons_tres", &stock), ("gputopo", &ours)] {
                row(name, sizes[0], policy, o);
            }
        }
    }
}

fn row(topo: &str, k: usize, policy: &str, o: &Outcome) {
    println!(
        "| {topo} | {k} | {policy} | {} | {:.3} | {:.1} % | {:.1} |",
        o.preemptions,
        o.victims_per_preemption(),
        100.0 * o.best_share(),
        o.mean_ring_gbps()
    );
}
