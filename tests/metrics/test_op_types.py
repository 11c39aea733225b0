"""Op-type shares on a GPU profile, from events shaped as torch.profiler's (no GPU needed)."""

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from parbench.metrics.op_types import op_time_by_category, scope_name, shares_pct
from parbench.metrics.timing import STEP_RANGE


@dataclass(eq=False)
class Event:
    name: str
    start: float
    device_time: float = 0.0
    cpu_parent: "Event | None" = None
    device_type: DeviceType = DeviceType.CPU
    thread: int = 1

    @property
    def time_range(self):
        return SimpleNamespace(start=self.start)

    @property
    def self_device_time_total(self) -> float:
        return self.device_time


def gpu_profile(*events: Event):
    return SimpleNamespace(events=lambda: list(events))


def test_kernel_time_counts_once_under_its_launching_ops_scope():
    """On a GPU, torch.profiler lists a kernel's time twice over, as its launching op's self device
    time and as a device-side event (kernels, and the scopes mirrored as GPU user annotations, the
    step range among them); only the first may count, else about half the time lands in 'other'."""
    mlp = Event(scope_name("mlp"), 0.0)
    attention = Event(scope_name("attention"), 10.0)
    gemv = Event("aten::mm", 1.0, device_time=300.0, cpu_parent=mlp)
    sdpa = Event("aten::_scaled_dot_product_flash_attention", 11.0, device_time=100.0, cpu_parent=attention)
    all_reduce = Event("c10d::allreduce_", 12.0, device_time=50.0, cpu_parent=attention)
    kernels = [Event("sm90_xmma_gemm_bf16", 2.0, 300.0, device_type=DeviceType.CUDA, thread=7),
               Event("flash_fwd_kernel", 12.0, 100.0, device_type=DeviceType.CUDA, thread=7),
               Event("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 13.0, 50.0, device_type=DeviceType.CUDA, thread=7),
               Event(STEP_RANGE, 2.0, 480.0, device_type=DeviceType.CUDA),
               Event(scope_name("attention"), 12.0, 170.0, device_type=DeviceType.CUDA)]
    shares = shares_pct(op_time_by_category(gpu_profile(mlp, attention, gemv, sdpa, all_reduce, *kernels),
                                            on_device=True))
    assert shares == pytest.approx({"mlp": 66.67, "attention": 22.22, "all_reduce": 11.11}, abs=0.01)


def test_time_in_the_step_outside_every_op_is_named_not_other():
    """A pipeline stage waits for the next one inside its step range but outside every op (gloo's
    send blocks between ops): that self time of the step range is `outside_ops`, not `other`."""
    step = Event(STEP_RANGE, 0.0, device_time=900.0)
    attention = Event(scope_name("attention"), 1.0, cpu_parent=step)
    mm = Event("aten::mm", 2.0, device_time=100.0, cpu_parent=attention)
    stray = Event("aten::empty", 3.0, device_time=10.0, cpu_parent=step)
    shares = shares_pct(op_time_by_category(gpu_profile(step, attention, mm, stray), on_device=True))
    assert shares == pytest.approx({"outside_ops": 89.11, "attention": 9.90, "other": 0.99}, abs=0.01)
