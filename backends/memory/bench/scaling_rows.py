"""tools/bench/scaling's rows for the memory folder (no bench program: the contended table only)."""
# scheme -> the URI it runs on (no server)
ROWS = {"memory": "memory://scaling?ttl=30s"}
