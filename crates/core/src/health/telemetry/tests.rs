//! The telemetry rule, the warm set and the hysteresis, on plain readings.

use super::*;

fn cool() -> Telemetry {
    Telemetry {
        temp_c: Reading::Value(60),
        slowdown_c: Reading::Value(90),
        shutdown_c: Reading::Value(95),
        power_mw: Reading::Value(200_000),
        power_limit_mw: Reading::Value(400_000),
        clock_events: Reading::Value(0x1), // GPU idle: not a throttle
        pcie_gen: Reading::Value((1, 4)),  // idle GPUs lower the generation
        pcie_width: Reading::Value((16, 16)),
        // Under load this GPU trained gen 4 x16 before.
        pcie_best: Some(Link {
            generation: 4,
            width: 16,
        }),
        nvlink_errors: Reading::Value(3),
        violations: Vec::new(),
        throttled_pct: Vec::new(),
    }
}

fn seen(t: &Telemetry, p: &TelemetryPolicy) -> Vec<Signal> {
    signals(t, p)
        .into_iter()
        .filter(|(_, s)| *s == Some(true))
        .map(|(g, _)| g)
        .collect()
}

#[test]
fn warm_is_near_the_slowdown_threshold_or_throttling_now() {
    let p = TelemetryPolicy::default();
    assert!(!warm(&cool(), &p), "60 C of 90 C, no throttle");
    let at = |temp| Telemetry {
        temp_c: Reading::Value(temp),
        ..cool()
    };
    assert!(!warm(&at(74), &p));
    assert!(warm(&at(75), &p), "15 C below the slowdown threshold");
    let capped = Telemetry {
        clock_events: Reading::Value(reason_bits::SW_POWER_CAP),
        ..cool()
    };
    assert!(warm(&capped, &p));
    let unread = Telemetry {
        temp_c: Reading::NotSupported,
        clock_events: Reading::NotSupported,
        ..cool()
    };
    assert!(!warm(&unread, &p), "missing telemetry is not evidence");
}

#[test]
fn each_signal_from_its_evidence() {
    let p = TelemetryPolicy::default();
    assert!(seen(&cool(), &p).is_empty());
    let with = |f: fn(&mut Telemetry)| {
        let mut t = cool();
        f(&mut t);
        seen(&t, &p)
    };
    assert_eq!(with(|t| t.temp_c = Reading::Value(85)), [Signal::Thermal]);
    assert_eq!(
        with(|t| t.clock_events = Reading::Value(reason_bits::HW_THERMAL)),
        [Signal::Thermal]
    );
    assert_eq!(
        with(|t| t.power_mw = Reading::Value(400_000)),
        [Signal::PowerCapped]
    );
    assert_eq!(
        with(|t| t.clock_events = Reading::Value(reason_bits::SW_POWER_CAP)),
        [Signal::PowerCapped]
    );
    assert_eq!(
        with(|t| t.clock_events = Reading::Value(reason_bits::HW_SLOWDOWN)),
        [Signal::HwSlowdown]
    );
    assert_eq!(
        with(|t| t.pcie_width = Reading::Value((4, 16))),
        [Signal::PcieDegraded]
    );
    assert_eq!(
        with(|t| t.nvlink_errors = Reading::Value(100)),
        [Signal::NvlinkErrors]
    );
    let by_gen = TelemetryPolicy {
        pcie_gen_degraded: true,
        ..p
    };
    assert_eq!(seen(&cool(), &by_gen), [Signal::PcieDegraded]);
}

#[test]
fn violation_shares_are_sustained_throttling() {
    let p = TelemetryPolicy::default();
    let with = |pct: &[(Limit, u32)]| {
        let t = Telemetry {
            throttled_pct: pct.to_vec(),
            ..cool()
        };
        seen(&t, &p)
    };
    assert_eq!(with(&[(Limit::Power, 50)]), [Signal::PowerCapped]);
    assert_eq!(with(&[(Limit::Power, 49)]), []);
    assert_eq!(with(&[(Limit::Thermal, 80)]), [Signal::Thermal]);
    assert_eq!(with(&[(Limit::Reliability, 100)]), [Signal::HwSlowdown]);
    assert_eq!(with(&[(Limit::BoardLimit, 60)]), [Signal::HwSlowdown]);
    // Idle clocks and sync boost are no fault of the GPU.
    assert_eq!(
        with(&[(Limit::LowUtilization, 100), (Limit::SyncBoost, 100)]),
        []
    );
    let off = TelemetryPolicy {
        violation_percent: 0,
        ..p
    };
    let t = Telemetry {
        throttled_pct: vec![(Limit::Power, 100)],
        ..Telemetry::default()
    };
    assert_eq!(signals(&t, &off)[1], (Signal::PowerCapped, None));
    // A counter alone is evidence either way when nothing else could be read.
    let t = Telemetry {
        throttled_pct: vec![(Limit::Power, 10)],
        ..Telemetry::default()
    };
    assert_eq!(signals(&t, &p)[1], (Signal::PowerCapped, Some(false)));
}

