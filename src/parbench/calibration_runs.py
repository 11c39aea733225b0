"""The runs `parbench calibrate` makes, by name, at the sizes of a CPU or of a GPU: the
microbenchmarks (matmul, attention, memory bandwidth, element-wise kernels, collectives), the calibration model's training
step eager and compiled under each checkpointing mode and with Qwen3's q/k norms, the native engine at two depths
(and on a CPU at a large batch), and the tiny
models whose steps are the host's dispatch (predict/learn.py and predict/host_fit.py fit them)."""

from __future__ import annotations

from functools import lru_cache

from parbench.config.schema import Config
from parbench.planner import compose_config
from parbench.predict.layout import Layout
from parbench.predict.calibration import HOST_STRATEGIES
from parbench.predict.microbench_fits import PREFILL_GEMM_ROWS
from parbench.prepare import validate
from parbench.workloads.specs.inference import GROUPED_GEMM_SM

CPU_SIZES = {"matmul": "[[128,128,128],[256,256,256],[512,512,512],[1024,1024,1024],[256,64,509]]",
             "attention": "[[8,4,2,64,16],[4,4,2,128,16],[2,4,2,256,16],[1,4,2,512,16],[2,4,2,64,16]]", "membw_end": "64M",
             "elementwise": ["workload.widths=[64,128]", "workload.elements=65536", "workload.modes=[eager]"],
             "collectives_end": "4M", "model": ["model=tiny"], "depth": [], "seq": 64, "batch": 4, "infer_layers": (2, 4),
             "infer": ["workload.input_len=32", "workload.output_len=8"],
             "kv_cache": ["workload.batch_size=8", "workload.input_len=64", "workload.output_len=8"]}
INFER_KV_RUN = "infer_kv_cache"
INFER_TINY_PREFIX = "infer_tiny_"
INFER_GRAPH_PREFIX = "infer_graph_"
GROUPS = 8  # the grouped runs' experts
GROUPED_RUNS = ("grouped_matmul", "grouped_decode_matmul")  # their calls, joined, fit one roofline
CENSUS_PREFIX, CENSUS_LAYERS = "census_", 8
MOE_CENSUS = "moe"  # only on GPUs whose grouped GEMMs read their offsets on the device: else its prefill cannot replay
HOST_LAYERS = (2, 4)
HOST_RUNS = tuple(f"host_{layers}_layers" for layers in HOST_LAYERS)
HOST_STEPS = ["workload.seq_len=64", "workload.batch_size=2", "workload.steps=60", "profile.enabled=false"]
HOST_RUN = [*HOST_STEPS, "parallel=dp"]
# The host runs beyond the tiny Llama at two depths: GPT-2- and Qwen3-shaped blocks at the tiny model's size, the tiny
# MoE (what its layer adds beyond its counted dispatch), and the Llama, GPT-2, Qwen3 and MoE blocks checkpointed in each
# mode (25 to 117 calls a layer: a replayed layer's cost per layer and per call, interpolated between block structures
# rather than extrapolated from two: on one H200 host a line through the Llama's and GPT-2's put Qwen3's and the MoE's
# selective replays 27 and 52 % over and their full ones 75 and 112 %, one through all four every block's within 15 and
# 32 %; docs/results/2026-11-29_selective31.md).
GPT2_SHAPE = ["model=gpt2_xl", "model.hidden=64", "model.heads=4", "model.kv_heads=4", "model.ffn=256", "model.vocab=512",
              "model.max_seq_len=256"]
QWEN3_SHAPE, MOE_SHAPE = ["model=tiny", "model.qk_norm=true"], ["model=tiny_moe"]
CHECKPOINTED_FAMILIES = {"": (["model=tiny"], "llama3_2_1b"), "_gpt2": (GPT2_SHAPE, "gpt2_xl"),
                         "_qwen3": (QWEN3_SHAPE, "qwen3_1_7b"), "_moe": (MOE_SHAPE, "moe_2_5b")}
HOST_SHAPES = {"host_gpt2": (GPT2_SHAPE, []), "host_qwen3": (QWEN3_SHAPE, []), "host_moe": (MOE_SHAPE, []),
               **{f"host{family}_{mode}": (model, [f"workload.activation_checkpointing={mode}"])
                  for family, (model, _) in CHECKPOINTED_FAMILIES.items() for mode in ("full", "selective")}}
