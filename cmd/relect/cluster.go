package main

import (
	"os"
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
	fs                  *pflag.FlagSet
}

func (c *clusterFlags) define(fs *pflag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service account)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context to use (default: the current context)")
}

// restConfig loads the configuration with kubectl's rules: --kubeconfig,
// else the files in $KUBECONFIG merged, else ~/.kube/config, else the
// in-cluster service account; --context overrides the current context.
// It reads files only; it does not contact the server. When none of them
// names a cluster, the error says what was tried (tried), not client-go's
// "no configuration has been provided, try setting KUBERNETES_MASTER".
func (c *clusterFlags) restConfig() (*rest.Config, error) {
	// An explicit empty value would silently mean the default: refused, as
	// the election's zeros are (refuseZeros).
	if c.fs != nil && c.fs.Changed("kubeconfig") && c.kubeconfig == "" {
		return nil, zeroFlagError(c.fs, "kubeconfig", "$KUBECONFIG, else ~/.kube/config, else the pod's service account")
	}
	if c.fs != nil && c.fs.Changed("context") && c.context == "" {
		return nil, zeroFlagError(c.fs, "context", "the kubeconfig's current context")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, usagef("no cluster to talk to: %s; give --kubeconfig, point $KUBECONFIG at a kubeconfig, or run in a pod", tried(rules))
	case err != nil:
		return nil, usagef("loading the kubeconfig (--kubeconfig, --context, $KUBECONFIG, in-cluster): %v", err)
	}
	return cfg, nil
}

// tried says where restConfig looked for a cluster and what it found: the
// kubeconfig files of rules, each missing or naming no cluster, and why the
// pod's service account was not used.
func tried(rules *clientcmd.ClientConfigLoadingRules) string {
	var files []string
	for _, f := range rules.Precedence {
		if _, err := os.Stat(f); err != nil {
			files = append(files, f+" does not exist")
		} else {
			files = append(files, f+" names no cluster (no current context or server)")
		}
	}
	var parts []string
	switch env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); {
	case rules.ExplicitPath != "":
		parts = append(parts, "--kubeconfig "+rules.ExplicitPath+" names no cluster (no current context or server)")
	case env != "":
		parts = append(parts, "$"+clientcmd.RecommendedConfigPathEnvVar+"="+env+": "+strings.Join(files, ", "))
	default:
		parts = append(parts, "$"+clientcmd.RecommendedConfigPathEnvVar+" is not set, and "+strings.Join(files, ", "))
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		parts = append(parts, "not in a pod ($KUBERNETES_SERVICE_HOST is not set)")
	} else {
		parts = append(parts, "the pod's service account is not usable (no token in /var/run/secrets/kubernetes.io/serviceaccount)")
	}
	return strings.Join(parts, "; ")
}
