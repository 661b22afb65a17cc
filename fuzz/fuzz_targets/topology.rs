//! The two topology texts another party writes: `nvidia-smi topo -m` output (an admin's paste
//! into `gputopo topo`/`gputopo pick --topology`, the agent's fallback when gres.conf has no
//! `Links=`) and gputopo's own topology files (`contrib/topologies/`, an admin's edits of
//! them). Never a panic; every topology either reads writes back as a topology file that
//! reads back to the same topology, and is recognised as one.
#![no_main]

use gputopo_core::topology::detect::{self, Format};
use gputopo_core::topology::{NodeTopology, fixture, smi};
use libfuzzer_sys::fuzz_target;

/// `render` then `parse` gives `t` back, and format detection names the rendered text a
/// topology file.
fn round_trip(t: &NodeTopology) {
    let text = fixture::render(t);
    let back = fixture::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(&back, t, "{text}");
    assert_eq!(detect::detect(&text), Some(Format::Fixture), "{text}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = smi::parse(text, "fuzz") {
        assert!(!t.is_empty());
        for a in 0..t.len() {
            for b in 0..t.len() {
                assert_eq!(t.link(a, b), t.link(b, a), "GPU{a}-GPU{b}");
            }
        }
        round_trip(&t);
    }
    if let Ok(t) = fixture::parse(text) {
        round_trip(&t);
    }
});
