"""Who talks to the Kubernetes API (Pulumi's provider aside): this package, and only here.

``client`` is the transport and the only importer of ``kubernetes``; ``preflight``, ``doctor``
and ``observe`` are pure decisions over values read through it. Nothing here writes: reads,
access reviews and strict server-side dry-runs only.
"""
