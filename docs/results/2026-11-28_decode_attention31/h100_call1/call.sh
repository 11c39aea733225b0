#!/usr/bin/env bash
# issue 31, 2026-11-28 (tenth session), H100: the attention run again with the decode shapes from 256 to 4,096
# positions and up to 2,048 blocks (the rest of the last H100 ledger kept), then GPT-2 XL at batch 32 by kernel
# kind, then decode points at batch 16-32 no fit used, each job's results as a jsonl record.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
HW=h100_sxm; W=outputs/calibrate/h100_sxm_da; mkdir -p $W
python -c "import json, sys; d = json.load(open(sys.argv[1])); d.pop('attention'); json.dump(d, open(sys.argv[2], 'w'), indent=1)" \
  docs/results/2026-11-28_prefill_replay31/h100_call2/measured_h100_sxm.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=$HW tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep -v INFO > $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h100_sxm.json; grep -E "attention|saved" $OUT/calibrate.log
(cd benchmarks && timeout 120 python inference_kernels.py --model gpt2_xl --points 32x512,16x256 --output-len 64 \
   --calibration $OUT/h100_sxm.yaml > $OUT/kernels_gpt2.txt 2>&1); grep "==\|kernels/model" $OUT/kernels_gpt2.txt
I=(hardware=$HW hardware.gpus_per_node=1 parallel=dp workload=inference workload.output_len=64 workload.repeats=3 workload.profile=false)
record() {  # record SWEEP_DIR: each finished job as {"kind": "infer", "overrides", "metrics"} into $OUT/verify.jsonl
  python - "$1" >> $OUT/verify.jsonl <<'PY'
import json, sys, pathlib
for job in sorted(pathlib.Path(sys.argv[1]).glob("*/results.json")):
    overrides = [o for o in json.loads((job.parent / "tracking.json").read_text())["overrides"] if not o.startswith("tracking.")]
    print(json.dumps({"kind": "infer", "overrides": overrides, "metrics": json.loads(job.read_text())["metrics"]}))
PY
}
for spec in "model=gpt2_xl workload.batch_size=16,32 workload.input_len=256" "model=llama2_7b workload.batch_size=32 workload.input_len=128" \
            "model=qwen3_1_7b workload.batch_size=32 workload.input_len=64" "model=llama3_2_1b workload.batch_size=32 workload.input_len=256" \
            "model=llama3_8b workload.batch_size=16 workload.input_len=2048"; do
  d=/tmp/v_$RANDOM; timeout 150 python -m parbench -m "${I[@]}" $spec hydra.sweep.dir=$d tracking.uri=sqlite:////tmp/v.db 2>&1 | grep -E "predicted_|Error|error" >> $OUT/verify.log
  record $d
done
wc -l $OUT/verify.jsonl
