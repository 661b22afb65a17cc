//! Unit tests of gputopo.conf parsing.

use super::*;

#[test]
fn parses_every_key() {
    let c = Config::parse(
        "# agent\nNvmlLibrary=/opt/fake/libnvidia-ml.so EccUncorrectableLimit=2\n\
         eccCorrectableDegraded=0 CriticalXids=79,48 IgnoredXids= XidWaitMs=0\n\
         NvmlTimeoutMs=500 DrainWhenAllFaulty=yes PublishTimeoutSec=5 GresConf=/etc/g.conf\n\
         HealthAware=no TopologyAware=off NodeRanking=0 DegradedLast=false\n\
         PreferAgentTopology=No LogDecisions=YES\n",
    )
    .unwrap();
    let a = &c.agent;
    assert_eq!(
        a.nvml_library.as_deref(),
        Some(Path::new("/opt/fake/libnvidia-ml.so"))
    );
    assert_eq!(a.health.ecc_uncorrectable_limit, 2);
    assert_eq!(a.health.ecc_correctable_degraded, 0);
    assert_eq!(a.health.critical_xids, vec![79, 48]);
    assert!(a.health.ignored_xids.is_empty());
    assert_eq!(
        (a.xid_wait_ms, a.nvml_timeout_ms, a.publish_timeout_sec),
        (0, 500, 5)
    );
    assert!(a.drain_when_all_faulty);
    let s = &c.select;
    assert!(!s.health_aware && !s.topology_aware && !s.node_ranking && !s.degraded_last);
    assert!(!s.prefer_agent_topology && s.log_decisions);
    assert_eq!(Config::parse("").unwrap(), Config::default());
}

#[test]
fn errors_name_line_and_key() {
    for (text, line, key) in [
        ("\nFoo=1", 2, "Foo"),
        ("HealthAware=maybe", 1, "HealthAware"),
        ("XidWaitMs=-1", 1, "XidWaitMs"),
        ("NvmlTimeoutMs=0", 1, "NvmlTimeoutMs"),
        ("CriticalXids=79,x", 1, "CriticalXids"),
        ("LogDecisions=yes\nlogdecisions=no", 2, "logdecisions"),
        ("HealthAware", 1, "HealthAware"),
        ("NvmlLibrary=", 1, "NvmlLibrary"),
    ] {
        let e = Config::parse(text).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (line, key), "{text}");
    }
}

#[test]
fn path_rules() {
    let p = |g: Option<&str>, s: Option<&str>| config_path(g.map(Path::new), s.map(Path::new));
    assert_eq!(
        p(Some("/x/g.conf"), Some("/y/slurm.conf")),
        Path::new("/x/g.conf")
    );
    assert_eq!(p(None, Some("/y/slurm.conf")), Path::new("/y/gputopo.conf"));
    assert_eq!(
        p(Some(""), Some("slurm.conf")),
        Path::new("/etc/slurm/gputopo.conf")
    );
    assert_eq!(p(None, None), Path::new("/etc/slurm/gputopo.conf"));
    assert_eq!(
        Config::load(Path::new("/nonexistent/gputopo.conf")).unwrap(),
        Config::default()
    );
}

mod fuzz {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn no_input_panics(s in "\\PC{0,200}") {
            let _ = Config::parse(&s);
        }

        #[test]
        fn near_misses_never_panic(
            k in proptest::sample::select(KEYS), v in "[a-zA-Z0-9,/\" =#-]{0,20}",
        ) {
            let _ = Config::parse(&format!("{k}={v}\n{k}={v}"));
        }
    }
}

/// The packaged example (contrib/gputopo.conf.example, /usr/share/doc/gputopo/examples)
/// documents every key, and uncommenting all of it gives exactly the defaults.
#[test]
fn example_file_shows_every_key_with_its_default() {
    let text = include_str!("../../../../contrib/gputopo.conf.example");
    assert_eq!(
        Config::parse(text),
        Ok(Config::default()),
        "all commented out"
    );
    let active: String = text
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .filter(|l| l.contains('=') && !l.contains(' '))
        .map(|l| format!("{l}\n"))
        .collect();
    for k in KEYS {
        assert!(
            active.lines().any(|l| l.split('=').next() == Some(*k)),
            "{k} missing from contrib/gputopo.conf.example"
        );
    }
    let mut defaults = Config::default();
    // The example names a concrete path for the path keys whose default is "unset".
    defaults.agent.nvml_library = Some("libnvidia-ml.so.1".into());
    defaults.agent.gres_conf = Some("/etc/slurm/gres.conf".into());
    defaults.agent.state_dir = Some("/var/lib/gputopo".into());
    assert_eq!(Config::parse(&active), Ok(defaults));
}

#[test]
fn sticky_xid_and_refresh_keys() {
    let d = Config::default().agent;
    assert_eq!(
        (d.xid_sticky_sec, d.xid_clear_checks, d.publish_refresh_sec),
        (3600, 3, 300)
    );
    assert_eq!(
        Config::parse("KernelLog=none\n").map(|c| c.agent.kernel_log),
        Ok(None)
    );
    let c = Config::parse("XidStickySec=0 XidClearChecks=1 StateDir=/run/g PublishRefreshSec=60\n")
        .unwrap()
        .agent;
    assert_eq!(
        (c.xid_sticky_sec, c.xid_clear_checks, c.publish_refresh_sec),
        (0, 1, 60)
    );
    assert_eq!(c.state_dir.as_deref(), Some(std::path::Path::new("/run/g")));
    for bad in ["PublishRefreshSec=0", "XidClearChecks=x", "StateDir="] {
        assert!(Config::parse(bad).is_err(), "{bad}");
    }
}
