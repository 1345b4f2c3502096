"""What a stack is asked to do: the settings and replica intents (``intents``, the Pod-level
ones in ``podsettings``), their field rules (``validators``) and rules across fields
(``rules``), stack files (``files``), and which kubeconfig and API server a run reaches
(``kubeconfigs``). Nothing here talks to a cluster or to Pulumi.
"""
