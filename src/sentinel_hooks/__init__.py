"""Sentinel: watch the outside world and wake an AI agent only when something matters."""

__version__ = "0.1.0"
