# Sourced by the GPU scripts (bench_adapted.sh, broad_then_bench.sh) after they set RESULT: installs the
# carried wheels (.whl: OR-Tools for ilp; .whl-dmp, where carried: FBGEMM's CPU wheel and TorchRec, for
# TorchRec's planner, see dmp_cores.sh) unless NO_WHEELS=1 (a dry run where they are installed), points
# PYTHONPATH at them and this checkout's src, and prints the GPU, torch and CPU count the run had.
WHEELS=$(ls .whl/*.whl .whl-dmp/*.whl 2>/dev/null)
if [ -n "$WHEELS" ] && [ -z "${NO_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    $WHEELS || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1
mkdir -p "$RESULT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no cuda', 'cpus', __import__('os').cpu_count())"
