package main

import (
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// leaseRef is the LEASE argument: where the Lease lives.
type leaseRef struct {
	namespace, name string
}

// String returns "namespace/name", the form of the argument and of
// RELECT_LEASE.
func (l leaseRef) String() string { return l.namespace + "/" + l.name }

// parseLease parses NAMESPACE/NAME and checks both parts as the API server
// would, so that a typo fails here and not at the first API call.
func parseLease(s string) (leaseRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return leaseRef{}, usagef("LEASE %q: want NAMESPACE/NAME, for example default/my-job", s)
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return leaseRef{}, usagef("LEASE %q: %q is not a valid namespace: %s", s, ns, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return leaseRef{}, usagef("LEASE %q: %q is not a valid Lease name: %s", s, name, strings.Join(msgs, "; "))
	}
	return leaseRef{namespace: ns, name: name}, nil
}

// clusterFlags find the API server as kubectl does.
type clusterFlags struct {
	kubeconfig, context string
}

func (c *clusterFlags) define(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service account)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context to use (default: the current context)")
}

// restConfig loads the configuration with kubectl's rules: --kubeconfig,
// else the files in $KUBECONFIG merged, else ~/.kube/config, else the
// in-cluster service account; --context overrides the current context.
// It reads files only; it does not contact the server.
func (c *clusterFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, usagef("loading the kubeconfig (--kubeconfig, --context, $KUBECONFIG, in-cluster): %v", err)
	}
	return cfg, nil
}
