"""Parallel strategies, one module each (dp, fsdp, tp/sp, cp, pp, ep, activation checkpointing,
compile, DeepSpeed zero). specs.py is the table the orchestrator reads without torch (when each
strategy applies, its checks, its order); model.py applies them on the ranks; mesh.py builds the mesh."""
