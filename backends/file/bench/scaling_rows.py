"""tools/bench/scaling's rows for the file folder (file_bench has no scaling/ rows: the contended table only)."""
# scheme -> the URI it runs on, "{dir}" a temporary folder (no server)
ROWS = {"file": "file://{dir}/scaling-file-locks"}
