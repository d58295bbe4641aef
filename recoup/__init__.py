"""Recoup: a durable scheduler for work that must happen later and take effect once,
and a dunning engine for retrying failed payments on top of it."""

__version__ = "0.1.0"
