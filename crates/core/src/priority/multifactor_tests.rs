//! Hand-computed cases from priority_multifactor.c, plus property tests.
use super::*;
use crate::priority::config::{Flags, PriorityConfig, Release, Weights};
use proptest::prelude::*;

const NOW: i64 = 1_700_000_000;

fn cfg(release: Release) -> PriorityConfig {
    PriorityConfig {
        weights: Weights {
            age: 1000,
            assoc: 0,
            fairshare: 10_000,
            job_size: 1000,
            partition: 10_000,
            qos: 5000,
        },
        ..PriorityConfig::slurm_default(release)
    }
}

fn part(factor: u16, max: u16) -> PartitionInput<'static> {
    PartitionInput {
        priority_job_factor: factor,
        norm_priority: PartitionInput::normalised(factor, max),
        max_time_mins: u32::MAX,
        tres_cnt: Some(&[64, 256_000, 0, 4, 0]),
    }
}

fn job() -> JobInput<'static> {
    JobInput {
        accrue_time: NOW - 3600,
        max_cpus: NO_VAL,
        min_cpus: 4,
        min_nodes: 1,
        time_limit_mins: 60,
        partition: Some(part(10, 20)),
        site_factor: NICE_OFFSET,
        nice: NICE_OFFSET,
        tres_req: Some(&[4, 8000, 0, 1, 0]),
        ..Default::default()
    }
}

const CLUSTER: ClusterInput = ClusterInput { cpus: 64, nodes: 4 };

#[test]
fn favor_large_sum() {
    let c = cfg(Release::V24_11);
    let p = job_priority(&c, CLUSTER, &job(), NOW, None);
    // age = 3600/604800 * 1000 = 5.952..., js = (1/4 + 4/64)/2 * 1000 = 156.25,
    // part = 0.5 * 10000 = 5000 → 5162.2 → 5162.
    assert_eq!(p.factors.age, 3600.0 / 604_800.0 * 1000.0);
    assert_eq!(p.factors.job_size, 156.25);
    assert_eq!(p.factors.partition, 5000.0);
    assert_eq!(p.priority, 5162);
    assert!(p.array.is_empty());
}

#[test]
fn favor_small_and_nice_and_site() {
    let mut c = cfg(Release::V24_11);
    c.favor_small = true;
    let mut j = job();
    j.nice = NICE_OFFSET + 100;
    j.site_factor = NICE_OFFSET + 7;
    let p = job_priority(&c, CLUSTER, &j, NOW, None);
    // js = ((4-1)/4 + (64-4)/64)/2 = (0.75 + 0.9375)/2 = 0.84375 → 843.75
    assert_eq!(p.factors.job_size, 843.75);
    let expect = 3600.0 / 604_800.0 * 1000.0 + 843.75 + 5000.0 + 7.0 - 100.0;
    assert_eq!(p.priority, expect as u32);
}

#[test]
fn favor_small_wraps_in_22_05_only() {
    let mut c = cfg(Release::V22_05);
    c.favor_small = true;
    let mut j = job();
    j.min_nodes = 8; // more than the cluster has
    let p22 = job_priority(&c, CLUSTER, &j, NOW, None);
    // (uint32)(4 - 8) = 4294967292 / 4 → huge, clamped to 1.
    assert_eq!(p22.factors.job_size, 1000.0);
    c.release = Release::V24_11;
    let p24 = job_priority(&c, CLUSTER, &j, NOW, None);
    assert_eq!(p24.factors.job_size, 0.9375 / 2.0 * 1000.0);
}

#[test]
fn size_relative_to_time() {
    let mut c = cfg(Release::V24_11);
    c.flags = Flags(Flags::FAIR_TREE | Flags::SIZE_RELATIVE);
    let p = job_priority(&c, CLUSTER, &job(), NOW, None);
    // max(1*64/4, 4) = 16 / 60 / 64 → 0.0041666 * 1000
    assert_eq!(p.factors.job_size, 16.0 / 60.0 / 64.0 * 1000.0);
    c.favor_small = true;
    let p = job_priority(&c, CLUSTER, &job(), NOW, None);
    assert_eq!(p.factors.job_size, (1.0 - 16.0 / 60.0 / 64.0) * 1000.0);
}

#[test]
fn no_job_size_without_nodes_in_24_11() {
    let c = cfg(Release::V24_11);
    let p = job_priority(&c, ClusterInput { cpus: 0, nodes: 0 }, &job(), NOW, None);
    assert_eq!(p.factors.job_size, 0.0);
}

