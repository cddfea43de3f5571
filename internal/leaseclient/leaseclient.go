// Package leaseclient makes the REST configuration of the client relect
// calls the Lease API with, from the user's (relect.Options.Config). It
// knows no election; the root package imports it.
package leaseclient

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// UserAgent is what RESTConfig adds to the configuration's user agent.
const UserAgent = "relect"

// RESTConfig returns a copy of cfg for the Lease client: no client-side
// rate limiter (relect's bucket paces the calls), no whole-request timeout,
// its own user agent, and protobuf on the wire. cfg is not changed.
func RESTConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil
	c.QPS = -1 // negative: no client-side limiter (rest.RESTClientFor)
	// An http.Client timeout covers the whole request, a watch's stream
	// included; the lock gives every other call a context timeout.
	c.Timeout = 0
	// Protobuf, as kube-controller-manager, kube-scheduler and kubelet
	// speak it: a Lease with relect's annotations is about 40 % smaller
	// than in JSON, and decodes an order of magnitude faster — on the
	// apiserver, which sends every renewal to every follower's watch, and
	// on each follower. JSON remains accepted for an apiserver (or proxy)
	// that answers in it.
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return rest.AddUserAgent(c, UserAgent)
}
