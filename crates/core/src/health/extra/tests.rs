//! Unit and property tests of the `Extra` format.

use super::*;
use crate::health::Device;
use crate::topology::fixture;

fn sample() -> NodeHealth {
    let topo = fixture::parse(
        "Node Name=x Gpus=2\nGpu Index=0 SwitchLinks=18\nGpu Index=1 SwitchLinks=18\n",
    )
    .unwrap();
    NodeHealth::new(
        vec![
            GpuHealth::from_reasons(1, vec![Reason::EccUncorrectable]),
            GpuHealth::from_reasons(0, vec![]),
        ],
        Some(&topo),
        vec![],
    )
}

#[test]
fn round_trips_and_is_compact() {
    let h = sample();
    let json = h.to_json();
    assert_eq!(
        json,
        r#"{"v":1,"gpus":[{"i":0,"s":"ok"},{"i":1,"s":"faulty","r":["ecc_uncorrectable"]}],"links":[[0,18],[18,0]],"pcie":[[0,3],[3,0]]}"#
    );
    let extra = merge_extra("", &h).unwrap();
    assert_eq!(parse_extra(&extra).unwrap(), Some(h.clone()));
    assert_eq!(h.with_status(Status::Faulty), GpuSet::from_bits(0b10));
    assert_eq!(h.pcie_level(0, 1), Some(PcieLevel::Phb));
    // The device identity round-trips too, and a malformed one is no identity.
    let mut d = sample();
    d.gpus[0].device = Device::new(Some(3), Some("3d:00.0")).with_uuid(Some("GPU-5fd1"));
    assert!(
        d.to_json()
            .contains(r#"{"i":0,"s":"ok","m":3,"b":"3d:00.0","u":"GPU-5fd1"}"#)
    );
    assert_eq!(parse_extra(&merge_extra("", &d).unwrap()).unwrap(), Some(d));
    let odd = r#"{"gputopo":{"v":1,"gpus":[{"i":0,"s":"ok","u":7}]}}"#;
    assert_eq!(
        parse_extra(odd).unwrap().map(|h| h.gpus[0].device.clone()),
        Some(Device::default())
    );
}

#[test]
fn foreign_values_are_not_ours() {
    for s in [
        "",
        "(null)",
        "rack=12",
        "{not json",
        "[1,2]",
        "5",
        r#"{"a":1}"#,
        r#"{"gputopo":null}"#,
    ] {
        assert_eq!(parse_extra(s), Ok(None), "{s}");
    }
    for s in [
        r#"{"gputopo":{"v":2}}"#,
        r#"{"gputopo":[]}"#,
        r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty"}]}"#,
        r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty"}],"x":NaN}}"#,
        "{\"gputopo\":{\"v\":1,\"gpus\":[{\"i\":3,\"s\":\"faulty\"}],\"x\":\"\u{fffd}\"\x01}}",
    ] {
        assert!(parse_extra(s).is_err(), "{s}");
    }
}

#[test]
fn partial_records_keep_every_usable_verdict() {
    let faulty3 = |s: &str| {
        let p = read_extra(s).unwrap().unwrap();
        assert_eq!(p.health.status(3), Some(Status::Faulty), "{s}");
        assert!(!p.problems.is_empty(), "{s}");
        p
    };
    faulty3(r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty"},{"i":0,"s":"weird"}]}}"#);
    faulty3(r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty"},{"i":3,"s":"ok"}]}}"#);
    faulty3(r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty"},{"i":99999,"s":"ok"}]}}"#);
    let p = faulty3(r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty"}],"links":[[0,1]]}}"#);
    assert_eq!(p.health.links, None);
    let p = faulty3(r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty"}],"pcie":[[9]]}}"#);
    assert_eq!(p.health.pcie, None);
    let clean = read_extra(r#"{"gputopo":{"v":1,"gpus":[{"i":3,"s":"faulty","id":"x"}]}}"#);
    assert!(
        clean.unwrap().unwrap().problems.is_empty(),
        "unknown fields are fine"
    );
}

#[test]
fn merge_keeps_foreign_keys_and_refuses_plain_strings() {
    let h = sample();
    let m = merge_extra(r#"{"rack":"b12","gputopo":{"v":0}}"#, &h).unwrap();
    assert!(m.starts_with(r#"{"gpu_faulty":"1","gpu_ok":1,"gputopo":{"v":1,"#));
    assert!(m.ends_with(r#","rack":"b12"}"#));
    assert_eq!(merge_extra(&m, &h).unwrap(), m, "idempotent");
    assert!(matches!(
        merge_extra("rack b12", &h),
        Err(MergeRefused::NotJson(_))
    ));
    assert!(matches!(
        merge_extra("[1]", &h),
        Err(MergeRefused::NotObject(_))
    ));
}

#[test]
fn flat_summary_keys_are_replaced_on_merge_and_ignored_by_the_reader() {
    let h = sample();
    // A stale summary (GPU 0 was faulty before) and a foreign key of the same family.
    let stale =
        r#"{"gpu_faulty":"0","gpu_unknown":"0-1","gpu_ok":0,"gpu_note":"x","gputopo":{"v":1}}"#;
    let m = merge_extra(stale, &h).unwrap();
    assert_eq!(
        m.split(r#","gputopo":"#).next(),
        Some(r#"{"gpu_faulty":"1","gpu_ok":1"#),
        "{m}"
    );
    assert!(m.ends_with(r#","gpu_note":"x"}"#), "foreign keys stay: {m}");
    // The plugin's reader sees the same health with or without the flat keys, whatever they say.
    assert_eq!(parse_extra(&m).unwrap(), Some(h.clone()));
    let lying = m.replace(
        r#""gpu_faulty":"1","gpu_ok":1"#,
        r#""gpu_faulty":[7],"gpu_ok":"x""#,
    );
    let p = read_extra(&lying).unwrap().unwrap();
    assert_eq!((p.health, p.problems), (h.clone(), vec![]));
    // All GPUs ok: only the count, so `grep gpu_faulty` finds exactly the nodes with faults.
    let ok = NodeHealth::new(vec![GpuHealth::from_reasons(0, vec![])], None, vec![]);
    assert!(
        merge_extra(&m, &ok)
            .unwrap()
            .starts_with(r#"{"gpu_ok":1,"gputopo":"#)
    );
}

#[test]
fn labels_follow_the_summary_and_survive_a_check_without_them() {
    use labels::{GpuFacts, Labels};
    let h = sample();
    let facts = GpuFacts {
        name: Some("NVIDIA H100 80GB HBM3".into()),
        mem_bytes: Some(81559 << 20),
        cc: Some((9, 0)),
    };
    let l = Labels::new(&[facts.clone(), facts], 2, true, true);
    let m = merge_extra_with(r#"{"cc":1,"rack":"b12"}"#, &h, Some(&l)).unwrap();
    assert!(
        m.starts_with(
            r#"{"gpu_faulty":"1","gpu_ok":1,"gpu_model":"H100","gpu_mem_gib":80,"cc":9.0,"gpu_count":2,"nvlink":true,"nvswitch":true,"gputopo":{"#
        ),
        "{m}"
    );
    assert!(m.ends_with(r#","rack":"b12"}"#), "{m}");
    // A check that could not read the labels keeps them, byte for byte.
    assert_eq!(merge_extra(&m, &h).unwrap(), m);
    assert_eq!(parse_extra(&m).unwrap(), Some(h));
}

#[test]
fn applies_measured_links() {
    let mut t = crate::topology::NodeTopology::uniform("t", 2, PcieLevel::Sys).unwrap();
    assert!(sample().apply_to(&mut t));
    assert_eq!(t.link(0, 1).nvlinks, 18);
    assert_eq!(t.link(1, 0).pcie, PcieLevel::Phb);
    let mut t3 = crate::topology::NodeTopology::uniform("t", 3, PcieLevel::Sys).unwrap();
    assert!(!sample().apply_to(&mut t3));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,200}") {
            let _ = parse_extra(&s);
            let _ = merge_extra(&s, &NodeHealth::default());
        }

        #[test]
        fn parse_never_panics_on_near_misses(
            v in 0u32..3, i in proptest::collection::vec(0usize..40, 0..5),
            s in "(ok|faulty|degraded|unknown|x)", r in "[a-z_:0-9]{0,12}",
            n in 0usize..4, m in 0usize..4, c in 0u16..300,
        ) {
            let gpus: Vec<String> = i.iter().map(|i| format!(r#"{{"i":{i},"s":"{s}","r":["{r}"]}}"#)).collect();
            let row = format!("[{}]", vec![c.to_string(); m].join(","));
            let links = format!("[{}]", vec![row; n].join(","));
            let text = format!(r#"{{"x":[1,{{}}],"gputopo":{{"v":{v},"gpus":[{}],"links":{links},"pcie":{links}}}}}"#, gpus.join(","));
            if let Ok(Some(h)) = parse_extra(&text) {
                // Whatever parses re-serialises to something that parses the same.
                let again = parse_extra(&merge_extra("", &h).unwrap()).unwrap();
                prop_assert_eq!(again, Some(h));
            }
        }
    }
}

#[test]
fn indices_beyond_the_topology_model_keep_their_verdict() {
    let p =
        read_extra(r#"{"gputopo":{"v":1,"gpus":[{"i":35,"s":"faulty"},{"i":70,"s":"degraded"}]}}"#)
            .unwrap()
            .unwrap();
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    assert_eq!(
        p.health.with_status_wide(Status::Faulty),
        crate::WideSet::from_iter([35])
    );
    assert_eq!(
        p.health.with_status(Status::Faulty),
        GpuSet::EMPTY,
        "beyond GpuSet"
    );
    assert_eq!(p.health.status(70), Some(Status::Degraded));
}

#[test]
fn warm_gpus_round_trip_and_a_bad_value_is_ignored() {
    let mut h = sample();
    h.warm = [0].into_iter().collect();
    let json = h.to_json();
    assert!(json.contains(r#""w":[0]"#), "{json}");
    let extra = merge_extra("", &h).unwrap();
    assert_eq!(parse_extra(&extra).unwrap(), Some(h.clone()));
    // A preference, not health: a malformed `w` drops only itself.
    let bad = extra.replace(r#""w":[0]"#, r#""w":"hot""#);
    let read = parse_extra(&bad).unwrap().expect("still ours");
    assert!(read.warm.is_empty());
    assert_eq!(read.gpus, h.gpus);
}

/// Issue 25 item 1: our own record, truncated or corrupted (a `"gputopo"` in text that is
/// not JSON), is replaced by the agent; an administrator's note is still never overwritten.
#[test]
fn merge_repairs_our_own_malformed_record_but_never_an_admin_note() {
    let h = sample();
    let good = merge_extra(r#"{"rack":"b12"}"#, &h).unwrap();
    let truncated = &good[..good.len() / 2];
    assert!(own_malformed(truncated).is_some());
    let fixed = merge_extra(truncated, &h).expect("our own record is repaired");
    assert_eq!(parse_extra(&fixed).unwrap(), Some(h.clone()));
    let nan = r#"{"gputopo":{"v":1,"gpus":[{"i":0,"s":"ok"}],"t":NaN}}"#;
    assert!(own_malformed(nan).is_some());
    assert!(merge_extra(nan, &h).is_ok());
    for admin in ["rack b12", "{rack b12", "(null", "{\"gputopo"] {
        let ours = own_malformed(admin).is_some();
        assert_eq!(
            merge_extra(admin, &h).is_ok(),
            ours,
            "{admin:?}: replaced only when it is ours"
        );
    }
    assert!(own_malformed("{rack b12").is_none());
    assert!(
        own_malformed(&good).is_none(),
        "a good record is not malformed"
    );
}
