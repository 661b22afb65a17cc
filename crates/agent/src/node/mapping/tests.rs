use super::*;

/// pcie8: NVML device i is /dev/nvidia(7-i).
fn pcie8() -> Vec<Device> {
    (0..8)
        .map(|i| Device {
            minor: Some(7 - i),
            type_name: Some("nvidia_l40s".into()),
            nvlinks: Some(vec![0; 8]),
            lost: false,
            migs: Vec::new(),
        })
        .collect()
}

fn fake_pcie8() -> String {
    (0..8usize)
        .map(|i| {
            format!(
                "l40s|32|0-31|{}|/dev/nvidia{}\n",
                identity::links_string(8, i, |_| 0),
                7 - i
            )
        })
        .collect()
}

fn nvml_of(m: &Mapping) -> Vec<Option<usize>> {
    m.slots.iter().map(|s| s.nvml).collect()
}

#[test]
fn fake_gpus_conf_puts_nvidia5_at_slurm_index_2() {
    let m = map_texts(
        Some("Name=gpu Type=l40s File=/dev/nvidia[0-7]\n"),
        Some(&fake_pcie8()),
        "n1",
        &pcie8(),
        minor_of,
    )
    .unwrap();
    assert_eq!(m.slots[2].file.as_deref(), Some("/dev/nvidia5"));
    assert_eq!(m.slots[2].nvml, Some(2));
    assert_eq!(nvml_of(&m), (0..8).map(Some).collect::<Vec<_>>());
    // Without fake_gpus.conf the same gres.conf is Slurm's order: /dev/nvidia2 first... third.
    let m = map_texts(
        Some("Name=gpu Type=l40s File=/dev/nvidia[0-7]\n"),
        None,
        "n1",
        &pcie8(),
        minor_of,
    )
    .unwrap();
    assert_eq!(m.slots[2].nvml, Some(5));
}

#[test]
fn autodetect_nvml_uses_nvml_order_and_reports_ignored_links() {
    let conf = "AutoDetect=nvml\nName=gpu Type=l40s File=/dev/nvidia[0-7]\n";
    let m = map_texts(Some(conf), None, "n1", &pcie8(), minor_of).unwrap();
    assert_eq!(nvml_of(&m), (0..8).map(Some).collect::<Vec<_>>());
    assert!(m.notes.is_empty());
    // Links= written in minor order: Slurm drops every GPU, and the agent says so.
    let conf: String = std::iter::once("AutoDetect=nvml\n".to_string())
        .chain((0..8).map(|k| {
            format!(
                "Name=gpu File=/dev/nvidia{k} Links={}\n",
                identity::links_string(8, k, |_| 0)
            )
        }))
        .collect();
    let m = map_texts(Some(&conf), None, "n1", &pcie8(), minor_of).unwrap();
    assert!(m.slots.is_empty());
    assert_eq!(m.notes.len(), 8, "{:?}", m.notes);
}

#[test]
fn no_gpu_lines_means_nvml_order() {
    let m = map_texts(Some("Name=mps Count=100\n"), None, "n1", &pcie8(), minor_of).unwrap();
    assert_eq!(nvml_of(&m), (0..8).map(Some).collect::<Vec<_>>());
    assert_eq!(m.slots[0].file.as_deref(), Some("/dev/nvidia7"));
    let m = map_texts(None, Some(&fake_pcie8()), "n1", &pcie8(), minor_of).unwrap();
    assert_eq!(nvml_of(&m), (0..8).map(Some).collect::<Vec<_>>());
}

#[test]
fn refuses_when_identity_is_unknown() {
    let d = pcie8();
    let e = map_texts(Some("Name=gpu Count=8\n"), None, "n1", &d, minor_of).unwrap_err();
    assert!(e.contains("names no device minor"), "{e}");
    let e = map_texts(
        Some("Name=gpu File=/a/nvidia1,/b/nvidia1\n"),
        None,
        "n1",
        &d,
        minor_of,
    )
    .unwrap_err();
    assert!(e.contains("minor 1"), "{e}");
    let mut twice = pcie8();
    twice[1].minor = Some(7);
    let e = map_texts(
        Some("Name=gpu File=/dev/nvidia[0-7]\n"),
        None,
        "n1",
        &twice,
        minor_of,
    )
    .unwrap_err();
    assert!(e.contains("two NVML devices"), "{e}");
    assert!(
        map_texts(
            Some("Name=gpu File=/dev/nvidia[0-\n"),
            None,
            "n1",
            &d,
            minor_of
        )
        .is_err()
    );
    assert!(map_texts(None, Some("x|y\n"), "n1", &d, minor_of).is_err());
}

