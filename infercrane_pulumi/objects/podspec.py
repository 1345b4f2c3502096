"""The runtime Pod of one intent: its container (argv, credentials, probes, resources, mounts)
and the pod-level fields a Deployment template and a KServe predictor share.

Pure: no Pulumi, no clients, no I/O. Hardened by default (seccomp RuntimeDefault, every
capability dropped, no privilege escalation, no service-account token); running as a non-root
user with a read-only root filesystem is a setting, because the official vLLM image runs as
root and writes under its home. Credentials travel only as references (``secretKeyRef``, a
Secret volume): no value is ever part of an object or of argv.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from infercrane_pulumi.config.intents import (
    HOME_PATH,
    MODEL_CACHE_PATH,
    KubernetesSettings,
    ReplicaIntent,
    effective_resources,
    model_cache,
    startup_seconds,
)

Manifest = dict[str, Any]

# The official vllm/vllm-openai image's ENTRYPOINT changed between releases
# (["python3", "-m", "vllm.entrypoints.openai.api_server"], then ["vllm", "serve"]), and args
# given for one generation fail on the other. Both generations ship this module and run it as
# the OpenAI server with --model, so the container names its command itself.
VLLM_COMMAND = ("python3", "-m", "vllm.entrypoints.openai.api_server")
PORT_NAME = "http"
WORKER_KEY_ENV = ("INFERCRANE_WORKER_API_KEY", "VLLM_API_KEY")
WORKER_KEY_VOLUME = "worker-key"
# Probes poll every 10 s once started; the startup probe's failure threshold turns the allowance
# into periods, rounded up.
PROBE_PERIOD_SECONDS = 10
PROBE_TIMEOUT_SECONDS = 5
# A live engine that stops answering its health endpoint for 30 s is restarted.
LIVENESS_FAILURES = 3


@dataclass(frozen=True)
class PodDialect:
    """What the workload API's own controller expects of the Pod it is given."""

    container_name: str
    # KServe's defaulting webhook fills a missing CPU limit with its own (1 CPU, stock), so a
    # predictor must carry one of its own.
    cpu_limit_required: bool = False


def literal(argv: list[str]) -> list[str]:
    """``argv`` as Kubernetes must pass it to the process, to the letter. Kubernetes expands
    ``$(NAME)`` in a container's command and args from the container's environment (which holds
    the worker key and ``HF_TOKEN``) and reduces ``$$`` to ``$``: so every ``$`` is doubled, and
    no string of a stack file (a model's name, its revision, an argument, a custom command, what
    ``${MODEL}`` puts into it) is ever expanded. The one place every container's argv passes."""
    return [entry.replace("$", "$$") for entry in argv]


def container_args(intent: ReplicaIntent) -> list[str]:
    if intent.workload is not None:
        values = {
            "MODEL": intent.model,
            "MODEL_REVISION": intent.model_revision or "",
            "PORT": str(intent.effective_port),
        }
        command = list(intent.workload.command)
        for name, value in values.items():
            command = [entry.replace(f"${{{name}}}", value) for entry in command]
        return command + list(intent.runtime_args)
    args = ["--model", intent.model, "--host", "0.0.0.0", "--port", str(intent.effective_port)]
    if intent.model_revision is not None:
        args += ["--revision", intent.model_revision]
    return args + list(intent.runtime_args)


def needs_writable_home(settings: KubernetesSettings) -> bool:
    """A non-root user cannot write the image's home (/root), a read-only root nothing at all:
    either way the runtime gets an emptyDir home and /tmp."""
    return settings.run_as_user is not None or settings.read_only_root_filesystem


def _secret_env(name: str, secret: str, key: str) -> Manifest:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _env(settings: KubernetesSettings, intent: ReplicaIntent) -> list[Manifest]:
    worker_key = intent.workload.worker_key if intent.workload is not None else None
    names = WORKER_KEY_ENV if worker_key is None else (worker_key.env,)
    env = [
        _secret_env(name, settings.worker_secret_name, settings.worker_secret_key)
        for name in names
        if name is not None
    ]
    if settings.hf_token is not None:
        env.append(_secret_env("HF_TOKEN", settings.hf_token.secret_name, settings.hf_token.key))
    if model_cache(settings, intent) is not None:
        env.append({"name": "HF_HOME", "value": cache_path(intent)})
    if needs_writable_home(settings):
        env.append({"name": "HOME", "value": HOME_PATH})
    return env


def cache_path(intent: ReplicaIntent) -> str:
    return MODEL_CACHE_PATH if intent.workload is None else intent.workload.cache_path


def _mounts(settings: KubernetesSettings, intent: ReplicaIntent) -> list[tuple[str, Manifest]]:
    """(volume name, its source) in mount order, with where each is mounted."""
    mounts: list[tuple[str, Manifest]] = []
    source: Manifest
    if settings.shm_size is not None:
        source = {"emptyDir": {"medium": "Memory", "sizeLimit": settings.shm_size}}
        mounts.append(("/dev/shm", {"name": "dshm", **source}))
    cache = model_cache(settings, intent)
    if cache is not None:
        source = (
            {"persistentVolumeClaim": {"claimName": cache.claim_name}}
            if cache.claim_name is not None
            else {"emptyDir": {"sizeLimit": cache.size_limit}}
        )
        mounts.append((cache_path(intent), {"name": "model-cache", **source}))
    if needs_writable_home(settings):
        mounts.append(("/tmp", {"name": "tmp", "emptyDir": {}}))
        mounts.append((HOME_PATH, {"name": "home", "emptyDir": {}}))
    worker_key = intent.workload.worker_key if intent.workload is not None else None
    if worker_key is not None and worker_key.file is not None:
        directory, file_name = worker_key.file.rsplit("/", 1)
        secret = {
            "secretName": settings.worker_secret_name,
            "items": [{"key": settings.worker_secret_key, "path": file_name}],
            # Readable by the owner and, through fsGroup, by a non-root runtime user.
            "defaultMode": 0o440,
        }
        mounts.append((directory, {"name": WORKER_KEY_VOLUME, "secret": secret}))
    return mounts


