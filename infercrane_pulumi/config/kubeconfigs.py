"""Which kubeconfig a run reaches its cluster with, decided in one place, and which API server
that kubeconfig's context names.

The precedence (docs/reference/kubeconfig.md), as kubectl's loader decides its own in
one function:

1. the stack's ``infercrane:kubernetes.kubeconfig`` (a path or the contents);
2. else the driver's kubeconfig: ``PulumiEnvironment.kubeconfig`` for ``NamespaceStack`` and
   ``ensure_many``, which never read their process's environment; ``$KUBECONFIG`` (else
   ``~/.kube/config``) for the command line and for a person's ``pulumi up``, whose caller sets
   that variable for exactly that process (``from_environment``).

A run resolves it once (``resolved``), to the contents or an absolute file, and hands the
answer explicitly to its own checks, to the program it serves and, through the program, to the
provider plugin: nothing reads a process's ``KUBECONFIG`` after that, and no reader resolves a
relative path against its own working directory. The plugin runs in the engine's (a workspace),
not the caller's, so a relative path handed on would name another file there (issue 49). A
relative path is anchored (``anchored``) at the working directory of the process that was
given it: a driver's caller's (``PulumiEnvironment`` and ``NamespaceStack`` when constructed,
the command line when it runs), or, for a person's ``pulumi up``, the program's, which Pulumi
sets to the project directory.

The program is served from the driver's own process, where the pulumi-kubernetes SDK would read
the driver's ``KUBECONFIG`` for a provider given none, so the provider is never given none. The
context is always the stack's own. One context name is reserved: ``in-cluster`` is the
ServiceAccount of the Pod the driver runs in (``in_cluster``). It is chosen in the
stack's settings like any other context, so that every driver takes it the same way and a
reviewer sees it there; it is never a fallback.

``identity`` names the API server a context reaches, its URL and the certificate authority it
trusts, read from the kubeconfig the way the provider reads it: the program compares it with the
server the driver's checks read (``cluster.client.Cluster.identity``) before it registers
anything.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from infercrane_pulumi.config.intents import (
    IN_CLUSTER_CONTEXT,
    KUBERNETES_KEY,
    KubernetesSettings,
    StackConfig,
)
from infercrane_pulumi.config.validators import is_kubeconfig_contents, kubeconfig_document
from infercrane_pulumi.errors import ConfigError

# The driver-side name of the fallback, for refusals.
DRIVER_KUBECONFIG = "the driver's kubeconfig (PulumiEnvironment.kubeconfig, or $KUBECONFIG)"
# Where the kubelet mounts a Pod's ServiceAccount token and the cluster's CA (client-go's
# in-cluster configuration reads the same files).
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class ClusterIdentity:
    """The API server a context reaches: its URL and the SHA-256 of the certificate authority it
    trusts (None: the system's trust store). Neither is a credential."""

    server: str
    certificate_authority: str | None

    def __str__(self) -> str:
        ca = "system CAs" if self.certificate_authority is None else self.certificate_authority[:12]
        return f"{self.server} (CA {ca})"

    @classmethod
    def of(cls, server: str, certificate_authority: bytes | None) -> ClusterIdentity:
        parts = urlsplit(server)
        # A server URL may carry user:password@; the identity never does.
        host = parts.netloc.rpartition("@")[2]
        bare = urlunsplit(parts._replace(netloc=host)).rstrip("/")
        digest = None
        if certificate_authority is not None:
            digest = hashlib.sha256(certificate_authority).hexdigest()
        return cls(bare, digest)


def from_environment(environ: Mapping[str, str]) -> Path:
    """The kubeconfig a process's own environment names, as kubectl reads it: ``$KUBECONFIG``,
    else ``~/.kube/config``. Only the command line and a person's ``pulumi up`` ask."""
    named = environ.get("KUBECONFIG")
    return Path(named) if named else Path(environ.get("HOME", "~"), ".kube", "config")


def anchored(value: str, base: Path) -> str:
    """A kubeconfig (a path, or the contents) that no working directory can change: a path
    with ``~`` expanded and, when relative, joined to ``base``; the contents as given."""
    if is_kubeconfig_contents(value):
        return value
    # os.path's expanduser leaves a name it cannot expand as it is (pathlib's raises).
    return str(base / os.path.expanduser(value))


def given(path: Path) -> Path:
    """A driver's kubeconfig anchored where its caller gave it (``PulumiEnvironment`` and
    ``NamespaceStack`` call this when constructed); a list of files stays as given, for
    ``resolved`` to refuse where it would be used."""
    value = str(path)
    return path if os.pathsep in value else Path(anchored(value, Path.cwd()))


def resolved(settings: KubernetesSettings, fallback: Path | str | None) -> KubernetesSettings:
    """``settings`` with the kubeconfig the run uses, as the contents or an absolute file:
    their own, else ``fallback`` (the driver's), a relative path anchored at this process's
    working directory. One ``ConfigError`` line when neither names one, or when the fallback
    is a list of files (kubectl merges them; the provider is given exactly one)."""
    if settings.context == IN_CLUSTER_CONTEXT:  # its settings name no kubeconfig (``intents``)
        return settings.model_copy(update={"kubeconfig": in_cluster(os.environ)})
    source = settings.kubeconfig
    if source is None:
        if fallback is None:
            raise ConfigError(
                f"{KUBERNETES_KEY}.kubeconfig: no kubeconfig for context {settings.context!r}: "
                f"set it, or give {DRIVER_KUBECONFIG}"
            )
        source = str(fallback)
        # Contents hold ':' on every line: only a path can name several files.
        if not is_kubeconfig_contents(source) and os.pathsep in source:
            raise ConfigError(
                f"{KUBERNETES_KEY}.kubeconfig: {DRIVER_KUBECONFIG} names several files "
                f"({source}); name one, or set infercrane:kubernetes.kubeconfig"
            )
    return settings.model_copy(update={"kubeconfig": anchored(source, Path.cwd())})


def in_cluster(environ: Mapping[str, str]) -> str:
    """The kubeconfig (the contents) of the Pod this process runs in, as its ServiceAccount:
    the API server from ``KUBERNETES_SERVICE_HOST``/``_PORT``, the mounted CA, and the mounted
    token as ``tokenFile``, which both clients read again (client-go every minute, ours at each
    connection), so that the kubelet's rotation of the projected token needs no restart. It
    holds no credential, only the files' paths. One ``ConfigError`` line outside a Pod."""
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    token, ca = SERVICE_ACCOUNT_DIR / "token", SERVICE_ACCOUNT_DIR / "ca.crt"
    missing = [
        *([] if host else ["KUBERNETES_SERVICE_HOST"]),
        *([] if port.isdecimal() else ["KUBERNETES_SERVICE_PORT"]),
        *(str(path) for path in (token, ca) if not path.is_file()),
    ]
    if missing:
        raise ConfigError(
            f"{KUBERNETES_KEY}.context: {IN_CLUSTER_CONTEXT!r} is the ServiceAccount of the Pod "
            f"this runs in, and this process is not in one (missing: {', '.join(missing)})"
        )
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    name = IN_CLUSTER_CONTEXT
    cluster = {"server": server, "certificate-authority": str(ca)}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"tokenFile": str(token)}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    return yaml.safe_dump(document, sort_keys=False)


