"""Launching workers: the torchrun command, multi-node rendezvous, supervision with a timeout."""
