"""tools/bench/scaling's rows for the memcached folder (memcached_bench's scaling/memcached/raw|dlock)."""
# scheme -> where its server is: "$VARIABLE" (the launcher's URI, the scheme replaced)
ROWS = {"memcached": "$DLOCK_MEMCACHED_URI"}
