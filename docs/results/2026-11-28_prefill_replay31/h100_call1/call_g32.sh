#!/usr/bin/env bash
# issue 31, 2026-11-28. On an H200: the H200 profile's decode_matmul, prefill_matmul and attention runs and the
# tiny engine runs with replayed prefills (the rest resumed from its ledger), then the inference cases' table.
# On an H100: the tiny engine runs with replayed prefills (the rest of the H100 ledger kept), the engine's kernels
# at short prompts, then short-prompt points no fit used, each job's results as a jsonl record.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
case "$G" in
  *H200*)
    REC=docs/results/2026-11-27_gpu31/h200_today ACC_FROM=docs/results/2026-11-27_device31/h200/accuracy_h200.jsonl \
      REDO="decode_matmul prefill_matmul attention" CASES=infer BUDGET_S=470 bash benchmarks/gpu_evidence.sh calib31 h200
    exit 0;;
esac
HW=h100_sxm; W=outputs/calibrate/h100_sxm_g; mkdir -p $W
cp docs/results/2026-11-27_prefill_gemm31/h100_call2/measured_h100_sxm.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=$HW tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep -v INFO > $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h100_sxm.json; tail -8 $OUT/calibrate.log
(cd benchmarks && timeout 150 python inference_kernels.py --model llama3_2_1b --points 1x64,8x64 --calibration $OUT/h100_sxm.yaml > $OUT/kernels_1b.txt 2>&1
 timeout 60 python inference_kernels.py --model tiny --points 4x64 --calibration $OUT/h100_sxm.yaml > $OUT/kernels_tiny.txt 2>&1)
grep "==" $OUT/kernels_*.txt
I=(hardware=$HW hardware.gpus_per_node=1 parallel=dp workload=inference workload.output_len=64 workload.repeats=3 workload.profile=false)
record() {  # record SWEEP_DIR: each finished job as {"kind": "infer", "overrides", "metrics"} into $OUT/verify.jsonl
  python - "$1" >> $OUT/verify.jsonl <<'PY'
import json, sys, pathlib
for job in sorted(pathlib.Path(sys.argv[1]).glob("*/results.json")):
    overrides = [o for o in json.loads((job.parent / "tracking.json").read_text())["overrides"] if not o.startswith("tracking.")]
    print(json.dumps({"kind": "infer", "overrides": overrides, "metrics": json.loads(job.read_text())["metrics"]}))
PY
}
for spec in "model=tiny" "model=tiny model.layers=8 workload.batch_size=1" "model=llama3_2_1b workload.batch_size=1,8 workload.input_len=64" \
            "model=llama3_2_1b workload.batch_size=2 workload.input_len=128" "model=qwen3_1_7b workload.batch_size=1,4 workload.input_len=64" \
            "model=gpt2_xl workload.batch_size=1 workload.input_len=64" "model=llama2_7b workload.batch_size=4 workload.input_len=64"; do
  d=/tmp/v_$RANDOM; timeout 120 python -m parbench -m "${I[@]}" $spec hydra.sweep.dir=$d tracking.uri=sqlite:////tmp/v.db 2>&1 | grep -E "predicted_|Error|error" >> $OUT/verify.log
  record $d
done
wc -l $OUT/verify.jsonl
