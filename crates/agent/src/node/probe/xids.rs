//! What a GPU says besides its health: its MIG devices, and the XID events NVML delivers
//! while the check listens.

use super::{Reading, nvml_raw, reading, value};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::{Device, Nvml};
use std::time::{Duration, Instant};

/// How long the XID wait goes on after its first event in service mode (a burst of XIDs
/// arrives together).
const BURST: Duration = Duration::from_millis(200);

/// The MIG devices of a GPU in MIG mode (none otherwise): NVML numbers them from 0 without
/// gaps, and answers NOT_FOUND past the last one.
pub(super) fn read_migs(
    nvml: &Nvml,
    dev: &Device<'_>,
    lost: &mut bool,
) -> Vec<(u32, u32, Option<String>)> {
    let enabled = value(dev.mig_mode(), lost).is_some_and(|m| m.current == 1);
    let max = if enabled {
        value(dev.mig_device_count(), lost).unwrap_or(0)
    } else {
        0
    };
    (0..max)
        .map_while(|k| dev.mig_device_by_index(k).ok())
        .filter_map(|m| {
            let (gi, ci) = nvml_raw::instance_ids(nvml, &m).ok()?;
            Some((gi, ci, m.name().ok()))
        })
        .collect()
}

pub(super) fn read_xids(
    nvml: &'static Nvml,
    n: usize,
    wait: Duration,
    listen: bool,
) -> Vec<(Reading<Vec<u32>>, bool)> {
    let mut out: Vec<(Reading<Vec<u32>>, bool)> =
        (0..n).map(|_| (Reading::NotSupported, false)).collect();
    let Ok(mut set) = nvml.create_event_set() else {
        for o in &mut out {
            o.0 = Reading::Failed("nvmlEventSetCreate failed".into());
        }
        return out;
    };
    let mut registered = Vec::new();
    for (i, o) in out.iter_mut().enumerate() {
        let dev = match nvml.device_by_index(i as u32) {
            Ok(d) => d,
            Err(e) => {
                o.0 = reading::<Vec<u32>>(Err(e), &mut o.1);
                continue;
            }
        };
        match dev.supported_event_types() {
            Ok(t) if t.contains(EventTypes::CRITICAL_XID_ERROR) => {}
            Ok(_) => continue,
            Err(e) => {
                o.0 = reading::<Vec<u32>>(Err(e), &mut o.1);
                continue;
            }
        }
        match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
            Ok(s) => {
                set = s;
                o.0 = Reading::Value(Vec::new());
                registered.push(i);
            }
            Err(e) => {
                o.0 = reading::<Vec<u32>>(Err(e.error), &mut o.1);
                // nvml-wrapper released the set: start a new one with the devices so far.
                match nvml.create_event_set() {
                    Ok(s) => set = s,
                    Err(_) => return out,
                }
                for &k in &registered {
                    if let Ok(d) = nvml.device_by_index(k as u32) {
                        if let Ok(s) = d.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                            set = s;
                        } else {
                            return out;
                        }
                    }
                }
            }
        }
    }
    let mut end = Instant::now() + wait;
    loop {
        let left = end.saturating_duration_since(Instant::now()).as_millis() as u32;
        match set.wait(left) {
            Ok(ev) => {
                let (Some(XidError::Value(x)), Ok(i)) = (ev.event_data, ev.device.index()) else {
                    continue;
                };
                if let Some((Reading::Value(v), _)) = out.get_mut(i as usize) {
                    v.push(x as u32);
                }
                if listen {
                    end = end.min(Instant::now() + BURST);
                }
            }
            Err(_) => break,
        }
        if left == 0 {
            break;
        }
    }
    out
}
