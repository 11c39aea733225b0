"""A predicted inference latency by part: one forward through every stage (compute, memory, host, communication)
and a request batch's TTFT, TPOT and E2E of those (predict/inference.py makes them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Forward:
    """One forward of the batch through every stage, by part."""

    compute_s: float  # GEMM (and a prefill's attention) FLOPs at their calibrated rates
    memory_s: float  # bytes read over the calibrated bandwidth
    comm_s: dict[str, float]  # strategy -> seconds (nothing hides it: each waits for the last)
    roofline: bool  # compute and memory traffic overlap and the larger counts; else they add
    host_s: float = 0.0  # the host's dispatch of this forward
    host_hidden: bool = False  # the device's work hides the dispatch up to its own length

    @property
    def device_s(self) -> float:
        return max(self.compute_s, self.memory_s) if self.roofline else self.compute_s + self.memory_s

    @property
    def exposed_host_s(self) -> float:
        return max(0.0, self.host_s - self.device_s) if self.host_hidden else self.host_s

    @property
    def seconds(self) -> float:
        return self.device_s + self.exposed_host_s + sum(self.comm_s.values())

    @property
    def bottleneck(self) -> str:
        parts = {"matmul compute": self.compute_s, "memory bandwidth": self.memory_s,
                 "host dispatch": self.exposed_host_s,
                 **{f"{name} communication": t for name, t in self.comm_s.items()}}
        return max(parts, key=parts.get)

    def as_dict(self) -> dict:
        return {"seconds": self.seconds, "compute_s": self.compute_s, "memory_s": self.memory_s,
                "host_s": self.exposed_host_s, "host_dispatch_s": self.host_s, "comm_s": dict(self.comm_s),
                "bottleneck": self.bottleneck}


@dataclass(frozen=True)
class InferencePrediction:
    prefill: Forward
    decode: Forward  # one decode step
    batch_size: int
    output_len: int
    calibration: str

    @property
    def ttft_s(self) -> float:
        return self.prefill.seconds

    @property
    def tpot_s(self) -> float:
        return self.decode.seconds

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + (self.output_len - 1) * self.tpot_s

    @property
    def output_tokens_per_s(self) -> float:
        return self.batch_size * self.output_len / self.e2e_s

    @property
    def bottleneck(self) -> str:
        return f"prefill {self.prefill.bottleneck}, decode {self.decode.bottleneck}"

    def as_dict(self) -> dict:
        return {"predicted_ttft_s": self.ttft_s, "predicted_tpot_s": self.tpot_s, "predicted_e2e_s": self.e2e_s,
                "predicted_output_tokens_per_s": self.output_tokens_per_s, "bottleneck": self.bottleneck,
                "prefill": self.prefill.as_dict(), "decode": self.decode.as_dict(), "calibration": self.calibration}
