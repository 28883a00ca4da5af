#!/usr/bin/env bash
# Stop 31, one GPU call (docs/benchmarks.md "Stop 31"): a model of the GPU's kernels, then the production suite
# planned with it, on the lent GPU (torch-only kernels):
#   1. a broad profile timed on this GPU over the production suite's shapes (dims 32-256 and column shards of
#      them, rows 1e2-1e8, pooling 0-150 multi-hot, 1-16 tables a device, a third of the tables cut to row
#      ranges, batch BATCH, fp32), for PROFILE_SECONDS (resumable, kept as it stops);
#   2. a cost model trained on it on this host's CPUs (ensemble ENSEMBLE);
#   3. `autoshard bench --suite SUITE` with that model (no --allow-other-hardware: it is this GPU's), rl with
#      the shipped policy, the all-to-alls modelled from the declared 8-GPU NVLink topology, until DEADLINE
#      seconds after the start; a second call on the same warm machine with PROFILE_SECONDS 0 resumes it.
# Before (CPU host): python benchmarks/gpu_prepare.py --suite production-40-8 --batch-size 16384 -o WORKDIR/production-40-8
# Run from the repo root on the GPU host, carrying .whl (OR-Tools for ilp) and WORKDIR:
#   bash benchmarks/gpu/broad_then_bench.sh PROFILE_SECONDS DEADLINE OUTDIR [WORKDIR] [DEVICE] [BATCH] [TASKS]
# Dry run on a CPU host: NO_WHEELS=1 ENSEMBLE=2 bash benchmarks/gpu/broad_then_bench.sh 40 120 OUT DIR cpu 1024 2
# A committed model instead of step 1-2 (stop 41's, the next GPU session): prepare WORKDIR/SUITE as above, copy
# it to WORKDIR/bench, then MODEL=benchmarks/gpu/cost-h100-s41.pt bash benchmarks/gpu/broad_then_bench.sh 0 560 OUT WORKDIR
set -u
SUITE=${SUITE:-production-40-8}
COMM=${COMM:-benchmarks/gpu/comm-h100-1x8-nvlink.json}
ENSEMBLE=${ENSEMBLE:-5}
# ALGOS=...,torchrec adds TorchRec's planner (carry .whl-dmp: host_setup.sh installs TorchRec from it)
ALGOS=${ALGOS:-dim_greedy,lookup_greedy,size_greedy,size_lookup_greedy,search,neuroshard,ilp,rl}
TRAIN_ARGS=${TRAIN_ARGS:-}  # e.g. "--epochs 400 --patience 60" to fit the lent minutes
BENCH_ARGS=${BENCH_ARGS:-}  # e.g. "--allow-other-hardware" for a model timed on another GPU (stop 70: H100's on an H200)
PROFILE_SECONDS=${1:-230}
DEADLINE=${2:-560}  # seconds after this script starts by which the bench stops
RESULT=${3:-gpuwork/out}
WORK=${4:-gpuwork/s31}
DEVICE=${5:-cuda}
BATCH=${6:-16384}
TASKS=${7:-10}
for n in "$PROFILE_SECONDS" "$DEADLINE" "$BATCH" "$TASKS"; do
  case $n in ''|*[!0-9]*) echo "broad_then_bench.sh: '$n' is not a whole number; usage: PROFILE_SECONDS DEADLINE OUTDIR [WORKDIR] [DEVICE] [BATCH] [TASKS]" >&2; exit 2;; esac
done
source benchmarks/gpu/host_setup.sh  # wheels, PYTHONPATH, $RESULT, what the host has
PROFILE=$WORK/broad-$DEVICE-b$BATCH
MODEL=${MODEL:-$WORK/cost-$DEVICE-broad-b$BATCH.pt}  # MODEL=<a committed GPU model> with PROFILE_SECONDS 0
if [ "$PROFILE_SECONDS" -gt 0 ]; then  # 0: the profile and model of an earlier call on this machine
  start=$SECONDS
  timeout -s INT "$PROFILE_SECONDS" python3 -m autoshard.cli.main profile --design broad --samples 3000 \
    --dims 32:256 --pooling 0:150 --tables-per-device 1:16 --batch-sizes "$BATCH" --precisions fp32 \
    --row-share 0.3 --time-budget-ms 300 --device "$DEVICE" --backend torch --seed 0 -o "$PROFILE" \
    > "$RESULT/profile.log" 2>&1
  echo "profile: rc $? after $((SECONDS - start)) s, $(cat "$PROFILE"/shards-rank*.jsonl | wc -l) samples"
  tr "\r" "\n" < "$RESULT/profile.log" | grep -v "^ *$" | tail -2
  tar czf "$RESULT/profile.tgz" -C "$WORK" "$(basename "$PROFILE")"
  start=$SECONDS
  python3 -m autoshard.cli.main train-cost --data "$PROFILE" --ensemble "$ENSEMBLE" --seed 0 -o "$MODEL" \
    $TRAIN_ARGS > "$RESULT/train.log" 2>&1
  echo "train-cost: rc $? after $((SECONDS - start)) s"
  tr "\r" "\n" < "$RESULT/train.log" | grep -v "^ *$" | grep -v "epoch/s\]" | tail -12
  cp "$MODEL" "$RESULT/" 2>/dev/null
  rm -rf "$WORK/bench" && cp -r "$WORK/$SUITE" "$WORK/bench"
fi
case ",$ALGOS," in *,torchrec,*)  # TorchRec's planner from carried wheels: drop it, said so, if it does not import
  python3 -c "import torchrec.distributed.planner" > "$RESULT/torchrec-import.log" 2>&1 \
    || { echo "torchrec does not import here (tail of $RESULT/torchrec-import.log below): benching without it"
         tail -3 "$RESULT/torchrec-import.log"; ALGOS=$(echo ",$ALGOS," | sed 's/,torchrec,/,/; s/^,//; s/,$//'); } ;;
esac
LIMIT=$((DEADLINE - SECONDS))  # the bench stops at the deadline; a later call (PROFILE_SECONDS 0) resumes it
echo "bench: $LIMIT s left"
[ "$LIMIT" -gt 0 ] || exit 0  # past the deadline (timeout 0 would mean no limit at all)
start=$SECONDS
timeout -s INT "$LIMIT" python3 -m autoshard.cli.main bench --suite "$SUITE" --batch-size "$BATCH" \
  --device "$DEVICE" --backend torch --comm "$COMM" \
  --algos "$ALGOS" \
  --policy src/autoshard/data/default_policy.pt --cost-model "$MODEL" --refresh-rounds 0 \
  --test-tasks "$TASKS" --rounds 2 --time-limit 2 --estimate none $BENCH_ARGS -o "$WORK/bench" >> "$RESULT/bench.log" 2>&1
echo "bench: rc $? after $((SECONDS - start)) s, $(ls "$WORK"/bench/bench/tasks 2>/dev/null | wc -l) tasks measured"
tr "\r" "\n" < "$RESULT/bench.log" | grep -v "^ *$" | grep -v "it/s\]$\|s/it\]$" | tail -40
tar czf "$RESULT/bench.tgz" -C "$WORK" bench/bench bench/stages 2>/dev/null
exit 0
