"""Per-term breakdown of the predicted step of each recorded accuracy case (ms):
    python docs/results/2026-11-25_predictor_host_cpu/breakdown.py [PROFILE]"""
import json, sys
from parbench.planner import compose_config
from parbench.prepare import validate
from parbench.predict import predict
from parbench.predict.calibration import load_calibration
from parbench.predict.layout import Layout
from parbench.predict.costs import host_seconds, elementwise_bytes
cal = load_calibration(sys.argv[1] if len(sys.argv) > 1 else "conf/calibrations/h100_sxm.yaml")
for line in open("docs/results/2026-11-24_predictor_accuracy/accuracy.jsonl"):
    r = json.loads(line)
    if r["kind"] != "train": continue
    cfg = compose_config(r["overrides"]); dims = validate(cfg, None); lay = Layout.of(cfg, dims)
    p = predict(cfg, dims, cal); c = p.compute
    print(f"{cfg.model.name} seq{cfg.workload.seq_len} b{cfg.workload.batch_size} comp={cfg.workload.compile} ac={cfg.workload.activation_checkpointing}: measured {r['metrics']['step_time_s']*1e3:.1f} pred {p.step_time_s*1e3:.1f} | mm {c.matmul_s*1e3:.1f} attn {c.attention_s*1e3:.1f} elem {c.elementwise_s*1e3:.1f} ({elementwise_bytes(lay)/1e9:.1f} GB min) opt {c.optimizer_s*1e3:.1f} recomp {c.recompute_s*1e3:.1f} host fwd/bwd/step {host_seconds(lay, cal).forward_s*1e3:.1f}/{host_seconds(lay, cal).backward_s*1e3:.1f}/{host_seconds(lay, cal).step_s*1e3:.1f} D_fwd {c.forward_s*1e3:.1f} D_bwd {(c.total_s-c.forward_s-c.optimizer_s)*1e3:.1f} exposed {p.host_s*1e3:.1f}")
