//! gres.conf as the agent and `gputopo pick` read it (the topology reader, the identity
//! reader, format detection) and `fake_gpus.conf`: never a panic, a hang or an unbounded
//! allocation (libFuzzer's -rss_limit_mb and -timeout catch the last two).
#![no_main]

use gputopo_core::identity::gres_conf as identity;
use gputopo_core::topology::{detect, gres_conf_parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = gres_conf_parse::parse(text, None);
    let _ = gres_conf_parse::parse(text, Some("n1"));
    let _ = identity::read(text, "n1");
    let _ = identity::parse_fake_gpus(text);
    let _ = detect::read(text, Some("n1"));
});
