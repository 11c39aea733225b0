"""Parallel degrees and the device mesh they describe (one mesh for every strategy)."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config import ConfigError
from parbench.config.schema import ParallelConfig

# Outermost to innermost: tp innermost so its frequent collectives stay on the fastest links.
MESH_DIMS = ("pp", "dp", "fsdp", "cp", "tp")


@dataclass(frozen=True)
class ParallelDims:
    pp: int
    dp: int
    fsdp: int
    cp: int
    tp: int
    ep: int

    @classmethod
    def from_config(cls, p: ParallelConfig, world_size: int) -> "ParallelDims":
        """Infer a -1 degree from the world size and check that the product matches it."""
        degrees = {"pp": p.pp, "dp": p.dp, "fsdp": p.fsdp, "cp": p.cp, "tp": p.tp}
        for name, value in {**degrees, "ep": p.ep}.items():
            if value == 0 or value < -1:
                raise ConfigError(f"parallel.{name}={value}: degrees must be positive (or -1 for dp/fsdp to infer)")
        inferred = [n for n, v in degrees.items() if v == -1]
        if len(inferred) > 1:
            raise ConfigError(f"parallel.{' and parallel.'.join(inferred)} are both -1: only one degree can be "
                              "inferred; set the others explicitly")
        if [n for n in inferred if n not in ("dp", "fsdp")]:
            raise ConfigError(f"parallel.{inferred[0]}=-1: only dp or fsdp can be inferred")
        known = 1
        for name, value in degrees.items():
            known *= value if value != -1 else 1
        if inferred:
            if world_size % known:
                raise ConfigError(
                    f"world size {world_size} is not divisible by the fixed degrees {_describe(degrees)} "
                    f"(product {known}): change them or hardware.gpus_per_node / hardware.nodes")
            degrees[inferred[0]] = world_size // known
        elif known != world_size:
            raise ConfigError(
                f"parallel degrees {_describe(degrees)} multiply to {known} but the world size is {world_size} "
                f"(hardware.nodes x hardware.gpus_per_node): make them match, or set parallel.dp=-1 to infer dp")
        dims = cls(**degrees, ep=p.ep)
        if (dims.dp * dims.fsdp * dims.cp) % dims.ep:
            raise ConfigError(f"parallel.ep={p.ep} must divide dp*fsdp*cp={dims.dp * dims.fsdp * dims.cp}: "
                              "expert parallel reuses the data/context-parallel ranks")
        return dims

    @property
    def world_size(self) -> int:
        return self.pp * self.dp * self.fsdp * self.cp * self.tp

    @property
    def data_parallel(self) -> int:
        """How many distinct batches one step sees."""
        return self.dp * self.fsdp

    def mesh_shape(self) -> tuple[int, ...]:
        return tuple(getattr(self, d) for d in MESH_DIMS)

    def as_dict(self) -> dict[str, int]:
        return {d: getattr(self, d) for d in (*MESH_DIMS, "ep")}


def _describe(degrees: dict[str, int]) -> str:
    return " x ".join(f"{n}={v}" for n, v in degrees.items() if v != 1) or "all 1"
