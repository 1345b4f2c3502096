"""The Pod Security Standards (``baseline``, ``restricted``) as a pure check of one Pod spec.

What the API server's Pod Security admission would refuse, decided from the spec alone, so a
violation shows in a preview instead of as a Pod the ReplicaSet cannot create. The checks follow
the Standards' tables (Kubernetes 1.36); Windows and AppArmor fields are not rendered by
InferCrane and are left to admission.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from infercrane_pulumi.config.intents import PodSecurityLevel

_BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
_SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
_RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every container of ``pod``, init containers first."""
    return [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]


def _seccomp(context: Mapping[str, Any] | None) -> str | None:
    profile = (context or {}).get("seccompProfile") or {}
    kind = profile.get("type")
    return None if kind is None else str(kind)


def _baseline(pod: Mapping[str, Any]) -> Iterator[str]:
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            yield f"{field} is true"
    pod_context = pod.get("securityContext") or {}
    if _seccomp(pod_context) == "Unconfined":
        yield "the Pod's seccomp profile is Unconfined"
    unsafe = sorted(
        str(s.get("name"))
        for s in pod_context.get("sysctls") or []
        if s.get("name") not in _SAFE_SYSCTLS
    )
    if unsafe:
        yield f"unsafe sysctls {', '.join(unsafe)}"
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            yield f"volume {volume.get('name')} is a hostPath"
    for container in containers(pod):
        name = container.get("name")
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            yield f"container {name} is privileged"
        added = set((context.get("capabilities") or {}).get("add") or []) - _BASELINE_CAPABILITIES
        if added:
            yield f"container {name} adds capabilities {', '.join(sorted(added))}"
        if _seccomp(context) == "Unconfined":
            yield f"container {name}'s seccomp profile is Unconfined"
        if context.get("procMount") not in (None, "Default"):
            yield f"container {name} sets procMount {context.get('procMount')}"
        if any(port.get("hostPort") for port in container.get("ports") or []):
            yield f"container {name} uses a hostPort"


def _restricted(pod: Mapping[str, Any]) -> Iterator[str]:
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            yield f"volume {volume.get('name')} is of type {', '.join(sorted(kinds))}"
    pod_context = pod.get("securityContext") or {}
    if pod_context.get("runAsUser") == 0:
        yield "the Pod runs as user 0"
    for container in containers(pod):
        name = container.get("name")
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            yield f"container {name} does not set allowPrivilegeEscalation: false"
        non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
        user = context.get("runAsUser", pod_context.get("runAsUser"))
        if non_root is not True and not (isinstance(user, int) and user > 0):
            yield f"container {name} may run as root (set runAsNonRoot or a non-zero runAsUser)"
        if context.get("runAsUser") == 0:
            yield f"container {name} runs as user 0"
        if (_seccomp(context) or _seccomp(pod_context)) not in ("RuntimeDefault", "Localhost"):
            yield f"container {name} has no RuntimeDefault or Localhost seccomp profile"
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"container {name} does not drop ALL capabilities"
        added = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            yield f"container {name} adds capabilities {', '.join(sorted(added))}"


def violations(pod: Mapping[str, Any], level: PodSecurityLevel) -> list[str]:
    """Why ``pod`` (a Pod spec) does not meet ``level``, one phrase each; empty when it does."""
    found: list[str] = []
    if level in ("baseline", "restricted"):
        found += _baseline(pod)
    if level == "restricted":
        found += _restricted(pod)
    return found
