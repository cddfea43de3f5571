package faultproxy

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer answers every line with a prefix and the line.
func echoServer(t *testing.T, prefix string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, prefix+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

type conn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{t: t, c: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and returns the answer, or the error after wait.
func (c *conn) roundTrip(line string, wait time.Duration) (string, error) {
	c.t.Helper()
	c.c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func TestProxyFaults(t *testing.T) {
	p, err := New("test", echoServer(t, "a:"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c1 := dial(t, p)
	if got, err := c1.roundTrip("hello", 2*time.Second); err != nil || got != "a:hello" {
		t.Fatalf("forwarding: got %q, %v", got, err)
	}

	// Black hole: open and new connections get no answer, and nothing is
	// refused.
	if err := p.Blackhole(); err != nil {
		t.Fatal(err)
	}
	if got, err := c1.roundTrip("lost", 300*time.Millisecond); err == nil {
		t.Fatalf("black hole answered %q on an open connection", got)
	}
	c2 := dial(t, p)
	if got, err := c2.roundTrip("lost", 300*time.Millisecond); err == nil {
		t.Fatalf("black hole answered %q on a new connection", got)
	}

	// Heal: the swallowed connections are closed, new ones work.
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.roundTrip("after", 2*time.Second); err == nil {
		t.Fatal("a connection that went through the black hole survived healing")
	}
	c3 := dial(t, p)
	if got, err := c3.roundTrip("healed", 2*time.Second); err != nil || got != "a:healed" {
		t.Fatalf("after heal: got %q, %v", got, err)
	}

	// Latency.
	if err := p.SetLatency(200*time.Millisecond, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got, err := c3.roundTrip("slow", 3*time.Second); err != nil || got != "a:slow" {
		t.Fatalf("with latency: got %q, %v", got, err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("round trip took %v with 200ms latency each way", d)
	}
	if err := p.SetLatency(0, 0); err != nil {
		t.Fatal(err)
	}

	// Cut: open connections end, the proxy still accepts.
	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	if _, err := c3.roundTrip("cut", 2*time.Second); err == nil {
		t.Fatal("connection survived a cut")
	}
	c4 := dial(t, p)
	if got, err := c4.roundTrip("again", 2*time.Second); err != nil || got != "a:again" {
		t.Fatalf("after cut: got %q, %v", got, err)
	}

	// New upstream, same listening address.
	addr := p.Addr()
	if err := p.SetUpstream(echoServer(t, "b:")); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Fatalf("listening address moved from %s to %s", addr, p.Addr())
	}
	c5 := dial(t, p)
	if got, err := c5.roundTrip("moved", 2*time.Second); err != nil || got != "b:moved" {
		t.Fatalf("after SetUpstream: got %q, %v", got, err)
	}
}