#[test]
fn a_lost_device_takes_the_one_free_slot_only() {
    let plain = |d: &[Device]| {
        map_texts(
            Some("Name=gpu File=/dev/nvidia[0-7]\n"),
            None,
            "n1",
            d,
            minor_of,
        )
        .unwrap()
    };
    let mut d = pcie8();
    d[3].minor = None;
    assert_eq!(plain(&d).slots[4].nvml, Some(3), "minor 4 was NVML 3's");
    d[4].minor = None;
    let m = plain(&d);
    assert_eq!(
        m.slots[3].nvml, None,
        "two unknown devices: which is which is not known"
    );
    assert_eq!(m.slots[4].nvml, None);
    // Unless both are lost: then either way round both GPUs are faulty / gpu_lost.
    d[3].lost = true;
    d[4].lost = true;
    let m = plain(&d);
    assert_eq!((m.slots[3].nvml, m.slots[4].nvml), (Some(3), Some(4)));
    // A gres.conf GPU without a device, and a device not in gres.conf.
    let m = map_texts(
        Some("Name=gpu File=/dev/nvidia[6-9]\n"),
        None,
        "n1",
        &pcie8(),
        minor_of,
    )
    .unwrap();
    assert_eq!(nvml_of(&m), vec![Some(1), Some(0), None, None]);
}

#[test]
fn device_minor_prefers_the_device_node() {
    assert_eq!(device_minor("/nonexistent/nvidia12"), Some(12));
    // /dev/null is character device 1:3.
    assert_eq!(device_minor("/dev/null"), Some(3));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics_and_never_maps_a_device_twice(
            g in "\\PC{0,200}",
            f in proptest::option::of("[a-z0-9|,/()-]{0,80}"),
            minors in proptest::collection::vec(proptest::option::of(0u32..12), 0..10),
        ) {
            let d: Vec<Device> = minors.iter().map(|&m| Device { minor: m, ..Device::default() }).collect();
            if let Ok(m) = map_texts(Some(&g), f.as_deref(), "n1", &d, minor_of) {
                let mut seen: Vec<usize> = m.slots.iter().filter_map(|s| s.nvml).collect();
                let n = seen.len();
                seen.sort_unstable();
                seen.dedup();
                prop_assert_eq!(n, seen.len());
            }
        }
    }
}

/// Two A100s in MIG mode: GPU 0 (minor 0) with GI 1 and GI 5, GPU 1 (minor 1) with GI 1,
/// their capability minors as the fake driver tree lists them.
fn two_a100s_in_mig() -> (Vec<Device>, mig::CapMinors) {
    let caps = mig::CapMinors::parse(&fake_nvml::tree::mig_minors(2));
    let inst = |minor: u32, gi: u32, ty: &str| mig::MigInstance {
        gi,
        ci: 0,
        type_name: Some(ty.into()),
        caps: caps.of(minor, gi, 0),
        links: None,
    };
    let d = vec![
        Device {
            minor: Some(0),
            type_name: Some("nvidia_a100-sxm4-40gb".into()),
            migs: vec![
                inst(0, 5, "nvidia_a100_1g.5gb"),
                inst(0, 1, "nvidia_a100_3g.20gb"),
            ],
            ..Device::default()
        },
        Device {
            minor: Some(1),
            type_name: Some("nvidia_a100-sxm4-40gb".into()),
            migs: vec![inst(1, 1, "nvidia_a100_3g.20gb")],
            ..Device::default()
        },
    ];
    (d, caps)
}

/// (parent minor, NVML device, MIG device) per Slurm GPU.
fn mig_slots(m: &Mapping) -> Vec<(Option<u32>, Option<usize>, Option<usize>)> {
    m.slots.iter().map(|s| (s.minor, s.nvml, s.mig)).collect()
}

/// Slurm's order of [`two_a100s_in_mig`]'s instances, by File= (natural order): gpu0/gi1
/// (cap 12), gpu0/gi5 (cap 48), gpu1/gi1 (cap 147).
const MIG_ORDER: [(Option<u32>, Option<usize>, Option<usize>); 3] = [
    (Some(0), Some(0), Some(1)),
    (Some(0), Some(0), Some(0)),
    (Some(1), Some(1), Some(0)),
];

