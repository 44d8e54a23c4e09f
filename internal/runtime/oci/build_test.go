package oci

import (
	"errors"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// apply builds a base spec with opts and fails the test on error.
func apply(t *testing.T, opts ...SpecOpt) *specs.Spec {
	t.Helper()
	s, err := Build("/rootfs", false, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuildAppliesInOrderAndStopsAtFirstError(t *testing.T) {
	var seen []string
	step := func(name string, err error) SpecOpt {
		return func(*specs.Spec) error { seen = append(seen, name); return err }
	}
	boom := errors.New("boom")
	if _, err := Build("/r", true, step("a", nil), step("b", boom), step("c", nil)); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if len(seen) != 2 || seen[0] != "a" || seen[1] != "b" {
		t.Fatalf("applied %v", seen)
	}
	s := apply(t)
	if s.Root.Path != "/rootfs" || s.Process.Cwd != "/" || len(s.Mounts) != 6 || len(s.Linux.Resources.Devices) != 1 || s.Linux.Resources.Devices[0].Allow {
		t.Fatalf("base spec %+v", s)
	}
}

func TestWhen(t *testing.T) {
	if s := apply(t, When(false, WithHostname("x"))); s.Hostname != "" {
		t.Fatal("When(false) applied")
	}
	if s := apply(t, When(true, WithHostname("x"), WithTerminal(true))); s.Hostname != "x" || !s.Process.Terminal {
		t.Fatal("When(true) did not apply every option")
	}
	if _, err := Build("/r", false, When(true, WithPauseArgs(pauseImageNoArgs))); err == nil {
		t.Fatal("When lost an option's error")
	}
}
