"""Microbenchmark workloads on CPU/gloo through the real CLI: collectives, matmul, attention, membw, elementwise, tp_linear;
GPU-only workloads refused on CPU; the nvidia-smi topology parser."""

from __future__ import annotations

import pytest
import torch

from parbench.config import ConfigError
from parbench.prepare import validate
from parbench.report.summary import metrics_table
from parbench.workloads.microbench.attention import decode_cache_bytes
from parbench.workloads.microbench.collectives import COLLECTIVES
from parbench.workloads.microbench.common import copies_to_exceed
from parbench.workloads.microbench.topology import parse_topo_matrix
from conftest import compose

ALL_OPS = "[all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv]"
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
              "broadcast": lambda n: 1.0, "send_recv": lambda n: 1.0}


def artifacts(cli, run_id: str) -> set[str]:
    import mlflow

    return {a.path for a in mlflow.MlflowClient(cli.uri).list_artifacts(run_id)}


def check_collectives_run(cli, run, ranks: int, sizes: list[int]) -> None:
    assert run.status == "FINISHED" and run["metrics.wrong_elements"] == 0
    for op, factor in BUS_FACTOR.items():
        for size in sizes:
            algbw, busbw = run[f"metrics.algbw_gbps/{op}/{size}"], run[f"metrics.busbw_gbps/{op}/{size}"]
            assert algbw > 0 and busbw == pytest.approx(algbw * factor(ranks), rel=1e-9), (op, size)
            assert run[f"metrics.wrong_elements/{op}/{size}"] == 0
        assert run[f"metrics.busbw_gbps/{op}"] == run[f"metrics.busbw_gbps/{op}/{sizes[-1]}"]
    names = {c.split("/")[-1] for c in run.index if c.startswith("metrics.time_us/all_reduce/")}
    assert names == {str(s) for s in sizes}
    import mlflow

    history = mlflow.MlflowClient(cli.uri).get_metric_history(run.run_id, "steps/size_bytes/all_to_all")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == list(enumerate(sizes))
    assert "collectives_bandwidth.png" in artifacts(cli, run.run_id)


def test_collectives_sweep_2_ranks_verified(cli):
    cli.run("workload=collectives", f"workload.ops={ALL_OPS}", "workload.begin=1K", "workload.end=16K",
            "workload.factor=4", "workload.iters=3", "workload.warmup_iters=1")
    check_collectives_run(cli, cli.runs().iloc[0], 2, [1024, 4096, 16384])


@pytest.mark.slow
def test_collectives_hydra_sweep_over_2_and_4_ranks_verified(cli):
    cli.run("workload=collectives", "hardware.gpus_per_node=2,4", f"workload.ops={ALL_OPS}", "workload.begin=4K",
            "workload.end=32K", "workload.factor=8", "workload.iters=3", "workload.warmup_iters=1", multirun=True)
    runs = cli.runs()
    children = runs[runs["tags.mlflow.parentRunId"].notna()]
    assert sorted(children["params.hardware.gpus_per_node"]) == ["2", "4"]
    for _, run in children.iterrows():
        check_collectives_run(cli, run, int(run["params.hardware.gpus_per_node"]), [4096, 32768])
    assert "busbw_gbps_avg" in (cli.root / "sweep" / "summary.csv").read_text()


def test_wrong_collective_results_fail_the_run(cli):
    proc = cli.run("workload=collectives", "workload.ops=[all_gather]", "workload.begin=1K", "workload.end=1K",
                   "workload.iters=2", "debug.corrupt_results=true", "debug.fault_rank=1", check=False)
    assert proc.returncode == 1
    run = cli.runs().iloc[0]
    assert run.status == "FAILED" and run["metrics.wrong_elements"] == 1
    assert "VerificationError: collective results verified wrong" in run["tags.failure_reason"]
    assert "all_gather at 1KiB: 1" in run["tags.failure_reason"]


