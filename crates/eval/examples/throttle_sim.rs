//! The throttled-GPU scenario of docs/results.md (issue 13 item 8): job slowdown under stock
//! cons_tres, gputopo with health verdicts only, and gputopo with the agent's telemetry, from
//! `gputopo_eval::sim::throttle` (its module docs give the model). The three policies of a row
//! replay the same jobs on the same throttle trajectory.
//!
//! `cargo run --release -p gputopo-eval --example throttle_sim -- [CHECKS] [SEED]`; run by
//! `contrib/results-throttle.sh`. Prints a Markdown table; deterministic for a seed.

use gputopo_core::topology::fixture;
use gputopo_eval::sim::throttle::{Scenario, View, run};

fn main() {
    let mut args = std::env::args().skip(1);
    let checks = args.next().and_then(|a| a.parse().ok()).unwrap_or(5000);
    let seed = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/topologies");
    println!(
        "| topology | throttled | spell (checks) | policy | jobs | mean slowdown | p95 | multi-GPU mean | multi-GPU p95 | jobs slowed | mean wait (checks) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for name in ["hgx-h100", "dgx1v"] {
        let path = format!("{dir}/{name}.topo");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let topo = fixture::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        for (share, spell) in [(0.05, 20.0), (0.1, 20.0), (0.2, 20.0), (0.1, 3.0)] {
            let s = Scenario {
                nodes: 32,
                checks,
                throttled_share: share,
                mean_spell: spell,
                throttled_speed: 0.6,
                load: 0.7,
                mean_duration: 30.0,
                seed,
            };
            for (view, o) in View::ALL.into_iter().zip(run(&topo, &s)) {
                println!(
                    "| {name} | {:.0} % | {spell:.0} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} % | {:.2} |",
                    share * 100.0,
                    view.name(),
                    o.count(1),
                    o.mean(1),
                    o.p95(1),
                    o.mean(2),
                    o.p95(2),
                    100.0 * o.slowed_share(1),
                    o.mean_wait()
                );
            }
        }
    }
}