EAGER_HOST_RUNS = (*HOST_RUNS, *HOST_SHAPES)
# A decode step's attention kinds the GPU run times: (heads, KV heads, head width), grouped and one query per KV head
# at 64 and 128 wide; each at one sequence and at 128 to 2,048 blocks (sequences x KV heads), and from a short
# prompt's cache to a long one's. A call's time steps up with each wave of blocks the SMs take (H200, 576
# positions: 29.7 µs at 512 blocks, 44.9 at 800, 88.6 at 2,048), so a grid of 512 and 2,048 alone read GPT-2 XL's
# 800 blocks 15 % short (docs/results/2026-11-28_gpt2_batch31.md).
DECODE_ATTENTION_KINDS = ((32, 8, 64), (16, 8, 128), (32, 32, 64), (32, 32, 128))
DECODE_ATTENTION_BLOCKS = (1, 128, 256, 512, 768, 1024, 1536, 2048)  # 1: one sequence
DECODE_ATTENTION_POSITIONS = (128, 256, 512, 1024, 4096)
# The 1B Llama's shapes at half its depth: its GEMMs, attention and vocabulary, in a quarter of the time.
GPU_SIZES = {"matmul": "[[1024,1024,1024],[2048,2048,2048],[4096,4096,4096],[8192,8192,8192],[4096,4096,14336],"
                       "[8192,2048,8192],[8192,8192,2048],[4096,1600,50257],[4096,50257,1600]]",  # the last two: GPT-2's head
             # a decode step's GEMMs (8 rows, B held as nn.Linear's weight, replayed as a graph): weights of
             # 8 KiB (the tiny model's) to 512 MiB, shallow and deep: a call's time by the bytes it reads; and GPT-2's
             # head, whose unaligned vocabulary takes a slower kernel
             "decode_matmul": "[[8,64,64],[8,128,256],[8,256,1024],[8,1024,1024],[8,1024,4096],[8,4096,1024],[8,2048,2048],[8,2048,8192],[8,8192,2048],"
                              "[8,4096,4096],[8,4096,16384],[8,16384,4096],[8,8192,8192],[8,4096,65536],[8,1600,50257]]",
             # a prefill's GEMMs of few rows (the same weights and way, at PREFILL_GEMM_ROWS), which neither the rate
             # curve nor the weights' read at the memory's bandwidth times (H100, Llama 2 7B at 256 rows: 1.1-1.4x
             # the larger of the two)
             "prefill_matmul": "[" + ",".join(f"[{rows},{k},{n}]" for rows in PREFILL_GEMM_ROWS for k, n in (
                 (64, 64), (256, 1024), (1024, 1024), (1024, 4096), (4096, 1024), (2048, 2048), (2048, 8192), (8192, 2048),
                 (4096, 4096), (4096, 16384), (16384, 4096), (8192, 8192), (4096, 65536))) + "]",
             # an MoE's experts (GROUPS of the 1B Llama's MLP matrices, and of half their width) as one grouped GEMM over
             # 512 to 16,384 rows, split as a router splits them, each call timed by its events (replayed in graphs, 40
             # calls of these back to back ran 19 % slower on an H200, as a long compute-bound stretch does); and a
             # decode step's 2 to 128 rows, which read only the matrices given rows (grouped_decode_matmul): the grouped
             # roofline from both
             "grouped_matmul": "[[512,2048,8192],[2048,2048,8192],[4096,2048,8192],[8192,2048,8192],[8192,8192,2048],"
                               "[16384,2048,8192],[4096,1024,4096],[8192,1024,4096],[8192,4096,1024]]",
             "grouped_decode_matmul": "[[2,2048,8192],[8,2048,8192],[32,2048,8192],[128,2048,8192],[8,8192,2048],"
                                      "[2,1024,4096],[16,1024,4096]]",
             # the 1B Llama's heads (64 wide) from 512 to 8,192 tokens and Qwen3's (128 wide) from 1,024 to
             # 4,096, each width fitted alone; 1,024 tokens at two batches: a call's fixed cost apart from the keys'
             "attention": "[[8,32,8,1024,64],[4,32,8,2048,64],[2,32,8,4096,64],[1,32,8,8192,64],[2,32,8,1024,64],"
                          "[8,32,8,512,64],[8,16,8,1024,128],[4,16,8,2048,128],[2,16,8,4096,128],[2,16,8,1024,128]]",
             # a decode step's attention (decode_shapes) of each kind, from a short prompt's cache to a long one's
             "decode_attention": "[" + ",".join(f"[{max(1, blocks // kv)},{heads},{kv},{positions},{width}]"
                                                for heads, kv, width in DECODE_ATTENTION_KINDS
                                                for blocks in DECODE_ATTENTION_BLOCKS
                                                for positions in DECODE_ATTENTION_POSITIONS) + "]",
             # the element-wise kernels eager and compiled, at a head's width (Qwen3's q/k norms) to a 70B's hidden size:
             # a norm's rate by its row's width (H200, GPT-2 XL's prefill: its 1,600-wide LayerNorms at 1.3-2.4 TB/s,
             # the tanh GELU at 3.1, the 1B Llama's SwiGLU at 4.4; docs/results/2026-11-28_gpt2_batch31.md)
             "elementwise": ["workload.widths=[128,512,1024,1536,2048,2560,3072,4096,5120,6144,8192]", "workload.iters=10"],
             "membw_end": "1G", "collectives_end": "256M", "model": ["model=llama3_2_1b"],
             "depth": ["model.layers=8"], "seq": 2048, "batch": 4, "infer_layers": (4, 16), "infer": ["workload.input_len=128", "workload.output_len=32"],
             "infer_tiny_layers": (4, 16), "infer_graph_layers": (4, 16),
             # other block structures replaying their prefills: how many kernels a layer of each runs (GPT-2's, Qwen3's
             # with its q/k norms, Llama 2's without grouped KV heads, an MoE's routing and grouped GEMMs where they
             # replay; predict/kernel_census.py)
             "census": {"gpt2": ["model=gpt2_xl"], "qwen3": ["model=qwen3_1_7b"], "llama_mha": ["model=llama2_7b"],
                        MOE_CENSUS: ["model=moe_2_5b"]},
             # the none runs profiled (their kernels by kind: predict/learn.py's device terms), and again at
             # twice the depth: the device's idle gaps per step apart from those per dispatch or layer
             "kernels": ["profile.enabled=true"], "deep": ["model.layers=16"],
             # A checkpointed layer's replay costs the host more at a real width than at the tiny model's
             # (H100, 2026-11-26: 3.7 ms a fully checkpointed layer of the 1B Llama's, 2.3 ms of the tiny one's)
             **{f"host{family}_{mode}_model": [f"model={model}"] for family, (_, model) in CHECKPOINTED_FAMILIES.items()
                for mode in ("full", "selective")}}


