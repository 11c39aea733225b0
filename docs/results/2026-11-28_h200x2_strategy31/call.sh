#!/usr/bin/env bash
# issue 31, 2026-11-28: the H200 profile's runs that need two GPUs (link, overlap, the strategy host runs host_tp,
# host_sp, host_fsdp, host_cp), `parbench calibrate` resumed from the one-GPU ledger of 2026-11-28_h200_inference31;
# each finished run is in $OUT/measured_h200.json, so a call cut short still returns what it measured.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
[ "$(echo "$G" | grep -c H200)" -ge 2 ] || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
WORK=outputs/calibrate/h200x2_strategy31; mkdir -p $WORK
cp ${LEDGER:-docs/results/2026-11-28_h200_inference31/measured_h200.json} $WORK/measured.json
( while sleep 20; do cp $WORK/measured.json $OUT/measured_h200.json; done ) &
timeout ${LIMIT:-420} python -m parbench calibrate hardware=h200 tracking.uri=sqlite:////tmp/mlflow.db hardware.gpus_per_node=2 \
  --work $WORK --out $OUT/h200.yaml 2>&1 | grep -v INFO | tee $OUT/calibrate.log
cp $WORK/measured.json $OUT/measured_h200.json
