package storee2e

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// peerProxy sits in front of one member's (plain http) peer listener and
// forwards raft's HTTP traffic, which names its sender in X-Server-From.
// Isolating a member id drops every request to or from that member and
// cancels the streams in flight, so the member is cut off from the others in
// both directions — a network partition the test controls.
type peerProxy struct {
	t        testing.TB
	target   string // member id (hex) behind this proxy, set once known
	srv      *http.Server
	URL      string
	mu       sync.Mutex
	isolated map[string]bool
	active   map[*http.Request]context.CancelFunc
}

// partition is the set of proxies of a cluster; a member id in isolated is
// cut off.
type partition struct {
	mu       sync.Mutex
	isolated map[string]bool
	proxies  []*peerProxy
}

func newPartition() *partition { return &partition{isolated: map[string]bool{}} }

// newProxy listens on a free loopback port and forwards to backend.
func (p *partition) newProxy(t testing.TB, backend string) *peerProxy {
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatalf("proxy backend %s: %v", backend, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	pp := &peerProxy{t: t, URL: "http://" + l.Addr().String(), active: map[*http.Request]context.CancelFunc{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // raft streams
	rp.ErrorLog = log.New(io.Discard, "", 0)
	pp.srv = &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.cut(pp, r.Header.Get("X-Server-From")) {
			http.Error(w, "partitioned", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		pp.mu.Lock()
		pp.active[r] = cancel
		pp.mu.Unlock()
		defer func() {
			pp.mu.Lock()
			delete(pp.active, r)
			pp.mu.Unlock()
			cancel()
		}()
		rp.ServeHTTP(w, r.WithContext(ctx))
	})}
	go func() { _ = pp.srv.Serve(l) }()
	t.Cleanup(func() { _ = pp.srv.Close() })
	p.mu.Lock()
	p.proxies = append(p.proxies, pp)
	p.mu.Unlock()
	return pp
}

func (p *partition) cut(pp *peerProxy, from string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isolated[from] || p.isolated[pp.target]
}

// isolate cuts member id off and breaks its connections in flight.
func (p *partition) isolate(id string) {
	p.mu.Lock()
	p.isolated[id] = true
	proxies := append([]*peerProxy(nil), p.proxies...)
	p.mu.Unlock()
	for _, pp := range proxies {
		pp.mu.Lock()
		for r, cancel := range pp.active {
			if r.Header.Get("X-Server-From") == id || pp.target == id {
				cancel()
			}
		}
		pp.mu.Unlock()
	}
}

// heal ends every isolation.
func (p *partition) heal() {
	p.mu.Lock()
	p.isolated = map[string]bool{}
	p.mu.Unlock()
}