def test_matmul_cpu_reports_positive_tflops(cli):
    cli.run("workload=matmul", "workload.shapes=[[64,64,64],[128,256,64]]", "workload.rotate_bytes=1M",
            "workload.iters=5", "workload.warmup_iters=1")
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED" and run["params.workload.dtype"] == "fp32"
    for shape in ("64x64x64", "128x256x64"):
        tflops = run[f"metrics.matmul_tflops/{shape}"]
        assert tflops > 0
        assert run[f"metrics.matmul_peak_fraction/{shape}"] == pytest.approx(tflops / 0.096)
    assert run["metrics.matmul_tflops"] == run["metrics.matmul_tflops/128x256x64"]  # the most FLOPs
    assert "matmul_tflops.png" in artifacts(cli, run.run_id)
    assert "plan_params_total" not in run.index  # no model behind a microbenchmark


def test_matmul_with_b_held_as_a_linear_weight_times_each_shape(cli):
    """b_transposed: B is N x K and the call F.linear(A, B), the same FLOPs; replaying graphs is a GPU's."""
    cli.run("workload=matmul", "workload.shapes=[[8,256,512]]", "workload.b_transposed=true",
            "workload.rotate_bytes=1M", "workload.iters=5", "workload.warmup_iters=1")
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED"
    seconds = run["metrics.matmul_time_us/8x256x512"] * 1e-6
    assert run["metrics.matmul_tflops/8x256x512"] == pytest.approx(2 * 8 * 256 * 512 / seconds / 1e12)
    proc = cli.run("workload=matmul", "workload.graph_calls=4", check=False)
    assert proc.returncode == 2 and "workload.graph_calls > 0 replays CUDA graphs" in proc.stderr
    assert "Set workload.graph_calls=0" in proc.stderr


def test_grouped_matmul_multiplies_each_group_by_its_own_matrix():
    """groups: M rows split evenly (or, routed, as a router splits them) over the groups' K x N matrices (held N x K
    where b_transposed), as an MoE's experts run; each group's rows come out as a plain matmul gives them."""
    import torch

    from parbench.workloads.microbench.matmul import grouped_multiply, groups_read, row_splits

    a, b = torch.randn(12, 8, dtype=torch.bfloat16), torch.randn(3, 5, 8, dtype=torch.bfloat16)
    out = grouped_multiply(row_splits(12, 3, False), True, torch.device("cpu"))(a, b)
    torch.testing.assert_close(out, torch.cat([a[4 * g:4 * g + 4] @ b[g].T for g in range(3)]))
    # routed: each call the next seeded split a router would give (uneven), each group's rows through its own matrix
    a = torch.randn(30, 8, dtype=torch.bfloat16)
    multiply = grouped_multiply(row_splits(30, 3, True), True, torch.device("cpu"))
    splits = []
    for seed in (0, 1):
        counts = torch.randint(3, (30,), generator=torch.Generator().manual_seed(seed)).bincount(minlength=3).tolist()
        starts = [sum(counts[:g]) for g in range(3)]
        torch.testing.assert_close(multiply(a, b), torch.cat([a[s:s + c] @ b[g].T
                                                              for g, (s, c) in enumerate(zip(starts, counts))]))
        splits.append(counts)
    assert splits[0] != splits[1] and [10, 10, 10] not in splits
    # of few rows, some groups get none: a call reads only the matrices of those given rows (an MoE's reached experts)
    assert groups_read(row_splits(30, 3, True)) == 3 and groups_read(row_splits(12, 3, False)) == 3
    assert groups_read([torch.tensor([2, 0, 1]), torch.tensor([0, 0, 3])]) == 1.5  # 2 groups given rows, then 1
    assert 3 <= groups_read(row_splits(8, 8, True)) < 8  # 8 rows at random reach about 5 of 8 groups


