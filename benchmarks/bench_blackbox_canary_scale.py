"""Canary-scale sweep (issue 26 design step): digits DP-SGD head (params.yaml recipe at claim eps), 1 canary
s * e_0 (a constant pixel column) with label LABEL in half of M heads, score = <u, centered W[:, 0]> (the quantity
the black-box score recovers exactly for a linear head); mu_u = mean shift / pooled sd; mu_lda = the same with a
mean-difference direction fitted on a quarter of the heads (worse: noisy direction). Data: digits[::2] (899 rows).

Run:  python benchmarks/bench_blackbox_canary_scale.py EPS M SCALES LABEL    e.g.  1 2000 1,3,10 0
"""
import time, sys, numpy as np, torch
torch.set_num_threads(2)
from sklearn.datasets import load_digits
from privaudit.defenders.specs import validate_defender_spec
from privaudit.train import TrainData, train_heads, predict_proba
from privaudit.defenders.recipes import recipe_from_spec
X, y = load_digits(return_X_y=True)
X = ((X - X.mean(0)) / np.maximum(X.std(0), 1e-12)).astype(np.float32)[::2]; y = y[::2].astype(np.int64)
n, d = X.shape
eps = float(sys.argv[1]); M = int(sys.argv[2]); scales=[float(s) for s in sys.argv[3].split(',')]; lab=int(sys.argv[4])
spec = validate_defender_spec({"name":"h","kind":"dp_sgd","epsilon":eps,"delta":1e-5,"epochs":20,"batch_size":64,"lr":0.5,"max_grad_norm":1.0})
rec = recipe_from_spec(spec, n)
print(rec.dp)
j = 0
for s in scales:
    xc = np.zeros(d, np.float32); xc[j] = s
    Xe = torch.tensor(xc).expand(M, 1, d).contiguous()
    ye = torch.full((M,1), lab)
    valid = torch.zeros(M,1,dtype=torch.bool); valid[:M//2] = True
    data = TrainData(torch.tensor(X), torch.tensor(y), M, X_extra=Xe, y_extra=ye, extra_valid=valid)
    t=time.time()
    heads = train_heads(rec, data, 10, torch.Generator().manual_seed(1))
    tt=time.time()-t
    W = heads.weights[0]  # (M, C, d)
    col = W[:, :, j].double().numpy()
    colc = col - col.mean(1, keepdims=True)
    u = -np.ones(10)/10; u[lab]+=1; u/=np.linalg.norm(u)
    sc = colc@u
    inn, out = sc[:M//2], sc[M//2:]
    mu = (inn.mean()-out.mean())/np.sqrt(0.5*(inn.var()+out.var()))
    # LDA direction on half
    md = colc[:M//4].mean(0)-colc[M//2:M//2+M//4].mean(0)
    sc2 = colc@md
    i2, o2 = sc2[M//4:M//2], sc2[M//2+M//4:]
    mu2 = (i2.mean()-o2.mean())/np.sqrt(0.5*(i2.var()+o2.var()))
    print(f"s={s} lab={lab} time={tt:.1f}s mu_u={mu:.3f} sd_in/out={inn.std()/out.std():.3f} mu_lda={mu2:.3f} meanshift={inn.mean()-out.mean():.4f} sd={out.std():.4f}", flush=True)
