package install

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestBusyProbeDoesNotRefuseTheRun: Busy probes by taking the lock for an
// instant; a run taking the lock in that instant must not be refused as
// busy (seen on a real node: two installs started together, the first one
// refused by the second one's probe).
func TestBusyProbeDoesNotRefuseTheRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	release, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	release()
	var stop atomic.Bool
	probes := make(chan int)
	go func() {
		n := 0
		for !stop.Load() {
			Busy(p)
			n++
		}
		probes <- n
	}()
	deadline := time.Now().Add(time.Second)
	locks := 0
	for time.Now().Before(deadline) {
		release, err := Lock(p)
		if err != nil {
			stop.Store(true)
			<-probes
			t.Fatalf("lock %d refused while only probes ran: %v", locks+1, err)
		}
		release()
		locks++
	}
	stop.Store(true)
	t.Logf("%d locks taken during %d probes", locks, <-probes)
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
	p := filepath.Join(t.TempDir(), "lock")
	release, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	release()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		for !stop.Load() {
			Busy(p)
		}
		close(done)
	}()
	defer func() { stop.Store(true); <-done }()
	for i := 0; i < 2000; i++ {
		if Busy(p) {
			t.Fatalf("probe %d: Busy while only another probe ran", i+1)
		}
	}
}
