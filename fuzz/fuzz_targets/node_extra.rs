//! Node `Extra` as slurmctld's select plugin reads it (`read_extra`, every candidate node),
//! and the agent's merge of its record into whatever `Extra` holds: never a panic; a merged
//! value always reads back as ours.
#![no_main]

use gputopo_core::health::{NodeHealth, merge_extra, own_malformed, read_extra};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = read_extra(text);
    let _ = own_malformed(text);
    let ours = parsed
        .ok()
        .flatten()
        .map(|p| p.health)
        .unwrap_or_else(NodeHealth::default);
    if let Ok(merged) = merge_extra(text, &ours) {
        let back = read_extra(&merged).expect("a merged Extra reads back");
        assert!(back.is_some(), "a merged Extra is ours: {merged}");
    }
});
