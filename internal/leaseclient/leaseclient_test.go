package leaseclient

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestRESTConfig(t *testing.T) {
	user := &rest.Config{
		Host: "https://example.invalid", QPS: 5, Burst: 10, Timeout: time.Minute, UserAgent: "app",
		RateLimiter: flowcontrol.NewTokenBucketRateLimiter(5, 10),
	}
	c := RESTConfig(user)
	if c.RateLimiter != nil || c.QPS != -1 || c.Timeout != 0 {
		t.Errorf("RateLimiter %v, QPS %v, Timeout %v: want nil, -1 (no client-side limiter), 0", c.RateLimiter, c.QPS, c.Timeout)
	}
	if c.ContentType != "application/vnd.kubernetes.protobuf" || c.AcceptContentTypes != "application/vnd.kubernetes.protobuf,application/json" {
		t.Errorf("ContentType %q, AcceptContentTypes %q: want protobuf, and JSON accepted", c.ContentType, c.AcceptContentTypes)
	}
	// rest.AddUserAgent replaces the user's agent: client-go's default, then "/relect".
	if want := rest.DefaultKubernetesUserAgent() + "/" + UserAgent; c.UserAgent != want || c.Host != user.Host {
		t.Errorf("UserAgent %q, Host %q: want %q, the same host", c.UserAgent, c.Host, want)
	}
	if user.QPS != 5 || user.Timeout != time.Minute || user.UserAgent != "app" || user.RateLimiter == nil || user.ContentType != "" {
		t.Errorf("the user's config changed: %+v", user)
	}
}
