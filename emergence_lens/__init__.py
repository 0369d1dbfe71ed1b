"""The ``emergence`` command: the one place above both ``interp`` and ``synthetic``.

``interp`` (checkpoint suites, patching) is the lower layer, ``sweeps`` (run-and-store
machinery) and ``synthetic`` (tasks with a known attention pattern) sit above it, and this
package mounts the command groups of all of them; nothing below imports from here.
"""
