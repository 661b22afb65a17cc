//! gres.conf as the agent and `gputopo pick` read it (the topology reader, the identity
//! reader with `MultipleFiles=` and MIG lines, format detection) and `fake_gpus.conf`, and
//! Slurm's GPU order the agent derives from both (`identity::slurm_order`, whose sorts need a
//! total order from `natural_cmp`): never a panic, a hang or an unbounded allocation
//! (libFuzzer's -rss_limit_mb and -timeout catch the last two); every configured GPU is
//! either in Slurm's order or reported ignored.
#![no_main]

use gputopo_core::identity::{self, gres_conf as identity_conf, natural_cmp};
use gputopo_core::topology::{detect, gres_conf_parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = gres_conf_parse::parse(text, None);
    let _ = gres_conf_parse::parse(text, Some("n1"));
    let conf = identity_conf::read(text, "n1");
    let fake = identity_conf::parse_fake_gpus(text);
    let _ = detect::read(text, Some("n1"));
    if let Ok(conf) = conf {
        for g in &conf.gpus {
            let _ = identity::self_position(g.links.as_deref());
        }
        let n = conf.gpus.len();
        let order = identity::slurm_order(conf.gpus.clone(), fake.ok());
        assert_eq!(order.gpus.len() + order.ignored.len(), n);
        let order = identity::slurm_order(conf.gpus.clone(), Some(conf.gpus));
        assert_eq!(order.gpus.len() + order.ignored.len(), n);
    }
    // natural_cmp orders device files for Slurm's sort: antisymmetric and transitive.
    let words: Vec<&str> = text.split_whitespace().take(8).collect();
    for a in &words {
        for b in &words {
            assert_eq!(
                natural_cmp(a, b),
                natural_cmp(b, a).reverse(),
                "{a:?} {b:?}"
            );
            for c in &words {
                if natural_cmp(a, b).is_le() && natural_cmp(b, c).is_le() {
                    assert!(natural_cmp(a, c).is_le(), "{a:?} <= {b:?} <= {c:?}");
                }
            }
        }
    }
});
