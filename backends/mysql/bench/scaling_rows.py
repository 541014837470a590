"""tools/bench/scaling's rows for the mysql folder (mysql_bench's scaling/<scheme>/raw|dlock)."""
# scheme -> where its server is: "$VARIABLE" (the launcher's URI, the scheme replaced)
ROWS = {
    "mysql+getlock": "$DLOCK_MYSQL_URI",
    "mysql+index": "$DLOCK_MYSQL_URI",
}
