"""The Kubernetes plumbing the webhook and the resizer share, written once.

- `client`: the API client (one `--server` / `--kubeconfig` / `$KUBECONFIG` / in-cluster / `~/.kube/config`
  order), `Kube` (raw JSON calls with client-side timeouts), `KubeError` (every failure, one shape;
  `not_found` and `conflict` are how 404 and 409 are asked, `is_not_found` / `is_conflict` of a raw
  response's status).
- `generic`: `GenericClient`, any kind by name (create, get, list, watch, patch, delete, discovery, tokens,
  access reviews) on `client.Transport` (`Kube`'s own): the one client of devstack, the benchmarks and the
  kube tier.
  `resources`: the built-in kinds' collections and paths; `credentials`: a CA with a client certificate or
  a token (`kubeconfig_credentials`), for `GenericClient.connect` and the benchmarks' own httpx clients.
- `informer`: list + watch into a thread-safe `Store` (bookmarks, 410 Gone → re-list, jittered backoff,
  readiness once synced, one secondary index, a pluggable projection of what is kept).
- `projection`: `FieldProjection`, an informer's `project=` that keeps only the named fields (the field
  lists are `placement.cached_fields`); with `Informer(metadata_only=True)` a cache lists and watches
  `PartialObjectMetadata`.
- `keys`: `object_key`, the `namespace/name` key of caches and work queues; `objects`: `Obj` (a plain JSON
  dict) and the accessors kubekit reads.
- `client.CustomResource`: a custom resource (group, version, plural) its caller declares, as
  `GenericClient(kinds=...)` takes the custom kinds it addresses by name (devstack's: `devstack.kinds`):
  kubekit names no one's CRDs and imports nothing of `placement` (an import-linter contract).
- `workqueue`, `controller`: client-go's work queue and controller-runtime's loop (`Result`, retries,
  terminal errors, `Leadership`), apart from the reconcilers; `election`: leader election on a Lease;
  `events`: the events.k8s.io recorder with its series. Their metrics are passed in.
- `logs`: one text and one JSON log format, in UTC.
- `settings`: the settings base (`EXCLUSIVE_PLACEMENT_*` environment, flags and `--help` generated from
  the model); `process`: how a binary starts (settings or exit 2, logging, run).

No domain decisions here (those are in `placement/`), and nothing specific to one binary.
"""
