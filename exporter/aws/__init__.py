"""AWS: the counted API client, ElastiCache discovery, CloudWatch queries and the background monitor that polls them.

May import exporter.common only; boto3 is loaded only when AWS is used.
"""

import logging

# botocore's DEBUG lines hold signatures, session tokens and reply bodies (a secret's value, an IAM token's signature):
# never below INFO, whatever level the exporter logs at
if logging.getLogger("botocore").level < logging.INFO:  # NOTSET too: it would follow a root logger at DEBUG
    logging.getLogger("botocore").setLevel(logging.INFO)
