"""Adapters: the one place per library where the project uses a name that library keeps private.

The rest of the code calls the public-looking functions here and never spells another library's
``_private`` name; ``tests/project/test_private_names.py`` fails when one appears anywhere else, and
checks on the installed versions that each name used here is still there (so a release that
moves one fails that test, naming the adapter, before a training or a trace fails less clearly).

One module per library, each saying for every private name why no public name does, the versions
checked, and what breaks if it moves:

* :mod:`interp.core.adapters.torch`: ATen dispatch modes and an operator's schema (``analyses.op_trace``);
* :mod:`interp.core.adapters.transformers`: the key patterns a model ignores when it loads a file;
* :mod:`interp.core.adapters.transformer_lens`: the attention softmax's dtype, bridge parameter names;
* :mod:`interp.core.adapters.cpython`: ``multiprocessing``'s fork server and process pools
  (the pinned training workers of :mod:`interp.core.kernel_pins`).

The tests' own plumbing (pytest's ``Item._fixtureinfo``, pytest-xdist's ``_split_scope``, a few
spies on torch and TransformerLens internals) stays in the tests, listed in that test.
"""
