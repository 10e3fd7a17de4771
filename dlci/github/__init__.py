"""Reporting to GitHub: the runner environment (runner), the sticky comment (comment), the API (api: comment upsert,
check run with annotations, retries, read-only tokens) and runner pools (shards: plan matrix, merge of shard results).
The action's entry point is ``entrypoint.py`` at the repository root."""
