package monitor

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/quantyroot/quantykube/internal/runtime/attach"
	"github.com/quantyroot/quantykube/internal/runtime/console"
)

// The monitor's clients: attached streams (output broadcast, stdin, resize) and control
// requests (log reopen) on attach.sock.

func (m *mon) copyOut(name string, typ byte, r io.Reader) {
	w := m.sink.Stream(name)
	defer w.Close()
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			m.broadcast(typ, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// clientWriteTimeout bounds a write to an attached client; a slower client is dropped.
const clientWriteTimeout = 5 * time.Second

func (m *mon) broadcast(typ byte, data []byte) {
	m.clientsMu.Lock()
	defer m.clientsMu.Unlock()
	for c := range m.clients {
		c.SetWriteDeadline(time.Now().Add(clientWriteTimeout))
		if err := attach.WriteFrame(c, typ, data); err != nil {
			c.Close()
			delete(m.clients, c)
		}
	}
}

func (m *mon) closeClients() {
	m.clientsMu.Lock()
	defer m.clientsMu.Unlock()
	for c := range m.clients {
		c.Close()
		delete(m.clients, c)
	}
}

func (m *mon) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go m.handle(c)
	}
}

// handle serves one client. A client that sends only ReopenLog is a control client;
// any other client is attached and receives the output from now on.
func (m *mon) handle(c net.Conn) {
	defer c.Close()
	registered := false
	defer func() {
		if !registered {
			return
		}
		m.clientsMu.Lock()
		delete(m.clients, c)
		m.clientsMu.Unlock()
		if m.o.StdinOnce && !m.o.Terminal {
			m.closeStdin()
		}
	}()
	for {
		typ, data, err := attach.ReadFrame(c)
		if err != nil {
			return
		}
		switch typ {
		case attach.ReopenLog:
			msg := ""
			if err := m.reopen(); err != nil {
				msg = err.Error()
			}
			m.clientsMu.Lock()
			attach.WriteFrame(c, attach.Ack, []byte(msg))
			m.clientsMu.Unlock()
			continue
		case attach.Stdin, attach.CloseStdin, attach.Resize:
		default:
			continue
		}
		if !registered {
			registered = true
			m.clientsMu.Lock()
			m.clients[c] = struct{}{}
			m.clientsMu.Unlock()
		}
		switch typ {
		case attach.Stdin:
			m.stdinMu.Lock()
			if m.stdin != nil {
				m.stdin.Write(data)
			}
			m.stdinMu.Unlock()
		case attach.CloseStdin:
			if m.o.StdinOnce {
				m.closeStdin()
			}
		case attach.Resize:
			if w, h, ok := attach.ParseResize(data); ok && m.pty != nil {
				console.Resize(m.pty, w, h)
			}
		}
	}
}

func (m *mon) closeStdin() {
	m.stdinMu.Lock()
	defer m.stdinMu.Unlock()
	if m.stdin != nil && m.pty == nil {
		m.stdin.Close()
		m.stdin = nil
	}
}

func (m *mon) reopen() error {
	if m.o.LogPath == "" {
		return nil
	}
	f, err := os.OpenFile(m.o.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("reopen log %s: %w", m.o.LogPath, err)
	}
	old := m.sink.Swap(f)
	m.log = f
	if oc, ok := old.(io.Closer); ok && old != nil {
		oc.Close()
	}
	return nil
}
