"""The exclusive-placement admission webhook: FastAPI over TLS, leader/node informer cache.

Modules, one concern each: `settings` (flags + EXCLUSIVE_PLACEMENT_* env), `review` (AdmissionReview wire
types and the Allowed/Denied/Patched/Errored vocabulary), `handlers` (placement core + leader lookup),
`cache` (list+watch informers and live fallback), `kube` (cluster access), `tls` (reloading SSLContext),
`metrics`, `logs`, `app` (routes only), `server` (wiring + uvicorn). Run `python -m webhook --help`.
"""
