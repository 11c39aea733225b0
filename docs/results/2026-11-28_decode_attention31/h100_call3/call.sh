#!/usr/bin/env bash
# issue 31, 2026-11-28 (tenth session), H100, call 3: the tiny model's TTFT by depth (1-16 layers) at the default's
# 4 x 64 and the calibration's 4 x 128, replayed prefills, in one sweep: is it a line in the layers, and where is
# the default run (2 layers, 4 x 64) on it?
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 400 python -m parbench -m hardware=h100_sxm hardware.gpus_per_node=1 workload=inference model=tiny \
  model.layers=1,2,4,8,16 workload.input_len=64,128 workload.batch_size=4 workload.output_len=32 workload.repeats=10 \
  workload.profile=false hydra.sweep.dir=/tmp/tiny tracking.uri=sqlite:////tmp/t.db > $OUT/sweep.log 2>&1
python - > $OUT/tiny_depths.txt <<'PY'
import json, pathlib
for job in sorted(pathlib.Path("/tmp/tiny").glob("*/results.json")):
    o = json.loads((job.parent / "tracking.json").read_text())["overrides"]; m = json.loads(job.read_text())["metrics"]
    print(" ".join(x for x in o if "layers" in x or "input_len" in x), *(f"{k} {m.get(k, float('nan')) * 1e6:.1f}"
          for k in ("ttft_s", "ttft_s_ci_low", "ttft_s_ci_high", "prefill_dispatch_s", "predicted_ttft_s", "tpot_s", "predicted_tpot_s")))
PY
cat $OUT/tiny_depths.txt
