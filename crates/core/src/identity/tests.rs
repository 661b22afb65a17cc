use super::gres_conf::{parse_fake_gpus, read};
use super::*;

/// The pcie8 node: NVML device i is /dev/nvidia(7-i); fake_gpus.conf lists the devices in
/// NVML order with `-1` at the NVML index, as NVML's autodetection would.
fn pcie8_fake() -> String {
    (0..8)
        .map(|i| {
            format!(
                "l40s|32|{}|{}|/dev/nvidia{}\n",
                if i < 4 { "0-15" } else { "16-31" },
                links_string(8, i, |_| 0),
                7 - i
            )
        })
        .collect()
}

fn files(o: &Order) -> Vec<&str> {
    o.gpus
        .iter()
        .map(|g| g.file.as_deref().unwrap_or("-"))
        .collect()
}

#[test]
fn plain_gres_conf_with_a_system_list_follows_nvml_order() {
    let g = read("Name=gpu Type=l40s File=/dev/nvidia[0-7]\n", "n1").unwrap();
    let o = slurm_order(g.gpus, Some(parse_fake_gpus(&pcie8_fake()).unwrap()));
    assert!(o.ignored.is_empty());
    // Slurm's GPU 2 is /dev/nvidia5 (NVML index 2), not /dev/nvidia2.
    assert_eq!(o.gpus[2].file.as_deref(), Some("/dev/nvidia5"));
    assert_eq!(
        files(&o),
        (0..8)
            .map(|i| format!("/dev/nvidia{}", 7 - i))
            .collect::<Vec<_>>()
    );
}

#[test]
fn without_a_system_list_gres_conf_order_is_kept() {
    let g = read(
        "NodeName=n[1-2] Name=gpu File=/dev/nvidia[2-3]\nName=gpu File=/dev/nvidia1\n",
        "n1",
    )
    .unwrap();
    assert_eq!(g.autodetect, None);
    let o = slurm_order(g.gpus, None);
    assert_eq!(
        files(&o),
        vec!["/dev/nvidia2", "/dev/nvidia3", "/dev/nvidia1"]
    );
}

#[test]
fn links_written_in_minor_order_are_all_ignored_against_nvml_order() {
    // What `gputopo gres-conf` used to write on pcie8: -1 at the minor's position.
    let conf: String = (0..8)
        .map(|m| {
            format!(
                "Name=gpu Type=l40s File=/dev/nvidia{m} Links={}\n",
                links_string(8, m, |_| 0)
            )
        })
        .collect();
    let g = read(&conf, "n1").unwrap();
    let o = merge(g.gpus, parse_fake_gpus(&pcie8_fake()).unwrap());
    assert_eq!(o.gpus.len(), 0);
    assert_eq!(o.ignored.len(), 8);
    assert!(o.ignored[0].why.contains("Links="));
    // Written in NVML order (-1 at the NVML index), every GPU is accepted.
    let conf: String = (0..8)
        .map(|i| {
            format!(
                "Name=gpu Type=l40s File=/dev/nvidia{} Links={}\n",
                7 - i,
                links_string(8, i, |_| 0)
            )
        })
        .collect();
    let o = merge(
        read(&conf, "n1").unwrap().gpus,
        parse_fake_gpus(&pcie8_fake()).unwrap(),
    );
    assert!(o.ignored.is_empty());
    assert_eq!(o.gpus[2].file.as_deref(), Some("/dev/nvidia5"));
}

#[test]
fn config_only_and_countless_records() {
    // A File= GPU with no device stays (config-only); a File-less one fills a device.
    let conf = vec![
        Record {
            file: Some("/dev/nvidia9".into()),
            type_name: None,
            links: None,
        },
        Record {
            file: None,
            type_name: None,
            links: None,
        },
        Record {
            file: None,
            type_name: None,
            links: None,
        },
    ];
    let sys = vec![Record {
        file: Some("/dev/nvidia0".into()),
        type_name: Some("nvidia_a100".into()),
        links: Some("-1".into()),
    }];
    let o = merge(conf, sys);
    assert_eq!(files(&o), vec!["/dev/nvidia0", "/dev/nvidia9"]);
    assert_eq!(o.ignored.len(), 1);
    // Type must be part of the device's type.
    let conf = vec![Record {
        file: None,
        type_name: Some("h100".into()),
        links: None,
    }];
    let sys = vec![Record {
        file: Some("/dev/nvidia0".into()),
        type_name: Some("nvidia_a100".into()),
        links: None,
    }];
    assert_eq!(merge(conf, sys).gpus.len(), 0);
}

