#!/usr/bin/env bash
# Put DeepSpeed, and the dependencies a GPU image with torch, numpy, pandas, matplotlib and
# nvidia-ml-py lacks, into the wheelhouse .whl/ (Python 3.12, x86_64 Linux), on a machine with
# internet; then, on the GPU machine (no internet):
#   pip install --no-index --find-links .whl deepspeed
#   bash benchmarks/ds_wheelhouse.sh [DEEPSPEED_SPEC_OR_SDIST]    (default deepspeed==0.19.8)
# DeepSpeed is a source package: the wheel built here is pure Python with no op prebuilt
# (DS_BUILD_OPS=0). parbench's defaults need none (torch AdamW, torch.distributed collectives);
# an op a run does ask for (parallel.zero.torch_adam=false: FusedAdam, DeepSpeedCPUAdam) is
# JIT-compiled there on first use, with nvcc and ninja (ninja's wheel is included).
set -euo pipefail
SPEC=${1:-deepspeed==0.19.8}
WH=${WHEELHOUSE:-.whl}
PIP=${PIP:-python3 -m pip}
mkdir -p "$WH"
DS_BUILD_OPS=0 $PIP wheel --no-deps --wheel-dir "$WH" "$SPEC"
# deepspeed's requirements minus torch and numpy (in the image), with their own dependencies
# (pydantic -> pydantic-core, annotated-types, typing-*), as binary wheels for CPython 3.12.
$PIP download --dest "$WH" --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  einops hjson msgpack ninja psutil py-cpuinfo tqdm "packaging>=20" "pydantic>=2"
ls "$WH" | grep -iE "deepspeed|einops|hjson|msgpack|ninja|psutil|cpuinfo|tqdm|packaging|pydantic"
