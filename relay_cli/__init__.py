"""relay: hand work between AI coding agents on one machine, never lying about delivery."""

__version__ = "0.1.0"