#[test]
fn autodetected_mig_instances_map_to_their_parent_and_instance() {
    // Slurm lists one GPU per instance, sorted by File= (natural order).
    let (d, _) = two_a100s_in_mig();
    let m = map_texts(Some("AutoDetect=nvml\n"), None, "n1", &d, minor_of).unwrap();
    assert_eq!(mig_slots(&m), MIG_ORDER);
    assert_eq!(
        m.slots[0].file.as_deref(),
        Some("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13")
    );
}

#[test]
fn hand_written_mig_instances_map_like_autodetected_ones() {
    // No AutoDetect: the administrator lists each MIG instance with MultipleFiles= (the
    // parent's file, then its GPU and compute instance capability files; Slurm's gres.conf
    // man page), here not in file order.
    let (d, caps) = two_a100s_in_mig();
    let line = |minor: u32, gi: u32, ty: &str| {
        let (g, c) = caps.of(minor, gi, 0).expect("listed");
        format!(
            "NodeName=n1 Name=gpu Type={ty} MultipleFiles=/dev/nvidia{minor},\
             /dev/nvidia-caps/nvidia-cap{g},/dev/nvidia-caps/nvidia-cap{c}\n"
        )
    };
    let conf = [
        line(1, 1, "a100_3g.20gb"),
        line(0, 5, "a100_1g.5gb"),
        line(0, 1, "a100_3g.20gb"),
    ]
    .concat();
    let m = map_texts(Some(&conf), None, "n1", &d, minor_of).unwrap();
    // Without a system list Slurm numbers them as written (identity::slurm_order): each is
    // tied to its (GPU, MIG device) by its capability files, whatever the order.
    let written: Vec<_> = [2, 1, 0].iter().map(|&i| MIG_ORDER[i]).collect();
    assert_eq!(mig_slots(&m), written);
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    // A line for an instance the driver does not list (destroyed since): which device it is
    // cannot be told, so nothing is published under a guessed index.
    let stale = format!(
        "{conf}NodeName=n1 Name=gpu MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap900,/dev/nvidia-caps/nvidia-cap901\n"
    );
    let r = map_texts(Some(&stale), None, "n1", &d, minor_of);
    let err = r.expect_err("refused");
    assert!(err.contains("nvidia-cap900"), "{err}");
}

#[test]
fn autodetect_nvidia_numbers_gpus_by_device_file() {
    // pcie8: NVML device i is /dev/nvidia(7-i); gpu/nvidia sorts by file, so Slurm GPU j is
    // /dev/nvidiaj, NVML device 7-j.
    let m = map_texts(Some("AutoDetect=nvidia\n"), None, "n1", &pcie8(), minor_of).unwrap();
    let got: Vec<(Option<u32>, Option<usize>)> =
        m.slots.iter().map(|s| (s.minor, s.nvml)).collect();
    let want: Vec<(Option<u32>, Option<usize>)> =
        (0..8).map(|j| (Some(j), Some(7 - j as usize))).collect();
    assert_eq!(got, want);
}

#[test]
fn before_24_11_mig_instances_are_ordered_by_their_index_within_the_gpu() {
    // 22.05.8 writes Links= with -1 at the MIG index within the GPU and sorts by it last: the
    // GPUs' first instances, then their second ... (e2e on Debian's 22.05.8 plugin).
    let caps = mig::CapMinors::parse(&fake_nvml::tree::mig_minors(2));
    let dev = |minor: u32, gis: &[u32]| Device {
        minor: Some(minor),
        migs: gis
            .iter()
            .enumerate()
            .map(|(k, &gi)| mig::MigInstance {
                gi,
                ci: 0,
                type_name: None,
                caps: caps.of(minor, gi, 0),
                links: Some(mig::links_before_24_11(k, gis.len())),
            })
            .collect(),
        ..Device::default()
    };
    let d = vec![dev(0, &[1, 5, 6]), dev(1, &[1, 2])];
    let m = map_texts(Some("AutoDetect=nvml\n"), None, "n1", &d, minor_of).unwrap();
    let got: Vec<(Option<usize>, Option<usize>)> =
        m.slots.iter().map(|s| (s.nvml, s.mig)).collect();
    assert_eq!(
        got,
        vec![
            (Some(0), Some(0)),
            (Some(1), Some(0)),
            (Some(0), Some(1)),
            (Some(1), Some(1)),
            (Some(0), Some(2))
        ]
    );
}
