//! Priority recalculation cost in the core: the work `priority/gputopo` does under the
//! slurmctld job write lock every PriorityCalcPeriod.
//!
//! Budget: 100k pending jobs recomputed well under 100 ms (multifactor's own loop takes the
//! same lock for its recalculation; see docs/priority.md for the in-slurmctld comparison).
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gputopo_core::priority::ledger::{Ledger, UsageCharge, UsageWeights};
use gputopo_core::priority::{
    AssocInput, ClusterInput, JobInput, JobPriority, NICE_OFFSET, NO_VAL, PartitionInput,
    PriorityConfig, QosInput, Release, Weights, job_priority_into,
};
use std::hint::black_box;

const NOW: i64 = 1_700_000_000;

/// The partitions the jobs run in (TRES totals borrowed from a static, as the plugin borrows
/// slurmctld's arrays).
fn partitions() -> Vec<PartitionInput<'static>> {
    (1..=4u16)
        .map(|f| PartitionInput {
            priority_job_factor: f * 10,
            norm_priority: f64::from(f) / 4.0,
            max_time_mins: 1440,
            tres_cnt: Some(&[4096, 16_000_000, 0, 128, 512]),
        })
        .collect()
}

/// Each job's requested TRES (the arrays [`jobs`] borrows).
fn requests(n: usize) -> Vec<[u64; 5]> {
    (0..n as u64)
        .map(|i| [1 + i % 64, 4000, 0, i % 9, 1])
        .collect()
}

fn jobs<'a>(parts: &'a [PartitionInput<'a>], reqs: &'a [[u64; 5]]) -> Vec<JobInput<'a>> {
    reqs.iter()
        .enumerate()
        .map(|(i, req)| {
            let i32_ = i as u32;
            JobInput {
                accrue_time: NOW - i64::from(i32_ % 86_400),
                max_cpus: NO_VAL,
                min_cpus: 1 + i32_ % 64,
                min_nodes: 1 + i32_ % 4,
                time_limit_mins: 10 + i32_ % 1000,
                partition: Some(parts[i % 4]),
                partitions: if i % 10 == 0 { &parts[..2] } else { &[] },
                qos: Some(QosInput {
                    priority: i32_ % 3,
                    norm_priority: f64::from(i32_ % 3) / 2.0,
                }),
                assoc: Some(AssocInput {
                    priority: 0,
                    priority_norm: 0.0,
                    fairshare: f64::from(i32_ % 100) / 100.0,
                }),
                tres_req: Some(req),
                site_factor: NICE_OFFSET,
                nice: NICE_OFFSET + i32_ % 5,
                ..Default::default()
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let cfg = PriorityConfig {
        weights: Weights {
            age: 1000,
            assoc: 100,
            fairshare: 10_000,
            job_size: 1000,
            partition: 10_000,
            qos: 5000,
        },
        tres_weights: Some(vec![1.0, 0.0, 0.0, 100.0, 0.0]),
        ..PriorityConfig::slurm_default(Release::V24_11)
    };
    let cluster = ClusterInput {
        cpus: 4096,
        nodes: 64,
    };
    let mut g = c.benchmark_group("priority_recalc");
    g.sample_size(20);
    let parts = partitions();
    for n in [10_000usize, 100_000] {
        let reqs = requests(n);
        let js = jobs(&parts, &reqs);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("multifactor_jobs", n), &js, |b, js| {
            // One output reused for every job, as the plugin's pass does.
            let mut out = JobPriority::default();
            b.iter(|| {
                let mut sum = 0u64;
                for j in js {
                    job_priority_into(&cfg, cluster, j, NOW, None, &mut out);
                    sum += u64::from(out.priority);
                }
                black_box(sum)
            })
        });
    }
    // The ledger's fair-share pass (1000 users in 50 accounts), done once per period.
    let mut ledger = Ledger::new(7 * 86_400, 0);
    for u in 0..1000u32 {
        ledger.charge(&UsageCharge {
            account: format!("acct{}", u % 50),
            user: format!("user{u}"),
            gpus: f64::from(u % 8),
            billing: f64::from(u % 32),
            run_secs: f64::from(60 + u),
        });
    }
    g.throughput(Throughput::Elements(1000));
    g.bench_function("ledger_fair_tree_1000_users", |b| {
        b.iter(|| {
            black_box(
                ledger
                    .fair_share(UsageWeights::default(), std::iter::empty())
                    .0
                    .len(),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
