"""Who talks to the Kubernetes API (Pulumi's provider aside): this package, and only here.

``client`` is the transport and the only importer of ``kubernetes``; ``api`` the requests a run
makes over it and what their answers mean; ``preflight``, ``verdict`` (and its ``actions``),
``ownership``, ``desired``, ``placement``, ``doctor`` and ``observe`` are decisions over values
read through it. It writes twice: ``deletion`` deletes exactly this stack's objects, each by
the uid its ownership check read, and ``runstatus`` applies the runner's status object.
Applying the stack's objects is the engine's, never this package's.
"""
