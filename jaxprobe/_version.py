"""The package version (one place: the package, the CLI and sweeps' records read it)."""

__version__ = "0.1.0"
