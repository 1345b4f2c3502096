"""Where stacks' state lives and who may write it: backend URLs (``backends``), their blobs
(``blobs``, ``s3``), bounded history (``retention``), stack leases and their database
(``leases``, ``leasedb``, ``holders``, ``fencing``), and recovery from a run that died
(``recovery``).
"""
