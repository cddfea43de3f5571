package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relect/relect/e2e/internal/faultproxy"
	"github.com/relect/relect/e2e/internal/history"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// The helpers of the controller-runtime scenario (ctrlrt_test.go): the
// replica processes (e2e/cmd/ctrlrt-replica), their histories read as they
// grow, a watch on the ConfigMaps they stamp, and pollers of their metrics
// and webhook servers.

var (
	crtBinOnce sync.Once
	crtBin     string
	crtBinErr  error
)

// ctrlrtReplicaBinary builds e2e/cmd/ctrlrt-replica once per run (with the
// race detector when the tests run with it).
func ctrlrtReplicaBinary(t *testing.T) string {
	t.Helper()
	crtBinOnce.Do(func() {
		start := time.Now()
		crtBin = filepath.Join(workDir, "ctrlrt-replica")
		args := []string{"build", "-o", crtBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/ctrlrt-replica")
		if out, err := exec.Command(goTool(), args...).CombinedOutput(); err != nil {
			crtBinErr = fmt.Errorf("go %v: %v\n%s", args, err, out)
			return
		}
		t.Logf("built the ctrlrt replica (race=%v) in %v", raceEnabled, time.Since(start).Round(time.Millisecond))
	})
	if crtBinErr != nil {
		t.Fatal(crtBinErr)
	}
	return crtBin
}

// historyTail reads a history file as it grows: each call parses only the
// lines written since the last.
type historyTail struct {
	path string

	mu      sync.Mutex
	off     int64
	partial []byte
	recs    []history.Record
}

// records returns every record written so far. The slice is shared: only
// read it.
func (h *historyTail) records() []history.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := os.Open(h.path)
	if err != nil {
		return h.recs
	}
	defer f.Close()
	if _, err := f.Seek(h.off, io.SeekStart); err != nil {
		return h.recs
	}
	data, err := io.ReadAll(f)
	if err != nil || len(data) == 0 {
		return h.recs
	}
	h.off += int64(len(data))
	data = append(h.partial, data...)
	end := bytes.LastIndexByte(data, '\n') + 1
	recs, _ := history.Parse(data[:end])
	h.partial = append([]byte(nil), data[end:]...)
	h.recs = append(h.recs, recs...)
	return h.recs
}

// events returns the records of event kind at or after from.
func (h *historyTail) events(kind string, from time.Time) []history.Record {
	var out []history.Record
	for _, r := range h.records() {
		if r.Kind == history.KindEvent && r.Event == kind && !r.Time().Before(from) {
			out = append(out, r)
		}
	}
	return out
}

// crtReplica is one replica process.
type crtReplica struct {
	*process
	id          string
	durable     bool // never stopped before the end of the phase
	proxy       *faultproxy.Proxy
	tail        *historyTail
	log         string
	metricsAddr string
	webhookPort int
}

// startReplica starts a replica of the phase named id and waits for its
// first record.
func (p *crtPhase) startReplica(id string, durable bool) *crtReplica {
	t := p.t
	t.Helper()
	dir, err := os.MkdirTemp(testDir(t), id+"-")
	if err != nil {
		t.Fatal(err)
	}
	r := &crtReplica{id: id, durable: durable, proxy: p.c.newProxy(t, p.mode+"-"+id),
		tail: &historyTail{path: filepath.Join(dir, "history.jsonl")}, log: filepath.Join(dir, "stderr.log")}
	kc := filepath.Join(dir, "kubeconfig")
	kubeconfig(t, kc, p.c.adminConfig(), r.proxy.Addr())
	args := []string{
		"-kubeconfig", kc, "-namespace", p.ns, "-lease", p.lease, "-identity", id, "-mode", p.mode,
		"-history", r.tail.path, "-group", p.group,
		"-lease-duration", leaseDuration.String(), "-renew-deadline", renewDeadline.String(), "-retry-period", retryPeriod.String(),
	}
	if p.mode == "ctrlrt" {
		r.metricsAddr = freeAddr(t)
		_, port, _ := net.SplitHostPort(freeAddr(t))
		r.webhookPort, _ = strconv.Atoi(port)
		args = append(args, "-metrics-addr", r.metricsAddr, "-webhook-port", port, "-cert-dir", p.certDir)
	}
	r.process = startProcess(t, id, exec.Command(ctrlrtReplicaBinary(t), args...), r.log, func() { r.dump(t) })
	waitFor(t, 10*time.Second, id+" to start", func() bool {
		for _, rec := range r.tail.records() {
			if rec.Kind == history.KindStart {
				return true
			}
		}
		return r.exited()
	})
	if r.exited() {
		t.Fatalf("%s exited at start: %v", id, r.err())
	}
	p.replicas = append(p.replicas, r)
	return r
}

