"""vLLM engine: vLLM's offline LLM with tensor_parallel_size / pipeline_parallel_size from the
parallel config, prefix caching off, ignore_eos and fixed lengths, token-id prompts.

parbench launches one process; vLLM starts its own workers for tp*pp > 1. TTFT and decode time
come from vLLM's per-request stats (RequestOutput.metrics, filled when disable_log_stats=False);
the offline API gives no per-token times, so ITL is not reported (TPOT is)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from parbench.config.schema import Config, ModelConfig
from parbench.metrics.memory import peak_memory_gb
from parbench.models.build import build_initialized, build_model, count_params
from parbench.distenv import DistEnv
from parbench.dtypes import torch_dtype
from parbench.workloads.inference.latency import (BatchTiming, RequestTiming, decode_bytes_per_step,
                                                   latency_metrics, mbu_metrics)
from parbench.workloads.inference.native import TOKENS_FILE, synthetic_prompts
from parbench.workloads.reporting import StepReporter
from parbench.workloads.specs.inference import missing_vllm_message

HF_MODEL_DIR = "hf_model"
# In-process engine core (starts in seconds), loopback networking, no hub access for a local model.
VLLM_ENV_DEFAULTS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1"}
# parbench Llama parameter names -> Hugging Face LlamaForCausalLM names.
HF_NAMES = {"tok_embeddings": "model.embed_tokens", "norm": "model.norm", "output": "lm_head",
            "attention.wq": "self_attn.q_proj", "attention.wk": "self_attn.k_proj",
            "attention.wv": "self_attn.v_proj", "attention.wo": "self_attn.o_proj",
            "feed_forward.w1": "mlp.gate_proj", "feed_forward.w3": "mlp.up_proj",
            "feed_forward.w2": "mlp.down_proj", "attention_norm": "input_layernorm",
            "ffn_norm": "post_attention_layernorm"}


def import_vllm():
    try:
        import vllm
    except ImportError as e:
        raise RuntimeError(missing_vllm_message(f" ({e})")) from None
    return vllm


def hf_name(name: str) -> str:
    """`layers.3.attention.wq.weight` -> `model.layers.3.self_attn.q_proj.weight`."""
    module, _, leaf = name.rpartition(".")
    if module.startswith("layers."):
        _, index, rest = module.split(".", 2)
        return f"model.layers.{index}.{HF_NAMES[rest]}.{leaf}"
    return f"{HF_NAMES[module]}.{leaf}"


def export_hf_llama(m: ModelConfig, seed: int, dtype: torch.dtype, path: Path) -> Path:
    """Save parbench's seeded Llama (the native engine's weights) as a Hugging Face checkpoint."""
    from transformers import LlamaConfig, LlamaForCausalLM

    state = {hf_name(k): v for k, v in build_initialized(m, seed, "cpu").state_dict().items()}
    config = LlamaConfig(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn,
                         num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
                         head_dim=m.head_dim or m.hidden // m.heads, max_position_embeddings=m.max_seq_len,
                         rms_norm_eps=m.norm_eps, rope_theta=m.rope_theta, tie_word_embeddings=m.tie_embeddings)
    with torch.device("meta"):
        hf = LlamaForCausalLM(config)
    hf.load_state_dict(state, strict=not m.tie_embeddings, assign=True)
    hf.to(dtype).save_pretrained(path)
    return path


def request_timing(output) -> RequestTiming:
    """TTFT, E2E and token count of one RequestOutput from vLLM's request stats."""
    stats = output.metrics
    if stats is None or not stats.first_token_latency:
        raise RuntimeError("vLLM returned no request stats (RequestOutput.metrics): this vLLM version does "
                           "not fill them offline; parbench needs disable_log_stats=False to work")
    decode = stats.last_token_ts - stats.first_token_ts
    return RequestTiming(stats.first_token_latency, stats.first_token_latency + decode,
                         len(output.outputs[0].token_ids))


def build_llm(cfg: Config, model: str):
    vllm = import_vllm()
    w, on_cpu = cfg.workload, cfg.hardware.device_type == "cpu"
    memory = ({"kv_cache_memory_bytes": int(w.vllm.kv_cache_gb * 1e9)} if on_cpu
              else {"gpu_memory_utilization": w.vllm.gpu_memory_utilization})
    return vllm.LLM(model=model, tensor_parallel_size=cfg.parallel.tp, pipeline_parallel_size=cfg.parallel.pp,
                    dtype={"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[w.dtype],
                    enable_prefix_caching=False, disable_log_stats=False, skip_tokenizer_init=True,
                    max_model_len=w.input_len + w.output_len, max_num_seqs=max(w.batch_size, 1),
                    enforce_eager=w.vllm.enforce_eager, seed=cfg.seed, **memory)


def run_vllm(cfg: Config, env: DistEnv, reporter: StepReporter) -> dict:
    w = cfg.workload
    for key, value in VLLM_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    vllm = import_vllm()
    job_dir = reporter.path.parent
    model = w.vllm.model or str(export_hf_llama(cfg.model, cfg.seed, torch_dtype(w.dtype), job_dir / HF_MODEL_DIR))
    llm = build_llm(cfg, model)
    params = vllm.SamplingParams(max_tokens=w.output_len, min_tokens=w.output_len, ignore_eos=True,
                                 temperature=0.0, detokenize=False)
    batches, first_tokens = [], None
    for i in range(w.warmup + w.repeats):
        prompts = [{"prompt_token_ids": row} for row in synthetic_prompts(cfg, i, torch.device("cpu")).tolist()]
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        batch = BatchTiming([request_timing(o) for o in outputs], time.perf_counter() - start)
        phase = "warmup" if i < w.warmup else "measure"
        if phase == "measure":
            batches.append(batch)
            first_tokens = first_tokens or [list(o.outputs[0].token_ids) for o in outputs]
        r = batch.requests[0]
        reporter.step(i, w.warmup + w.repeats, phase, ttft_s=r.ttft, e2e_s=r.e2e,
                      **({"tpot_s": r.tpot} if r.tpot is not None else {}))
    (job_dir / TOKENS_FILE).write_text(json.dumps(first_tokens))
    metrics = {**latency_metrics(batches, w.output_len), **peak_memory_gb(env.device)}
    counts = count_params(build_model(cfg.model, "meta"), cfg.model)
    weight_bytes, kv_bytes = decode_bytes_per_step(cfg.model, counts, w, torch_dtype(w.dtype))
    mbu, tags = mbu_metrics(weight_bytes, kv_bytes, metrics.get("tpot_s"), cfg.parallel.tp * cfg.parallel.pp,
                            cfg.hardware.hbm_bandwidth_gbps)
    tags.update(vllm_version=vllm.__version__, itl_s="n/a (vLLM's offline API reports no per-token times)")
    return {"metrics": {**metrics, **mbu}, "tags": tags, "artifacts": [TOKENS_FILE]}
