package etcdrestore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// Member is a local etcd member as kubeadm's static pod manifest runs it.
type Member struct {
	// Name is the member's name (kubeadm: the node name).
	Name string
	// ClientURL is its first advertised client URL.
	ClientURL string
	// DataDir is its data dir (etcd's default /var/lib/etcd if unset).
	DataDir string
	// PeerURL is its --initial-advertise-peer-urls.
	PeerURL string
	// Token is its --initial-cluster-token (etcd's default if unset).
	Token string
}

// MemberOf reads a Member from kubeadm's etcd manifest.
func MemberOf(manifest []byte) (Member, error) {
	var m Member
	var ok bool
	if m.Name, ok = staticpod.Flag(manifest, "name"); !ok {
		return m, errors.New("no --name flag; it is not kubeadm's etcd manifest")
	}
	adv, ok := staticpod.Flag(manifest, "advertise-client-urls")
	if !ok {
		return m, errors.New("no --advertise-client-urls flag; it is not kubeadm's etcd manifest")
	}
	m.ClientURL = strings.Split(adv, ",")[0]
	if u, err := url.Parse(m.ClientURL); err != nil || u.Hostname() == "" {
		return m, fmt.Errorf("--advertise-client-urls=%q is not a URL", adv)
	}
	if m.DataDir, ok = staticpod.Flag(manifest, "data-dir"); !ok {
		m.DataDir = "/var/lib/etcd"
	}
	if m.PeerURL, ok = staticpod.Flag(manifest, "initial-advertise-peer-urls"); !ok {
		return m, errors.New("no --initial-advertise-peer-urls flag; it is not kubeadm's etcd manifest")
	}
	if m.Token, ok = staticpod.Flag(manifest, "initial-cluster-token"); !ok {
		m.Token = "etcd-cluster"
	}
	return m, nil
}