// dump logs the tail of its stderr, for a failed test.
func (r *crtReplica) dump(t *testing.T) {
	data, err := os.ReadFile(r.log)
	if err != nil {
		return
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	t.Logf("---- %s: last %d lines of stderr:\n%s", r.id, len(lines), bytes.Join(lines, []byte("\n")))
}

// logCount counts the lines of its stderr that contain s.
func (r *crtReplica) logCount(s string) int {
	data, _ := os.ReadFile(r.log)
	return strings.Count(string(data), s)
}

// intervals returns its intervals in view (history.ViewRelect, or
// viewReconcile).
func (r *crtReplica) intervals(view string) []history.Interval {
	return history.Intervals(r.id, r.tail.records(), view, r.dead())
}

// The history views of e2e/cmd/ctrlrt-replica: its reconciles, and in
// mode native the Lease as its lock held it.
const (
	viewReconcile = "reconcile"
	viewLease     = "lease"
)

// stamp is one version of a stamped ConfigMap, as the test's watch saw it.
type stamp struct {
	name, rv, leader, term, fence string
}

// stampWatch records every version of the ConfigMaps of one group.
type stampWatch struct {
	mu       sync.Mutex
	versions []stamp
	stop     context.CancelFunc
	done     chan struct{}
}

// watchStamps follows the ConfigMaps labelled ctrlrt-e2e=group in ns from
// the test process, straight to the apiserver; it resumes a broken watch
// with a new list (a version written meanwhile may then be missed, never
// reordered).
func (c *cluster) watchStamps(t *testing.T, ns, group string) *stampWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &stampWatch{stop: cancel, done: make(chan struct{})}
	cfg := c.adminConfig()
	cfg.Timeout = 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	sel := metav1.ListOptions{LabelSelector: "ctrlrt-e2e=" + group}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			list, err := cms.List(ctx, sel)
			if err == nil {
				for i := range list.Items {
					w.add(&list.Items[i])
				}
				o := sel
				o.ResourceVersion = list.ResourceVersion
				if wi, err := cms.Watch(ctx, o); err == nil {
					for ev := range wi.ResultChan() {
						if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted {
							w.add(cm)
						}
					}
					wi.Stop()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *stampWatch) add(cm *corev1.ConfigMap) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.versions = append(w.versions, stamp{name: cm.Name, rv: cm.ResourceVersion, leader: cm.Annotations["e2e.relect.io/leader"],
		term: cm.Annotations["e2e.relect.io/term"], fence: cm.Annotations["e2e.relect.io/fence"]})
}

func (w *stampWatch) close() {
	w.stop()
	<-w.done
}

// serverPoll polls a replica's metrics and webhook servers every period
// through one keep-alive client each, and counts the connections each
// needed and the polls that failed: a server that restarted would cost a
// new connection (and fail the polls while it was down).
type serverPoll struct {
	mu     sync.Mutex
	polls  map[string]int
	failed map[string]int
	conns  map[string]map[string]bool // local addresses used
	stop   context.CancelFunc
	done   chan struct{}
}

func pollServers(t *testing.T, r *crtReplica, ca *x509.CertPool, period time.Duration) *serverPoll {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sp := &serverPoll{polls: map[string]int{}, failed: map[string]int{}, conns: map[string]map[string]bool{}, stop: cancel, done: make(chan struct{})}
	client := func(tlsConfig *tls.Config) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, MaxConnsPerHost: 1, IdleConnTimeout: time.Hour}}
	}
	targets := map[string]struct {
		url string
		c   *http.Client
	}{
		"metrics": {"http://" + r.metricsAddr + "/metrics", client(nil)},
		"webhook": {fmt.Sprintf("https://127.0.0.1:%d/ping", r.webhookPort), client(&tls.Config{RootCAs: ca})},
	}
	go func() {
		defer close(sp.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			for name, tg := range targets {
				var local string
				trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { local = i.Conn.LocalAddr().String() }}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, tg.url, nil)
				resp, err := tg.c.Do(req)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if ctx.Err() != nil {
					return
				}
				sp.mu.Lock()
				sp.polls[name]++
				if !ok {
					sp.failed[name]++
				}
				if local != "" {
					if sp.conns[name] == nil {
						sp.conns[name] = map[string]bool{}
					}
					sp.conns[name][local] = true
				}
				sp.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(sp.close)
	return sp
}

func (sp *serverPoll) close() {
	sp.stop()
	<-sp.done
}

// webhookCert writes a self-signed certificate for 127.0.0.1 (tls.crt,
// tls.key, as controller-runtime's webhook server reads them) into dir,
// and returns a pool that trusts it.
func webhookCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ctrlrt-e2e-webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for name, data := range map[string][]byte{
		"tls.crt": certPEM,
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return pool
}
