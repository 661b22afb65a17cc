#!/usr/bin/env bash
# The throttled-GPU scenario of the evaluation (issue 13 item 8): a share of the GPUs runs
# slower (hot, power-capped), a job runs at its slowest GPU's speed; mean and p95 slowdown of
# stock cons_tres, gputopo with health verdicts only, and gputopo with the agent's telemetry,
# all three on the same jobs and throttle trajectory (model: gputopo_eval::sim::throttle).
# Kept apart from contrib/results.sh so either reruns alone; results.sh appends the fragment
# this writes to docs/results.md.
#   contrib/results-throttle.sh [CHECKS] [SEED]     # defaults 20000 1; deterministic
set -euo pipefail
cd "$(dirname "$0")/.."
checks=${1:-20000} seed=${2:-1}
start=$(date +%s)
table=$(cargo run --release -q -p gputopo-eval --example throttle_sim -- "$checks" "$seed")
secs=$(($(date +%s) - start))
cat >docs/results-throttle.md <<EOD
## Throttled GPUs (\`contrib/results-throttle.sh $checks $seed\`)

Each row: 32 nodes of one topology, jobs arriving for $checks health checks (Poisson, 70 %
of the GPUs offered; 1/2/4/8 GPUs on one node with shares 25/35/30/10 %; ideal run times
exponential, mean 30 checks), strict FIFO, seed $seed; the three policies of a row replay the
same jobs on the same throttle trajectory. Each GPU throttles and recovers on its own Markov
chain ("throttled": the share throttled at any time; "spell": the mean length of a throttle
spell), a throttled GPU runs at 60 % speed, and a job advances each check at its slowest
GPU's speed. Slowdown: run time over the ideal run time (1.000 = never slowed); p95 by
nearest rank; "multi-GPU": jobs of 2 GPUs or more; "jobs slowed": share slowed at all.

- **stock cons_tres**: the lowest-index node with room, cons_tres's GPU pick.
- **gputopo, health only**: the plugin's node ranking and GPU re-pick without telemetry (this
  scenario has no ECC/XID faults, so its health verdicts are all \`ok\`).
- **gputopo, telemetry-aware**: the same with what the agent would publish, computed by the
  agent's own rules each check (\`health::telemetry::signals\`, the hysteresis
  \`Track::step\` with \`TelemetryRaiseChecks=2\`/\`TelemetryClearChecks=3\`, and the warm set
  \`w\`): a throttle seen in two checks in a row makes the GPU \`degraded\` (used last) until
  three clean checks; a throttle seen in one check only puts it in \`w\` (\`PreferCool\`: cooler
  sets and nodes among equally good ones). The scheduler reads the previous check's
  publication, as slurmctld reads the last \`Extra\` written.

$table

$secs s wall for the $(echo "$table" | tail -n +3 | wc -l) rows on this machine.

Observations (written against the run of \`contrib/results-throttle.sh 20000 1\`, 40,332 jobs
per row and policy): health-only and stock slow jobs alike, since throttling is invisible to
both (the interconnect, which differs on dgx1v, is not counted here). With 20-check spells the
telemetry-aware policy cuts the excess slowdown (above 1.0) by a third to two fifths at 5-10 % throttled (1.068 →
1.039 and 1.135 → 1.091 on hgx-h100) and the p95 most at 5 % (1.481 → 1.282); at 20 % the
gain is smaller (1.253 → 1.206), as free unthrottled GPUs run short. At 20 % the slowed jobs
push the cluster near saturation and the queue grows over the run (waits of hundreds of
checks), and there the telemetry-aware policy waits longest: keeping jobs off degraded GPUs
ranks nodes by health before fit, which leaves fewer whole nodes free for 8-GPU jobs. The
telemetry-aware policy cannot avoid a GPU that starts throttling under a running job (the
agent sees it only afterwards), nor one whose spell is shorter than its hysteresis: with
3-check spells most throttling is over before it is published, and the gain shrinks. Mean
waits move with run times (slowed jobs hold GPUs longer) and with node choice; FIFO is kept
by every policy. The model leaves out the interconnect (\`sim::comm\`, counted in the tables
above) and any heat caused by the jobs themselves: throttling here is independent of load.
EOD
cat docs/results-throttle.md
