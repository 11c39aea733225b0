"""Measurement definitions: FLOPs and MFU, step-time statistics, memory."""

# A profiled run's compute a step, in all and by kind (`kernel_time_s/gemm`, ...): metrics/trace.py
# measures it, predict/learn.py fits the model's device terms to it.
KERNEL_TIME = "kernel_time_s"
