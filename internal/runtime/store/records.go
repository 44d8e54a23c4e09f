package store

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is a pod sandbox. Config is kept as protobuf bytes on disk.
type Sandbox struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// Ready is false once StopPodSandbox ran (or the pause process died).
	Ready bool `json:"ready"`
	// NetNS is the pinned network namespace path; empty for host network.
	NetNS string `json:"netns,omitempty"`
	// NetworkSetUp is true while a CNI ADD is in effect (DEL must run before removal).
	NetworkSetUp  bool     `json:"network_set_up,omitempty"`
	IP            string   `json:"ip,omitempty"`
	AdditionalIPs []string `json:"additional_ips,omitempty"`
	// PausePid is the pause process (the holder of the IPC/UTS/PID namespaces).
	PausePid     int    `json:"pause_pid"`
	CgroupParent string `json:"cgroup_parent"`
	// OwnCgroupParent is true when the runtime created CgroupParent (no parent in the
	// request) and must remove it with the sandbox.
	OwnCgroupParent bool   `json:"own_cgroup_parent,omitempty"`
	RuntimeHandler  string `json:"runtime_handler,omitempty"`
	// Layers are the pause image's diff IDs under Rootfs, kept while the sandbox exists.
	Layers []string `json:"layers"`
	// Rootfs is the pause container's overlay mount point.
	Rootfs   string `json:"rootfs"`
	ConfigPB []byte `json:"config"`

	mu     sync.Mutex
	config *runtimeapi.PodSandboxConfig
}

func (s *Sandbox) GetID() string   { return s.ID }
func (s *Sandbox) GetName() string { return s.Name }

// Config returns the decoded sandbox config (cached).
func (s *Sandbox) Config() *runtimeapi.PodSandboxConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.config == nil {
		c := &runtimeapi.PodSandboxConfig{}
		_ = proto.Unmarshal(s.ConfigPB, c)
		s.config = c
	}
	return s.config
}

// SetConfig stores c.
func (s *Sandbox) SetConfig(c *runtimeapi.PodSandboxConfig) error {
	b, err := proto.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode sandbox config: %w", err)
	}
	s.ConfigPB, s.config = b, c
	return nil
}

// DecodeSandbox is the Load decoder for sandboxes.
func DecodeSandbox(b []byte) (*Sandbox, error) {
	s := &Sandbox{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// User is a resolved process identity.
type User struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// Container is a container record. Its exit is not stored here but in the monitor's exit.json.
type Container struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	SandboxID string    `json:"sandbox_id"`
	CreatedAt time.Time `json:"created_at"`
	StartedAt time.Time `json:"started_at,omitempty"`
	// Pid is the init pid runc created (valid until the exit file exists).
	Pid      int    `json:"pid"`
	ImageRef string `json:"image_ref"` // the image as the user named it
	ImageID  string `json:"image_id"`
	// Layers are the diff IDs under the rootfs; they are kept while the container exists
	// even if its image is removed.
	Layers  []string `json:"layers"`
	LogPath string   `json:"log_path,omitempty"`
	Rootfs  string   `json:"rootfs"`
	// CgroupPath is the container's cgroup path relative to each hierarchy's root.
	CgroupPath string `json:"cgroup_path"`
	ConfigPB   []byte `json:"config"`
	// User is the identity the container's process runs as (for ContainerStatus.User).
	User *User `json:"user,omitempty"`
	// Resources is the last UpdateContainerResources (or create's) linux resources.
	ResourcesPB []byte `json:"resources,omitempty"`

	mu     sync.Mutex
	config *runtimeapi.ContainerConfig
}

func (c *Container) GetID() string   { return c.ID }
func (c *Container) GetName() string { return c.Name }

// Config returns the decoded container config (cached).
func (c *Container) Config() *runtimeapi.ContainerConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.config == nil {
		cfg := &runtimeapi.ContainerConfig{}
		_ = proto.Unmarshal(c.ConfigPB, cfg)
		c.config = cfg
	}
	return c.config
}

// SetConfig stores cfg.
func (c *Container) SetConfig(cfg *runtimeapi.ContainerConfig) error {
	b, err := proto.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode container config: %w", err)
	}
	c.ConfigPB, c.config = b, cfg
	return nil
}

// DecodeContainer is the Load decoder for containers.
func DecodeContainer(b []byte) (*Container, error) {
	c := &Container{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, err
	}
	return c, nil
}
