package oci

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

type unixStat struct {
	typ          string
	major, minor int64
	mode         os.FileMode
}

func statDevice(path string, out *unixStat) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		out.typ = "c"
	case unix.S_IFBLK:
		out.typ = "b"
	default:
		return fmt.Errorf("not a device node: give a character or block device")
	}
	out.major, out.minor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
	out.mode = os.FileMode(st.Mode & 0o777)
	return nil
}