def overridden(args: list[str], extra: list[str]) -> list[str]:
    """args with extra's keys set to extra's values (each key once in the command a run prints)."""
    keys = {o.split("=", 1)[0] for o in extra}
    return [*(a for a in args if a.split("=", 1)[0] not in keys), *extra]


def train_runs(s: dict) -> dict[str, list[str]]:
    """The model's step eager and compiled under each checkpointing mode, with Qwen3's q and k norms, and
    fully checkpointed at half the batch (the peak's part per logit apart from its fixed part); on a GPU
    the none runs profiled, and again at twice the depth (`<mode>_deep`)."""
    base = ["workload=train", *s["model"], *s["depth"], "workload.steps=6", "workload.warmup_steps=2", "profile.enabled=false",
            "parallel=dp"]
    short = [f"workload.seq_len={s['seq']}", f"workload.batch_size={s['batch']}"]
    runs = {}
    for mode in ("eager", "compiled"):
        for ac in ("none", "selective", "full"):
            runs[f"{mode}_{ac}"] = [*base, *short, f"workload.compile={str(mode == 'compiled').lower()}",
                                    f"workload.activation_checkpointing={ac}"]
        runs[f"{mode}_qk_norm"] = [*runs[f"{mode}_none"], "model.qk_norm=true"]
        runs[f"{mode}_full_half"] = [*runs[f"{mode}_full"], f"workload.batch_size={s['batch'] // 2}"]
        if "kernels" in s:
            runs[f"{mode}_none"] = overridden(runs[f"{mode}_none"], s["kernels"])
            runs[f"{mode}_deep"] = overridden(runs[f"{mode}_none"], s["deep"])
    return runs