def for_run(config: StackConfig, fallback: Path | str | None) -> StackConfig:
    """``config`` with the kubeconfig its run uses (``resolved``)."""
    return config.model_copy(update={"kubernetes": resolved(config.kubernetes, fallback)})


def identity(settings: KubernetesSettings) -> ClusterIdentity:
    """The API server ``settings``' context names in its kubeconfig (a resolved one), the way
    pulumi-kubernetes reads a path or the contents; one ``ConfigError`` line if it names
    none."""
    source = settings.kubeconfig
    assert source is not None, "identity of unresolved settings"
    assert is_kubeconfig_contents(source) or Path(source).is_absolute(), "a relative kubeconfig"

    def refused(why: str) -> ConfigError:
        return ConfigError(
            f"{KUBERNETES_KEY}.context: cannot read the API server of context "
            f"{settings.context!r} from the kubeconfig ({why})"
        )

    base = Path.cwd()
    if is_kubeconfig_contents(source):
        document = kubeconfig_document(source)
    else:
        path = Path(source)
        base = path.parent
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            raise refused(type(error).__name__) from error
    if not isinstance(document, Mapping):
        raise refused("not a kubeconfig")
    context = _named(document, "contexts", settings.context, "context")
    cluster = _named(document, "clusters", context.get("cluster"), "cluster")
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise refused("its cluster has no server")
    try:
        return ClusterIdentity.of(server, _certificate_authority(cluster, base))
    except (OSError, ValueError, binascii.Error) as error:
        raise refused(f"certificate authority: {type(error).__name__}") from error


def _named(document: Mapping[str, Any], section: str, name: object, key: str) -> Mapping[str, Any]:
    for entry in document.get(section) or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            found = entry.get(key)
            if isinstance(found, Mapping):
                return found
    raise ConfigError(f"{KUBERNETES_KEY}.context: the kubeconfig has no {key} named {str(name)!r}")


def _certificate_authority(cluster: Mapping[str, Any], base: Path) -> bytes | None:
    data = cluster.get("certificate-authority-data")
    if isinstance(data, str) and data:
        return base64.b64decode(data, validate=True)
    path = cluster.get("certificate-authority")
    if isinstance(path, str) and path:
        return (base / Path(path).expanduser()).read_bytes()
    return None
