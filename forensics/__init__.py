"""forensics: offline forensic analysis of the post-mortem logs of GPU training jobs."""

__version__ = "0.1.0"