def infer_run(s: dict, prefill_graph: bool = False) -> list[str]:
    """A native-engine run of the host's share: batch 4 of short prompts, prefills launched op by op
    (or, on a GPU, replayed as the engine does by default)."""
    return ["workload=inference", *s["infer"], "workload.batch_size=4", "workload.repeats=10", "workload.profile=false",
            f"workload.prefill_graph={str(prefill_graph).lower()}"]


def depth_infer_run(s: dict, shape: str) -> list[str]:
    """The calibration model's native engine at its calibration depth and the sizes' `shape`."""
    return ["workload=inference", *s["model"], *s["depth"], *s[shape], "workload.repeats=5", "workload.profile=false"]


def grouped_run(s: dict, name: str) -> list[str]:
    """A grouped run's matmul over GROUPS matrices, its rows split as a router splits them."""
    return ["workload=matmul", f"workload.shapes={s[name]}", f"workload.groups={GROUPS}", "workload.routed_groups=true"]


def grouped_calls(results: dict[str, dict]) -> dict[str, float]:
    """The grouped runs' metrics joined (their calls, each shape in one run); empty unless both ran: the few-row calls
    alone leave the rate free, the compute-bound ones the read."""
    if not all(name in results for name in GROUPED_RUNS):
        return {}
    return {key: value for name in GROUPED_RUNS for key, value in results[name].items()}


