#!/usr/bin/env bash
# Stop 41, one GPU call (docs/benchmarks.md "Stop 41"):
#  A. benchmarks/gpu/retime.py for RETIME_SECONDS: the production suite's devices of stop 31's GPU bench and
#     records of the broad H100 profile, re-timed under the bench's protocol and the profile's, with the GPU's
#     clocks (OUTDIR/retime.jsonl);
#  B. for PROFILE_SECONDS, stop 31's broad design with one change, every table's vocabulary its full rows
#     (--vocab-log-fraction 0; the design's range -3:0 almost never draws it, and 232 of the 400
#     tables of stop 31's production run have it), into a fresh profile written where the call's files come back from
#     (OUTDIR/fullvocab: on the CPU host `autoshard profile-pack` a copy of it).
# Run from the repo root on the GPU host:
#   bash benchmarks/gpu/retime_then_profile.sh RETIME_SECONDS PROFILE_SECONDS OUTDIR [WORKERS] [DEVICE]
# Dry run on a CPU host: NO_WHEELS=1 bash benchmarks/gpu/retime_then_profile.sh 20 30 OUT 2 cpu
set -u
RETIME_SECONDS=${1:-170}
PROFILE_SECONDS=${2:-280}
RESULT=${3:-gpuwork/out}
WORKERS=${4:-6}
DEVICE=${5:-cuda}
for n in "$RETIME_SECONDS" "$PROFILE_SECONDS" "$WORKERS"; do
  case $n in ''|*[!0-9]*) echo "retime_then_profile.sh: '$n' is not a whole number; usage: RETIME_SECONDS PROFILE_SECONDS OUTDIR [WORKERS] [DEVICE]" >&2; exit 2;; esac
done
source benchmarks/gpu/host_setup.sh  # PYTHONPATH, $RESULT, what the host has
start=$SECONDS
if [ "$RETIME_SECONDS" -gt 0 ]; then
  python3 benchmarks/gpu/retime.py --bench benchmarks/runs/s31-gpu-h100-production-40-8-b16384-broad.json.gz \
    --profile profiles/nvidia-h100/broad-s31-b16384 --devices 64 --records 40 --seconds "$RETIME_SECONDS" \
    --device "$DEVICE" -o "$RESULT/retime.jsonl" > "$RESULT/retime.log" 2>&1
  echo "retime: rc $? after $((SECONDS - start)) s"; tail -2 "$RESULT/retime.log"
  python3 benchmarks/gpu/retime.py --summary "$RESULT/retime.jsonl"
fi
WORK=$RESULT/fullvocab  # written as it goes: a call stopped at its limit still returns what was timed
left=$((RETIME_SECONDS + PROFILE_SECONDS - (SECONDS - start)))
if [ "$PROFILE_SECONDS" -gt 0 ] && [ "$left" -gt 10 ]; then
  timeout -s INT "$left" python3 -m autoshard.cli.main profile --design broad --samples 3000 \
    --dims 32:256 --pooling 0:150 --tables-per-device 1:16 --batch-sizes 16384 --precisions fp32 \
    --row-share 0.3 --vocab-log-fraction 0 --time-budget-ms 300 --device "$DEVICE" --backend torch --seed 1 \
    --prepare-workers "$WORKERS" -o "$WORK" > "$RESULT/profile.log" 2>&1
  echo "profile: rc $? after $((SECONDS - start)) s, $(cat "$WORK"/shards-rank*.jsonl 2>/dev/null | wc -l) samples"
  tr "\r" "\n" < "$RESULT/profile.log" | grep -v "^ *$" | tail -3
fi
exit 0
