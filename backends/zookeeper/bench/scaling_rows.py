"""tools/bench/scaling's rows for the zookeeper folder (zookeeper_bench's scaling/zookeeper/raw|dlock)."""
# scheme -> where its server is: "$VARIABLE" (the launcher's URI, the scheme replaced)
ROWS = {"zookeeper": "$DLOCK_ZOOKEEPER_URI"}
