#!/usr/bin/env bash
# The GPU check of issue 24 (run 2026-12-04 on an NVIDIA H200: steps 1-2 took about 1 minute, step 3
# about 2.5, most of it training the quick suite on the CPU; the numbers are in docs/results.md, "On a GPU"):
#   1. ranking times, fast engine vs TransformerLens, at the pythia-70m and pythia-410m shapes (--device cuda);
#   2. checkpoint switch time, new boot vs weight swap (+ read-ahead), at the 70m shape;
#   3. the main job on the quick suite (embedded-quick) with --device cuda and with --device cpu,
#      and a check that every number of the two agrees to 1e-4 (benchmarks/compare_reports.py).
#
#   benchmarks/device_check.sh                # on the CUDA machine, from the repository root
#   benchmarks/device_check.sh --cpu --tiny   # the CPU half at tiny scale (what CI runs: tests/benchmarks/test_device_check.py)
#
# --cpu: run everything on the CPU (step 3 compares two CPU runs: the plumbing, not the device).
# --tiny: tiny shapes and a 2-step suite instead of the 70m/410m shapes; step 3 on SUITE (a folder) if set.
# Environment: PYTHON (default .venv/bin/python, else python), OUT (default a temporary folder),
# SUITE (main-job source; default embedded-quick, trained on first use, ~2.5 min on one core).
# Exit status: non-zero when a step fails or CUDA and CPU results differ by more than 1e-4.
set -euo pipefail
DEVICE=cuda
TINY=0
for arg in "$@"; do
  case "$arg" in
    --cpu) DEVICE=cpu ;;
    --tiny) TINY=1 ;;
    *) echo "error: device_check.sh: unknown option $arg (valid: --cpu, --tiny)" >&2; exit 2 ;;
  esac
done
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
OUT=${OUT:-$(mktemp -d)}
SUITE=${SUITE:-embedded-quick}
export PYTHONPATH=${PYTHONPATH:-$PWD}
if [ "$DEVICE" = cuda ]; then
  "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'error: device_check.sh: no CUDA device (use --cpu for the CPU half)')"
  "$PYTHON" -c "import torch; print('device:', torch.cuda.get_device_name(0), 'torch', torch.__version__)"
fi
start=$(date +%s)
echo "== 1. ranking: fast engine vs TransformerLens ($DEVICE)"
if [ "$TINY" = 1 ]; then
  "$PYTHON" -c "
import sys; sys.path.insert(0, 'benchmarks')
import bench_patching as b
b.DEVICE = '$DEVICE'; b.SHAPES['tiny'] = (2, 2, 32); b.VOCAB = 256
r = b.bench_shape('tiny', 4, 9, None, 1, ['pattern'])[0]
print(f\"tiny pattern: transformer_lens {r['t_ref']:.3f} s, fast {r['t_fast']:.3f} s, max |fast - reference| {r['max_abs_diff']:.1e}\")
assert r['max_abs_diff'] < 1e-5, r
"
else
  "$PYTHON" benchmarks/bench_patching.py --shapes 70m,410m --kinds pattern --device "$DEVICE" --ref-heads-160m 0
fi
echo "== 2. checkpoint switch: new boot vs weight swap ($DEVICE)"
if [ "$TINY" = 1 ]; then
  "$PYTHON" benchmarks/bench_checkpoint_switch.py --shapes tiny --steps 3 --switches 6 --d-vocab 256 --device "$DEVICE"
else
  "$PYTHON" benchmarks/bench_checkpoint_switch.py --shapes 70m --steps 6 --switches 50 --device "$DEVICE"
fi
echo "== 3. main job on $SUITE: $DEVICE vs cpu"
EXTRA=()
[ "$TINY" = 1 ] && EXTRA=(--n-prompts 8 --length 6)
"$PYTHON" -m emergence_lens.cli run "$SUITE" --out "$OUT/main-$DEVICE" --device "$DEVICE" --scan "${EXTRA[@]}"
"$PYTHON" -m emergence_lens.cli run "$SUITE" --out "$OUT/main-cpu-reference" --device cpu --scan "${EXTRA[@]}"
"$PYTHON" benchmarks/compare_reports.py "$OUT/main-$DEVICE" "$OUT/main-cpu-reference" --atol 1e-4
echo "device_check_seconds: $(( $(date +%s) - start ))"
echo "device_check: $DEVICE and cpu agree to 1e-4 (outputs in $OUT)"
