// Package kubeconfig builds token kubeconfigs in the shape Istio's remote secrets accept
// (embedded CA data and token, cluster/context/user named after the cluster).
package kubeconfig

import (
	"os"

	"k8s.io/client-go/tools/clientcmd"
	api "k8s.io/client-go/tools/clientcmd/api"
)

// Token returns a kubeconfig for server that authenticates with a bearer token. Everything is
// embedded because istiod rejects kubeconfigs that point at files.
func Token(name, server string, caData []byte, token string) *api.Config {
	return TokenFor(name, &api.Cluster{Server: server, CertificateAuthorityData: caData}, token)
}

// TokenFor returns a kubeconfig for the cluster entry server that authenticates with a bearer
// token, keeping the entry's TLS and proxy settings (tls-server-name, insecure-skip-tls-verify,
// proxy-url, ...). server must be flattened (its CA inline: clientcmdapi.FlattenConfig), since
// the kubeconfig is read far from the files it could name.
func TokenFor(name string, server *api.Cluster, token string) *api.Config {
	cl := server.DeepCopy()
	cl.LocationOfOrigin = ""
	cfg := api.NewConfig()
	cfg.Clusters[name] = cl
	cfg.AuthInfos[name] = &api.AuthInfo{Token: token}
	cfg.Contexts[name] = &api.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return cfg
}

// Bytes serialises cfg.
func Bytes(cfg *api.Config) ([]byte, error) { return clientcmd.Write(*cfg) }

// WriteFile writes cfg to path with mode 0600, since it holds a credential.
func WriteFile(path string, cfg *api.Config) error {
	data, err := Bytes(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	// WriteFile keeps the mode of an existing file; make sure it is private.
	return os.Chmod(path, 0o600)
}
