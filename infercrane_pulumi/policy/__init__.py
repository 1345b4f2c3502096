"""InferCrane's policy: rules a platform team sets per namespace, over the objects a stack renders.

The configuration (``infercrane:policy``) is ``intents.PolicySettings``; ``podsecurity`` is the
Pod Security Standards check, ``rules`` the rule set, its evaluation and its enforcement. Pure:
no Pulumi, no clients, no I/O, so the same rules run in every driver's program and in the
offline diff of a pull request.
"""
