// Package testcluster runs a real, local Kubernetes control plane for rudder's integration
// tests, `make dev-cluster` and `make demo`: etcd and kube-apiserver through controller-runtime's
// envtest, plus optionally kube-controller-manager, kube-scheduler and kwok with one simulated
// Node, all from binaries that `make tools` builds into bin/.
//
// Every address it allocates (the Service and Pod ranges) is only allocated, never routed: no
// test sends traffic to them. Components it starts itself die with the process that started them.
package testcluster
