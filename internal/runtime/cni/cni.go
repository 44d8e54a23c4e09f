// Package cni attaches sandboxes to the node's network with libcni: the first network
// configuration (lexically) in the conf dir is used, like kubelet's dockershim and containerd.
package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// Network is the node's pod network.
type Network struct {
	ConfDir string
	BinDirs []string
	cni     *libcni.CNIConfig
}

// New prepares a network; configs are (re)read on every call so a CNI installed after
// the runtime started is picked up.
func New(confDir string, binDirs []string, cacheDir string) *Network {
	return &Network{ConfDir: confDir, BinDirs: binDirs, cni: libcni.NewCNIConfigWithCacheDir(binDirs, cacheDir, nil)}
}

// load returns the network list to use, or an error naming what is missing.
func (n *Network) load() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(n.ConfDir, []string{".conf", ".conflist", ".json"})
	if err != nil {
		return nil, fmt.Errorf("read CNI config dir %s: %w", n.ConfDir, err)
	}
	sort.Strings(files)
	for _, f := range files {
		var list *libcni.NetworkConfigList
		if l, err := libcni.NetworkConfFromFile(f); err == nil {
			list = l
		}
		if list != nil && len(list.Plugins) > 0 {
			return list, nil
		}
	}
	return nil, fmt.Errorf("no CNI network config in %s: install a CNI plugin config (e.g. a bridge .conflist)", n.ConfDir)
}

// Ready reports whether a network config exists.
func (n *Network) Ready() error {
	_, err := n.load()
	return err
}

// PortMapping is one hostPort of a pod.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Pod names the sandbox for the plugins (CNI_ARGS K8S_POD_*).
type Pod struct {
	ID, NetNS, Name, Namespace, UID string
	Ports                           []PortMapping
}

func (p Pod) runtimeConf() *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: p.ID,
		NetNS:       p.NetNS,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ID},
			{"K8S_POD_UID", p.UID},
		},
		CapabilityArgs: map[string]any{},
	}
	if len(p.Ports) > 0 {
		rt.CapabilityArgs["portMappings"] = p.Ports
	}
	return rt
}

// Setup runs ADD and returns the pod's IPs (first is the primary).
func (n *Network) Setup(ctx context.Context, p Pod) ([]string, error) {
	list, err := n.load()
	if err != nil {
		return nil, err
	}
	res, err := n.cni.AddNetworkList(ctx, list, p.runtimeConf())
	if err != nil {
		return nil, fmt.Errorf("CNI add %s for sandbox %s: %w", list.Name, p.ID, err)
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("convert CNI result: %w", err)
	}
	var ips []string
	for _, ip := range r.IPs {
		if ip.Address.IP != nil && !ip.Address.IP.Equal(net.IPv4zero) {
			ips = append(ips, ip.Address.IP.String())
		}
	}
	return ips, nil
}

// Teardown runs DEL; it is safe to call twice and when the netns is already gone.
func (n *Network) Teardown(ctx context.Context, p Pod) error {
	list, err := n.load()
	if err != nil {
		return err
	}
	if err := n.cni.DelNetworkList(ctx, list, p.runtimeConf()); err != nil {
		var nf libcni.NotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("CNI del %s for sandbox %s: %w", list.Name, p.ID, err)
	}
	return nil
}
