//! The agent's memory across checks, applied to a reading: XIDs the kernel logged since the
//! last check, remembered (sticky) XIDs, the telemetry hysteresis, violation counters, the warm
//! set and the widest PCIe link each GPU has shown (`StateDir/xid-<node>.json`, written only
//! when `remember`).

use super::super::kernel_log;
use super::super::probe::NodeReading;
use super::super::settings::Settings;
use super::super::xid_state;
use gputopo_core::health::Reading;
use gputopo_core::health::kernel_xid;
use gputopo_core::health::sticky::{StickyPolicy, XidMemory};
use gputopo_core::health::telemetry;
use std::time::Duration;

/// Applies the agent's memory to this check's reading `r`. Without `remember` (commands that
/// only look) no XID is recorded, and the tracks are still stepped (what this check would
/// conclude) but nothing is saved.
pub(super) fn apply_memory(
    s: &Settings,
    r: &mut NodeReading,
    remember: bool,
    notes: &mut Vec<String>,
) {
    let a = &s.config.agent;
    let path = xid_state::path(a.state_dir.as_deref(), &s.node);
    let (mut memory, note) = xid_state::load(&path);
    notes.extend(note);
    let before = memory.clone();
    let policy = StickyPolicy {
        hold_sec: a.xid_sticky_sec,
        clear_checks: a.xid_clear_checks,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    add_kernel_xids(s, r, &mut memory, notes);
    for g in &mut r.gpus {
        let Some(key) = g.ident.uuid.clone().or_else(|| g.ident.bus_id.clone()) else {
            continue;
        };
        if remember {
            let seen: Option<Vec<u32>> = g.evidence.xids.value().map(|v| {
                v.iter()
                    .copied()
                    .filter(|x| !a.health.ignored_xids.contains(x))
                    .collect()
            });
            memory.record(&key, seen.as_deref(), now, policy);
        }
        // The widest link this GPU has shown in its slot: pcie_degraded is a drop from it.
        g.evidence.telemetry.pcie_best =
            memory.step_pcie(&key, g.ident.bus_id.as_deref(), &g.evidence.telemetry);
        // Throttled time since the previous check, from the counters remembered then.
        g.evidence.telemetry.throttled_pct =
            memory.step_counters(&key, &g.evidence.telemetry.violations);
        g.evidence.sustained = memory.step_signals(
            &key,
            &telemetry::signals(&g.evidence.telemetry, &a.telemetry),
            &a.telemetry,
        );
        g.evidence.warm = memory.step_warm(
            &key,
            telemetry::warm_seen(&g.evidence.telemetry, &a.telemetry),
            &a.telemetry,
        );
        let held = memory.held(&key);
        if !held.is_empty() {
            let mut all = g.evidence.xids.value().cloned().unwrap_or_default();
            all.extend_from_slice(held);
            all.sort_unstable();
            all.dedup();
            g.evidence.xids = Reading::Value(all);
        }
    }
    if remember && memory != before {
        if let Err(e) = xid_state::save(&path, &memory) {
            notes.push(e);
        }
    }
}

/// Adds the XIDs the driver logged since the last check (`KernelLog=`) to each GPU's XID
/// evidence, by PCI bus id, and moves the memory's cursor past them. A GPU whose XID events NVML
/// does not support gets the kernel's reading instead (a clean log counts towards clearing a
/// sticky XID); a failed event read stays failed unless the log names an XID of the GPU.
fn add_kernel_xids(
    s: &Settings,
    r: &mut NodeReading,
    memory: &mut XidMemory,
    notes: &mut Vec<String>,
) {
    let a = &s.config.agent;
    let Some(path) = &a.kernel_log else { return };
    if r.failure.is_some() {
        return;
    }
    let window = Duration::from_secs(a.xid_sticky_sec);
    let found = match kernel_log::read(path, memory.klog.as_ref(), window) {
        Ok(f) => f,
        Err(e) => {
            notes.push(format!(
                "{e}: XIDs logged between checks are not counted (run as root, or KernelLog=none)"
            ));
            return;
        }
    };
    for g in &mut r.gpus {
        let bus = g
            .ident
            .bus_id
            .as_deref()
            .and_then(kernel_xid::normalise_bus);
        let logged = bus
            .and_then(|b| found.by_bus.get(&b))
            .cloned()
            .unwrap_or_default();
        match &mut g.evidence.xids {
            Reading::Value(v) => v.extend(logged),
            Reading::NotSupported => g.evidence.xids = Reading::Value(logged),
            // The events could not be read: a logged XID is still evidence, and a clean log
            // says nothing about the failed read, which stays.
            Reading::Failed(_) | Reading::Missing if !logged.is_empty() => {
                g.evidence.xids = Reading::Value(logged);
            }
            Reading::Failed(_) | Reading::Missing => {}
        }
    }
    memory.klog = found.cursor;
}
