# Sourced first by a device script (bash docs/results/<page>/callN.sh on the GPU machine, .whl carried):
# `source docs/results/device_env.sh H100` records the GPU in $OUT/gpu.txt and stops (exit 3) unless its name holds
# the given word, installs the wheelhouse, sets the environment every GPU process here needs, and adds the host's CPU
# and dispatch speed to gpu.txt (host_probe.py).
G=$(nvidia-smi --query-gpu=name,serial --format=csv,noheader); echo "call: $G" | tee $OUT/gpu.txt
case "$G" in *"$1"*) ;; *) exit 3;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python docs/results/host_probe.py | tee -a $OUT/gpu.txt