#[test]
fn qos_assoc_fairshare_and_no_normal() {
    let mut c = cfg(Release::V24_11);
    c.weights.assoc = 100;
    let mut j = job();
    j.qos = Some(QosInput {
        priority: 50,
        norm_priority: 0.5,
    });
    j.assoc = Some(AssocInput {
        priority: 3,
        priority_norm: 0.75,
        fairshare: 0.25,
    });
    let p = job_priority(&c, CLUSTER, &j, NOW, None);
    assert_eq!(
        (p.factors.qos, p.factors.assoc, p.factors.fairshare),
        (2500.0, 75.0, 2500.0)
    );
    c.flags = Flags(
        Flags::FAIR_TREE | Flags::NO_NORMAL_QOS | Flags::NO_NORMAL_ASSOC | Flags::NO_NORMAL_PART,
    );
    let p = job_priority(&c, CLUSTER, &j, NOW, None);
    assert_eq!(
        (p.factors.qos, p.factors.assoc, p.factors.partition),
        (250_000.0, 300.0, 100_000.0)
    );
}

#[test]
fn tres_factors_normalised_by_partition() {
    let mut c = cfg(Release::V24_11);
    c.tres_weights = Some(vec![100.0, 0.0, 0.0, 1000.0, 0.0]);
    let p = job_priority(&c, CLUSTER, &job(), NOW, None);
    // cpu 4/64*100 = 6.25, gpu 1/4*1000 = 250
    assert_eq!(p.factors.tres, vec![6.25, 0.0, 0.0, 250.0, 0.0]);
    c.flags = Flags(Flags::FAIR_TREE | Flags::NO_NORMAL_TRES);
    let p = job_priority(&c, CLUSTER, &job(), NOW, None);
    assert_eq!(p.factors.tres, vec![400.0, 0.0, 0.0, 1000.0, 0.0]);
}

#[test]
fn clamps_low_and_high() {
    let c = cfg(Release::V24_11);
    let mut j = job();
    j.nice = NICE_OFFSET + 1_000_000;
    assert_eq!(job_priority(&c, CLUSTER, &j, NOW, None).priority, 1);
    let mut c = cfg(Release::V24_11);
    c.weights.partition = u32::MAX;
    c.weights.qos = u32::MAX;
    j = job();
    j.partition = Some(part(20, 20));
    j.qos = Some(QosInput {
        priority: 1,
        norm_priority: 1.0,
    });
    let p = job_priority(&c, CLUSTER, &j, NOW, None);
    assert_eq!(p.priority, u32::MAX);
    assert!(p.clamped);
}

#[test]
fn direct_priority_bypasses() {
    let c = cfg(Release::V24_11);
    let j = JobInput {
        direct_priority: Some(77),
        ..job()
    };
    let p = job_priority(&c, CLUSTER, &j, NOW, None);
    assert_eq!((p.priority, p.factors.partition), (77, 0.0));
}

#[test]
fn age_saturates_and_ignores_future_accrue() {
    let c = cfg(Release::V24_11);
    let j = JobInput {
        accrue_time: NOW - 30 * 86_400,
        ..job()
    };
    assert_eq!(job_priority(&c, CLUSTER, &j, NOW, None).factors.age, 1000.0);
    let j = JobInput {
        accrue_time: NOW + 50,
        ..job()
    };
    assert_eq!(job_priority(&c, CLUSTER, &j, NOW, None).factors.age, 0.0);
}

#[test]
fn multi_partition_array_22_and_24() {
    let mut j = job();
    let parts = [part(20, 20), part(10, 20)];
    j.partitions = &parts;
    let p22 = job_priority(&cfg(Release::V22_05), CLUSTER, &j, NOW, None);
    let arr = p22.array;
    assert_eq!(arr.len(), 3);
    assert_eq!(arr[2], 0);
    let base = 3600.0 / 604_800.0 * 1000.0 + 156.25;
    assert_eq!(arr[0], (10_000.0 + base) as u32);
    assert_eq!(arr[1], (5000.0 + base) as u32);
    let qos = [
        QosInput {
            priority: 10,
            norm_priority: 1.0,
        },
        QosInput {
            priority: 0,
            norm_priority: 0.0,
        },
    ];
    j.qos_list = &qos;
    let p24 = job_priority(&cfg(Release::V24_11), CLUSTER, &j, NOW, None);
    let arr = p24.array;
    assert_eq!(
        arr,
        vec![
            (15_000.0 + base) as u32,
            (10_000.0 + base) as u32,
            (10_000.0 + base) as u32,
            (5000.0 + base) as u32
        ]
    );
}

#[test]
fn incr_only_keeps_larger() {
    let f = Flags(Flags::INCR_ONLY);
    assert_eq!(apply_incr_only(f, 10, 5), 10);
    assert_eq!(apply_incr_only(f, 10, 50), 50);
    assert_eq!(apply_incr_only(Flags(0), 10, 5), 5);
    let mut c = cfg(Release::V24_11);
    c.flags = f;
    let parts = [part(20, 20)];
    let j = JobInput {
        partitions: &parts,
        ..job()
    };
    let p = job_priority(&c, CLUSTER, &j, NOW, Some(&[u32::MAX]));
    assert_eq!(p.array, vec![u32::MAX]);
    // A shorter previous array (Slurm's split copy): what it has is kept, the rest computed.
    let p = job_priority(&cfg(Release::V22_05), CLUSTER, &j, NOW, Some(&[]));
    assert_eq!(p.array.len(), 2);
}

