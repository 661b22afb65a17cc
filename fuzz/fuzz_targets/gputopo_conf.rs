//! gputopo.conf, as slurmctld (select and priority roles) and the agent read it.
#![no_main]

use gputopo_core::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::parse(text);
    }
});
