"""The exclusive-placement admission webhook: FastAPI over TLS, leader/node informer cache.

Modules, one concern each: `settings` (its flags and `EXCLUSIVE_PLACEMENT_*` env, on `kubekit.settings`),
`review` (AdmissionReview wire types and the Allowed/Denied/Patched/Errored vocabulary), `handlers`
(placement core + leader lookup), `cache` (the leader directory: informers and live fallback), `tls`
(reloading SSLContext), `limits` and `protocol` (abuse bounds), `metrics`, `app` (routes only), `server`
(wiring + uvicorn), `testing` (test tools). Cluster access and logs are `kubekit`'s. `python -m webhook
--help`.
"""
