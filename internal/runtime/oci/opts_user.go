package oci

import (
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// WithSandboxUser runs the pause process as the sandbox's runAsUser/runAsGroup (root when
// unset) with its supplemental groups; no image lookup.
func WithSandboxUser(lsc *runtimeapi.LinuxSandboxSecurityContext) SpecOpt {
	return func(s *specs.Spec) error {
		if v := lsc.GetRunAsUser(); v != nil {
			s.Process.User.UID = uint32(v.Value)
		}
		if v := lsc.GetRunAsGroup(); v != nil {
			s.Process.User.GID = uint32(v.Value)
		}
		for _, g := range lsc.GetSupplementalGroups() {
			s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, uint32(g))
		}
		return nil
	}
}

// WithContainerUser resolves the container's identity in rootfs (ResolveUser): the
// image's user unless runAsUser/runAsUsername/runAsGroup override it. Supplementary
// groups are the primary gid, the request's groups, then (policy Merge) the image's
// /etc/group memberships, without duplicates (containerd's order). runAsGroup without a
// user is refused.
func WithContainerUser(rootfs, imageUser string, lsc *runtimeapi.LinuxContainerSecurityContext) SpecOpt {
	return func(s *specs.Spec) error {
		if lsc.GetRunAsGroup() != nil && lsc.GetRunAsUser() == nil && lsc.GetRunAsUsername() == "" {
			return fmt.Errorf("run_as_group is set without run_as_user or run_as_username: set a user too")
		}
		var uid, gid *int64
		if v := lsc.GetRunAsUser(); v != nil {
			uid = &v.Value
		}
		if v := lsc.GetRunAsGroup(); v != nil {
			gid = &v.Value
		}
		strict := lsc.GetSupplementalGroupsPolicy() == runtimeapi.SupplementalGroupsPolicy_Strict
		u, err := ResolveUser(rootfs, imageUser, uid, lsc.GetRunAsUsername(), gid, strict)
		if err != nil {
			return err
		}
		groups := []uint32{u.GID}
		for _, g := range lsc.GetSupplementalGroups() {
			groups = append(groups, uint32(g))
		}
		groups = append(groups, u.AdditionalGids...)
		s.Process.User = specs.User{UID: u.UID, GID: u.GID, AdditionalGids: dedup(groups)}
		return nil
	}
}

func dedup(in []uint32) []uint32 {
	seen := map[uint32]bool{}
	out := []uint32{}
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
