#!/usr/bin/env bash
# Issue 14's real-step check where this project can run it: the step model against TorchRec DMP training
# steps on D CPU ranks, each pinned to a physical core of its own (benchmarks/dmp_step.py --pin-cpus). The
# CPU hosts have 2 vCPUs: on the AMD VM about one core, so its DMP steps time the ranks' contention, not the
# plan (docs/benchmarks.md, "The step model against real TorchRec training steps"); the Intel VM's are two
# cores, and stop 43 ran D=2 there (docs/benchmarks.md, "Stop 43"); for D > 2 the GPU hosts this project is
# lent have 16 CPU cores and no fbgemm-gpu or torchrec, but FBGEMM's CPU wheel and TorchRec are small enough
# to carry (about 7 MB with their dependencies the host lacks). No GPU is used.
#
# Here (a CPU host with the package registries), once: the wheels for the GPU host's Python 3.12 and torch
# 2.11 (fbgemm-gpu-cpu 1.6.0 and tensordict 0.12.0 are the releases of torch 2.11's spring; torchrec 1.6.1
# goes with fbgemm 1.6), into a folder git ignores:
#   echo /.whl-dmp/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl-dmp fbgemm-gpu-cpu==1.6.0 torchrec==1.6.1 tensordict==0.12.0 orjson==3.13.0 pyvers==0.2.3 \
#     importlib_metadata==10.2.0
# On the GPU host, from the repo root, carrying .whl-dmp (D=8 needs 8 physical cores; not yet timed there:
# the D=2 dry run below took 50 s on a 2-vCPU host):
#   bash benchmarks/gpu/dmp_cores.sh OUTDIR ["2 4 8"] [STEPS]
# Dry run on a CPU host with torchrec installed: NO_WHEELS=1 bash benchmarks/gpu/dmp_cores.sh OUT 2 3
set -u
RESULT=${1:-gpuwork/dmp}
DEVICES=${2:-2 4 8}
STEPS=${3:-10}
for n in $DEVICES "$STEPS"; do
  case $n in ''|*[!0-9]*) echo "dmp_cores.sh: '$n' is not a whole number; usage: OUTDIR [\"D D ...\"] [STEPS]" >&2; exit 2;; esac
done
if [ -z "${NO_WHEELS:-}" ]; then
  if ! ls .whl-dmp/*.whl > /dev/null 2>&1; then
    echo "dmp_cores.sh: no wheels in .whl-dmp; download them here first (see the top of this script) and carry .whl-dmp" >&2
    exit 2
  fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-dmp \
    .whl-dmp/*.whl || exit 1
  export PYTHONPATH=/tmp/site-dmp:$PWD/src
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
mkdir -p "$RESULT"
python3 - <<'EOF' || { echo "dmp_cores.sh: FBGEMM's CPU kernels or TorchRec do not load on this host" >&2; exit 1; }
import os, torch, fbgemm_gpu, torchrec  # noqa: F401,E401
import torchrec.distributed.model_parallel  # noqa: F401
from autoshard.hardware.multiprocess import physical_cores
assert torch.ops.fbgemm.asynchronous_complete_cumsum(torch.tensor([1, 2])).tolist() == [0, 1, 3]  # kernels load
print("torch", torch.__version__, "fbgemm_gpu", getattr(fbgemm_gpu, "__version__", "?"), "torchrec",
      getattr(torchrec, "__version__", "?"), "logical cpus", os.cpu_count(), "physical cores", len(physical_cores()))
EOF
start=$SECONDS
for D in $DEVICES; do
  # 3 tables a rank (at least 10) and 2048 samples a rank: kernels of a few ms, above DMP's fixed cost
  TABLES=$(( D * 3 > 10 ? D * 3 : 10 ))
  python3 benchmarks/dmp_step.py --devices "$D" --tables "$TABLES" --batch-size $(( 2048 * D )) --pin-cpus \
    --steps "$STEPS" --overhead-batch 0 --profile-steps 3 --json "$RESULT/dmp-d$D.json" > "$RESULT/dmp-d$D.log" 2>&1
  echo "D=$D: rc $? after $((SECONDS - start)) s"
  grep -A 7 "^| plan | step model" "$RESULT/dmp-d$D.log"; grep "^Spearman" "$RESULT/dmp-d$D.log"
  grep -A 12 "^DMP's ops" "$RESULT/dmp-d$D.log"
  tail -1 "$RESULT/dmp-d$D.log"
done
exit 0