def test_grouped_matmul_runs_and_refuses_what_grouped_mm_cannot(cli):
    cli.run("workload=matmul", "workload.shapes=[[64,32,48],[2,32,48]]", "workload.groups=4", "workload.dtype=bf16",
            "workload.routed_groups=true", "workload.rotate_bytes=1M", "workload.iters=3", "workload.warmup_iters=1")
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED" and run["params.workload.groups"] == "4" and run["params.workload.routed_groups"] == "True"
    seconds = run["metrics.matmul_time_us/64x32x48"] * 1e-6
    assert run["metrics.matmul_tflops/64x32x48"] == pytest.approx(2 * 64 * 32 * 48 / seconds / 1e12)
    # the matrices a call reads: every group's of 64 rows, one or two of 2 rows (a decode step's experts)
    assert run["metrics.matmul_groups_read/64x32x48"] == 4 and 1 <= run["metrics.matmul_groups_read/2x32x48"] <= 2
    for overrides, message in ((["workload.groups=3", "workload.dtype=bf16"], "divides every shape's M"),
                               (["workload.groups=4"], "F.grouped_mm, which takes bf16"),
                               (["workload.groups=4", "workload.dtype=bf16", "workload.shapes=[[64,30,48]]"],
                                "K and N in multiples of 8")):
        proc = cli.run("workload=matmul", "workload.shapes=[[64,32,48]]", *overrides, "dry_run=true", check=False)
        assert proc.returncode == 2 and message in proc.stderr


def test_attention_cpu_forward_and_backward_tflops(cli):
    """SDPA forward and backward per shape; the FLOPs the model counts (4 B H S D x S/2 forward
    causal, twice that backward) over the measured times."""
    cli.run("workload=attention", "workload.shapes=[[2,4,2,64,16],[1,4,4,128,8]]", "workload.iters=3",
            "workload.warmup_iters=1", "workload.decode_shapes=[[3,4,2,96,16]]", "workload.rotate_bytes=1M")
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED" and run["params.workload.dtype"] == "fp32"
    for shape, (b, h, _, s, d) in (("2x4x2x64x16", (2, 4, 2, 64, 16)), ("1x4x4x128x8", (1, 4, 4, 128, 8))):
        forward = 4 * b * h * s * d * s / 2
        both, fwd, bwd = (run[f"metrics.attention_{k}tflops/{shape}"] for k in ("", "fwd_", "bwd_"))
        assert min(both, fwd, bwd) > 0
        seconds = run[f"metrics.attention_time_us/{shape}"] * 1e-6
        assert both == pytest.approx(3 * forward / seconds / 1e12)
        assert seconds == pytest.approx(forward / fwd / 1e12 + 2 * forward / bwd / 1e12)
    assert run["metrics.attention_tflops"] == run["metrics.attention_tflops/2x4x2x64x16"]  # the most FLOPs
    # a decode step's attention: one query per sequence over a 96-position cache of 3 x 2 KV heads
    seconds = run["metrics.decode_attention_time_us/3x4x2x96x16"] * 1e-6
    assert seconds > 0 and run["metrics.decode_attention_gbps/3x4x2x96x16"] == pytest.approx(
        2 * 3 * 2 * 96 * 16 * 4 / seconds / 1e9)
    assert run["metrics.decode_attention_ns_per_position/3x4x2x96x16"] == pytest.approx(seconds / 96 * 1e9)


def test_attention_shapes_that_cannot_work_are_refused(cli):
    proc = cli.run("workload=attention", "workload.shapes=[[2,6,4,64,16]]", check=False)
    assert proc.returncode != 0 and "heads a multiple of kv_heads" in proc.stderr + proc.stdout
    proc = cli.run("workload=attention", "workload.decode_shapes=[[2,4,2,64]]", check=False)
    assert proc.returncode != 0 and "workload.decode_shapes=" in proc.stderr + proc.stdout
    proc = cli.run("workload=attention", "workload.rotate_bytes=lots", check=False)
    assert proc.returncode != 0 and "rotate_bytes" in proc.stderr + proc.stdout


def test_inputs_rotate_through_enough_copies_to_leave_l2():
    assert copies_to_exceed(512 << 20, 96 << 20) == 6  # 6 x 96 MiB: more than 512 MiB
    assert copies_to_exceed(512 << 20, 1 << 30) == 1
    assert decode_cache_bytes([3, 4, 2, 96, 16], torch.bfloat16) == 2 * 3 * 2 * 96 * 16 * 2


