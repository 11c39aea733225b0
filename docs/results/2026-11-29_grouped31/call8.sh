#!/usr/bin/env bash
# issue 31, 2026-11-29 (eighteenth session), call 8 (one H200): the MoE's grouped GEMMs with its router's uneven split
# of the rows beside an even one (uneven_groups.py): why they run slower in the model than in the calibration.
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *H200*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 200 python docs/results/2026-11-29_grouped31/uneven_groups.py 2>&1 | grep -v -i warn | tee $OUT/uneven_groups.txt
