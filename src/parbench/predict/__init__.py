"""Predict before you run: memory per device and step time of a training layout, and TTFT and TPOT
of the native inference engine, from the model's shapes, the strategies' communication and a
calibration of the machine (docs/plan.md). Loads no torch, so the orchestrator checks the fit and
`parbench plan` ranks thousands of layouts in seconds."""

from __future__ import annotations

from parbench.config.dims import ParallelDims
from parbench.config.schema import Config
from parbench.predict.calibration import Calibration
from parbench.predict.profiles import calibration_for
from parbench.predict.layout import Layout
from parbench.predict.step import Prediction, predict_step

# predicted figure -> the measured metric its error is taken against
MEASURED = {"predicted_step_time_s": "step_time_s", "predicted_mem_peak_gb": "mem_peak_allocated_gb",
            "predicted_tokens_per_s": None, "predicted_ttft_s": "ttft_s_p50", "predicted_tpot_s": "tpot_s_p50",
            "predicted_e2e_s": None, "predicted_output_tokens_per_s": None}


def predictable(cfg: Config) -> bool:
    """The model predicts training runs and the native inference engine's."""
    return is_training(cfg) or (cfg.workload.name == "inference" and cfg.workload.engine == "native")


def is_training(cfg: Config) -> bool:
    return getattr(cfg.workload, "name", None) == "train"


def predict(cfg: Config, dims: ParallelDims, cal: Calibration | None = None) -> Prediction:
    """The predicted step of this config (its own calibration unless one is given)."""
    layout = Layout.of(cfg, dims)
    return predict_step(layout, cal or calibration_for(cfg.hardware, layout.dtype, cfg.calibration))


def prediction_errors(predicted: dict, measured: dict) -> dict[str, float]:
    """predicted_* beside the measured figures and their errors in % of the measured value
    (positive: the model predicted more): predicted_step_time_error_pct, predicted_ttft_error_pct..."""
    out = {k: predicted[k] for k in MEASURED if predicted.get(k) is not None}
    for p, m in MEASURED.items():
        if m and predicted.get(p) is not None and measured.get(m):
            name = p.removeprefix("predicted_").removesuffix("_s").removesuffix("_gb")
            out[f"predicted_{name}_error_pct"] = 100 * (predicted[p] - measured[m]) / measured[m]
    return out
