"""A crash-recovery runtime for agent tool calls, and the chaos harness that proves it.

``harness.runtime`` is the library; the other sub-packages are the harness.
"""

__version__ = "0.1.0"
