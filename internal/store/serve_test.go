package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// runTimeout bounds a hang only; nothing asserts how long Run took.
const runTimeout = 2 * time.Minute

var errAcceptFailed = errors.New("injected accept failure")

// failingListener is a real loopback listener whose Accept fails for good
// (not a temporary error, so gRPC and net/http give up) once fail is closed.
type failingListener struct {
	net.Listener
	accepting chan struct{} // closed at the first Accept: Serve is running
	once      sync.Once
	fail      chan struct{}
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.once.Do(func() { close(l.accepting) })
	<-l.fail
	return nil, errAcceptFailed
}

// listenFailingAt returns a listen hook that binds real loopback listeners
// and wraps the one bound n-th (0: the first client URL; the metrics
// listeners are bound after the client ones).
func listenFailingAt(n int) (listenFunc, *failingListener) {
	fl := &failingListener{accepting: make(chan struct{}), fail: make(chan struct{})}
	calls := 0
	return func(network, addr string) (net.Listener, error) {
		l, err := net.Listen(network, addr)
		if err != nil || calls != n {
			calls++
			return l, err
		}
		calls++
		fl.Listener = l
		return fl, nil
	}, fl
}

// runStore starts run with the hook and returns a channel that gets its
// result, and the log it writes.
func runStore(ctx context.Context, t *testing.T, listen listenFunc) (<-chan error, *syncWriter) {
	t.Helper()
	cfg := Config{
		Name: "t", DataDir: t.TempDir(), UnsafeNoFsync: true,
		ListenClientURLs:  []string{"http://127.0.0.1:0"},
		ListenMetricsURLs: []string{"http://127.0.0.1:0"},
	}
	logs := &syncWriter{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, log, listen) }()
	return done, logs
}

// syncWriter is a log buffer safe to read while Run writes it.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func waitResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(runTimeout):
		t.Fatal("Run did not return")
		return nil
	}
}

// TestListenerFailureStopsTheStore: when a client or metrics listener's
// Serve fails while the store runs, Run stops the store and returns that
// failure, naming the listener, so `quantykube store` exits 1 with it
// (before, the goroutine ended, Run returned nil and the process exited 0).
func TestListenerFailureStopsTheStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		nth  int
		want string
	}{
		{"client", 0, "serving the etcd v3 API on http://127.0.0.1:0 stopped: "},
		{"metrics", 1, "serving metrics on http://127.0.0.1:0 stopped: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen, fl := listenFailingAt(tc.nth)
			done, logs := runStore(context.Background(), t, listen)
			select {
			case <-fl.accepting:
			case err := <-done:
				t.Fatalf("Run returned before serving: %v\n%s", err, logs)
			}
			close(fl.fail)
			err := waitResult(t, done)
			if !errors.Is(err, errAcceptFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run returned %v; want the accept failure, as %q...\n%s", err, tc.want, logs)
			}
		})
	}
}

// TestStopIsNotAFailure: the listeners that stop because the store stops
// (ctx canceled) are not reported: Run returns nil.
func TestStopIsNotAFailure(t *testing.T) {
	listen, _ := listenFailingAt(-1) // no listener fails
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, logs := runStore(ctx, t, listen)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, runTimeout, true, func(context.Context) (bool, error) {
		return strings.Contains(logs.String(), "store ready"), nil
	})
	if err != nil {
		t.Fatalf("store never ready: %v\n%s", err, logs)
	}
	cancel()
	if err := waitResult(t, done); err != nil {
		t.Fatalf("Run after ctx canceled: %v\n%s", err, logs)
	}
}
