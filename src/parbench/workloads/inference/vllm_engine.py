"""vLLM engine: placeholder replaced below."""
