//! The flat keys gputopo writes next to its `gputopo` object in a node's `Extra`.
//!
//! Why flat keys: the `gputopo` object is made for the select plugin (per-GPU verdicts,
//! matrices) and is hundreds of bytes long; an administrator scanning `sinfo -O NodeList,Extra`
//! or `scontrol show node` needs a short, readable summary, and Slurm 24.11+'s
//! `SchedulerParameters=extra_constraints` (`--extra`) looks keys up only at the top level of
//! the object and compares only strings, numbers and booleans (../shared/docs/slurm-25-26-port.md
//! §5). So the summary is a few top-level keys, written first so that a narrow `sinfo` column
//! shows them:
//!
//! | Key | JSON type | When | Meaning |
//! |---|---|---|---|
//! | `gpu_ok` | number | always | GPUs whose verdict is `ok` (`--extra='gpu_ok>=4'`) |
//! | `gpu_faulty` | string | some GPU is faulty | their GRES indices, Slurm's range form (`"3,5-6"`); never allocated |
//! | `gpu_degraded` | string | some GPU is degraded | ... used last |
//! | `gpu_unknown` | string | some GPU is unknown | ... used last |
//! | `gpu_drained` | string | an administrator drained GPUs | their indices ([`super::drain`]); never allocated, not counted in `gpu_ok` |
//!
//! `gpu_ok` is always there because Slurm treats a missing key as false, even for `!=`; the
//! index lists are only there when not empty, to keep `Extra` compact and make
//! `grep gpu_faulty` find exactly the nodes with excluded GPUs. Index lists hold commas, which
//! `--extra` cannot express; for routing use the number.
//!
//! gputopo owns the keys in [`OWNED`]: a merge drops them from the current value before it
//! writes its own, so a GPU that recovers loses its key. Readers of the `gputopo` object
//! (the select plugin) never look at them.

use super::NodeHealth;
use crate::health::Status;
use crate::wideset::WideSet;
use serde_json::Value;

/// The flat keys gputopo writes (and removes when stale). Other top-level keys are never
/// touched.
pub const OWNED: &[&str] = &[
    "gpu_ok",
    "gpu_faulty",
    "gpu_degraded",
    "gpu_drained",
    "gpu_unknown",
];

/// The health summary keys for `h` with the GPUs in `drained` taken out of service by an
/// administrator ([`super::drain`]), in the order they are written: `gpu_ok` counts the ok
/// GPUs that are not drained, so `--extra='gpu_ok>=N'` routes on GPUs a job can get.
pub fn health_keys(h: &NodeHealth, drained: &WideSet) -> Vec<(&'static str, Value)> {
    let mut out = Vec::with_capacity(5);
    for (key, status) in [
        ("gpu_faulty", Status::Faulty),
        ("gpu_degraded", Status::Degraded),
    ] {
        push_list(&mut out, key, h.with_status_wide(status));
    }
    push_list(&mut out, "gpu_drained", drained.clone());
    let ok = h.with_status_wide(Status::Ok).difference(drained).len();
    out.push(("gpu_ok", Value::from(ok)));
    push_list(&mut out, "gpu_unknown", h.with_status_wide(Status::Unknown));
    out
}

/// The flat keys of a node with drains but no agent health: `gpu_drained` alone (no
/// `gpu_ok`: without the agent nothing is known about the other GPUs).
pub fn drain_keys(drained: &WideSet) -> Vec<(&'static str, Value)> {
    let mut out = Vec::with_capacity(1);
    push_list(&mut out, "gpu_drained", drained.clone());
    out
}

fn push_list(out: &mut Vec<(&'static str, Value)>, key: &'static str, set: WideSet) {
    if !set.is_empty() {
        out.push((key, Value::String(set.to_string())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{GpuHealth, Reason};

    #[test]
    fn lists_only_the_statuses_present_and_always_counts_ok() {
        let h = NodeHealth::new(
            vec![
                GpuHealth::from_reasons(0, vec![]),
                GpuHealth::from_reasons(3, vec![Reason::EccUncorrectable]),
                GpuHealth::from_reasons(5, vec![Reason::GpuLost]),
                GpuHealth::from_reasons(6, vec![Reason::Xid(79)]),
                GpuHealth::from_reasons(2, vec![Reason::EccCorrectable]),
                GpuHealth::from_reasons(1, vec![Reason::NvmlTimeout]),
            ],
            None,
            vec![],
        );
        assert_eq!(
            health_keys(&h, &WideSet::new()),
            vec![
                ("gpu_faulty", Value::from("3,5-6")),
                ("gpu_degraded", Value::from("2")),
                ("gpu_ok", Value::from(1)),
                ("gpu_unknown", Value::from("1")),
            ]
        );
        let all_ok = NodeHealth::new(vec![GpuHealth::from_reasons(0, vec![])], None, vec![]);
        assert_eq!(
            health_keys(&all_ok, &WideSet::new()),
            vec![("gpu_ok", Value::from(1))]
        );
        for (k, _) in health_keys(&h, &WideSet::new()) {
            assert!(
                OWNED.contains(&k),
                "{k} must be owned so a merge removes it"
            );
        }
    }
}
