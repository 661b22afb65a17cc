//! Capability labels read back from `Extra` into generated config lines (`gputopo features`,
//! `gputopo topology-conf`): whatever `Extra` holds, each node gives one line, and no label
//! adds a line or a key.
#![no_main]

use gputopo_core::health::extra::labels::{Labels, label_str};
use gputopo_core::topology::block_conf::{block_conf, tree_conf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(obj)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return;
    };
    if let Some(l) = Labels::from_flat(&obj) {
        for f in l.features() {
            assert!(
                !f.is_empty()
                    && f.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)),
                "{f:?}"
            );
        }
    }
    let domain = label_str(&obj, "nvlink_domain");
    let nodes = vec![("a1".to_string(), domain.clone()), ("a2".to_string(), None)];
    for conf in [block_conf(&nodes), tree_conf(&nodes)] {
        let want = 2 + 2 * usize::from(domain.is_some());
        assert_eq!(conf.lines().count(), want, "{conf}");
    }
});
