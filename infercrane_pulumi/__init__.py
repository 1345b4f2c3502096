"""InferCrane's Kubernetes provider as a Pulumi program.

One durable replica intent becomes one ``ReplicaComponent`` owning either a Deployment + Service
or one KServe InferenceService; one Pulumi stack per namespace.
"""