def benchmarks(cfg: Config) -> dict[str, list[str]]:
    """The runs, by name: their overrides on top of the user's. One device has no link and no
    overlap to measure: those runs are left out and their figures kept."""
    s = CPU_SIZES if cfg.hardware.device_type == "cpu" else GPU_SIZES
    many = cfg.hardware.nodes * cfg.hardware.gpus_per_node > 1
    device_offsets = (cfg.hardware.compute_capability or 0.0) >= GROUPED_GEMM_SM  # grouped GEMMs graph and replay
    profiled = ["workload=train", *s["model"], *s["depth"], f"workload.seq_len={s['seq']}", "workload.batch_size=2",
                "workload.steps=8", "profile.enabled=true", "profile.plots=false"]
    return {
        "matmul": ["workload=matmul", f"workload.shapes={s['matmul']}", "workload.iters=20"],
        "attention": ["workload=attention", f"workload.shapes={s['attention']}", "workload.iters=20",
                      *([f"workload.decode_shapes={s['decode_attention']}"] if "decode_attention" in s else [])],
        **{name: ["workload=matmul", f"workload.shapes={s[name]}", "workload.b_transposed=true", "workload.graph_calls=40",
                  "workload.iters=20"] for name in ("decode_matmul", "prefill_matmul") if name in s},
        # a decode step's grouped calls replayed in graphs where the offsets stay on the device, as the engine replays
        # them, each of the 8 splits as often (24 calls); the compute-bound ones by their events
        **({"grouped_matmul": [*grouped_run(s, "grouped_matmul"), "workload.iters=20"],
            "grouped_decode_matmul": [*grouped_run(s, "grouped_decode_matmul"), "workload.iters=24",
                                      *(["workload.graph_calls=40"] if device_offsets else [])]}
           if "grouped_matmul" in s else {}),
        "membw": ["workload=membw", f"workload.end={s['membw_end']}"],
        "elementwise": ["workload=elementwise", *s["elementwise"]],
        **({"collectives": ["workload=collectives", "workload.ops=[all_reduce,all_gather,reduce_scatter]",
                            f"workload.end={s['collectives_end']}", "workload.factor=4"],
            "train_dp": [*profiled, "parallel=dp"], "train_fsdp": [*profiled, "parallel=fsdp"]} if many else {}),
        **train_runs(s),
        # The native engine at two depths: the host's share of prefill and of each decode step (the
        # prefill launched op by op: a replayed graph's TTFT would show its kernels, not its dispatch),
        # and on a GPU the tiny model at two depths: a decode step's launch and kernel latencies, and
        # a replayed prefill's (its kernels a few µs: what is left of its TTFT is the launch and the wait).
        **{f"infer_{layers}_layers": [*infer_run(s), *s["model"], f"model.layers={layers}"] for layers in s["infer_layers"]},
        **{f"{INFER_TINY_PREFIX}{layers}_layers": [*infer_run(s, prefill_graph=True), "model=tiny", f"model.layers={layers}"]
           for layers in s.get("infer_tiny_layers", ())},
        # and the calibration model at its two depths replaying its prefills: what a layer of its width adds
        # to a replay beyond its GEMMs and attention (H100: 20-27 µs, against the tiny model's few)
        **{f"{INFER_GRAPH_PREFIX}{layers}_layers": [*infer_run(s, prefill_graph=True), *s["model"], f"model.layers={layers}"]
           for layers in s.get("infer_graph_layers", ())},
        # and other block structures replaying theirs: the kernels a layer of each runs
        **{f"{CENSUS_PREFIX}{name}": [*infer_run(s, prefill_graph=True), *model, f"model.layers={CENSUS_LAYERS}"]
           for name, model in s.get("census", {}).items()
           if name != MOE_CENSUS or device_offsets},
        # and on a CPU at a large batch: how fast a decode step reads its KV cache (a GPU's decode attention
        # is the attention run's decode calls)
        **({INFER_KV_RUN: depth_infer_run(s, "kv_cache")} if "kv_cache" in s else {}),
        # The tiny model at two depths, on the ranks (and so the threads per rank) the other runs use:
        # the host's dispatch per step and per layer.
        **{name: ["workload=train", "model=tiny", f"model.layers={layers}", *HOST_RUN]
           for name, layers in zip(HOST_RUNS, HOST_LAYERS)},
        # and the deeper one compiled: a compiled block's dispatch per layer
        "host_compiled": ["workload=train", "model=tiny", f"model.layers={HOST_LAYERS[-1]}", *HOST_RUN,
                          "workload.compile=true"],
        # blocks of other op mixes, and the Llama's and GPT-2's checkpointed (on a GPU at their real widths):
        # what a replayed layer adds per layer and per call (predict/host_fit.py)
        **{name: ["workload=train", *s.get(f"{name}_model", model), f"model.layers={HOST_LAYERS[-1]}", *HOST_RUN, *extra]
           for name, (model, extra) in HOST_SHAPES.items()},
        # and, where there are ranks to run them, under each of HOST_STRATEGIES: what its wrappers add per dispatch
        **({f"host_{strategy}": ["workload=train", "model=tiny", f"model.layers={HOST_LAYERS[-1]}", *HOST_STEPS,
                                 f"parallel={strategy}"] for strategy in HOST_STRATEGIES} if many else {}),
    }


def is_engine_host_run(name: str) -> bool:
    """A native-engine run whose time is the host's: its small batches, on a GPU the calibration model's replayed
    prefills among them; not the large-batch KV-cache run."""
    return name.startswith("infer_") and name != INFER_KV_RUN


def is_host_run(name: str) -> bool:
    """A run whose time is the host's dispatch (what `parbench calibrate --host` makes): the training steps of the
    tiny models (on a GPU, the checkpointed ones at their real widths) and the engine's (is_engine_host_run), not the
    other block structures' census."""
    return name.startswith("host_") or is_engine_host_run(name)


def benchmark_layout(overrides: list[str], name: str) -> Layout:
    """The layout of one calibration run, as the model sees it."""
    return composed_layout(tuple(overrides), name)


@lru_cache(maxsize=None)
def composed_layout(overrides: tuple[str, ...], name: str) -> Layout:
    """benchmark_layout, composed once per run: a fit asks for each run's layout many times, and a Hydra
    composition takes about half a second."""
    cfg = compose_config([*overrides, *benchmarks(compose_config([*overrides, "workload=train"]))[name]])
    return Layout.of(cfg, validate(cfg, None))