#[test]
fn a_link_is_degraded_below_what_the_gpu_showed_not_below_its_maximum() {
    let p = TelemetryPolicy::default();
    let x8 = |best: Option<Link>| Telemetry {
        pcie_width: Reading::Value((8, 16)),
        pcie_best: best,
        ..cool()
    };
    let best = |width| {
        Some(Link {
            generation: 4,
            width,
        })
    };
    // A card in a slot wired x8 (real A10G, Quadro P2000): x8 is all it ever showed.
    assert!(seen(&x8(best(8)), &p).is_empty());
    // The same card after it trained x16 in this slot: x8 is a drop.
    assert_eq!(seen(&x8(best(16)), &p), [Signal::PcieDegraded]);
    // Without the agent's memory the link is no evidence either way.
    assert_eq!(signals(&x8(None), &p)[3], (Signal::PcieDegraded, None));
    // A generation drop (idle) counts only with PcieGenDegraded=yes, and only below the best.
    let by_gen = TelemetryPolicy {
        pcie_gen_degraded: true,
        ..p
    };
    let idle_gen1 = |generation| Telemetry {
        pcie_best: Some(Link {
            generation,
            width: 16,
        }),
        ..cool()
    };
    assert!(seen(&idle_gen1(4), &p).is_empty());
    assert_eq!(seen(&idle_gen1(4), &by_gen), [Signal::PcieDegraded]);
    assert!(
        seen(&idle_gen1(1), &by_gen).is_empty(),
        "never faster than gen 1"
    );
}

#[test]
fn missing_telemetry_is_no_evidence() {
    let p = TelemetryPolicy::default();
    let none = signals(&Telemetry::default(), &p);
    assert!(none.iter().all(|(_, s)| s.is_none()), "{none:?}");
    // One source read clean is enough to say "not seen".
    let t = Telemetry {
        clock_events: Reading::Value(0),
        ..Telemetry::default()
    };
    assert_eq!(signals(&t, &p)[0], (Signal::Thermal, Some(false)));
    assert_eq!(signals(&t, &p)[3], (Signal::PcieDegraded, None));
}

#[test]
fn hysteresis_raises_late_clears_later_and_ignores_gaps() {
    let p = TelemetryPolicy::default();
    let run = |seq: &[Option<bool>]| {
        let mut t = Track::default();
        seq.iter()
            .map(|&s| {
                t = t.step(s, &p);
                t.on
            })
            .collect::<Vec<_>>()
    };
    let (y, n) = (Some(true), Some(false));
    // One hot check is not sustained; two in a row are.
    assert_eq!(run(&[y, n, y, y]), [false, false, false, true]);
    // A gap neither raises nor breaks a run.
    assert_eq!(run(&[y, None, y]), [false, false, true]);
    // Clearing takes three clean checks in a row; a relapse restarts the count.
    assert_eq!(
        run(&[y, y, n, n, y, n, n, n]),
        [false, true, true, true, true, true, true, false]
    );
    assert!(Track::default().step(n, &p).is_idle());
}

#[test]
fn warm_holds_for_its_clear_checks() {
    let p = warm_policy(&TelemetryPolicy::default());
    let hot = Telemetry {
        temp_c: Reading::Value(80),
        ..cool()
    };
    let mut t = Track::default();
    let mut seq = Vec::new();
    for x in [&hot, &cool(), &hot, &cool(), &cool(), &cool()] {
        t = t.step(warm_seen(x, &TelemetryPolicy::default()), &p);
        seq.push(t.on);
    }
    // Warm at once; a temperature hovering at the edge keeps it; three cool checks clear.
    assert_eq!(seq, [true, true, true, true, true, false]);
    assert_eq!(warm_seen(&Telemetry::default(), &p), None);
}

#[test]
fn tokens_round_trip() {
    for s in Signal::ALL {
        assert_eq!(Signal::from_token(s.token()), Some(s));
    }
    assert_eq!(Signal::from_token("xid_79"), None);
}

/// Issue 25 item 4: a busy GPU at its enforced power limit (draw at the limit, SW power cap
/// reason) is normal under load: it counts as `power_capped` only after
/// `PowerCapRaiseChecks` checks in a row (default 10), not after `TelemetryRaiseChecks` (2),
/// while the HW power brake (an external signal, no load effect) is `hw_slowdown` at once.
#[test]
fn power_capping_under_load_counts_only_when_it_lasts() {
    let p = TelemetryPolicy::default();
    let busy = Telemetry {
        temp_c: Reading::Value(70),
        power_mw: Reading::Value(400_000),
        clock_events: Reading::Value(reason_bits::SW_POWER_CAP),
        ..cool()
    };
    let mut tracks = crate::health::sticky::XidMemory::default();
    let on_after = |tracks: &mut crate::health::sticky::XidMemory, t: &Telemetry, checks| {
        (0..checks)
            .map(|_| tracks.step_signals("gpu", &signals(t, &p), &p))
            .collect::<Vec<_>>()
    };
    let counted = on_after(&mut tracks, &busy, 10);
    assert!(
        counted[..9].iter().all(Vec::is_empty),
        "nine checks at the cap are normal load: {counted:?}"
    );
    assert_eq!(
        counted[9],
        [Signal::PowerCapped],
        "the tenth in a row counts"
    );
    // A pause in the load (one check below the cap) restarts the count.
    let mut tracks = crate::health::sticky::XidMemory::default();
    on_after(&mut tracks, &busy, 9);
    on_after(&mut tracks, &cool(), 1);
    assert!(on_after(&mut tracks, &busy, 9).iter().all(Vec::is_empty));
    // The HW power brake is no load effect: hw_slowdown after TelemetryRaiseChecks.
    let brake = Telemetry {
        clock_events: Reading::Value(reason_bits::HW_POWER_BRAKE),
        ..cool()
    };
    assert_eq!(seen(&brake, &p), [Signal::HwSlowdown]);
    let mut tracks = crate::health::sticky::XidMemory::default();
    assert_eq!(
        on_after(&mut tracks, &brake, 2)[1],
        [Signal::HwSlowdown],
        "two checks"
    );
    // PowerCapRaiseChecks=2 restores the short window.
    let short = TelemetryPolicy {
        power_cap_raise_checks: 2,
        ..p
    };
    assert_eq!(short.for_signal(Signal::PowerCapped).raise_checks, 2);
    assert_eq!(p.for_signal(Signal::Thermal), p);
}