#[test]
fn sprio_row_recomputes_part_and_keeps_tres_quirk() {
    let mut c = cfg(Release::V24_11);
    c.tres_weights = Some(vec![100.0, 0.0, 0.0, 0.0, 0.0]);
    let parts = [part(20, 20)];
    let j = JobInput {
        partitions: &parts,
        ..job()
    };
    let p = job_priority(&c, CLUSTER, &j, NOW, None);
    let mut other = part(20, 20);
    other.tres_cnt = Some(&[0, 0, 0, 0, 0]);
    let row = sprio_row(&c, &j, &p.factors, Some(&other), None);
    assert_eq!(row.partition, 10_000.0);
    // No partition total: the weighted value is weighted again (multifactor does that).
    assert_eq!(row.tres[0], 6.25 * 100.0);
}

/// A job's plain fields; [`Arb::with`] builds the borrowed input over them.
#[derive(Clone, Debug)]
struct Arb {
    fields: JobInput<'static>,
    pf: u16,
    multi: bool,
    tres_req: [u64; 5],
}

impl Arb {
    fn with<R>(&self, f: impl FnOnce(&JobInput) -> R) -> R {
        let parts = [part(self.pf, u16::MAX), part(1, 2)];
        let j = JobInput {
            partitions: if self.multi { &parts } else { &[] },
            tres_req: Some(&self.tres_req),
            ..self.fields
        };
        f(&j)
    }
}

fn arb_job() -> impl Strategy<Value = Arb> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        0i64..10_000_000,
        any::<u16>(),
    )
        .prop_map(|(tc, maxc, minc, mn, tl, site, nice, age, pf)| Arb {
            fields: JobInput {
                accrue_time: NOW - age,
                total_cpus: tc % 3 * (tc / 3),
                max_cpus: maxc,
                min_cpus: minc,
                min_nodes: mn,
                time_limit_mins: tl,
                partition: Some(part(pf, u16::MAX)),
                site_factor: site,
                nice,
                ..Default::default()
            },
            pf,
            multi: pf % 2 == 0,
            tres_req: [u64::from(minc), 1, 2, 3, 4],
        })
}

fn arb_cfg() -> impl Strategy<Value = PriorityConfig> {
    (
        any::<[u32; 6]>(),
        any::<u32>(),
        any::<bool>(),
        0u32..2048,
        any::<bool>(),
    )
        .prop_map(|(w, max_age, fs, flags, r)| PriorityConfig {
            release: if r { Release::V22_05 } else { Release::V24_11 },
            weights: Weights {
                age: w[0],
                assoc: w[1],
                fairshare: w[2],
                job_size: w[3],
                partition: w[4],
                qos: w[5],
            },
            tres_weights: Some(vec![1.5, 0.0, 2.0, 1e6, 0.1]),
            max_age_secs: max_age,
            favor_small: fs,
            flags: Flags(flags),
            damp_factor: 1,
        })
}

proptest! {
    #[test]
    fn never_panics_and_is_at_least_one(c in arb_cfg(), j in arb_job(), nodes in any::<i32>(), cpus in any::<u32>()) {
        let p = j.with(|j| job_priority(&c, ClusterInput { cpus, nodes }, j, NOW, None));
        prop_assert!(p.priority >= 1);
        let n = p.array.len();
        for (i, v) in p.array.into_iter().enumerate() {
            prop_assert!(v >= 1 || (c.release == Release::V22_05 && i == n - 1));
        }
    }

    #[test]
    fn monotonic_in_age(c in arb_cfg(), j in arb_job(), extra in 0i64..1_000_000) {
        let a = j.with(|j| job_priority(&c, CLUSTER, j, NOW, None));
        let b = j.with(|j| job_priority(&c, CLUSTER, j, NOW + extra, None));
        prop_assert!(b.factors.age >= a.factors.age);
        prop_assert!(b.priority >= a.priority);
    }

    #[test]
    fn reused_output_equals_fresh(c in arb_cfg(), j1 in arb_job(), j2 in arb_job()) {
        // One JobPriority reused across jobs (the plugin's pass) gives what a fresh one gives.
        let mut out = JobPriority::default();
        j1.with(|j| job_priority_into(&c, CLUSTER, j, NOW, None, &mut out));
        j2.with(|j| job_priority_into(&c, CLUSTER, j, NOW, None, &mut out));
        prop_assert_eq!(out, j2.with(|j| job_priority(&c, CLUSTER, j, NOW, None)));
    }

    #[test]
    fn clamp_matches_c_rules(sum in any::<f64>()) {
        let (p, clamped) = clamp_priority(sum);
        prop_assert!(p >= 1 || sum.is_nan());
        if sum >= 4_294_967_296.0 { prop_assert!(clamped && p == u32::MAX); }
        if (1.0..4_294_967_296.0).contains(&sum) { prop_assert_eq!(p, sum.trunc() as u32); }
    }
}
