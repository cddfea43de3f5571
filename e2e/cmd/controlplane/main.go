// Command controlplane runs the project's own control plane — kube-apiserver
// v1.37.2 and etcd v3.7.3, as built by hack/build-control-plane.sh — on
// 127.0.0.1 until interrupted, and writes an admin kubeconfig for it, so
// that the examples can run against a real apiserver without a cluster:
//
//	rm -f /tmp/relect.kubeconfig
//	KUBEBUILDER_ASSETS=$(hack/build-control-plane.sh) go run -C e2e ./cmd/controlplane -out /tmp/relect.kubeconfig &
//	until [ -e /tmp/relect.kubeconfig ]; do sleep 1; done
//	go run ./examples/demo -kubeconfig /tmp/relect.kubeconfig
//
// It writes the kubeconfig last, once the apiserver serves, in one rename
// (a reader never sees half of it), and removes it when it stops; so wait
// for the file. It then prints the line "relect-controlplane-ready
// kubeconfig=FILE" on stdout (readyMarker: no log line of the apiserver or
// etcd contains it, whereas "ready" was also in the apiserver's "Storage is
// ready for all registered resources", printed before). It stops both
// processes on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// readyMarker begins the line printed on stdout once the kubeconfig is
// written: a word no log line of the apiserver or etcd contains.
const readyMarker = "relect-controlplane-ready"

func main() {
	kubeconfig := flag.String("out", filepath.Join(os.TempDir(), "relect.kubeconfig"), "where to write the admin kubeconfig, last, once the apiserver serves; removed at exit (controller-runtime already defines -kubeconfig)")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set: run with KUBEBUILDER_ASSETS=$(hack/build-control-plane.sh)")
	}
	// A kubeconfig left by an earlier run names a server that is gone:
	// whoever waits for the file must not find it before this one serves.
	if err := os.Remove(kubeconfig); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	api := &envtest.APIServer{Out: os.Stderr, Err: os.Stderr}
	api.Configure().
		// Works in a network namespace without a default route too.
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	env := &envtest.Environment{
		ControlPlane:             envtest.ControlPlane{APIServer: api},
		ControlPlaneStartTimeout: 60 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return err
	}
	defer env.Stop()
	defer os.Remove(kubeconfig) // before the apiserver stops

	if err := announce(os.Stdout, kubeconfig, adminConfig(cfg)); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "controlplane: apiserver at %s; kubeconfig %s; stop with Ctrl-C\n", cfg.Host, kubeconfig)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

// adminConfig is a kubeconfig for the admin user of cfg.
func adminConfig(cfg *rest.Config) clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["relect"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["relect"] = &clientcmdapi.Context{Cluster: "relect", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "relect"
	return *kc
}

// announce writes kc to path — beside it first, then renamed, so that the
// file appears whole or not at all — and then prints the ready line on
// stdout.
func announce(stdout io.Writer, path string, kc clientcmdapi.Config) error {
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(kc, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	_, err := fmt.Fprintf(stdout, "%s kubeconfig=%s\n", readyMarker, path)
	return err
}
