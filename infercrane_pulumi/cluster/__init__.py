"""Who talks to the Kubernetes API (Pulumi's provider aside): this package, and only here.

``client`` is the transport and the only importer of ``kubernetes``; ``preflight``,
``ownership``, ``drift``, ``unchanged``, ``doctor`` and ``observe`` are decisions over values
read through it. The one write is ``deletion``'s: deleting exactly this stack's objects, each by
the uid its ownership check read. Applying is the engine's, never this package's.
"""
