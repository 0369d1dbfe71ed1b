"""The ground floor of ``interp``: plumbing every package uses (the one training loop,
:mod:`interp.core.train_loop`, among it). Imports nothing else from ``interp``."""
