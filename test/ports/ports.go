// Package ports hands out loopback ports for test and benchmark rigs that start
// servers as child processes. (test/robustness and test/k8s-storage are
// modules of their own, with their own copy: they do not depend on this module.)
package ports

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
)

// ports hands out loopback ports below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768-60999 by default), each at most once
// in this process. A port found with ":0" comes from that range, where every
// outgoing connection takes its local port too: one can be taken by a client
// connection before the member binds it, or while a killed member restarts
// on it. The start depends on the pid, so concurrent test processes mostly
// pick different ports; a port is handed out only if it could be bound.
var ports struct {
	sync.Mutex
	next int
	used map[int]bool
}

const portLow, portHigh = 20000, 32000

// Free returns count distinct ports, never handed out before here.
func Free(count int) ([]int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
		ports.next = portLow + (os.Getpid()*97)%(portHigh-portLow)
	}
	var out []int
	for tries := 0; len(out) < count; tries++ {
		if tries > portHigh-portLow {
			return nil, errors.New("no free port left in 127.0.0.1:20000-31999")
		}
		p := ports.next
		if ports.next++; ports.next >= portHigh {
			ports.next = portLow
		}
		if ports.used[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports.used[p] = true
		out = append(out, p)
	}
	return out, nil
}
