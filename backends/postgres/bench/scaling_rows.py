"""tools/bench/scaling's rows for the postgres folder (postgres_bench's scaling/<scheme>/raw|dlock)."""
# scheme -> where its server is: "$VARIABLE" (the launcher's URI, the scheme replaced)
ROWS = {
    "postgres+advisory": "$DLOCK_POSTGRES_URI",
    "postgres+index": "$DLOCK_POSTGRES_URI",
}
