//! The shared pick on an 8-GPU node with 4 shards per GPU, cons_tres's first-fit pick as
//! stock, against the faults issue 15 found (shards on a faulty GPU 3).

use super::*;

fn s(v: &[usize]) -> GpuSet {
    v.iter().copied().collect()
}

/// Eight devices of `per` shares, `free[i]` free, all eligible; GPUs 0-3 near the job.
fn node(free: &[u64]) -> Vec<Device> {
    free.iter()
        .enumerate()
        .map(|(i, &f)| Device {
            gpus: s(&[i]),
            free: f,
            eligible: true,
            near: i < 4,
        })
        .collect()
}

fn on(dev: usize, n: u64) -> Vec<u64> {
    let mut v = vec![0; 8];
    v[dev] = n;
    v
}

fn faulty(g: &[usize]) -> HealthMasks {
    HealthMasks {
        faulty: s(g),
        degraded: GpuSet::EMPTY,
    }
}

fn input<'a>(
    d: &'a [Device],
    stock: &'a [u64],
    health: HealthMasks,
    multiple: bool,
) -> SharedInput<'a> {
    SharedInput {
        devices: d,
        stock,
        health,
        multiple,
    }
}

#[test]
fn a_healthy_pick_stays() {
    let d = node(&[4; 8]);
    let stock = on(0, 2);
    assert_eq!(
        decide(&input(&d, &stock, faulty(&[3]), false)),
        SharedDecision::Keep(SharedKeep::Healthy)
    );
    assert_eq!(
        decide(&input(&d, &[0; 8], faulty(&[3]), false)),
        SharedDecision::Keep(SharedKeep::NothingSelected)
    );
}

#[test]
fn shares_of_a_faulty_gpu_move_to_the_first_healthy_device_that_holds_them() {
    // GPUs 0-2 full: cons_tres takes GPU 3 (faulty); the job gets GPU 4 instead.
    let d = node(&[0, 0, 0, 4, 4, 4, 4, 4]);
    let stock = on(3, 2);
    assert_eq!(
        decide(&input(&d, &stock, faulty(&[3]), false)),
        SharedDecision::Replace {
            shares: on(4, 2),
            why: ReplaceReason::AvoidsFaulty
        }
    );
    // A near device with room comes before a far one.
    let d = node(&[4, 1, 3, 4, 4, 4, 4, 4]);
    assert_eq!(
        decide(&input(&d, &on(3, 3), faulty(&[0, 3]), false)),
        SharedDecision::Replace {
            shares: on(2, 3),
            why: ReplaceReason::AvoidsFaulty
        }
    );
}

#[test]
fn without_a_healthy_device_the_node_is_dropped() {
    let d = node(&[0, 0, 0, 4, 1, 1, 0, 0]);
    assert_eq!(
        decide(&input(&d, &on(3, 2), faulty(&[3]), false)),
        SharedDecision::ExcludeNode { need: 2, have: 2 },
        "two devices of one share each do not make one device of two"
    );
    // With MULTIPLE_SHARING_GRES_PJ they do.
    let mut two = vec![0; 8];
    two[4] = 1;
    two[5] = 1;
    assert_eq!(
        decide(&input(&d, &on(3, 2), faulty(&[3]), true)),
        SharedDecision::Replace {
            shares: two,
            why: ReplaceReason::AvoidsFaulty
        }
    );
}

#[test]
fn devices_cons_tres_could_not_use_are_never_chosen() {
    let mut d = node(&[0, 0, 0, 4, 4, 4, 4, 4]);
    d[4].eligible = false; // e.g. GPU 4 allocated whole
    assert_eq!(
        decide(&input(&d, &on(3, 2), faulty(&[3]), false)),
        SharedDecision::Replace {
            shares: on(5, 2),
            why: ReplaceReason::AvoidsFaulty
        }
    );
}

#[test]
fn degraded_gpus_are_used_last() {
    let d = node(&[4; 8]);
    let h = HealthMasks {
        faulty: GpuSet::EMPTY,
        degraded: s(&[0]),
    };
    assert_eq!(
        decide(&input(&d, &on(0, 2), h, false)),
        SharedDecision::Replace {
            shares: on(1, 2),
            why: ReplaceReason::AvoidsDegraded
        }
    );
    // Only degraded GPUs have room: the pick stays.
    let d = node(&[4, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        decide(&input(&d, &on(0, 2), h, false)),
        SharedDecision::Keep(SharedKeep::NoHealthier)
    );
    // Faulty beats degraded: a faulty pick moves to a degraded GPU before the node is lost.
    let h = HealthMasks {
        faulty: s(&[1]),
        degraded: s(&[0]),
    };
    let d = node(&[4, 4, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        decide(&input(&d, &on(1, 2), h, false)),
        SharedDecision::Replace {
            shares: on(0, 2),
            why: ReplaceReason::AvoidsFaulty
        }
    );
}

#[test]
fn a_planned_preemption_or_an_odd_shape_is_left_alone() {
    let d = node(&[0, 4, 4, 4, 4, 4, 4, 4]);
    assert_eq!(
        decide(&input(&d, &on(0, 2), faulty(&[0]), false)),
        SharedDecision::Keep(SharedKeep::Busy)
    );
    assert_eq!(
        decide(&input(&d[..4], &on(1, 2), faulty(&[1]), false)),
        SharedDecision::Keep(SharedKeep::Mismatch)
    );
}

#[test]
fn every_replacement_keeps_the_total_and_fits_health_and_room() {
    // Exhaustive over small nodes: 4 devices, free 0..=3 each, one faulty, one degraded.
    for code in 0..256u32 {
        let free: Vec<u64> = (0..4).map(|i| u64::from((code >> (2 * i)) & 3)).collect();
        let d: Vec<Device> = node(&free).into_iter().take(4).collect();
        for bad in 0..4 {
            for multiple in [false, true] {
                let h = HealthMasks {
                    faulty: s(&[bad]),
                    degraded: s(&[(bad + 1) % 4]),
                };
                for dev in 0..4 {
                    for n in 1..=free[dev] {
                        let mut stock = vec![0; 4];
                        stock[dev] = n;
                        match decide(&input(&d, &stock, h, multiple)) {
                            SharedDecision::Replace { shares, .. } => {
                                assert_eq!(shares.iter().sum::<u64>(), n);
                                assert_eq!(shares[bad], 0, "{free:?} {stock:?}");
                                assert!(shares.iter().zip(&d).all(|(s, d)| *s <= d.free));
                                if !multiple {
                                    assert_eq!(shares.iter().filter(|s| **s > 0).count(), 1);
                                }
                            }
                            SharedDecision::Keep(_) => assert_ne!(dev, bad),
                            SharedDecision::ExcludeNode { .. } => assert_eq!(dev, bad),
                        }
                    }
                }
            }
        }
    }
}
