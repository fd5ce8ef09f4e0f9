"""The real control plane, built from pinned Go modules and run locally: devstack's only cluster.

`make kube` builds kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and JobSet's
controller from the Go tools module in cluster/ (`build`); `KubeControlPlane` (`cluster`) starts them with
kwokctl's binary runtime, nodes of the asked shape (devstack.shape), JobSet's controller and webhooks, and
the identities this project's processes use under the chart's RBAC.
"""
