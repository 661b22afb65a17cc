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

/// The real text report (an excerpt) in tests/fixtures/nvidia-smi and its fixture.
const TEXT_REPORT: &str = "nvidia-smi/mlengineering-a100-remap-pending.txt";
const TEXT_COMMIT: &str = "783e7f67256e58edcaed6fb9418b689ab0d88c68";

/// The header of the text report's fixture (what regenerating it passes).
pub(crate) fn text_header() -> [String; 4] {
    [
        format!("Made from tests/fixtures/nvidia-smi/{}: a real nvidia-smi -q excerpt", &TEXT_REPORT[11..]),
        format!("from stas00/ml-engineering debug/hardware-troubleshooting.md, commit {TEXT_COMMIT}"),
        "(CC BY-SA 4.0, Stas Bekman): an A100 after XID 63, a row remap pending. Sections it elides are the fake's defaults.".into(),
        "Regenerate: fake-nvml-from-smi tests/fixtures/nvidia-smi/mlengineering-a100-remap-pending.txt real-a100-remap-pending (these header lines)".into(),
    ]
}

#[test]
fn a_real_text_report_converts_to_its_committed_fixture() {
    let got = from_report(
        &read(TEXT_REPORT),
        "real-a100-remap-pending",
        &text_header(),
    )
    .expect("converts");
    assert_eq!(
        got,
        read("nvml/real-a100-remap-pending.fx"),
        "regenerate the fixture"
    );
    let g = &crate::fixture::parse(&got).expect("parses").gpus[0];
    // What the excerpt shows; ECC mode is elided, so the fake's default (on) stands.
    assert_eq!(g.ecc, Some(true));
    assert_eq!((g.retired_supported, g.ecc_counts[0]), (false, [177, 177]));
    assert_eq!(g.remap, Some([1, 0, 1, 0]));
}

#[test]
fn the_text_form_reads_every_field_the_xml_form_does() {
    // Hand-written in nvidia-smi 550's text layout: each field the converter reads.
    let report = "\
==============NVSMI LOG==============

Timestamp                                 : Thu Nov 28 04:03:23 2024
Driver Version                            : 550.90.12

Attached GPUs                             : 1
GPU 00000000:03:00.0
    Product Name                          : NVIDIA H200
    MIG Mode
        Current                           : Disabled
        Pending                           : Enabled
    GPU UUID                              : GPU-00000000-0000-0000-0000-000000000001
    Minor Number                          : 3
    PCI
        Bus Id                            : 00000000:03:00.0
        GPU Link Info
            PCIe Generation
                Max                       : 5
                Current                   : 1
            Link Width
                Max                       : 16x
                Current                   : 8x
    Clocks Event Reasons
        Idle                              : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Active
            HW Power Brake Slowdown       : Not Active
        Display Clock Setting             : Not Active
    FB Memory Usage
        Total                             : 143771 MiB
    ECC Mode
        Current                           : Enabled
        Pending                           : Enabled
    ECC Errors
        Volatile
            DRAM Correctable              : 2
            DRAM Uncorrectable            : 1
    Retired Pages
        Single Bit ECC                    : 0
        Double Bit ECC                    : 2
        Pending Page Blacklist            : No
    Remapped Rows                         : N/A
    Temperature
        GPU Current Temp                  : 80 C
        GPU Shutdown Temp                 : 98 C
        GPU Slowdown Temp                 : 95 C
    GPU Power Readings
        Power Draw                        : 690.12 W
        Current Power Limit               : 700.00 W
    Fabric
        State                             : Completed
        CliqueId                          : 7
        ClusterUUID                       : 0a1b2c3d-0000-0000-0000-00000000beef
";
    let got = from_report(report, "h200", &[]).expect("converts");
    let lines: Vec<&str> = got.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "Node Name=h200 Gpus=1 Driver=550.90.12 FabricCluster=0a1b2c3d00000000000000000000beef FabricClique=7",
            "Gpu Index=0 BusId=00000000:03:00.0 Uuid=GPU-00000000-0000-0000-0000-000000000001 Minor=3 Name=\"NVIDIA H200\" Ecc=on EccUncVol=1 EccCorVol=2 RetiredDbe=0x1000,0x2000 Remap=unsupported MemMiB=143771 Mig=off>on",
            "Telemetry Gpu=0 Temp=80 Slowdown=95 Shutdown=98 PowerW=690 PowerLimitW=700 ClockEvents=0x4c PcieGen=1/5 PcieWidth=8/16",
        ]
    );
    crate::fixture::parse(&got).expect("parses");
    assert!(from_text("no GPU here\n", "x", &[]).is_err());
}
