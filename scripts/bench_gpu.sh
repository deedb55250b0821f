#!/usr/bin/env bash
# The CUDA figures of BENCHMARKS.md ("On a GPU"): the same benchmarks on the GPU and, for comparison, on the same
# machine's CPU.  Usage: bash scripts/bench_gpu.sh FRAMES_DIR FUNSD_DIR OUT_DIR
#   FRAMES_DIR: a folder of video frames (the bedroom clip's frames/); FUNSD_DIR: a FUNSD-style set (queries.jsonl)
set -euo pipefail
frames=$1 funsd=$2 out=$3
mkdir -p "$out"
py=${PYTHON:-python3}
foveate() { "$py" -m foveate.cli "$@"; }
"$py" - <<'PY'
import torch, onnxruntime
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("onnxruntime", onnxruntime.__version__, onnxruntime.get_available_providers())
from foveate.core.device import ocr_backend
print("ocr backend", ocr_backend())
PY
for dev in cuda cpu; do
  foveate bench --device $dev --presets fast,default -n 10 --json "$out/bench-$dev.json"
  foveate bench-video "$frames" -n 100 --thresholds 8 --device $dev --json "$out/video-$dev.json"
done
"$py" scripts/bench_ocr.py "$funsd" -n 8 --split all --json "$out/ocr.json"
