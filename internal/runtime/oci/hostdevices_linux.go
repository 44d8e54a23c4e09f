package oci

import (
	"io/fs"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// HostDevices lists the host's device nodes below /dev for privileged containers (as
// containerd and Docker give them), skipping the per-container ones (pts, shm, mqueue)
// and the console.
func HostDevices() []specs.LinuxDevice {
	var out []specs.LinuxDevice
	filepath.WalkDir("/dev", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			switch p {
			case "/dev/pts", "/dev/shm", "/dev/mqueue", "/dev/.lxc", "/dev/.udev":
				return filepath.SkipDir
			}
			return nil
		}
		if p == "/dev/console" || d.Type()&os.ModeDevice == 0 {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		typ := "c"
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			typ = "b"
		}
		mode := os.FileMode(st.Mode & 0o777)
		out = append(out, specs.LinuxDevice{Path: p, Type: typ, Major: int64(unix.Major(st.Rdev)), Minor: int64(unix.Minor(st.Rdev)),
			FileMode: &mode, UID: ptr(st.Uid), GID: ptr(st.Gid)})
		return nil
	})
	return out
}
