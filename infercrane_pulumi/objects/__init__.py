"""The Kubernetes objects an intent becomes, as plain values: the kinds (``kinds``), names from the
durable key (``naming``), the runtime Pod (``podspec``), the manifests (``manifests``), when a
replica serves (``readiness``), and what differs per workload API (``workloads``). Pure.
"""
