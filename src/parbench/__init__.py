"""parbench: measure parallel layouts for LLM training and inference, tracked in MLflow."""

from parbench.bytecode import enable_bytecode_cache

__version__ = "0.1.0"

# First thing, before torch, Hydra or MLflow are imported: see bytecode.py.
enable_bytecode_cache()
