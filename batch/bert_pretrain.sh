#!/bin/bash
# hetseq: submit BERT pre-training to Slurm, phase 1 then phase 2. Phase 2 is held until phase 1 has
# completed successfully (sbatch --dependency=afterok): a phase-1 job that reaches its time limit is
# requeued by bert_phase1.slurm under the same job id, so phase 2 keeps waiting until phase 1 is done.
#
#   bash bert_pretrain.sh [sbatch options...]     e.g. --account=myproject --partition=gpu
#   MODEL=large WORK_DIR=/shared/me/bert bash bert_pretrain.sh
#
# The sbatch options apply to both phases; the variables of bert_phase1.slurm and bert_phase2.slurm
# (WORK_DIR, MODEL, DATA_DIR, SAVE_DIR, ...) are passed on with the environment. If phase 1 fails,
# phase 2 never starts (squeue shows it with the reason DependencyNeverSatisfied): scancel it, fix, and
# run this again (phase 1 resumes from its checkpoint).
set -eo pipefail
here=$(cd "$(dirname "$0")" && pwd)
p1=$(sbatch --parsable "$@" "$here/bert_phase1.slurm")
p1=${p1%%;*}                                  # --parsable prints "id" or "id;cluster"
p2=$(sbatch --parsable --dependency=afterok:"$p1" "$@" "$here/bert_phase2.slurm")
p2=${p2%%;*}
echo "phase 1: job $p1; phase 2: job $p2 (starts when $p1 has completed successfully)"
