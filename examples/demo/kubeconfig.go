package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
)

// loadKubeconfig builds a REST config from one kubeconfig file and context
// ("" for its current-context).
//
// Real programs should call clientcmd.BuildConfigFromFlags (or use
// clientcmd's loading rules, which also merge $KUBECONFIG). This demo lives
// in relect's own module, and k8s.io/client-go/tools/clientcmd would add
// github.com/spf13/pflag to relect's go.mod, so it decodes the file with
// clientcmd's codec and maps the fields client-go's own loader maps: server,
// TLS, proxy, token, client certificate, basic auth, impersonation and exec
// credential plugins. Auth-provider plugins (a legacy mechanism) are passed
// through but only work if the program links them in.
func loadKubeconfig(path, context string) (*rest.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSetup, err)
	}
	obj, _, err := clientcmdlatest.Codec.Decode(data, nil, clientcmdapi.NewConfig())
	if err != nil {
		return nil, fmt.Errorf("%w: decoding kubeconfig %s: %v", errSetup, path, err)
	}
	kc, ok := obj.(*clientcmdapi.Config)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a kubeconfig (decoded a %T)", errSetup, path, obj)
	}
	if context == "" {
		context = kc.CurrentContext
	}
	kctx := kc.Contexts[context]
	if kctx == nil {
		return nil, fmt.Errorf("%w: kubeconfig %s has no context %q", errSetup, path, context)
	}
	cluster, user := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	if cluster == nil || cluster.Server == "" {
		return nil, fmt.Errorf("%w: kubeconfig %s: context %q names no cluster with a server", errSetup, path, context)
	}
	if user == nil {
		user = clientcmdapi.NewAuthInfo()
	}

	// Relative file names are relative to the kubeconfig's directory.
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSetup, err)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}

	cfg := &rest.Config{
		Host: cluster.Server,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   cluster.InsecureSkipTLSVerify,
			ServerName: cluster.TLSServerName,
			CAFile:     abs(cluster.CertificateAuthority),
			CAData:     cluster.CertificateAuthorityData,
			CertFile:   abs(user.ClientCertificate),
			CertData:   user.ClientCertificateData,
			KeyFile:    abs(user.ClientKey),
			KeyData:    user.ClientKeyData,
		},
		DisableCompression: cluster.DisableCompression,
		BearerToken:        user.Token,
		BearerTokenFile:    abs(user.TokenFile),
		Username:           user.Username,
		Password:           user.Password,
		AuthProvider:       user.AuthProvider,
		Impersonate: rest.ImpersonationConfig{
			UserName: user.Impersonate,
			UID:      user.ImpersonateUID,
			Groups:   user.ImpersonateGroups,
			Extra:    user.ImpersonateUserExtra,
		},
	}
	if cluster.ProxyURL != "" {
		u, err := url.Parse(cluster.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("%w: kubeconfig %s: proxy-url: %v", errSetup, path, err)
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	if user.Exec != nil {
		exec := *user.Exec
		if strings.ContainsRune(exec.Command, filepath.Separator) {
			exec.Command = abs(exec.Command)
		}
		exec.Config = cluster.Extensions["client.authentication.k8s.io/exec"]
		cfg.ExecProvider = &exec
	}
	return cfg, nil
}
