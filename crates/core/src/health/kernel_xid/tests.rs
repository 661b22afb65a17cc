use super::*;

const DMESG: &str =
    include_str!("../../../../../tests/fixtures/kernel-log/dmesg-xid-119-xe9680.log");
const KMSG: &str = include_str!("../../../../../tests/fixtures/kernel-log/kmsg-h100-gb200.kmsg");

fn x(bus: &str, xid: u32) -> KernelXid {
    KernelXid {
        bus: bus.into(),
        xid,
    }
}

#[test]
fn a_recorded_dmesg_gives_exactly_its_xids() {
    let got: Vec<KernelXid> = DMESG.lines().filter_map(parse_message).collect();
    assert_eq!(got, vec![x("0000:9b:00", 119); 5]);
}

#[test]
fn recorded_kmsg_records_give_seq_time_and_xids() {
    let recs: Vec<(u64, u64, &str)> = KMSG.lines().filter_map(parse_kmsg).collect();
    assert_eq!(recs.len(), KMSG.lines().count());
    assert_eq!(recs[0].0, 3998);
    let xids: Vec<(u64, KernelXid)> = recs
        .iter()
        .filter_map(|(seq, _, m)| parse_message(m).map(|k| (*seq, k)))
        .collect();
    assert_eq!(
        xids,
        vec![
            (4102, x("0000:9b:00", 119)),
            (4106, x("0009:01:00", 149)),
            (4107, x("0009:01:00", 154)),
            (4108, x("0008:01:00", 149)),
            (4109, x("0000:29:00", 79)),
        ]
    );
}

#[test]
fn message_forms() {
    for (line, want) in [
        (
            "[111111111.111] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            Some(x("0000:05:00", 79)),
        ),
        (
            "NVRM: Xid (0000:03:00): 14, Channel 00000001",
            Some(x("0000:03:00", 14)),
        ),
        (
            "Oct 02 10:41:07 srv kernel: NVRM: Xid (PCI:0000:3D:00): 79, pid=0, GPU has fallen off the bus.",
            Some(x("0000:3d:00", 79)),
        ),
        (
            "NVRM: Xid (PCI:0000:07:00 GPU-I:05): 43, pid=1, Ch 00000008",
            Some(x("0000:07:00", 43)),
        ),
        (
            "NVRM: GPU at PCI:0000:18:00: GPU has fallen off the bus.",
            Some(x("0000:18:00", 79)),
        ),
        ("NVRM: Xid error: xyz, invalid data", None),
        ("NVRM: Xid (invalid): some error", None),
        ("NVRM: Xid (PCI:0000:05:00): , nothing", None),
        ("kernel: unrelated noise", None),
        (
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
            None,
        ),
    ] {
        assert_eq!(parse_message(line), want, "{line}");
    }
}

#[test]
fn bus_ids_normalise_from_every_spelling() {
    for a in [
        "PCI:0000:3b:00",
        "0000:3B:00.0",
        "00000000:3B:00.0",
        "3b:00",
        "3B:00.0",
    ] {
        assert_eq!(normalise_bus(a).as_deref(), Some("0000:3b:00"), "{a}");
    }
    for bad in ["", "3b", "zz:00", "0000:3b:00:00", "0000:100:00"] {
        assert_eq!(normalise_bus(bad), None, "{bad}");
    }
}

#[test]
fn freshness_by_cursor_or_window() {
    let c = Cursor {
        boot: "b1".into(),
        seq: 10,
    };
    assert!(fresh(Some(&c), "b1", 11, 0, 5, 1));
    assert!(!fresh(Some(&c), "b1", 10, 0, 5, 1));
    // Another boot (or no cursor): only what is younger than the window.
    assert!(fresh(Some(&c), "b2", 1, 9_000_000, 10_000_000, 1_000_000));
    assert!(!fresh(None, "b2", 1, 8_000_000, 10_000_000, 1_000_000));
}

mod fuzz {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,160}") {
            let _ = parse_message(&s);
            let _ = parse_kmsg(&s);
            let _ = normalise_bus(&s);
        }

        #[test]
        fn near_misses_never_panic(s in "(NVRM: )?(Xid )?\\(?(PCI:)?[0-9a-fA-F:. ]{0,16}\\)?:? ?[0-9]{0,12},?.{0,10}") {
            let _ = parse_message(&s);
        }
    }
}
