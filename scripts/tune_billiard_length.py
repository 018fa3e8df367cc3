"""ESS per 1000 pivots of the billiard walk vs trajectory length (multiples of R), rounded frame."""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from knorm import workloads as W
from knorm.body.hull import SymmetricHull
from knorm.diagnostics import ess
from knorm.walks.chains import Chain, default_params, run_chains
from knorm.walks.sampler import rounding_of
spec, steps = sys.argv[2], int(sys.argv[3])
mults = [float(m) for m in sys.argv[4:]]
if spec.startswith("marg"):
    F = W.marginals((2,) * int(spec[4:]), 2)
else:
    d = int(spec[3:]); F = W.random_pm1(d, 5 * d, rng=np.random.default_rng(0))
K = SymmetricHull(F)
rnd = rounding_of(K)
fr = rnd.frame
base = default_params("billiard", fr)
for m in mults:
    p = base.copy(); p[0] = base[0] * m / 2.0   # default L = 2R
    cs = [Chain(fr, x, np.random.default_rng(10 + i)) for i, x in enumerate(rnd.points[:4])]
    run_chains(cs, "billiard", 20, 20, p, workers=2)
    p0 = sum(c.pivots for c in cs)
    rec = run_chains(cs, "billiard", steps, 1, p, workers=2)
    piv = sum(c.pivots for c in cs) - p0
    e_coord = float(np.min(ess(rec)))
    e_rad = float(np.min(ess(np.sum(rec**2, axis=2)[..., None])))
    e = min(e_coord, e_rad)
    n = rec.shape[0] * rec.shape[1]
    print(f"{spec} r={fr.r} L={m:.2f}R: {piv / n:.0f} piv/step, tau coord {n / e_coord:.2f} rad {n / e_rad:.2f}, "
          f"ESS per 1000 pivots {1000 * e / piv:.3f}", flush=True)
