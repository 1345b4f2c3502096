"""Which cluster a stack applies to, recorded by every driver's run and checked by the next.

A stack is named after its namespace, and the in-cluster kubeconfig is the same text in every
cluster: two clusters' runners on one state database would share one stack, each forgetting the
other's replicas. So a run records where it applied (``records.ClusterRecord``): the API
server's certificate authority, as the run's client trusts it (``Cluster.identity``, read once
when it connected), and the uid of the stack's
namespace there (read by name: the shipped Role allows that one ``get``). The next run reaching
a cluster where both differ from the record is refused before anything is read or written. One
of the two may change within one cluster (a rotated CA; a namespace deleted and made again), and
the run then records the new one; a record of neither part known is never the same as anything.
A person's ``pulumi up`` records nothing, so the next driver's run records afresh.
"""

from __future__ import annotations

from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.errors import ConfigError, InternalError
from infercrane_pulumi.program.records import ClusterRecord


def reached(cluster: Cluster, namespace: str) -> ClusterRecord:
    """Where a run through ``cluster`` to ``namespace`` applies."""
    identity = cluster.identity
    if identity is None:
        raise InternalError("placement: a client without the identity it connected as")
    return ClusterRecord(
        identity.server, identity.certificate_authority, cluster.namespace_uid(namespace)
    )


def check(stack_name: str, recorded: ClusterRecord | None, now: ClusterRecord) -> None:
    """Refuse a run reaching another cluster than the one ``recorded`` (None: nothing yet)."""
    if recorded is None or _same(recorded, now):
        return
    raise ConfigError(
        f"stack {stack_name}: applied to another cluster (namespace uid "
        f"{recorded.namespace_uid}, CA {_short(recorded.certificate_authority)} at "
        f"{recorded.server}) than this run reaches (namespace uid {now.namespace_uid}, CA "
        f"{_short(now.certificate_authority)} at {now.server}); one stack per cluster: name "
        "each cluster's stack apart, or give each its own state"
    )


def _same(recorded: ClusterRecord, now: ClusterRecord) -> bool:
    ca = recorded.certificate_authority
    namespace = recorded.namespace_uid
    return (ca is not None and ca == now.certificate_authority) or (
        namespace is not None and namespace == now.namespace_uid
    )


def _short(digest: str | None) -> str:
    return "(system CAs)" if digest is None else digest[:12]
