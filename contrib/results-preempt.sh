#!/usr/bin/env bash
# The preemption scenario of the evaluation (issue 15 item 5): two priority classes, the high
# class multi-GPU; victims per preemption and preemptor set quality for stock cons_tres's plan
# and gputopo's (model: gputopo_eval::sim::preempt). Kept apart from contrib/results.sh so
# either reruns alone; results.sh appends the fragment this writes to docs/results.md.
#   contrib/results-preempt.sh [TRIALS] [SEED]     # defaults 2000 1; deterministic
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-2000} seed=${2:-1}
table=$(cargo run --release -q -p gputopo-eval --example preempt_sim -- "$trials" "$seed")
cat >docs/results-preempt.md <<EOD
## Preemption (\`contrib/results-preempt.sh $trials $seed\`)

Each trial: 16 nodes of one topology, every GPU held by a low-class job (1 GPU, or 2 with
probability 0.3; stock's GPU pick), then one high-class job of 2 or 4 GPUs preempts. Slurm
offers the low-class jobs in its own order (one class, so the order among them is an
accident: random here); cons_tres removes them in that order until the job fits, takes the
lowest-index node where it fits and preempts the removed jobs there. gputopo reorders the
candidates first (\`steer::victims\`: the cheapest victims whose freed GPUs give the best
set) and picks the GPUs with the engine. "best set": the preemptor's set scores as well as
the best set of its size on the node; "ring": bottleneck of its best ring (GB/s).

$table

The model is not a Slurm run: cons_tres's node choice is taken as the lowest index where the
job fits. Stock preempts more here because its accidental order can remove, on the node
where the job then fits, more jobs than needed (e.g. a 1-GPU and a 2-GPU job for a 2-GPU job);
with 1-GPU jobs only (the e2e tests' case, \`tests/e2e/preempt*.rs\`) both preempt exactly k
on a real slurmctld. On NVSwitch nodes (hgx-h100) every set is a best set; set quality
differs only where the interconnect does.
EOD
cat docs/results-preempt.md
