"""The Kubernetes plumbing the webhook and the resizer share, written once.

- `client`: the API client (one `--server` / `--kubeconfig` / `$KUBECONFIG` / in-cluster / `~/.kube/config`
  order), `Kube` (raw JSON calls with client-side timeouts), `KubeError` (every failure, one shape).
- `informer`: list + watch into a thread-safe `Store` (bookmarks, 410 Gone → re-list, jittered backoff,
  readiness once synced, one secondary index, a pluggable projection of what is kept).
- `projection`: `FieldProjection`, an informer's `project=` that keeps only the named fields (the field
  lists are `placement.cached_fields`); with `Informer(metadata_only=True)` a cache lists and watches
  `PartialObjectMetadata`.
- `keys`: `object_key`, the `namespace/name` key of caches and work queues.
- `logs`: one text and one JSON log format, in UTC.
- `settings`: the settings base (`EXCLUSIVE_PLACEMENT_*` environment, flags and `--help` generated from
  the model); `process`: how a binary starts (settings or exit 2, logging, run).

No domain decisions here (those are in `placement/`), and nothing specific to one binary.
"""
