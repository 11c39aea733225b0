"""Offline: what if a checkpointed step's extra host time (the replay figures) fell partly in the forward, as
selective31's host_replay.py measured (the 1B Llama's selective step: 92 ms of forward dispatch and 95 of backward at
4 x 1024; the MoE's 58 / 42 % selective, 31 / 69 % full)? Re-predicts every one-GPU training record (shipped
profiles) with that share of host_s_per_replayed_* moved to the forward phase. Usage: python phase_split.py JSONL..."""
import json, statistics, sys
from dataclasses import replace
import parbench.predict.host as H
import parbench.predict.step as S
from parbench.planner import compose_config
from parbench.prepare import validate
from parbench.predict import predict
from parbench.predict.profiles import calibration_for

orig = H.host_seconds
def make(fsel, ffull):
    def hs(layout, cal):
        h = orig(layout, cal)
        mode = layout.activation_checkpointing
        if layout.compiled or mode == "none": return h
        d = H.eager_dispatches(layout)
        if d is None: return h
        ck = cal.host_s_per_replayed_call.get(mode, 0.0) * d.replayed_calls + cal.host_s_per_replayed_layer.get(mode, 0.0) * d.replayed_layers
        f = fsel if mode == "selective" else ffull
        return replace(h, forward_s=h.forward_s + f * ck, backward_s=h.backward_s - f * ck)
    return hs
files = sys.argv[1:]
cases = []
for f in files:
    for l in open(f):
        d = json.loads(l)
        if 'workload=train' in d['overrides'] and d['metrics'] and 'hardware.gpus_per_node=1' in d['overrides']:
            cases.append((f.split('/')[2], d))
for fsel, ffull in ((0, 0), (0.5, 0.3), (0.5, 0), (0.3, 0.3)):
    S.host_seconds = make(fsel, ffull)
    errs = []; ck = []
    for src, d in cases:
        cfg = compose_config(d['overrides']); dims = validate(cfg, None)
        cal = calibration_for(cfg.hardware, cfg.workload.dtype, None)
        p = predict(cfg, dims, cal)
        e = 100 * (p.step_time_s - d['metrics']['step_time_s']) / d['metrics']['step_time_s']
        errs.append(abs(e))
        if 'workload.compile=false' in d['overrides'] and 'workload.activation_checkpointing=none' not in d['overrides']:
            ck.append((src, ' '.join(o.split('=')[1] for o in d['overrides'] if o.startswith(('model=','workload.seq_len','workload.batch_size','workload.activation'))), round(e, 1)))
    print(f"sel {fsel} full {ffull}: all {len(errs)} median {statistics.median(errs):.1f} worst {max(errs):.1f}; eager ckpt median {statistics.median(abs(c[2]) for c in ck):.1f} worst {max(abs(c[2]) for c in ck):.1f}")
    if fsel == 0.5 and ffull == 0.3 or fsel == 0:
        for c in ck: print("   ", c)
