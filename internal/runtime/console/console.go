// Package console receives the pty master that runc sends over a --console-socket.
package console

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Listener is a unix socket runc connects to in order to hand over a pty master.
type Listener struct {
	l    *net.UnixListener
	Path string
}

// Listen creates the socket at path (removing a stale one).
func Listen(path string) (*Listener, error) {
	_ = os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen console socket %s: %w", path, err)
	}
	return &Listener{l: l, Path: path}, nil
}

// Close removes the socket.
func (c *Listener) Close() error {
	err := c.l.Close()
	_ = os.Remove(c.Path)
	return err
}

// Accept waits for runc and returns the pty master it sends.
func (c *Listener) Accept() (*os.File, error) {
	conn, err := c.l.AcceptUnix()
	if err != nil {
		return nil, fmt.Errorf("accept console: %w", err)
	}
	defer conn.Close()
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(name, oob)
	if err != nil {
		return nil, fmt.Errorf("read console fd: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("parse console control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("parse console fd: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
}

// Resize sets the terminal size of a pty master.
func Resize(f *os.File, width, height uint16) error {
	return unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: width, Row: height})
}