def test_tp_linear_column_and_row_equal_unsharded(cli):
    cli.run("workload=tp_linear", "workload.tokens=48", "workload.in_features=96", "workload.out_features=64",
            "workload.iters=3", "workload.warmup_iters=1")
    run = cli.runs().iloc[0]
    assert run.status == "FINISHED"
    assert run["metrics.max_rel_error/column"] == 0  # all_gather of exact slices of the same product
    assert run["metrics.max_rel_error/row"] < 1e-6  # sums of partial products in another order
    y_bytes = 48 * 64 * 4
    assert run["metrics.comm_bytes/column"] == y_bytes / 2 and run["metrics.comm_bytes/row"] == y_bytes
    assert run["metrics.comm_bytes/none"] == 0
    for mode in ("none", "column", "row"):
        assert run[f"metrics.compute_ms/{mode}"] > 0 and run[f"metrics.total_ms/{mode}"] > 0
    assert "tp_linear.md" in artifacts(cli, run.run_id)


def test_membw_cpu_copy_bandwidth(cli):
    cli.run("workload=membw", "workload.begin=64K", "workload.end=1M", "workload.factor=16", "workload.iters=3")
    run = cli.runs().iloc[0]
    assert run["metrics.membw_gbps/65536"] > 0 and run["metrics.membw_gbps"] == run["metrics.membw_gbps/1048576"]
    assert "membw.png" in artifacts(cli, run.run_id)


def test_elementwise_times_each_kernel_at_each_width_and_mode(cli):
    """Every kernel eager and compiled (the models' own RoPE and norms), at rows of two widths: its minimum bytes
    over its time, the same bytes at every width (the rows are elements // width)."""
    cli.run("workload=elementwise", "workload.elements=16384", "workload.widths=[64,256]", "workload.iters=3",
            "workload.warmup_iters=1", "workload.modes=[eager,compiled]", "workload.kernels=[rms_norm,rope,swiglu]")
    run = cli.runs().iloc[0]
    for mode in ("eager", "compiled"):
        for kernel, moved in (("rms_norm", 2), ("rope", 2), ("swiglu", 3)):
            for width in (64, 256):
                key = f"{mode}/{kernel}/{width}"
                nbytes = moved * 16384 * 4  # fp32 on a CPU
                assert run[f"metrics.elementwise_gbps/{key}"] == pytest.approx(
                    nbytes / run[f"metrics.elementwise_time_us/{key}"] / 1e3, rel=1e-6), key
    assert "elementwise.md" in artifacts(cli, run.run_id)


def test_elementwise_refuses_widths_its_heads_do_not_divide(cli):
    proc = cli.run("workload=elementwise", "workload.widths=[100]", check=False)
    assert proc.returncode == 2 and "multiples of 64" in proc.stderr


@pytest.mark.parametrize("workload", ["p2p", "topology"])
def test_gpu_only_workloads_are_refused_on_cpu(cli, workload):
    proc = cli.run(f"workload={workload}", check=False)
    assert proc.returncode == 2 and "needs GPUs (hardware.device_type=cuda)" in proc.stderr


def test_parse_topo_matrix_keeps_the_gpu_block():
    text = ("\x1b[4m\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
            "GPU0\t X \tNV18\tSYS\tPIX\t0-55\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tSYS\tSYS\t0-55\t0\t\tN/A\n"
            "GPU2\tSYS\tSYS\t X \tSYS\t56-111\t1\t\tN/A\n"
            "NIC0\tPIX\tSYS\tSYS\t X \t\t\t\t\n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a "
            "bonded set of # NVLinks\n")
    assert parse_topo_matrix(text) == [["X", "NV18", "SYS"], ["NV18", "X", "SYS"], ["SYS", "SYS", "X"]]
    assert parse_topo_matrix("No devices were found\n") == []


