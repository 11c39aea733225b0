"""parbench: measure parallel layouts for LLM training and inference, tracked in MLflow."""

__version__ = "0.1.0"
