#!/bin/sh
# The run half of `make check-latest` and `make check-floors` (issue 66), after the fast tier: with
# the given venv's Python, one short training of each of the five synthetic architectures (claim 5's
# token mixers) and one `emergence run` on a tiny suite trained here (one model, 24 steps, four
# checkpoints). It checks that the code runs on that venv's versions, not any number. Everything is
# written under a temporary folder, removed at the end; the first failing command stops it.
#   usage: sh tools/check_resolution.sh PYTHON
set -eu
PY=${1:?usage: sh tools/check_resolution.sh PYTHON}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/emergence-check-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export EMERGENCE_LENS_CACHE="$WORK/cache"

for arch in transformer mlp-mixer mamba2 gated-deltanet rwkv; do
  echo "== emergence synth train --arch $arch (4 steps)"
  "$PY" -m emergence_lens synth train --arch "$arch" --S 8 --s 2 --n-heads 2 --d-head 8 --steps 4 \
    --eval-every 2 --eval-tokens 512 --tokens-per-step 256 --device cpu --no-progress --out "$WORK/synth-$arch"
done

cat > "$WORK/tiny.yaml" <<'EOF'
sizes:
  - {n_layers: 1, d_model: 16, n_heads: 2, steps: 24}
seeds: [0]
checkpoint_every: 8
n_ctx: 32
batch_size: 4
EOF
echo "== emergence train-suite (one tiny run) and emergence run on it"
"$PY" -m emergence_lens train-suite "$WORK/tiny.yaml" --jobs 1 > "$WORK/folders.txt"
RUN=$(cut -f1 "$WORK/folders.txt" | tail -n 1)
"$PY" -m emergence_lens run "$RUN" --out "$WORK/run" --n-prompts 8
test -s "$WORK/run/report.html"
echo "check_resolution: 5 architectures trained and emergence run finished with $("$PY" -c 'import sys; print(sys.executable)')"