def test_summary_patterns_match_one_name_segment():
    table = metrics_table({"busbw_gbps/all_reduce": 1.0, "busbw_gbps/all_reduce/1024": 2.0, "wrong_elements": 0.0},
                          ("busbw_gbps/*", "wrong_elements"))
    assert "busbw_gbps/all_reduce " in table and "/1024" not in table and "wrong_elements" in table


def test_every_collective_has_a_bus_factor_test():
    assert set(COLLECTIVES) == set(BUS_FACTOR)


def fake_nvml(bus_ids: list[str], remotes: list[list[str]], pcie_level: int):
    """Just the NVML calls from_nvml makes: GPU i has one active NVLink per entry of remotes[i]."""
    from types import SimpleNamespace

    class NVMLError(Exception):
        pass

    def remote(handle, link):
        if link >= len(remotes[handle]):
            raise NVMLError("invalid link")
        return SimpleNamespace(busId=remotes[handle][link].encode())

    return SimpleNamespace(
        NVMLError=NVMLError, NVML_NVLINK_MAX_LINKS=18, NVML_FEATURE_ENABLED=1,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: len(bus_ids),
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=bus_ids[h]),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=141 * 2**30),
        nvmlDeviceGetNvLinkState=lambda h, link: 1 if link < len(remotes[h]) else 0,
        nvmlDeviceGetNvLinkRemotePciInfo=remote,
        nvmlDeviceGetTopologyCommonAncestor=lambda a, b: pcie_level,
        nvmlSystemGetDriverVersion=lambda: "570.86", nvmlSystemGetCudaDriverVersion=lambda: 12080)


def test_nvml_links_count_direct_and_nvswitch_nvlinks():
    from parbench.workloads.microbench.topology import from_nvml, topology_tags

    gpus = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:9A:00.0"]
    # GPU0 and GPU1 share 4 direct links (remote ids in NVML's 4-digit-domain spelling); GPU2 has none.
    direct = from_nvml(fake_nvml(gpus, [["0000:2a:00.0"] * 4, ["0000:18:00.0"] * 4, []], pcie_level=50))
    assert direct.links == [["X", "NV4", "SYS"], ["NV4", "X", "SYS"], ["SYS", "SYS", "X"]]
    assert direct.cuda_driver_version == "12.8" and direct.gpus[2]["name"] == "NVIDIA H200"
    # Every GPU has 18 links to NVSwitches (remote ids that are no GPU): all pairs NV18.
    switched = from_nvml(fake_nvml(gpus, [["00000000:05:00.0"] * 18] * 3, pcie_level=50))
    assert {link for row in switched.links for link in row} == {"X", "NV18"}
    tags = topology_tags(switched)
    assert tags["gpu_count"] == "3" and tags["gpu_names"] == "NVIDIA H200 x3"
    assert tags["gpu_links"] == "0-1:NV18 0-2:NV18 1-2:NV18" and tags["driver_version"] == "570.86"


def test_nvidia_smi_fallback_reads_gpus_versions_and_links(monkeypatch):
    from parbench.workloads.microbench import topology

    outputs = {
        "--query-gpu=index,name,pci.bus_id,memory.total,driver_version":
            "0, NVIDIA H200, 00000000:18:00.0, 143771, 570.86.15\n1, NVIDIA H200, 00000000:2A:00.0, 143771, 570.86.15\n",
        "topo": "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-55\nGPU1\tNV18\t X \t0-55\n",
        "": "| NVIDIA-SMI 570.86.15    Driver Version: 570.86.15    CUDA Version: 12.8     |\n",
    }
    monkeypatch.setattr(topology, "_run", lambda *cmd: outputs[cmd[1] if len(cmd) > 1 else ""])
    found = topology.from_nvidia_smi()
    assert [g["memory_mib"] for g in found.gpus] == [143771, 143771] and found.driver_version == "570.86.15"
    assert found.cuda_driver_version == "12.8" and found.links == [["X", "NV18"], ["NV18", "X"]]


def test_a_negative_graph_calls_is_refused():
    with pytest.raises(ConfigError, match=r"workload.graph_calls=-1: give 0 \(each call timed alone\)"):
        validate(compose("workload=matmul", "workload.graph_calls=-1"), None)
