"""Random walks over K (ball, hit-and-run, coordinate hit-and-run, billiard), rounding and sampling."""

from .chains import WALKS, Chain, run_chains
from .rounding import Rounding, round_body
from .sampler import ConvergenceError, ConvergenceWarning, Sampler, SamplingInfo, sample_uniform

__all__ = ["WALKS", "Chain", "run_chains", "Rounding", "round_body", "sample_uniform", "Sampler", "SamplingInfo",
           "ConvergenceWarning", "ConvergenceError"]
