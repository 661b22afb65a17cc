# shellcheck shell=bash
# The harness clusters the parity gate runs Slurm's expect and --local-config python tests on
# (contrib/slurm-testsuite/list names one per test). Sourced by contrib/slurm-testsuite/inner.sh.
#
# profile NAME sets:
#   P_NODES     node count (contrib/cluster.sh --nodes)
#   P_GRES      gres.conf template (cluster.sh --gres-conf: one line per entry, @DEV@ = the
#               node's fake device directory; written once per node)
#   P_NODE_GRES the nodes' Gres= (cluster.sh --node-gres)
#   P_DBD       1: a private slurmdbd and MariaDB (contrib/slurmdbd.sh)
#   P_EXTRA     slurm.conf lines (cluster.sh --extra-conf: each replaces the generated line of
#               the same key)
# The plugins (SelectType, PriorityType) come from the side being run, not from the profile.
#
# The GPUs are untyped (Slurm's GPU accounting tests, test39.20 and test40.4, want "no Type")
# but keep the topology gputopo steers by: Cores= and Links= of the DGX-1 (V100) fixture.

# gres.conf lines of the DGX-1 fixture without NodeName= and Type=, files under @DEV@.
gate_gres_links() {
  "$GPUTOPO_BIN" gres-conf --topology "$repo/contrib/topologies/dgx1v.topo" --node n1 \
    --file-prefix @DEV@/nvidia | sed -e 's/^NodeName=n1 //' -e 's/ Type=[^ ]*//'
}

# Accounting as the GPU-accounting, limit and fair-share tests declare it (test39.20, test21.*,
# test24.*): GPUs as a TRES, every limit enforced, job accounting gathered.
gate_acct_conf() {
  cat <<EOC
AccountingStorageTRES=gres/gpu${1:-}
AccountingStorageEnforce=associations,limits,qos,safe
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
EOC
}

# Every profile manages memory (test39.10, test1.12, test17.36 and the QOS limit tests
# test21.30/21.34 skip or leave out subtests without it): 100 MB per CPU by default, 16000 MB
# per node (contrib/cluster.sh).
gate_mem_conf() {
  printf 'SelectTypeParameters=CR_Core_Memory\nDefMemPerCPU=100\n'
}

profile() {
  # 5 nodes: test3.11 runs its last subtests only with 5 or more, test1.114 needs 3.
  P_NODES=5 P_DBD=0 P_EXTRA=$(gate_mem_conf) P_NODE_GRES=gpu:8
  P_GRES=$(gate_gres_links) || return 1
  case $1 in
    gpu) ;;
    # No Cores=/Links=: tests that expect the lowest free GPU indices (test39.17) declare no
    # topology; with Links= stock cons_tres picks linked GPUs too.
    plain) P_GRES='Name=gpu File=@DEV@/nvidia[0-7]' ;;
    # MPS: 4 GPUs with 100 MPS shares each (test40.*: "100 or more MPS per gpu").
    mps|acctmps)
      P_NODES=2 P_NODE_GRES=gpu:4,mps:400
      P_GRES=$(printf 'Name=gpu File=@DEV@/nvidia[0-3]\nName=mps Count=400\n')
      P_EXTRA+=$'\n'"GresTypes=gpu,mps"
      if [ "$1" = acctmps ]; then P_DBD=1 P_EXTRA+=$'\n'$(gate_acct_conf ,gres/mps); fi ;;
    acct) P_DBD=1 P_EXTRA+=$'\n'$(gate_acct_conf) ;;
    # QOS preemption (test34.2).
    acctqos) P_DBD=1 P_EXTRA+=$'\n'$(gate_acct_conf)$'\n'"PreemptType=preempt/qos"$'\n'"PreemptMode=CANCEL" ;;
    # Partition-priority preemption (test34.1 makes its own partitions).
    preempt) P_EXTRA+=$'\nPreemptType=preempt/partition_prio\nPreemptMode=CANCEL' ;;
    *) echo "profiles.sh: no profile '$1'" >&2; return 1 ;;
  esac
}