#[test]
fn multiple_files_is_one_gpu_over_its_files() {
    // A MIG instance written by hand (Slurm's gres.conf man page): the parent's device file and
    // the capability files of its GPU and compute instance; the list is the record's file.
    let t = "Name=gpu Type=1g.10gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap[21-22]\n\
             Name=gpu Type=a100 File=/dev/nvidia1\n";
    let g = read(t, "n1").unwrap();
    let files: Vec<Option<&str>> = g.gpus.iter().map(|r| r.file.as_deref()).collect();
    assert_eq!(
        files,
        [
            Some("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22"),
            Some("/dev/nvidia1")
        ]
    );
    assert!(
        read(
            "Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/nvidia0\n",
            "n1"
        )
        .is_err()
    );
}

#[test]
fn autodetect_for_the_node_wins() {
    let t = "AutoDetect=off\nNodeName=n1 AutoDetect=NVML\nNodeName=n2 AutoDetect=off\nName=gpu Count=2\n";
    let g = read(t, "n1").unwrap();
    assert!(g.autodetects_nvml());
    assert_eq!(g.gpus.len(), 2);
    assert!(!read(t, "n2").unwrap().autodetects_nvml());
    assert!(!read("AutoDetect=off\n", "n3").unwrap().autodetects_nvml());
    assert!(read("Name=gpu File=/dev/nvidia[0-\n", "n1").is_err());
    assert!(read("Name=gpu Count=x\n", "n1").is_err());
    assert!(read("Name=gpu Count=100000\n", "n1").is_err());
}

#[test]
fn fake_gpus_fields() {
    let r = parse_fake_gpus("# c\n\n(null)|8|0-3|(null)|/dev/nvidia0|uuid|\n").unwrap();
    assert_eq!(
        r,
        vec![Record {
            file: Some("/dev/nvidia0".into()),
            type_name: None,
            links: None
        }]
    );
    assert!(parse_fake_gpus("a|1|0|-1\n").is_err());
}

#[test]
fn helpers() {
    assert_eq!(
        natural_cmp("/dev/nvidia2", "/dev/nvidia10"),
        std::cmp::Ordering::Less
    );
    assert_eq!(natural_cmp("a010", "a10"), std::cmp::Ordering::Equal);
    assert_eq!(natural_cmp("b", "a9"), std::cmp::Ordering::Greater);
    assert_eq!(self_position(Some("0,-1,2")), 1);
    assert_eq!(self_position(Some("0,0")), -2);
    assert_eq!(self_position(Some("-1,-1")), -2);
    assert_eq!(self_position(Some("x")), -2);
    assert_eq!(self_position(None), -1);
    // makedev(195, 5) and makedev(195, 300)
    assert_eq!(minor_of_rdev((195 << 8) | 5), 5);
    assert_eq!(
        minor_of_rdev((195 << 8) | (300 & 0xff) | ((300 & !0xff) << 12)),
        300
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics_and_keeps_every_device_once(s in "\\PC{0,200}", f in "[a-z0-9|,()/-]{0,120}") {
            let conf = read(&s, "n1").map(|g| g.gpus).unwrap_or_default();
            let sys = parse_fake_gpus(&f).unwrap_or_default();
            let n = conf.len();
            let o = slurm_order(conf, Some(sys));
            prop_assert!(o.gpus.len() + o.ignored.len() == n);
            let _ = natural_cmp(&s, &f);
        }
    }
}

#[test]
fn several_types_and_forty_gpus() {
    // Two types; the devices' types are longer ("nvidia_a100"), as NVML spells them.
    let g = read(
        "Name=gpu Type=a100 File=/dev/nvidia[0-1]\nName=gpu Type=v100 File=/dev/nvidia[2-3]\n",
        "n1",
    )
    .unwrap();
    let sys: Vec<Record> = (0..4)
        .map(|i| Record {
            file: Some(format!("/dev/nvidia{}", 3 - i)),
            type_name: Some(
                if 3 - i < 2 {
                    "nvidia_a100"
                } else {
                    "tesla_v100"
                }
                .into(),
            ),
            links: Some(links_string(4, i, |_| 0)),
        })
        .collect();
    let o = merge(g.gpus, sys);
    assert_eq!(
        files(&o),
        vec![
            "/dev/nvidia3",
            "/dev/nvidia2",
            "/dev/nvidia1",
            "/dev/nvidia0"
        ]
    );
    assert_eq!(o.gpus[0].type_name.as_deref(), Some("v100"));
    // 40 GPUs, fake_gpus.conf without Links=: natural file order (nvidia2 before nvidia10).
    let g = read("Name=gpu File=/dev/nvidia[0-39]\n", "n1").unwrap();
    let sys = parse_fake_gpus(
        &(0..40)
            .rev()
            .map(|m| format!("(null)|64|0-63|(null)|/dev/nvidia{m}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let o = merge(g.gpus, sys);
    assert_eq!(o.gpus.len(), 40);
    assert_eq!(o.gpus[2].file.as_deref(), Some("/dev/nvidia2"));
    assert_eq!(o.gpus[10].file.as_deref(), Some("/dev/nvidia10"));
}
