"""Development tooling that never ships in the wheel: the disposable local control plane,
namespace bootstrap and the demo. It may import the product (``infercrane_pulumi``); the
product never imports it (enforced by ``tests/unit/test_layers.py``).
"""

from pathlib import Path

# This package exists only in a checkout, so the checkout's layout is its to know.
REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY_DIR = REPO_ROOT / "deploy" / "kubernetes"
