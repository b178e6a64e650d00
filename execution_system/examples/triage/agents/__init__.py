"""Executors of the triage example."""
