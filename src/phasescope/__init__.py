"""phasescope: find and measure phase sensitivity in models with chunked KV-cache compression.

Importing the package is cheap; submodules (``phasescope.kv``, ``phasescope.model``) load torch
when used.
"""

__version__ = "0.1.0"