def _probe(path: str, **timing: int) -> Manifest:
    return {"httpGet": {"path": path, "port": PORT_NAME}, **timing}


def _probes(settings: KubernetesSettings, intent: ReplicaIntent) -> Manifest:
    path = "/health" if intent.workload is None else intent.workload.readiness_path
    allowance = startup_seconds(settings, intent)
    return {
        # Liveness and readiness wait for this one: a model load of up to the allowance is
        # never mistaken for a hung engine.
        "startupProbe": _probe(
            path,
            periodSeconds=PROBE_PERIOD_SECONDS,
            timeoutSeconds=PROBE_TIMEOUT_SECONDS,
            failureThreshold=math.ceil(allowance / PROBE_PERIOD_SECONDS),
        ),
        "livenessProbe": _probe(
            path,
            periodSeconds=PROBE_PERIOD_SECONDS,
            timeoutSeconds=PROBE_TIMEOUT_SECONDS,
            failureThreshold=LIVENESS_FAILURES,
        ),
        "readinessProbe": _probe(path, periodSeconds=5, timeoutSeconds=2, failureThreshold=3),
    }


def _resources(
    settings: KubernetesSettings, intent: ReplicaIntent, dialect: PodDialect
) -> Manifest:
    resources = effective_resources(settings, intent)
    gpu = {settings.gpu_resource: "1"}
    requests = {"cpu": resources.cpu_request, "memory": resources.memory_request} | gpu
    limits: dict[str, str] = {"memory": resources.memory_limit} | gpu
    cpu_limit = resources.cpu_limit
    if cpu_limit is None and dialect.cpu_limit_required:
        cpu_limit = resources.cpu_request
    if cpu_limit is not None:
        limits["cpu"] = cpu_limit
    return {"requests": requests, "limits": limits}


def runtime_container(
    settings: KubernetesSettings, intent: ReplicaIntent, dialect: PodDialect
) -> Manifest:
    workload = intent.workload
    argv: Manifest = (
        {"command": literal(list(VLLM_COMMAND)), "args": literal(container_args(intent))}
        if workload is None
        else {"command": literal(container_args(intent))}
    )
    container: Manifest = {
        "name": dialect.container_name,
        "image": settings.image_digest if workload is None else workload.image,
        "imagePullPolicy": "IfNotPresent",
        **argv,
        "ports": [{"name": PORT_NAME, "containerPort": intent.effective_port, "protocol": "TCP"}],
        "env": _env(settings, intent),
        **_probes(settings, intent),
        "resources": _resources(settings, intent, dialect),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": settings.read_only_root_filesystem,
        },
    }
    mounts = _mounts(settings, intent)
    if mounts:
        container["volumeMounts"] = [
            {"name": volume["name"], "mountPath": path}
            | ({"readOnly": True} if "secret" in volume else {})
            for path, volume in mounts
        ]
    return container


def _pod_security(settings: KubernetesSettings) -> Manifest:
    context: Manifest = {"seccompProfile": {"type": "RuntimeDefault"}}
    if settings.run_as_user is not None:
        user = settings.run_as_user
        # fsGroup: mounted volumes (the cache, the worker key file) are the runtime's to use.
        context |= {"runAsNonRoot": True, "runAsUser": user, "runAsGroup": user, "fsGroup": user}
    return context


def pod_fields(
    settings: KubernetesSettings, intent: ReplicaIntent, dialect: PodDialect
) -> Manifest:
    """The pod-level fields shared by a Deployment template and a KServe predictor."""
    grace = 30 if intent.workload is None else intent.workload.shutdown_grace_seconds
    fields: Manifest = {
        "serviceAccountName": settings.service_account,
        # The runtime never calls the API server; a mounted token would only be a credential
        # for whoever takes over the container.
        "automountServiceAccountToken": False,
        "securityContext": _pod_security(settings),
        "terminationGracePeriodSeconds": grace,
        "nodeSelector": {settings.gpu_product_label: intent.gpu},
    }
    if settings.runtime_class_name is not None:
        fields["runtimeClassName"] = settings.runtime_class_name
    if settings.tolerations:
        fields["tolerations"] = [
            toleration.model_dump(by_alias=True, exclude_none=True)
            for toleration in settings.tolerations
        ]
    volumes = [volume for _, volume in _mounts(settings, intent)]
    if volumes:
        fields["volumes"] = volumes
    fields["containers"] = [runtime_container(settings, intent, dialect)]
    return fields


def progress_deadline_seconds(settings: KubernetesSettings, intent: ReplicaIntent) -> int:
    """How long the Deployment controller waits before it reports ProgressDeadlineExceeded:
    the startup allowance plus ten minutes to schedule, pull and start the container."""
    return startup_seconds(settings, intent) + 600
