package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/runc"
)

func (e *testEnv) state(t *testing.T, id string) runtimeapi.ContainerState {
	t.Helper()
	c, err := e.containers.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return e.containerState(c)
}

func TestStartContainer(t *testing.T) {
	e := newTestEnv(t)
	id := e.createContainer(t, e.runPod(t, "web"), "app")
	e.j.fail("runc.Start", errors.New("exec: no such file"))
	if _, err := e.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err == nil {
		t.Fatal("a failed runc start succeeded")
	}
	if st := e.state(t, id); st != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("state after failed start %v", st)
	}
	e.j.fail("runc.Start", nil)
	if _, err := e.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if st := e.state(t, id); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("state %v", st)
	}
	if _, err := e.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err == nil || !strings.Contains(err.Error(), "not CREATED") {
		t.Fatalf("second start: %v", err)
	}
}

// running is a started container in a new pod.
func (e *testEnv) running(t *testing.T) string {
	t.Helper()
	id := e.createContainer(t, e.runPod(t, fmt.Sprintf("web%d", len(e.sandboxes.List()))), "app")
	if _, err := e.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	e.j.reset()
	return id
}

func TestStopContainerGraceful(t *testing.T) {
	e := newTestEnv(t)
	id := e.running(t)
	if _, err := e.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	// The image's stop signal (SIGQUIT), and no SIGKILL: the process exited.
	if got := e.j.made("runc.Kill"); !slices.Equal(got, []string{fmt.Sprintf("runc.Kill %s %d false", id, syscall.SIGQUIT)}) {
		t.Fatalf("kills %v", got)
	}
	if st := e.state(t, id); st != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("state %v", st)
	}
	e.j.reset()
	if _, err := e.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5}); err != nil || len(e.j.calls) != 0 {
		t.Fatalf("stopping an exited container: %v, calls %v", err, e.j.calls)
	}
}

func TestStopContainerKillsAfterTimeout(t *testing.T) {
	e := newTestEnv(t)
	id := e.running(t)
	e.runc.onKill = func(id string, sig syscall.Signal) {
		if sig == syscall.SIGKILL {
			e.recordExit(t, id, 137)
		}
	}
	if _, err := e.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("runc.Kill %s %d false", id, syscall.SIGQUIT), fmt.Sprintf("runc.Kill %s %d true", id, syscall.SIGKILL)}
	if got := e.j.made("runc.Kill"); !slices.Equal(got, want) {
		t.Fatalf("kills %v, want %v", got, want)
	}
}

// runc says the container is gone: its monitor has recorded (or is recording) the exit,
// and the stop succeeds once the record is there.
func TestStopContainerWhenRuncSaysGone(t *testing.T) {
	e := newTestEnv(t)
	id := e.running(t)
	e.j.fail("runc.Kill", fmt.Errorf("runc kill: container does not exist: %w", runc.ErrNotFound))
	e.recordExit(t, id, 0)
	if _, err := e.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("stop of a container runc no longer knows: %v", err)
	}
	if got := e.j.made("runc.Kill"); len(got) != 0 {
		t.Fatalf("an exited container was signalled: %v", got)
	}

	id2 := e.running(t)
	e.j.fail("runc.Kill", fmt.Errorf("runc kill: container does not exist: %w", runc.ErrNotFound))
	recorded := make(chan error, 1)
	go func() { // the monitor writes the record while StopContainer waits
		recorded <- monitor.WriteExit(e.containers.RecordDir(id2), monitor.Exit{Code: 0, FinishedAt: time.Now()})
	}()
	if _, err := e.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id2}); err != nil {
		t.Fatalf("stop while the monitor records the exit: %v", err)
	}
	if err := <-recorded; err != nil {
		t.Fatal(err)
	}
}

func TestStopContainerNeverRecorded(t *testing.T) {
	e := newTestEnv(t)
	id := e.running(t)
	e.j.fail("runc.Kill", fmt.Errorf("runc kill: %w", runc.ErrNotFound))
	_, err := e.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id})
	if err == nil || !strings.Contains(err.Error(), "did not exit within "+testTimeouts.exitRecorded.String()) {
		t.Fatalf("err %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("cancelled stop: %v", err)
	}
}

func TestStopAndRemoveUnknownContainer(t *testing.T) {
	e := newTestEnv(t)
	if _, err := e.StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: "nope"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: "nope"}); err != nil {
		t.Fatal(err)
	}
	if len(e.j.calls) != 0 {
		t.Fatalf("calls %v", e.j.calls)
	}
}

func TestRemoveContainer(t *testing.T) {
	e := newTestEnv(t)
	id := e.running(t)
	before := []string{}
	for _, l := range e.leftovers(t) {
		if !strings.Contains(l, id) {
			before = append(before, l)
		}
	}
	e.j.fail("runc.Delete", errors.New("runc delete: device or resource busy"))
	if _, err := e.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err == nil {
		t.Fatal("a failed runc delete was ignored")
	}
	if _, err := e.containers.Get(id); err != nil {
		t.Fatal("the record went although runc still holds the container")
	}
	e.j.fail("runc.Delete", fmt.Errorf("runc delete: %w", runc.ErrNotFound))
	if _, err := e.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("remove of a container runc forgot: %v", err)
	}
	if _, err := e.containers.Get(id); err == nil {
		t.Fatal("record kept")
	}
	if after := e.leftovers(t); !slices.Equal(after, before) {
		t.Fatalf("left behind %v, want %v", after, before)
	}
}
