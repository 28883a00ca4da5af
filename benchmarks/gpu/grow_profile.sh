#!/usr/bin/env bash
# Stop 35, one GPU call (docs/benchmarks.md "Stop 35"): grow stop 31's broad H100 profile
# (profiles/nvidia-h100/broad-s31-b16384: the same command resumes it) for PROFILE_SECONDS, the next samples'
# tables and lookups drawn by WORKERS processes while the GPU times (autoshard profile --prepare-workers).
# The new records come back as OUTDIR/shards-new.jsonl.gz; on the CPU host, put them beside the packed file
# (gunzip to shards-rank0.jsonl) and `autoshard profile-pack` the directory. If this host's hardware
# differs from the profile's (another CPU model under the H100), the same design (seed 0) is profiled into
# a fresh directory instead, so its first samples re-time stop 31's: a host-to-host comparison.
# Run from the repo root on the GPU host: bash benchmarks/gpu/grow_profile.sh PROFILE_SECONDS OUTDIR [WORKERS] [DEVICE]
# Dry run on a CPU host: NO_WHEELS=1 bash benchmarks/gpu/grow_profile.sh 30 OUT 2 cpu
set -u
PROFILE_SECONDS=${1:-470}
RESULT=${2:-gpuwork/out}
WORKERS=${3:-4}
DEVICE=${4:-cuda}
for n in "$PROFILE_SECONDS" "$WORKERS"; do
  case $n in ''|*[!0-9]*) echo "grow_profile.sh: '$n' is not a whole number; usage: PROFILE_SECONDS OUTDIR [WORKERS] [DEVICE]" >&2; exit 2;; esac
done
# timeout 0 would mean no limit at all
[ "$PROFILE_SECONDS" -gt 0 ] || { echo "grow_profile.sh: PROFILE_SECONDS must be at least 1" >&2; exit 2; }
source benchmarks/gpu/host_setup.sh  # PYTHONPATH, $RESULT, what the host has
WORK=/tmp/grow-profile  # outside the checkout: nothing the next call's copy of the tree could replace
rm -rf "$WORK" && mkdir -p "$WORK"
cp -r "${SOURCE:-profiles/nvidia-h100/broad-s31-b16384}" "$WORK/broad"  # SOURCE: a dry run's own
profile() {  # the stop-31 command (its axes: it was begun before stop 95), with the prefetch
  timeout -s INT "$1" python3 -m autoshard.cli.main profile --design broad --samples 3000 \
    --dims 32:256 --pooling 0:150 --tables-per-device 1:16 --batch-sizes 16384 --precisions fp32 \
    --row-share 0.3 --time-budget-ms 300 --device "$DEVICE" --backend torch --seed 0 --sobol-axes aligned \
    --prepare-workers "$WORKERS" -o "$2" > "$RESULT/profile.log" 2>&1
}
start=$SECONDS
profile "$PROFILE_SECONDS" "$WORK/broad"
rc=$?
if [ ! -f "$WORK/broad/shards-rank0.jsonl" ] && grep -q "one profile must not mix hardware" "$RESULT/profile.log"; then
  echo "this host is not the profile's hardware: $(tail -1 "$RESULT/profile.log")"
  rm -rf "$WORK/broad" && mkdir -p "$WORK/broad"
  left=$((PROFILE_SECONDS - (SECONDS - start)))
  [ "$left" -gt 0 ] && profile "$left" "$WORK/broad"
  rc=$?
  cp "$WORK/broad/profile.json" "$RESULT/" 2>/dev/null
fi
new=$(cat "$WORK"/broad/shards-rank*.jsonl 2>/dev/null | wc -l)
echo "profile: rc $rc after $((SECONDS - start)) s, $new new samples"
tr "\r" "\n" < "$RESULT/profile.log" | grep -v "^ *$" | tail -3
cat "$WORK"/broad/shards-rank*.jsonl 2>/dev/null | gzip -9 > "$RESULT/shards-new.jsonl.gz"
exit 0
