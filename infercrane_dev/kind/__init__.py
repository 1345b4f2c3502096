"""Disposable Kind clusters on a node image built here, without any registry (``README.md``).

``python -m infercrane_dev.kind prepare|up|down``; :class:`.cluster.KindRuntime` from Python (the
Kind test, ``tests/conformance/test_kind.py``). Dev-only: the product never imports it. It must
never run beside the local control plane's real node (it takes the same machine lock), never
pull an image, and never leave the host changed after ``down``.
"""
