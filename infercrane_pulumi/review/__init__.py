"""What reviewers read: the one change model (object, key, stack), per-object YAML diffs, the
pull-request comment and its JSON, and the offline diff between a git base and the working tree.
Pure, but for ``gitrepo`` (the door to git) and the base-code render of ``offline_diff``."""
