package relect

import (
	"context"

	"github.com/relect/relect/internal/leasewatch"
	"github.com/relect/relect/internal/linelease"
	"github.com/relect/relect/internal/registry"
	"github.com/relect/relect/internal/shards"

	"k8s.io/apimachinery/pkg/watch"
)

// gatewayCalls is the gateway as the components see it: the Calls of the
// shards component (shards.Calls), the registry (registry.Calls) and the
// line Lease (linelease.Calls), one adapter for all three. Every call goes through the gateway's bucket and
// is counted there.
type gatewayCalls struct{ gw *gateway }

var (
	_ shards.Calls    = gatewayCalls{}
	_ registry.Calls  = gatewayCalls{}
	_ linelease.Calls = gatewayCalls{}
)

func (c gatewayCalls) Do(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error {
	return c.gw.do(ctx, verb, bounded, fn)
}

func (c gatewayCalls) DoSpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) error {
	return c.gw.doSpare(ctx, verb, bounded, 0, fn)
}

func (c gatewayCalls) TrySpare(ctx context.Context, verb string, bounded bool, fn func(context.Context) error) (bool, error) {
	return c.gw.trySpare(ctx, verb, bounded, fn)
}

func (c gatewayCalls) Ready(ctx context.Context) error { return c.gw.ready(ctx) }

func (c gatewayCalls) Decode(ev watch.Event, open bool) leasewatch.Event { return c.gw.event(ev, open) }
