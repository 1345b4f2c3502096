"""Runnable examples of the project's public interfaces (the docs link them)."""
