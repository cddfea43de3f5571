// Command controlplane runs the project's own control plane — kube-apiserver
// v1.37.2 and etcd v3.7.3, as built by hack/build-control-plane.sh — on
// 127.0.0.1 until interrupted, and writes an admin kubeconfig for it, so
// that the examples can run against a real apiserver without a cluster:
//
//	KUBEBUILDER_ASSETS=$(hack/build-control-plane.sh) go run -C e2e ./cmd/controlplane -out /tmp/relect.kubeconfig &
//	go run ./examples/demo -kubeconfig /tmp/relect.kubeconfig
//
// It prints "ready" on stdout once the kubeconfig is written, and stops
// both processes on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	kubeconfig := flag.String("out", filepath.Join(os.TempDir(), "relect.kubeconfig"), "where to write the admin kubeconfig (controller-runtime already defines -kubeconfig)")
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

	kc := clientcmdapi.NewConfig()
	kc.Clusters["relect"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["relect"] = &clientcmdapi.Context{Cluster: "relect", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "relect"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "controlplane: apiserver at %s; kubeconfig %s; stop with Ctrl-C\n", cfg.Host, kubeconfig)
	fmt.Println("ready")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}
