#!/usr/bin/env bash
# the tests that need a GPU, then what a user sees: the default inference run and Llama 2 7B at 16 x 1024
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
timeout 300 python -m pytest -q tests/metrics/test_timing.py tests/workloads/test_inference.py tests/workloads/test_microbench.py -k "cuda or graph or gpu or attention" 2>&1 | tail -8 > $OUT/gpu_tests.txt
python -m parbench workload=inference hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/u1 2>&1 | grep -v "INFO\|\] step\|rank . +" | tail -30 > $OUT/user_default_inference.txt
python -m parbench workload=inference model=llama2_7b workload.batch_size=16 workload.input_len=1024 hardware.gpus_per_node=1 tracking.uri=sqlite:////tmp/u.db hydra.run.dir=/tmp/u2 2>&1 | grep -v "INFO\|\] step\|rank . +" | tail -30 > $OUT/user_llama2_7b.txt
