#!/usr/bin/env bash
# Stop 25, GPU call 1 (docs/benchmarks.md "Stop 25"): profile the DLRM-50 (4) train pool's shards
# on the GPU (torch-only kernels; the lent host has no fbgemm-gpu), for SECONDS at most (resumable).
# Before: python benchmarks/gpu_prepare.py --suite dlrm-50-4 --batch-size 16384 -o gpuwork/dlrm-50-4
# Run from the repo root on the GPU host: bash benchmarks/gpu/profile.sh SECONDS OUTDIR [PROFILE_DIR]
set -u
SECONDS_LIMIT=${1:-200}
RESULT=${2:-gpuwork/out}
PROFILE=${3:-gpuwork/profile-dlrm50-b16384}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p "$RESULT"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
python3 -c "import torch, numpy, scipy; print('torch', torch.__version__, 'numpy', numpy.__version__, torch.cuda.get_device_name(0), 'cpus', __import__('os').cpu_count())"
timeout -s INT "$SECONDS_LIMIT" python3 -m autoshard.cli.main profile --tables gpuwork/dlrm-50-4/train_pool.json \
  --samples 3000 --max-tables 24 --batch-size 16384 --device cuda --backend torch --seed 0 \
  -o "$PROFILE" 2>&1 | tr "\r" "\n" | tail -8
echo "profile rc ${PIPESTATUS[0]}; records: $(wc -l < "$PROFILE"/shards-rank0.jsonl)"
tar czf "$RESULT/profile.tgz" "$PROFILE"
