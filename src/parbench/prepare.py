"""From a composed config to what would run: resolve -> validate (each part checks itself) -> plan
(mesh, model size, the workload's figures, the performance model's prediction and fit check). The
orchestrator does this for its job, the sweep check for every point before the first launches,
`dry_run=true` prints it. No torch or mlflow here: a config that cannot work is refused in about a
second."""

from __future__ import annotations

import json

from omegaconf import DictConfig

from parbench.config import ConfigError, resolve
from parbench.config.dims import ParallelDims
from parbench.config.hardware import GpuInfo
from parbench.config.hf_model import source_tags
from parbench.config.schema import Config
from parbench.config.validate import validate_config
from parbench.fmt import format_metric, format_number
from parbench.models import MODEL_FAMILIES, describe
from parbench.parallel.specs import STRATEGIES
from parbench.predict import is_training, predict, predictable
from parbench.predict.profiles import calibration_for
from parbench.predict.fit import check_fit
from parbench.predict.inference import predict_inference
from parbench.models.shapes import param_counts
from parbench.workloads.registry import WORKLOADS, job_layout, plan_workload, typed_config


def validate(cfg: Config, gpus: list[GpuInfo] | None) -> ParallelDims:
    """The config groups config/ owns, the model family, the layout, then every strategy's and the
    workload's own checks; `gpus` are the local GPUs when launching here (None: planning only)."""
    validate_config(cfg, gpus)
    if cfg.model.family not in MODEL_FAMILIES:
        raise ConfigError(f"model.family={cfg.model.family!r} is unknown: use one of "
                          f"{', '.join(MODEL_FAMILIES.names())}")
    dims = ParallelDims.from_config(*job_layout(cfg))
    for name in STRATEGIES.names():
        STRATEGIES.get(name).validate(cfg, dims)
    WORKLOADS.get(cfg.workload.name).validate(cfg, dims)
    return dims


def make_plan(cfg: Config, dims: ParallelDims) -> dict:
    """What would run: layout, model size and the workload's own figures (dry_run prints it)."""
    spec = WORKLOADS.get(cfg.workload.name)
    model = {}
    if spec.uses_model:
        counts = param_counts(cfg.model)  # from the shapes: equal to a built model's (tests/predict)
        model = {"model": cfg.model.name, "model_shape": describe(cfg.model), **source_tags(cfg.model),
                 "params_total": counts.total, "params_active": counts.active, "params_embedding": counts.embedding}
    return {
        "hardware": cfg.hardware.name, "device_type": cfg.hardware.device_type, "backend": cfg.hardware.backend,
        "nodes": cfg.hardware.nodes, "gpus_per_node": cfg.hardware.gpus_per_node,
        "world_size": dims.world_size, "mesh": dims.as_dict(), **model,
        "workload": cfg.workload.name, **plan_workload(spec, cfg, dims), **prediction_plan(cfg, dims),
    }


def prediction_plan(cfg: Config, dims: ParallelDims) -> dict:
    """The performance model's figures: a training config's step and memory and its fit check
    (each suggestion tried through the checks and the model before it is named; a point that does
    not fit is refused unless dry_run or launch.check_fit=false); an inference config's TTFT and TPOT."""
    if not predictable(cfg):
        return {}
    try:
        cal = calibration_for(cfg.hardware, cfg.workload.dtype, cfg.calibration)
    except ConfigError as e:
        if cfg.calibration:  # the profile asked for is missing or unreadable
            raise
        return {"prediction_unavailable": str(e)}
    if not is_training(cfg):
        return {"prediction": predict_inference(cfg, dims, cal).as_dict()}
    p = predict(cfg, dims, cal)
    fit = check_fit(cfg, p, lambda c: validate(c, None), cal)
    if fit.ok is False and cfg.launch.check_fit and not cfg.dry_run:
        raise ConfigError(f"{fit.message} (launch.check_fit=false launches it anyway)")
    return {"memory_estimate_per_device_gb": p.memory.as_dict(), "prediction": p.as_dict(), "fit": fit.message}


def prediction_lines(plan: dict) -> list[str]:
    """The prediction in words: step (and the fit check) for training, TTFT and TPOT for inference."""
    p = plan.get("prediction")
    if not p:
        return []
    if "predicted_ttft_s" in p:
        figures = (f"TTFT {format_metric('ttft_s', p['predicted_ttft_s'])}, "
                   f"TPOT {format_metric('tpot_s', p['predicted_tpot_s'])}, "
                   f"E2E {format_metric('e2e_s', p['predicted_e2e_s'])}, "
                   f"{format_number(p['predicted_output_tokens_per_s'])} output tok/s")
    else:
        figures = (f"step {format_metric('step_time_s', p['predicted_step_time_s'])}, "
                   f"{format_metric('tokens_per_s', p['predicted_tokens_per_s'])}")
    lines = [f"[parbench] predicted ({p['calibration']}): {figures}, bottleneck: {p['bottleneck']}"]
    return lines + ([f"[parbench] {plan['fit']}"] if "fit" in plan else [])


def print_plan(plan: dict) -> None:
    """dry_run: the prediction in words, then the whole plan as JSON."""
    for line in prediction_lines(plan):
        print(line, flush=True)
    print(json.dumps(plan, indent=2))


def prepare(node: DictConfig, gpus: list[GpuInfo], validate_gpus: bool = True) -> tuple[Config, ParallelDims, dict]:
    """resolve -> validate -> plan: the typed config, its mesh and the plan, or ConfigError.
    validate_gpus=False: planning for other machines (dry_run, a SLURM sweep checked before submission)."""
    cfg = resolve.resolve(typed_config(node), gpus)
    dims = validate(cfg, gpus if validate_gpus and not cfg.dry_run else None)
    return cfg, dims, make_plan(cfg, dims)
