package main

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// loadKubeconfig builds a REST config from one kubeconfig file and context
// ("" for its current-context), with client-go's own loader, as kubectl
// loads it.
func loadKubeconfig(path, context string) (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: kubeconfig %s: %v", errSetup, path, err)
	}
	return cfg, nil
}
