"""`kubectl exclusive-placement`: where exclusive placement stands, read from the API server.

docs/kubectl-plugin.md describes it.

`status` shows every topology domain with the Jobs holding it and every exclusive Job not yet placed with
what it waits for; `explain` follows one Job, JobSet or pod through the steps to being placed. It only
reads (get, list, watch). The decisions are `placement.status`; this package reads (`cluster`), shapes the
answer (`render`, `explain`) and parses the command line (`cli`).
"""
