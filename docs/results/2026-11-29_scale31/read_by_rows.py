# Offline (no GPU): the grouped roofline with its read rate a power of the rows each group takes, fitted to the
# calibration ledger and checked on the validation calls (docs/results/2026-11-29_scale31.md, "Still open").
# Run from the repo root: python docs/results/2026-11-29_scale31/read_by_rows.py
import json, ast, numpy as np
from scipy.optimize import least_squares
def load(metrics, groups=8):
    out=[]
    for k,us in metrics.items():
        if not k.startswith('matmul_time_us/'): continue
        s=k.split('/')[1]; m,kk,n=map(int,s.split('x'))
        g=metrics.get(f'matmul_groups_read/{s}', groups*(1-(1-1/groups)**m))
        out.append((s, 2*m*kk*n, g*kk*n*2, m/g, us))
    return out
cal=load(json.load(open('docs/results/2026-11-29_scale31/measured_h200.json'))['grouped_matmul']['metrics'])
val=[]
for l in open('docs/results/2026-11-29_scale31/call3/validation_matmul.jsonl'): val+=load(json.loads(l))
groups=None
for line in open('docs/results/2026-11-29_grouped31/call11/matmul.txt'):
    if line.startswith('=='): groups=int(line.split('workload.groups=')[1].split()[0]); continue
    val+=load({f'matmul_time_us/{k}':v for k,v in ast.literal_eval(line).items()}, groups)
def model(x, f, b, r):
    rate, read, t0, p, gam = np.exp(x[0]), np.exp(x[1]), x[2], x[3], x[4]
    eff = np.minimum(1.0, (r/64.0))**gam
    return t0 + ((f/rate)**p + (b/(read*eff))**p)**(1/p)
def fit(pts, gam_free):
    f,b,r,us = (np.array([p[i] for p in pts],float) for i in (1,2,3,4))
    lo=[-np.inf,-np.inf,0,1,0]; hi=[np.inf,np.inf,min(us),16, 1 if gam_free else 1e-9]
    x=least_squares(lambda x: np.log(model(x,f,b,r)/us), [np.log(max(f/us)),np.log(max(b/us)),0,2,0], bounds=(lo,hi)).x
    return x
for gf in (False, True):
    x=fit(cal, gf)
    print('gamma free' if gf else 'gamma 0', f"rate {np.exp(x[0])/1e6:.0f} TF/s read {np.exp(x[1])/1e3:.0f} GB/s t0 {x[2]:.1f} p {x[3]:.2f} gamma {x[4]:.3f}")
    for tag, pts in (('cal',cal),('val',val)):
        errs=[100*(model(x,f,b,r)/us-1) for _,f,b,r,us in pts]
        print(f"  {tag}: {min(errs):+.1f}..{max(errs):+.1f} median|e| {np.median(np.abs(errs)):.1f}")
    for s,f,b,r,us in val:
        if s in ('512x4096x14336','4096x2048x1408','2x4096x14336','8x4096x14336','2x2048x2816'): print('   ',s, f"{100*(model(x,f,b,r)/us-1):+.1f}")
print("--- knee free")
def model6(x, f, b, r):
    rate, read, t0, p, gam, knee = np.exp(x[0]), np.exp(x[1]), x[2], x[3], x[4], np.exp(x[5])
    eff = np.minimum(1.0, (r/knee))**gam
    return t0 + ((f/rate)**p + (b/(read*eff))**p)**(1/p)
f,b,r,us = (np.array([p[i] for p in cal],float) for i in (1,2,3,4))
best=None
for k0 in (8,16,32,64,128,256):
    x=least_squares(lambda x: np.log(model6(x,f,b,r)/us), [np.log(max(f/us)),np.log(max(b/us)),0,2,0.1,np.log(k0)], bounds=([-np.inf,-np.inf,0,1,0,0],[np.inf,np.inf,min(us),16,1,np.log(4096)])).x
    c=np.sum(np.log(model6(x,f,b,r)/us)**2)
    print(k0, f"knee {np.exp(x[5]):.1f} gamma {x[4]:.3f} read {np.exp(x[1])/1e3:.0f} p {x[3]:.2f} t0 {x[2]:.1f} cost {c:.4f}")
    if best is None or c<best[0]: best=(c,x)
x=best[1]
for tag, pts in (('cal',cal),('val',val)):
    errs=[100*(model6(x,f_,b_,r_)/us_-1) for _,f_,b_,r_,us_ in pts]
    print(f"  {tag}: {min(errs):+.1f}..{max(errs):+.1f} median|e| {np.median(np.abs(errs)):.1f}")
print("--- pure power, no knee")
def model7(x, f, b, r):
    rate, read, t0, p, gam = np.exp(x[0]), np.exp(x[1]), x[2], x[3], x[4]
    return t0 + ((f/rate)**p + (b/(read*r**gam))**p)**(1/p)
x=least_squares(lambda x: np.log(model7(x,f,b,r)/us), [np.log(max(f/us)),np.log(max(b/us)),0,2,0.1], bounds=([-np.inf,-np.inf,0,1,0],[np.inf,np.inf,min(us),16,1])).x
print(f"gamma {x[4]:.3f} read {np.exp(x[1])/1e3:.0f} p {x[3]:.2f} t0 {x[2]:.1f} rate {np.exp(x[0])/1e6:.0f}")
for tag, pts in (('cal',cal),('val',val)):
    errs=[100*(model7(x,f_,b_,r_)/us_-1) for _,f_,b_,r_,us_ in pts]
    print(f"  {tag}: {min(errs):+.1f}..{max(errs):+.1f} median|e| {np.median(np.abs(errs)):.1f}")
