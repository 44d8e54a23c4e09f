package server

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listens reports whether process pid holds the TCP socket listening on
// 127.0.0.1:port. On a shared machine a free port can be taken by someone
// else between FreePort and the child's bind; a readiness probe alone could
// then be answered by that other process.
func Listens(pid, port int) (bool, error) {
	inode, err := listenInode(port)
	if err != nil || inode == "" {
		return false, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, fmt.Errorf("list fds of pid %d: %w", pid, err)
	}
	want := "socket:[" + inode + "]"
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && l == want {
			return true, nil
		}
	}
	return false, nil
}

// listenInode returns the inode of the socket listening on 127.0.0.1:port
// ("" if none), from /proc/net/tcp.
func listenInode(port int) (string, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", fmt.Errorf("read /proc/net/tcp: %w", err)
	}
	defer f.Close()
	local := fmt.Sprintf("0100007F:%04X", port) // 127.0.0.1, little-endian hex
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		// sl local_address rem_address st ... inode is field 9; st 0A is LISTEN.
		if len(fl) > 9 && fl[1] == local && fl[3] == "0A" {
			if _, err := strconv.ParseUint(fl[9], 10, 64); err == nil {
				return fl[9], nil
			}
		}
	}
	return "", sc.Err()
}
