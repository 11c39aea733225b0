#!/usr/bin/env bash
# issue 31: the H100 profile's prefill_matmul run (the rest resumed from its ledger), then inference points
# at prompt sizes no record holds (64 to 2,048 rows), each job's results as a jsonl record
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=outputs/calibrate/h100_sxm_pf; mkdir -p $W; cp docs/results/2026-11-27_attention31/h100_attention/measured_h100_sxm.json $W/measured.json
timeout 240 python -m parbench calibrate hardware=h100_sxm tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep -v INFO > $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h100_sxm.json; tail -25 $OUT/calibrate.log
I=(hardware.gpus_per_node=1 parallel=dp workload=inference workload.output_len=64 workload.repeats=3 workload.profile=false)
record() {  # record SWEEP_DIR: each finished job as {"kind": "infer", "overrides", "metrics"} into $OUT/verify.jsonl
  python - "$1" >> $OUT/verify.jsonl <<'PY'
import json, sys, pathlib
for job in sorted(pathlib.Path(sys.argv[1]).glob("*/results.json")):
    overrides = [o for o in json.loads((job.parent / "tracking.json").read_text())["overrides"] if not o.startswith("tracking.")]
    print(json.dumps({"kind": "infer", "overrides": [*overrides, "hardware=h100_sxm"], "metrics": json.loads(job.read_text())["metrics"]}))
PY
}
for spec in "model=llama3_2_1b workload.batch_size=1,8 workload.input_len=64" "model=llama2_7b workload.batch_size=1,4 workload.input_len=128" \
            "model=qwen3_8b workload.batch_size=1 workload.input_len=256" "model=llama3_8b workload.batch_size=2 workload.input_len=1024"; do
  d=/tmp/v_$RANDOM; python -m parbench -m "${I[@]}" $spec hydra.sweep.dir=$d tracking.uri=sqlite:////tmp/v.db 2>&1 | grep -E "predicted_|Error|error" >> $OUT/verify.log
  record $d
done
wc -l $OUT/verify.jsonl
