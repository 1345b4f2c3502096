"""Moved to ``infercrane_pulumi.config.intents``; this path re-exports it for one release
(CHANGELOG.md)."""

from infercrane_pulumi.config.intents import *  # noqa: F403
