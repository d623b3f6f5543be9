"""Training techniques that are not Composer's: ``kfac`` (K-FAC preconditioned SGD), ``muon`` (Muon
for the hidden 2-d weights), ``sparsity`` (gradual magnitude pruning), ``quantize`` (post-training
int8), ``schedule`` (lr schedules as per-step factors) and ``ramps`` (a language model's batch-size
ramp and sequence-length warm-up as a table of shapes)."""

__all__ = ["kfac", "muon", "quantize", "ramps", "schedule", "sparsity"]
