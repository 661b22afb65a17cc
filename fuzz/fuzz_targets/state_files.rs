//! The files gputopo reads back from disk: the priority ledger and the persisted health in
//! StateSaveLocation, and the agent's XID state. A file that parses writes back to one that
//! parses to the same value.
#![no_main]

use gputopo_core::health::persist::HealthStore;
use gputopo_core::health::sticky::XidMemory;
use gputopo_core::priority::ledger::Ledger;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(l) = Ledger::from_json(text, 600, std::path::Path::new("fuzz")) {
        let again = Ledger::from_json(&l.to_json(), 600, std::path::Path::new("fuzz"));
        assert!(again.is_ok(), "a written ledger reads back");
    }
    if let Ok((s, _)) = HealthStore::from_json(text) {
        let (again, problems) = HealthStore::from_json(&s.to_json()).expect("reads back");
        assert_eq!(again, s);
        assert!(problems.is_empty());
    }
    let _ = XidMemory::parse(text);
});
