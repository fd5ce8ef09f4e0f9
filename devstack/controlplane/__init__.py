"""The real control plane, built from pinned Go modules and run locally (`--control-plane kube`).

`make kube` builds kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and JobSet's
controller from the Go tools module in cluster/ (`build`); `KubeControlPlane` (`cluster`) starts them with
kwokctl's binary runtime, nodes shaped as kubesim's, JobSet's controller and webhooks, and the identities
this project's processes use under the chart's RBAC.
"""
