// Package leaseclient builds the benchmark's JSON Lease client: the
// rest.Config relect builds its own Lease client from (the root module's
// internal/leaseclient, RESTConfig: no client-side rate limiter, no
// whole-request timeout, its user agent), but speaking JSON where relect
// speaks protobuf. A relect candidate given a clientset built from it
// (Options.Client) sends every Lease and registry call as relect did
// before it spoke protobuf, so that the benchmark can run both side by
// side.
package leaseclient

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// JSONConfig returns a copy of cfg for a JSON Lease client.
func JSONConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil
	c.QPS = -1 // negative: no client-side limiter (rest.RESTClientFor)
	c.Timeout = 0
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	return rest.AddUserAgent(c, "relect")
}
