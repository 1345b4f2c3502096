"""The shipped runner (``deploy/kubernetes/runner``) in a test's namespace, and the ways to look
at it from outside: its log of JSON envelopes, and a command run in its container.

The Deployment is the shipped one with only what a cluster of the suite needs changed: the
image built from this checkout, a toleration of the GPU workers' taint (a Kind cluster has no
other schedulable node), and by default one replica, the state on a file backend in the Pod's
``/tmp`` (the state dies with the Pod) and a period longer than any scenario, so that runs
start only when the stack file changes (``Runner``'s fields change those three, and the life
of the projected token).
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes import client

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster.nodepools import GPU_TAINT
from infercrane_pulumi.config.intents import IN_CLUSTER_CONTEXT
from infercrane_pulumi.config.kubeconfigs import SERVICE_ACCOUNT_DIR
from tests.conformance.harness import wait_for

RUNNER_FILE = DEPLOY_DIR / "runner" / "runner.yaml"
NAME = "infercrane-runner"
PROJECT_DIR = "/etc/infercrane"
STATE_URL = "file:///tmp/state"
PERIOD_SECONDS = "3600"
# Kind's GPU workers are its only schedulable nodes: their taint, tolerated.
GPU_TOLERATION = {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}
# And its control plane's node, where a second runner goes to be on a node of its own.
CONTROL_PLANE_TOLERATION = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def shipped(kind: str, name: str | None = None) -> dict[str, Any]:
    """The runner base's object of ``kind`` (of ``name``, where it holds several)."""
    [found] = [
        d
        for d in yaml.safe_load_all(RUNNER_FILE.read_text())
        if d and d["kind"] == kind and name in (None, d["metadata"]["name"])
    ]
    return copy.deepcopy(found)


def applied_status(envelope: Mapping[str, Any], *, at: str) -> dict[str, str]:
    """The status object's data after a run that applied what ``envelope`` (its ``--json``
    output) says, finished ``at``, computed independently of ``cluster.runstatus``."""
    result = envelope["result"]
    replicas = [
        {"externalKey": r["externalKey"], "change": r["change"], "reasons": r["reasons"]}
        for r in result["replicas"]
    ]
    return {
        "result": "applied",
        "appliedVersion": result["desiredVersion"]["resourceVersion"],
        "appliedAt": at,
        "replicas": json.dumps(replicas, sort_keys=True),
        "error": "",
        "retryable": "",
        "problems": "",
        "finishedAt": at,
    }


def status_object(namespace: str, stack: str = "") -> dict[str, Any]:
    """The runner's status object, as an overlay for ``namespace`` renders it (of ``stack``:
    by default the runner's, named after the namespace)."""
    made = shipped("ConfigMap", "infercrane-stack-status")
    made["metadata"]["namespace"] = namespace
    made["metadata"]["annotations"]["infercrane.dev/stack"] = stack or namespace
    return made


