#!/usr/bin/env bash
# Stop 29, one GPU call (docs/benchmarks.md "Stop 29"): DLRM-50 (4) at batch 16384 on the lent GPU (torch-only
# kernels), the learned planners driven by the shipped cost model of OTHER hardware
# (src/autoshard/data/default_cost_model.pt: AMD EPYC, FBGEMM kernels; --allow-other-hardware):
#   a: adapted to this GPU by the bench's refresh loop on the planners' own devices (--refresh-rounds 2)
#   b: as it is (--refresh-rounds 0), to see what the adaptation changes
# rl is left out: the loop retrains the policy every round, minutes of CPU the lent GPU would idle through.
# All-to-alls modelled from the declared 4-GPU NVLink topology (one GPU cannot time them). Each run stops
# after its SECONDS (measured tasks are kept; benchmarks/gpu/assemble_partial.py reads a stopped one).
# Before (CPU host): python benchmarks/gpu_prepare.py --suite dlrm-50-4 --batch-size 16384 -o gpuwork/s29/dlrm-50-4
# Run from the repo root on the GPU host, carrying .whl (OR-Tools for ilp) and gpuwork/s29:
#   bash benchmarks/gpu/bench_adapted.sh SECONDS_A SECONDS_B OUTDIR [WORKDIR] [DEVICE] [BATCH] [TASKS]
# Stop 30 (the production suite, 8 devices, rl in run b with the shipped policy), the same script with:
#   SUITE=production-40-8 COMM=benchmarks/gpu/comm-h100-1x8-nvlink.json RL_POLICY=src/autoshard/data/default_policy.pt
#   (before: python benchmarks/gpu_prepare.py --suite production-40-8 --batch-size 16384 -o WORKDIR/production-40-8)
set -u
SUITE=${SUITE:-dlrm-50-4}
COMM=${COMM:-benchmarks/gpu/comm-h200-1x4-nvlink.json}
RL_POLICY=${RL_POLICY:-}
LIMIT_A=${1:-280}
LIMIT_B=${2:-200}
RESULT=${3:-gpuwork/out}
WORK=${4:-gpuwork/s29}
DEVICE=${5:-cuda}
BATCH=${6:-16384}
TASKS=${7:-10}
source benchmarks/gpu/host_setup.sh  # wheels, PYTHONPATH, $RESULT, what the host has
HEURISTICS=dim_greedy,lookup_greedy,size_greedy,size_lookup_greedy
run() {  # NAME SECONDS MODEL REFRESH_ROUNDS [EXTRA ALGOS] [EXTRA ARGS...]
  rm -rf "$WORK/$1" && cp -r "$WORK/$SUITE" "$WORK/$1"
  local start=$SECONDS
  timeout -s INT "$2" python3 -m autoshard.cli.main bench --suite "$SUITE" --batch-size "$BATCH" \
    --device "$DEVICE" --backend torch --comm "$COMM" \
    --algos "$HEURISTICS,search,neuroshard,ilp${5:-}" "${@:6}" \
    --cost-model "$3" --allow-other-hardware --refresh-rounds "$4" --refresh-tasks 2 \
    --test-tasks "$TASKS" --rounds 2 --time-limit 2 --estimate none -o "$WORK/$1" > "$RESULT/$1.log" 2>&1
  echo "run $1: rc $? after $((SECONDS - start)) s"
  tr "\r" "\n" < "$RESULT/$1.log" | grep -v "^ *$" | grep -v "it/s\]$\|s/it\]$" | tail -40
  tar czf "$RESULT/$1.tgz" -C "$WORK" "$1/bench" "$1/stages" "$1/refresh" 2>/dev/null
}
RL=()  # rl in run b only (no refresh there, so nothing retrains its policy on the lent GPU's time)
[ -n "$RL_POLICY" ] && RL=(,rl --policy "$RL_POLICY")
# SECONDS_A or SECONDS_B 0 skips that run
[ "$LIMIT_A" -gt 0 ] && run a "$LIMIT_A" src/autoshard/data/default_cost_model.pt 2
[ "$LIMIT_B" -gt 0 ] && run b "$LIMIT_B" src/autoshard/data/default_cost_model.pt 0 ${RL[@]+"${RL[@]}"}
exit 0
