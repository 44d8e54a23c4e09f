package install

import (
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBusyProbeDoesNotRefuseTheRun: Busy probes by taking the lock for an
// instant; a run taking the lock in that instant must not be refused as
// busy (seen on a real node: two installs started together, the first one
// refused by the second one's probe).
func TestBusyProbeDoesNotRefuseTheRun(t *testing.T) {
	p := freeLock(t)
	probes := probing(p)
	deadline := time.Now().Add(time.Second)
	locks := 0
	for time.Now().Before(deadline) {
		release, err := Lock(p)
		if err != nil {
			probes()
			t.Fatalf("lock %d refused while only probes ran: %v", locks+1, err)
		}
		release()
		locks++
	}
	t.Logf("%d locks taken during %d probes", locks, probes())
}

func TestLockStillRefusedWhileHeld(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	release, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	start := time.Now()
	if _, err := Lock(p); !errors.Is(err, ErrBusy) {
		t.Fatalf("second lock: %v", err)
	}
	if !Busy(p) {
		t.Fatal("Busy is false while the lock is held")
	}
	t.Logf("refused after %v", time.Since(start).Round(time.Millisecond))
}

// TestBusyIgnoresAnotherProbe: two probes meeting are not a run.
func TestBusyIgnoresAnotherProbe(t *testing.T) {
	p := freeLock(t)
	defer probing(p)()
	for i := 0; i < 2000; i++ {
		if Busy(p) {
			t.Fatalf("probe %d: Busy while only another probe ran", i+1)
		}
	}
}

// freeLock is a lock file that exists (Busy probes only existing ones) and
// is free.
func freeLock(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lock")
	release, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	release()
	return p
}

// probing runs Busy on p in a loop, as another process's run would, until
// the returned function is called; that returns how many probes ran.
func probing(p string) func() int {
	var stop atomic.Bool
	probes := make(chan int, 1)
	go func() {
		n := 0
		for !stop.Load() {
			Busy(p)
			n++
		}
		probes <- n
	}()
	var once sync.Once
	var n int
	return func() int {
		once.Do(func() { stop.Store(true); n = <-probes })
		return n
	}
}