def deployment(
    namespace: str,
    image: str,
    *,
    replicas: int,
    every: str,
    events: bool,
    token_seconds: int | None = None,
    spread: bool = False,
) -> dict[str, Any]:
    made = shipped("Deployment")
    made["metadata"]["namespace"] = namespace
    spec = made["spec"]
    spec["replicas"] = replicas
    pod = spec["template"]["spec"]
    pod["tolerations"] = [GPU_TOLERATION]
    if spread:  # each replica on a node of its own, the control plane's included
        pod["tolerations"].append(CONTROL_PLANE_TOLERATION)
        term = {
            "labelSelector": {"matchLabels": spec["selector"]["matchLabels"]},
            "topologyKey": "kubernetes.io/hostname",
        }
        pod["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    for container in [*pod["initContainers"], *pod["containers"]]:
        container["image"] = image
    [runner] = pod["containers"]
    args = runner["args"]
    args[args.index("--every") + 1] = every
    if events:  # progress on stderr, so that a test sees a run in flight
        args.append("--events")
    if token_seconds is not None:  # the automounted volume, with the token's life shortened
        pod["automountServiceAccountToken"] = False
        token = {"path": "token", "expirationSeconds": token_seconds}
        root_ca = {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
        named = {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
        sources = [
            {"serviceAccountToken": token},
            {"configMap": root_ca},
            {"downwardAPI": {"items": [named]}},
        ]
        pod["volumes"].append({"name": "token", "projected": {"sources": sources}})
        mount = {"name": "token", "mountPath": str(SERVICE_ACCOUNT_DIR), "readOnly": True}
        runner["volumeMounts"].append(mount)
    return made


def stack_document(
    namespace: str,
    replicas: list[dict[str, Any]],
    *,
    policy: dict[str, Any] | None = None,
    **settings: Any,
) -> str:
    kubernetes = {"context": IN_CLUSTER_CONTEXT, "namespace": namespace} | settings
    config = {"infercrane:kubernetes": kubernetes, "infercrane:replicas": replicas}
    if policy is not None:
        config["infercrane:policy"] = policy
    return yaml.safe_dump({"config": config})


@dataclass
class Runner:
    """The runner in ``namespace``, seen by the admin (``api``, and ``kubectl`` for exec)."""

    api: client.ApiClient
    namespace: str
    kubectl: list[str]  # kubectl with the admin's kubeconfig and context
    replicas: int = 1
    every: str = PERIOD_SECONDS
    events: bool = False
    state_url: str = STATE_URL
    state_ca: bytes = b""  # the state database's CA, the Secret's ``ca.crt`` (none: no file)
    token_seconds: int | None = None  # the projected token's life (None: the automounted one)
    spread: bool = False  # each replica on a node of its own

    def key(self, stack: str = "") -> str:
        """The ConfigMap's key (the file's name) of ``stack``, by default the runner's own."""
        return f"Pulumi.{stack or self.namespace}.yaml"

    def start(self, image: str, stack: str, passphrase: str, labels: Mapping[str, str]) -> None:
        core = client.CoreV1Api(self.api)

        def meta(name: str) -> client.V1ObjectMeta:
            return client.V1ObjectMeta(name=name, namespace=self.namespace, labels=dict(labels))

        core.create_namespaced_secret(
            self.namespace,
            client.V1Secret(
                metadata=meta("infercrane-runner-state"),
                string_data={"backend-url": self.state_url, "passphrase": passphrase}
                | ({"ca.crt": self.state_ca.decode()} if self.state_ca else {}),
            ),
        )
        core.create_namespaced_config_map(
            self.namespace,
            client.V1ConfigMap(metadata=meta("infercrane-stack"), data={self.key(): stack}),
        )
        placed = {"namespace": self.namespace, "labels": dict(labels)}
        policy: Any = shipped("ConfigMap", "infercrane-runner-policy")  # the platform's, as shipped
        policy["metadata"] |= placed
        core.create_namespaced_config_map(self.namespace, policy)
        status: Any = status_object(self.namespace)
        status["metadata"]["labels"] |= dict(labels)
        core.create_namespaced_config_map(self.namespace, status)
        made: Any = deployment(
            self.namespace,
            image,
            replicas=self.replicas,
            every=self.every,
            events=self.events,
            token_seconds=self.token_seconds,
            spread=self.spread,
        )
        made["metadata"] |= placed
        client.AppsV1Api(self.api).create_namespaced_deployment(self.namespace, made)
        budget: Any = shipped("PodDisruptionBudget")
        budget["metadata"] |= placed
        client.PolicyV1Api(self.api).create_namespaced_pod_disruption_budget(self.namespace, budget)
        # Its read of the stack file from the API server (``--configmap``), as shipped.
        rbac = client.RbacAuthorizationV1Api(self.api)
        role: Any = shipped("Role")
        role["metadata"] |= placed
        rbac.create_namespaced_role(self.namespace, role)
        binding: Any = shipped("RoleBinding")
        binding["metadata"] |= placed
        binding["subjects"][0]["namespace"] = self.namespace
        rbac.create_namespaced_role_binding(self.namespace, binding)

    def stop(self) -> None:
        """No more runs: the Deployment deleted (its Pods go with it)."""
        client.AppsV1Api(self.api).delete_namespaced_deployment(NAME, self.namespace)

    def write(self, document: str, *, stack: str = "") -> None:
        """The control plane's edit of a stack file in the runner's ConfigMap, waited for
        until the runner's container sees it (the kubelet's next sync of the Pod)."""
        key = self.key(stack)
        client.CoreV1Api(self.api).patch_namespaced_config_map(
            "infercrane-stack", self.namespace, {"data": {key: document}}
        )
        path = f"{PROJECT_DIR}/stacks/{key}"
        # By its hash: a document of 1 MiB is longer than one argument may be (128 KiB).
        digest = hashlib.sha256(document.encode()).hexdigest()
        seen = (
            "import hashlib, sys; "
            f"sys.exit(hashlib.sha256(open({path!r}, 'rb').read()).hexdigest() != {digest!r})"
        )
        until(lambda: self.exec("python3", "-c", seen).returncode == 0, f"{key} in the Pod", 90)

    def pods(self) -> list[str]:
        """The runner's Pods that are running, by name."""
        pods = client.CoreV1Api(self.api).list_namespaced_pod(
            self.namespace, label_selector=f"app.kubernetes.io/name={NAME}"
        )
        running = [p for p in pods.items if p.status and p.status.phase == "Running"]
        return sorted(p.metadata.name for p in running if p.metadata and p.metadata.name)

    def pod(self) -> str:
        """A running Pod of the runner, once all of its replicas run."""
        running = wait_for(
            lambda: self.pods() if len(self.pods()) == self.replicas else None,
            timeout=180,
            what=f"the runner's {self.replicas} Pod(s) running",
        )
        return running[0]

    def records(self, pod: str) -> list[dict[str, Any]]:
        """What ``pod``'s runner printed: run envelopes (``command``) and, with ``events``,
        progress records (``type``), in order."""
        log = client.CoreV1Api(self.api).read_namespaced_pod_log(
            pod, self.namespace, container="runner"
        )
        return [json.loads(line) for line in log.splitlines() if line.startswith("{")]

    def envelopes(self, pod: str = "") -> list[dict[str, Any]]:
        """Every run's envelope so far, of ``pod`` (default: the one runner's)."""
        return [r for r in self.records(pod or self.pod()) if "command" in r]

    def run_after(self, seen: int, *, pod: str = "", timeout: float = 240) -> dict[str, Any]:
        """The envelope of the first run after the ``seen`` first ones."""
        return wait_for(
            lambda: next(iter(self.envelopes(pod)[seen:]), None),
            timeout=timeout,
            what=f"run {seen + 1} of the runner",
        )

    def exec(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """``argv`` in the runner container, with its environment (its identity, its state)."""
        return self.exec_in(self.pod(), *argv)

    def exec_in(self, pod: str, *argv: str) -> subprocess.CompletedProcess[str]:
        """``argv`` in ``pod``'s runner container."""
        return subprocess.run(
            self._in(pod, argv), capture_output=True, text=True, check=False, timeout=300
        )

    def spawn(self, pod: str, *argv: str) -> subprocess.Popen[str]:
        """``argv`` in ``pod``'s runner container, left running; its output read as it comes."""
        return subprocess.Popen(
            self._in(pod, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def _in(self, pod: str, argv: Sequence[str]) -> list[str]:
        return [*self.kubectl, "-n", self.namespace, "exec", pod, "-c", "runner", "--", *argv]

    def cli(self, command: str, *, stack: str = "") -> subprocess.CompletedProcess[str]:
        """``infercrane-pulumi <command> --json`` of ``stack`` (default: the runner's own), in
        its container, with its state."""
        where = ("--stack", stack or self.namespace, "--project-dir", PROJECT_DIR)
        secret = ("--passphrase-file", "/etc/infercrane-state/passphrase")
        return self.exec("python3", "-m", "infercrane_pulumi", command, *where, *secret, "--json")

    def states(self) -> dict[str, str]:
        done = self.cli("inspect")
        assert done.returncode == 0, done.stdout + done.stderr
        return {r["externalKey"]: r["state"] for r in json.loads(done.stdout)["result"]}


def until(probe: Callable[[], bool], what: str, timeout: float = 240) -> None:
    wait_for(lambda: probe() or None, timeout=timeout, what=what)
