//! Topology-aware preemption victims with `PreemptType=preempt/qos` (issue 15 item 1): the
//! same scenario as `preempt.rs` (two DGX-1V nodes full of 1-GPU jobs, a 4-GPU preemptor),
//! with the preemption order coming from QOS (slurmdbd) instead of partition tiers. One
//! cluster (a slurmdbd start is slow) runs both modes: the fill jobs' QOS sets the mode
//! (`lowreq` PreemptMode=requeue, `lowcan` PreemptMode=cancel; the QOS's mode wins over
//! slurm.conf's for preempt/qos), and QOS `urgent` may preempt both.
//!
//! With select/gputopo the preemptor gets a best quad and, as with stock
//! (`GPUTOPO_SELECT=cons_tres`, which prints what cons_tres chose), exactly four victims; and
//! with a faulty GPU, jobs submitted without `-N1` take the victims stock needs (issue 25
//! item 2).
//! slurmdbd lives beside the harness's cluster directory (`DIR-qos.dbd`, ports from
//! `DIR-qos`), so this can run while other clusters and other tests' slurmdbd do.

use super::gres_configs::cancel_all;
use super::harness::{Cluster, Opts, Slurmdbd, WAIT, e2e_enabled, select};
use super::preempt::{CONF, best_quad, preempt_once_with};
use super::preempt_faulty;
use super::select::extra_with_faulty;

#[test]
#[ignore = "needs root, Slurm, MariaDB and slurmdbd; run by contrib/test-all.sh"]
fn with_preempt_qos_a_preemptor_gets_a_best_quad_at_stock_cost() {
    if !e2e_enabled() {
        return;
    }
    let dbd = Slurmdbd::beside("qos", &["gtqos"]);
    let extra = format!(
        "PreemptType=preempt/qos\nPreemptMode=REQUEUE\n\
         AccountingStorageEnforce=associations,qos\n{}",
        dbd.conf("gtqos")
    );
    let c = Cluster::up(Opts {
        nodes: 2,
        extra_conf: Some(extra),
        gputopo_conf: Some(CONF.into()),
        debug: true,
        ..Opts::default()
    });
    let sacctmgr = |args: &[&str]| {
        let mut all = vec!["-i"];
        all.extend_from_slice(args);
        c.ok("sacctmgr", &all);
    };
    sacctmgr(&["add", "qos", "lowreq", "PreemptMode=requeue"]);
    sacctmgr(&["add", "qos", "lowcan", "PreemptMode=cancel"]);
    sacctmgr(&[
        "add",
        "qos",
        "urgent",
        "Preempt=lowreq,lowcan",
        "Priority=100",
    ]);
    sacctmgr(&["add", "account", "acct"]);
    sacctmgr(&[
        "add",
        "user",
        "root",
        "account=acct",
        "qos=normal,lowreq,lowcan,urgent",
    ]);
    // slurmdbd pushes the new records to slurmctld; wait until it knows root's association.
    c.wait_until("slurmctld to know root's QOS", WAIT, || {
        let out = c.run(
            "scontrol",
            &["show", "assoc_mgr", "users=root", "flags=assoc"],
        );
        String::from_utf8_lossy(&out.stdout).contains("Account=acct")
    });
    let high = ["-A", "acct", "--qos=urgent"];
    for (mode, qos) in [("REQUEUE", "--qos=lowreq"), ("CANCEL", "--qos=lowcan")] {
        let (victims, node, gpus) = preempt_once_with(&c, 16, &["-A", "acct", qos], &high);
        println!(
            "select/{}, preempt/qos {mode}: 4-GPU preemptor on {node} GPUs {gpus:?}, {} victims",
            select(),
            victims.len()
        );
        assert_eq!(victims.len(), 4, "the minimum: {victims:?}");
        if select() == "gputopo" {
            assert!(best_quad(&gpus), "not a best quad: {gpus:?}");
        }
        cancel_all(&c);
    }
    // Issue 25 item 2 under preempt/qos: n1's GPU 3 faulty, a 2-GPU and a 4-GPU job without
    // -N take the 6 victims stock needs, each in one round (tests/e2e/preempt_faulty.rs).
    let faulty = format!("Extra={}", extra_with_faulty(8, 3));
    c.ok("scontrol", &["update", "NodeName=n1", &faulty]);
    preempt_faulty::fill(&c, &["-A", "acct", "--qos=lowreq"]);
    let victims = preempt_faulty::preempt(
        &c,
        &[
            &["-A", "acct", "--qos=urgent", "--gres=gpu:2"],
            &["-A", "acct", "--qos=urgent", "--gres=gpu:4"],
        ],
    );
    println!(
        "select/{}, preempt/qos REQUEUE, GPU 3 of n1 faulty, 2+4 GPUs without -N: {} victims",
        select(),
        victims.len()
    );
    if select() == "gputopo" {
        assert_eq!(victims.len(), 6, "what stock needs: {victims:?}");
    }
    drop(c);
    drop(dbd);
}
