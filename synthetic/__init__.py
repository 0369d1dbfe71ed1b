"""emergence-lens ``synthetic``: tasks with a known attention pattern (linear map, cellular
automata), models (transformer and alternative token mixers), the attention-bias intervention,
training with training-dynamics metrics, and sweeps (Baherwani et al. 2026, synthetic part).

Start with :func:`synthetic.training.train` or ``emergence synth train``; docs/synthetic.md.
"""
