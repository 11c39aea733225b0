"""Predict before you run: memory per device and step time of a training layout from the model's
shapes, the strategies' communication and a calibration of the machine (docs/plan.md). Loads no
torch, so the orchestrator checks the fit and `parbench plan` ranks thousands of layouts in seconds."""

from __future__ import annotations

from parbench.config.dims import ParallelDims
from parbench.config.schema import Config
from parbench.predict.calibration import Calibration, calibration_for
from parbench.predict.layout import Layout
from parbench.predict.step import Prediction, predict_step


def predictable(cfg: Config) -> bool:
    """The model predicts training runs."""
    return getattr(cfg.workload, "name", None) == "train"


def predict(cfg: Config, dims: ParallelDims, cal: Calibration | None = None) -> Prediction:
    """The predicted step of this config (its own calibration unless one is given)."""
    layout = Layout.of(cfg, dims)
    return predict_step(layout, cal or calibration_for(cfg.hardware, layout.dtype, cfg.calibration))


def prediction_errors(predicted: dict, measured: dict) -> dict[str, float]:
    """predicted_* beside the measured figures and their errors in % of the measured value
    (positive: the model predicted more)."""
    out = {k: predicted[k] for k in ("predicted_step_time_s", "predicted_mem_peak_gb", "predicted_tokens_per_s")
           if k in predicted}
    pairs = (("step_time", "predicted_step_time_s", "step_time_s"),
             ("mem_peak", "predicted_mem_peak_gb", "mem_peak_allocated_gb"))
    for name, p, m in pairs:
        if predicted.get(p) is not None and measured.get(m):
            out[f"predicted_{name}_error_pct"] = 100 * (predicted[p] - measured[m]) / measured[m]
    return out
