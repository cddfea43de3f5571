//go:build tools

// Package tools records the control-plane binaries built by
// hack/build-control-plane.sh so that `go mod tidy` keeps their requirements.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
