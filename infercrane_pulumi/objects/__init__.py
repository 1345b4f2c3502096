"""The Kubernetes objects an intent becomes, as plain values: the kinds (``kinds``), names from the
durable key (``naming``), the runtime Pod (``podspec``), what every object shares
(``manifests``, ``readiness``), one module per workload API (``deployment``, ``kserve``, each
filling in a ``workloadapi.WorkloadApi``), and their table (``workloads``). Pure.
"""
