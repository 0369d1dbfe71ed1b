"""Data files shipped with the package: the embedded suite's training text.

``training-text-v1.xz`` (xz, 627,720 bytes; 4,000,000 bytes decompressed, sha256
``7fb0c883bd8ae8a6…``, recorded in :data:`interp.sources.environment.TRAINING_TEXT`): the first
4,000,000 bytes of CPython 3.11.7's ``Lib/*.py`` sources in sorted path order (``test``,
``tests``, ``idlelib``, ``site-packages`` left out; files joined by a newline). The files are
listed with their sizes in ``training-text-v1.files.tsv``; the text is under the Python Software
Foundation License (``training-text-v1.LICENSE.txt``, CPython's own LICENSE).
"""
