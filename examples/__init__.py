"""Runnable examples of the project's public interfaces (README links them)."""
