"""Admission tests: fixture pack, properties."""
