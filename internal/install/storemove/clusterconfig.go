package storemove

import (
	"bytes"
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// externalEtcd is kubeadm's ClusterConfiguration etcd.external section: the
// endpoints and the client certificate kube-apiserver uses towards them.
type externalEtcd struct {
	Endpoints []string `yaml:"endpoints"`
	CAFile    string   `yaml:"caFile"`
	CertFile  string   `yaml:"certFile"`
	KeyFile   string   `yaml:"keyFile"`
}

// withExternalEtcd returns the ClusterConfiguration document cfg with its
// etcd section replaced by etcd.external = ext. Every other field is kept as
// it was (a yaml.v3 node edit); only the etcd section's text changes.
func withExternalEtcd(cfg []byte, ext externalEtcd) ([]byte, error) {
	doc, err := parseClusterConfig(cfg)
	if err != nil {
		return nil, err
	}
	var section yaml.Node
	if err := section.Encode(map[string]externalEtcd{"external": ext}); err != nil {
		return nil, fmt.Errorf("encode etcd.external: %w", err)
	}
	setTopLevel(doc, "etcd", &section)
	return encodeClusterConfig(doc)
}

// withEtcdSectionOf returns cur with its etcd section replaced by the one of
// from (both ClusterConfiguration documents): how undo puts etcd back into a
// ClusterConfiguration that kubeadm (an upgrade) rewrote while the store
// served, keeping what the upgrade changed.
func withEtcdSectionOf(cur, from []byte) ([]byte, error) {
	doc, err := parseClusterConfig(cur)
	if err != nil {
		return nil, err
	}
	src, err := parseClusterConfig(from)
	if err != nil {
		return nil, err
	}
	section := topLevel(src, "etcd")
	if section == nil {
		removeTopLevel(doc, "etcd")
	} else {
		setTopLevel(doc, "etcd", section)
	}
	return encodeClusterConfig(doc)
}

// etcdEndpointsOf reports the etcd.external endpoints of a ClusterConfiguration
// (nil for etcd.local or none).
func etcdEndpointsOf(cfg []byte) []string {
	var c struct {
		Etcd struct {
			External *externalEtcd `yaml:"external"`
		} `yaml:"etcd"`
	}
	if err := yaml.Unmarshal(cfg, &c); err != nil || c.Etcd.External == nil {
		return nil
	}
	return c.Etcd.External.Endpoints
}

var errNotClusterConfig = errors.New("not a kubeadm ClusterConfiguration (no top-level mapping)")

// parseClusterConfig returns the top-level mapping node of a YAML document.
func parseClusterConfig(b []byte) (*yaml.Node, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("parse ClusterConfiguration: %w", err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errNotClusterConfig
	}
	return root.Content[0], nil
}

func encodeClusterConfig(doc *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	enc.CompactSeqIndent() // sequences as kubeadm (sigs.k8s.io/yaml) writes them
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode ClusterConfiguration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode ClusterConfiguration: %w", err)
	}
	return buf.Bytes(), nil
}

// topLevel returns the value node of key in mapping m, or nil.
func topLevel(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setTopLevel sets key to value in mapping m, in place if key exists,
// appended otherwise.
func setTopLevel(m *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = value
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}

func removeTopLevel(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
