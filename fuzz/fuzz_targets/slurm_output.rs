//! What the agent's commands read from Slurm and from the driver: `scontrol show node -o -d`
//! and `scontrol show job -d -o` output (`gputopo nodes`, `gputopo metrics`, `gputopo drain`;
//! users write job names, comments and `Extra`, Slurm the rest), the placement note read back
//! from a job's comment, the driver's `mig-minors` file and the MIG `File=` lists slurmd
//! writes. Never a panic, a hang or an unbounded allocation; a node's free GPUs are among its
//! configured ones and none is excluded or held.
//!
//! These parsers live in the `gputopo` command's crate, whose other dependencies (NVML,
//! clap, plotting, Prometheus, the simulator) the fuzz build should not compile with
//! coverage instrumentation: the target compiles the parser files themselves (`#[path]`),
//! which need only the core and `anyhow`. (`rustfmt::skip`: they are formatted with the
//! agent; rustfmt would look for their `cfg(test)` modules beside this file.)
#![no_main]

#[allow(dead_code)]
#[rustfmt::skip]
#[path = "../../crates/agent/src/fleet/records.rs"]
mod records;
#[allow(dead_code)]
#[rustfmt::skip]
#[path = "../../crates/agent/src/fleet/view.rs"]
mod view;
#[allow(dead_code)]
#[rustfmt::skip]
#[path = "../../crates/agent/src/node/mapping/mig.rs"]
mod mig;

use gputopo_core::steer::explain;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // One text as both outputs: node lines start `NodeName=`, job lines `JobId=`.
    let cluster = view::Cluster::read(&text, &text);
    for node in &cluster.nodes {
        let free = node.free();
        assert!(free.is_subset(&gputopo_core::wideset::WideSet::first_n(node.gpus)));
        assert!(free.intersection(&node.excluded()).is_empty());
        assert!(free.intersection(&node.used).is_empty());
        if let Some(n) = node.free_nvlink_max() {
            assert!(n <= free.len().max(1), "{n} > {}", free.len());
        }
    }
    let stranded = cluster.stranded_all();
    for (node, s) in cluster.nodes.iter().zip(&stranded) {
        assert!(*s <= node.free().len());
    }
    let _ = records::gpu_holders(&text);
    let _ = explain::read(&text);
    let caps = mig::CapMinors::parse(&text);
    for line in text.lines() {
        let _ = mig::parse_release(line);
        if let Some((parent, gi, ci)) = mig::parse_files(line) {
            assert_eq!(
                mig::parse_files(&mig::files(parent, (gi, ci))),
                Some((parent, gi, ci))
            );
        }
        if let Some((g, rest)) = line.split_once(' ') {
            let _ = mig::type_name(g, rest);
        }
    }
    let _ = caps.of(0, 0, 0);
});
