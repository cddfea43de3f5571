//go:build tools

// Package tools records the etcd server built by hack/build-control-plane.sh
// so that `go mod tidy` keeps its requirements.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
