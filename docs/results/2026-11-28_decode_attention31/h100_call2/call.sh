#!/usr/bin/env bash
# issue 31, 2026-11-28 (tenth session), H100, call 2: the decode_matmul run again with GPT-2's unaligned head among
# its shapes (the rest of call 1's ledger kept), then GPT-2 XL decode points no fit used, each job as a jsonl record,
# then what a new user sees on the default inference run with the new profile in conf/calibrations.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
HW=h100_sxm; W=outputs/calibrate/h100_sxm_da2; mkdir -p $W
python -c "import json, sys; d = json.load(open(sys.argv[1])); d.pop('decode_matmul'); json.dump(d, open(sys.argv[2], 'w'), indent=1)" \
  docs/results/2026-11-28_decode_attention31/h100_call1/measured_h100_sxm.json $W/measured.json
timeout 200 python -m parbench calibrate hardware=$HW tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=1 \
  --work $W --out $OUT/h100_sxm.yaml 2>&1 | grep -v INFO > $OUT/calibrate.log
cp $W/measured.json $OUT/measured_h100_sxm.json; grep -E "decode GEMMs|saved" $OUT/calibrate.log | cut -c1-400
I=(hardware=$HW hardware.gpus_per_node=1 parallel=dp workload=inference workload.output_len=64 workload.repeats=3 workload.profile=false)
record() {  # record SWEEP_DIR: each finished job as {"kind": "infer", "overrides", "metrics"} into $OUT/verify.jsonl
  python - "$1" >> $OUT/verify.jsonl <<'PY'
import json, sys, pathlib
for job in sorted(pathlib.Path(sys.argv[1]).glob("*/results.json")):
    overrides = [o for o in json.loads((job.parent / "tracking.json").read_text())["overrides"] if not o.startswith("tracking.")]
    print(json.dumps({"kind": "infer", "overrides": overrides, "metrics": json.loads(job.read_text())["metrics"]}))
PY
}
for spec in "model=gpt2_xl workload.batch_size=1,8 workload.input_len=1024" "model=gpt2_xl workload.batch_size=24 workload.input_len=128"; do
  d=/tmp/v_$RANDOM; timeout 150 python -m parbench -m "${I[@]}" $spec hydra.sweep.dir=$d tracking.uri=sqlite:////tmp/v.db 2>&1 | grep -E "predicted_|Error|error" >> $OUT/verify.log
  record $d
done
wc -l $OUT/verify.jsonl
[ -e $OUT/h100_sxm.yaml ] && cp $OUT/h100_sxm.yaml conf/calibrations/h100_sxm.yaml
timeout 90 python -m parbench workload=inference hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db > $OUT/newuser_inference.txt 2>&1
tail -30 $OUT/newuser_inference.txt
