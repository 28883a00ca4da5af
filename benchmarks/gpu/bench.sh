#!/usr/bin/env bash
# Stop 25, GPU call 2 (docs/benchmarks.md "Stop 25"): DLRM-50 (4) at batch 16384 on the GPU,
# torch-only kernels, planned with the cost model and policy trained (on this project's CPU host) from the
# GPU profile of benchmarks/gpu/profile.sh; all-to-alls modelled from the declared topology
# benchmarks/gpu/h200-1x4-nvlink.json (one GPU: no NCCL between ranks). ilp needs OR-Tools, carried as
# wheels in .whl (see /work/.library/device/README.md). Stops after SECONDS; measured tasks are kept.
# Run from the repo root on the GPU host: bash benchmarks/gpu/bench.sh SECONDS OUTDIR
set -u
SECONDS_LIMIT=${1:-290}
RESULT=${2:-gpuwork/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
mkdir -p "$RESULT"
timeout -s INT "$SECONDS_LIMIT" python3 -m autoshard.cli.main bench --suite dlrm-50-4 --batch-size 16384 \
  --device cuda --backend torch --comm gpuwork/comm/comm_model.json \
  --cost-model gpuwork/models/cost-h200-dlrm50-b16384.pt --policy gpuwork/models/policy-h200-dlrm50-b16384.pt \
  --test-tasks 10 --rounds 2 --time-limit 2 --estimate none -o gpuwork/dlrm-50-4 > "$RESULT/bench.log" 2>&1
echo "bench rc $?"
tr "\r" "\n" < "$RESULT/bench.log" | grep -v "^ *$" | tail -45
tar czf "$RESULT/bench.tgz" gpuwork/dlrm-50-4/bench gpuwork/dlrm-50-4/stages
