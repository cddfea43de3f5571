// Package faultproxy is a TCP proxy on loopback, one per candidate, between
// the candidate and the apiserver, that the e2e tests use to inject network
// faults: added latency, a black hole, and cut connections. TLS passes
// through untouched.
//
// It embeds Shopify's toxiproxy (github.com/Shopify/toxiproxy/v2) in the
// test process rather than running its server: the proxy and its "toxics"
// are driven through toxiproxy's Go types, with no HTTP API and no port
// other than the proxy's own.
package faultproxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// The names of the toxics this package adds; one of each kind at most.
const (
	toxicBlackholeUp   = "blackhole-up"
	toxicBlackholeDown = "blackhole-down"
	toxicLatencyUp     = "latency-up"
	toxicLatencyDown   = "latency-down"
)

var (
	serverOnce sync.Once
	server     *toxiproxy.ApiServer
)

// toxiproxyServer returns the toxiproxy server object the proxies hang off.
// Its HTTP API is never started; it only carries a logger and (disabled)
// metrics for the proxies.
func toxiproxyServer() *toxiproxy.ApiServer {
	serverOnce.Do(func() {
		server = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	})
	return server
}

// Proxy forwards connections from a loopback port to an upstream address.
// It is safe for concurrent use.
type Proxy struct {
	mu sync.Mutex
	p  *toxiproxy.Proxy
}

// New starts a proxy listening on 127.0.0.1 on a free port and forwarding
// to upstream (host:port).
func New(name, upstream string) (*Proxy, error) {
	p := toxiproxy.NewProxy(toxiproxyServer(), name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("faultproxy: starting %s: %w", name, err)
	}
	return &Proxy{p: p}, nil
}

// Addr is the host:port candidates connect to.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Listen
}

// Upstream is the host:port the proxy forwards to.
func (p *Proxy) Upstream() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Upstream
}

// SetUpstream points the proxy at a new upstream address (an apiserver that
// came back on another port). Open connections are cut; the listening
// address stays the same. It is a no-op when the upstream is unchanged.
func (p *Proxy) SetUpstream(upstream string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.p.Upstream == upstream {
		return nil
	}
	return p.p.Update(&toxiproxy.Proxy{Listen: p.p.Listen, Upstream: upstream, Enabled: true})
}

// Blackhole makes the proxy swallow everything in both directions, on open
// connections and on new ones, which it still accepts and connects
// upstream: requests are never answered and nothing is refused, as when
// packets are dropped on the way. Heal ends it.
func (p *Proxy) Blackhole() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range []struct{ name, stream string }{{toxicBlackholeUp, "upstream"}, {toxicBlackholeDown, "downstream"}} {
		if p.p.Toxics.GetToxic(t.name) != nil {
			continue
		}
		// A timeout toxic with timeout 0 drops all data and never closes.
		js := fmt.Sprintf(`{"name":%q,"type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`, t.name, t.stream)
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("faultproxy: black hole: %w", err)
		}
	}
	return nil
}

// SetLatency delays every chunk of data going upstream (requests) by up
// and every chunk coming back (responses) by down; 0 removes that delay.
func (p *Proxy) SetLatency(up, down time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range []struct {
		name, stream string
		d            time.Duration
	}{{toxicLatencyUp, "upstream", up}, {toxicLatencyDown, "downstream", down}} {
		if p.p.Toxics.GetToxic(t.name) != nil {
			if err := p.p.Toxics.RemoveToxic(context.Background(), t.name); err != nil {
				return fmt.Errorf("faultproxy: removing latency: %w", err)
			}
		}
		if t.d == 0 {
			continue
		}
		js := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%d}}`,
			t.name, t.stream, t.d.Milliseconds())
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("faultproxy: latency: %w", err)
		}
	}
	return nil
}

// Heal removes the black hole. Connections that went through it are closed
// (their byte streams lost data, so TLS could not go on over them); clients
// reconnect.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range []string{toxicBlackholeUp, toxicBlackholeDown} {
		if p.p.Toxics.GetToxic(name) == nil {
			continue
		}
		if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
			return fmt.Errorf("faultproxy: heal: %w", err)
		}
	}
	return nil
}

// Cut closes every open connection through the proxy, both sides, as a
// reset would; the proxy keeps listening and accepts new connections.
func (p *Proxy) Cut() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p.Stop()
	return p.p.Start()
}

// Close stops the proxy and closes all its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p.Stop()
}
