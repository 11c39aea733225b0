"""Measurement definitions: FLOPs and MFU, step-time statistics, memory."""
