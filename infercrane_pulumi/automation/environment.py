"""Where a Pulumi run keeps its state, plugins and binaries; nothing comes from the shell.

Any DIY backend URL passes through (``file://`` by default, ``s3://``, ``postgres://``, ...),
so several control-plane replicas can share state and Pulumi's own stack locks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class PulumiEnvironment:
    state_dir: Path
    pulumi_home: Path
    passphrase: str = field(repr=False)
    bin_dir: Path | None = None
    kubeconfig: Path | None = None
    # Another DIY backend instead of ``state_dir`` (which then only holds nothing).
    backend_url: str | None = None

    @property
    def backend(self) -> str:
        return self.backend_url or self.state_dir.resolve().as_uri()

    @property
    def local_state(self) -> Path | None:
        """The state directory when the backend is this machine's file system."""
        return None if self.backend_url else self.state_dir

    def variables(self) -> dict[str, str]:
        variables = {
            "PULUMI_BACKEND_URL": self.backend,
            "PULUMI_CONFIG_PASSPHRASE": self.passphrase,
            "PULUMI_HOME": str(self.pulumi_home.resolve()),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Use the installed, version-pinned plugin, never a same-named binary on PATH.
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
        }
        if self.bin_dir is not None:
            variables["PATH"] = os.pathsep.join([str(self.bin_dir), os.environ.get("PATH", "")])
        if self.kubeconfig is not None:
            variables["KUBECONFIG"] = str(self.kubeconfig)
        return variables
