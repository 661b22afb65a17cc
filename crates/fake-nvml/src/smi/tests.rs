use super::*;

/// The real reports in tests/fixtures/nvidia-smi and the fixtures made from them.
pub(crate) const REAL: [&str; 8] = [
    "a100-sxm4-v12",
    "a10g",
    "tesla-t4",
    "quadro-p2000-v12",
    "rtx-3080-v13",
    "rtx-4000-sff-ada-v13",
    "gtx-1070-ti",
    "rtx-3090-v12",
];
const COMMIT: &str = "b27263146617cefe16c0b300107b58b111a7fa57";

fn read(rel: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_real_report_converts_to_its_committed_fixture() {
    for f in REAL {
        let header = [
            format!(
                "Made from tests/fixtures/nvidia-smi/telegraf-{f}.xml: a real nvidia-smi -q -x report from"
            ),
            format!(
                "influxdata/telegraf plugins/inputs/nvidia_smi/testdata/{f}.xml, commit {COMMIT} (MIT licence)."
            ),
            format!(
                "Regenerate: fake-nvml-from-smi tests/fixtures/nvidia-smi/telegraf-{f}.xml real-{f} (these header lines)"
            ),
        ];
        let got = from_xml(
            &read(&format!("nvidia-smi/telegraf-{f}.xml")),
            &format!("real-{f}"),
            &header,
        )
        .unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(
            got,
            read(&format!("nvml/real-{f}.fx")),
            "{f}: regenerate the fixture"
        );
        crate::fixture::parse(&got).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

#[test]
fn not_supported_answers_stay_not_supported() {
    let node = |f: &str| crate::fixture::parse(&read(&format!("nvml/real-{f}.fx"))).unwrap();
    // A consumer board: no ECC, no retirement, no remapping (NVML NOT_SUPPORTED, smi N/A).
    let g = &node("gtx-1070-ti").gpus[0];
    assert_eq!((g.ecc, g.retired_supported, g.remap), (None, false, None));
    // Ampere datacenter: remapping instead of page retirement.
    let g = &node("a10g").gpus[0];
    assert_eq!(
        (g.ecc, g.retired_supported, g.remap),
        (Some(true), false, Some([0; 4]))
    );
    // Turing: page retirement, no remapping.
    let g = &node("tesla-t4").gpus[0];
    assert_eq!((g.retired_supported, g.remap), (true, None));
    // A100 with MIG on: four 1g.20gb instances; NVML reports no row remapping in MIG mode.
    let g = &node("a100-sxm4-v12").gpus[0];
    assert_eq!(g.mig.map(|m| (m.current, m.pending)), Some((true, true)));
    let migs: Vec<(u32, u32, &str)> = g
        .migs
        .iter()
        .map(|m| (m.gi, m.ci, m.profile.as_str()))
        .collect();
    assert_eq!(
        migs,
        vec![
            (3, 0, "1g.20gb"),
            (4, 0, "1g.20gb"),
            (5, 0, "1g.20gb"),
            (6, 0, "1g.20gb")
        ]
    );
    assert_eq!(g.remap, None);
}

#[test]
fn bad_reports_are_errors() {
    assert!(from_xml("not xml", "x", &[]).is_err());
    assert!(
        from_xml("<other/>", "x", &[])
            .unwrap_err()
            .contains("nvidia_smi_log")
    );
    assert!(
        from_xml("<nvidia_smi_log/>", "x", &[])
            .unwrap_err()
            .contains("no <gpu>")
    );
}

mod fuzz {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn no_report_panics(s in "<nvidia_smi_log><gpu id=\"[0-9A-F:.]{0,16}\">(<[a-z_]{1,20}>[0-9A-Za-z ./]{0,10}</[a-z_]{1,20}>){0,6}</gpu></nvidia_smi_log>") {
            let _ = from_xml(&s, "x", &[]);
        }
    }
}
