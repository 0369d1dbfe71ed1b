"""``python -m emergence_lens ...`` is ``emergence ...``."""

from emergence_lens.cli import main

main()
