#!/bin/bash
# A preemptable job that saves a checkpoint when Slurm preempts it and resumes from it when
# requeued (issue 15 item 2).
#
#   sbatch -p low --gres=gpu:8 contrib/examples/checkpoint-resume.sh [STEPS]
#
# With PreemptMode=REQUEUE and a partition GraceTime, slurmctld sends the job's steps SIGCONT
# and SIGTERM (not the batch script itself), lets them run GraceTime seconds more, then kills
# and requeues the job, which later starts this script again with the same job id in the same
# working directory. So the work runs as a job step (srun), traps SIGTERM, writes its
# checkpoint and waits to be killed: a job that exits on its own during GraceTime ends as
# completed or failed and is not requeued.
#
# The work is STEPS steps of one second (a stand-in for training epochs); the checkpoint is
# the number of steps done, in checkpoint.$SLURM_JOB_ID in the working directory, written to
# a temporary name and renamed, so a kill during the write never leaves a torn checkpoint.
#SBATCH --requeue
#SBATCH --open-mode=append
set -u

steps=${1:-30}
if [ -z "${CHECKPOINT_WORKER:-}" ]; then
  exec srun --export=ALL,CHECKPOINT_WORKER=1 "$0" "$steps"
fi

ckpt=${CHECKPOINT:-$PWD/checkpoint.${SLURM_JOB_ID:-local}}
done_steps=0
if [ -s "$ckpt" ]; then
  done_steps=$(cat "$ckpt")
  echo "resumed from checkpoint at step $done_steps (restart ${SLURM_RESTART_COUNT:-0})"
else
  echo "started from step 0"
fi

save() {
  echo "$done_steps" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
  echo "checkpoint written at step $done_steps"
  # Wait for the end of GraceTime: Slurm kills and requeues the job then.
  while :; do sleep 1 & wait $!; done
}
# bash runs a trap only between commands, so the work waits on a background sleep.
trap save TERM

while [ "$done_steps" -lt "$steps" ]; do
  sleep 1 &
  wait $!
  done_steps=$((done_steps + 1))
  echo "at step $done_steps"
done
rm -f "$ckpt"
echo "finished all $steps steps"
