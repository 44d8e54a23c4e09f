package runtimemove

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// nodeName is the node's name as the API knows it: the kubelet's client
// certificate says "system:node:NAME"; the host name is the fallback.
func (p Paths) nodeName() (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.KubeletConf)
	if err == nil {
		data := cfg.TLSClientConfig.CertData
		if len(data) == 0 && cfg.TLSClientConfig.CertFile != "" {
			data, _ = os.ReadFile(cfg.TLSClientConfig.CertFile)
		}
		for len(data) > 0 {
			var b *pem.Block
			if b, data = pem.Decode(data); b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			if c, err := x509.ParseCertificate(b.Bytes); err == nil && strings.HasPrefix(c.Subject.CommonName, "system:node:") {
				return strings.TrimPrefix(c.Subject.CommonName, "system:node:"), nil
			}
		}
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("find the node's name: %w; pass --node-name", err)
	}
	return strings.ToLower(h), nil
}
