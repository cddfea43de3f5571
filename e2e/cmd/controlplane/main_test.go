package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The README said to wait for "ready", which the apiserver's own log
// printed first ("Storage is ready for all registered resources"): the
// ready line is one no such line contains, printed once the kubeconfig is
// whole in its place.
func TestAnnounce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relect.kubeconfig")
	var out bytes.Buffer
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	if err := announce(&out, path, adminConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	want := readyMarker + " kubeconfig=" + path + "\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatalf("the kubeconfig: %v", err)
	}
	if got := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server; got != cfg.Host {
		t.Errorf("the kubeconfig names server %q, want %q", got, cfg.Host)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the file written beside it stayed: %v", err)
	}
	// Messages of the apiserver (storage_readiness.go) and etcd
	// (embed/serve.go) that say "ready", logged before the kubeconfig is
	// written.
	for _, line := range []string{
		"Storage is ready for all registered resources",
		"ready to serve client requests",
	} {
		if strings.Contains(line, readyMarker) {
			t.Errorf("a log line contains the ready marker %q: %s", readyMarker, line)
		}
	}
}
