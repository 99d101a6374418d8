"""The package version (its own module, so the run manifest can read it without the package facade)."""

__version__ = "0.1.0"
