package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestCommandShape(t *testing.T) {
	root := &cobra.Command{Use: "quantykube"}
	rt := NewCommand()
	root.AddCommand(rt)
	for _, f := range []string{"config", "socket", "state-dir", "root-dir", "log-level"} {
		if rt.Flags().Lookup(f) == nil && rt.PersistentFlags().Lookup(f) == nil {
			t.Errorf("flag --%s missing", f)
		}
	}
	mon, _, err := root.Find([]string{"runtime", "monitor"})
	if err != nil || mon.Name() != "monitor" || !mon.Hidden {
		t.Fatalf("monitor subcommand: %v %v", mon, err)
	}
	if got := strings.Join(monitorPath(rt), " "); got != "runtime monitor" {
		t.Fatalf("monitor argv = %q", got)
	}
}

func TestMonitorByHandFails(t *testing.T) {
	root := &cobra.Command{Use: "quantykube", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	root.SetArgs([]string{"runtime", "monitor"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "not by hand") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadConfigIsReported(t *testing.T) {
	root := &cobra.Command{Use: "quantykube", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	root.SetArgs([]string{"runtime", "--config", "/nonexistent.toml", "--log-level", "loud"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "log_level") {
		t.Fatalf("err = %v", err)
	}
}

func TestSystemdUnitKeepsContainersOnStop(t *testing.T) {
	u := SystemdUnit("/usr/local/bin/quantykube", "/etc/quantykube/runtime.toml")
	for _, want := range []string{"KillMode=process", "Delegate=yes", "ExecStart=/usr/local/bin/quantykube runtime --config /etc/quantykube/runtime.toml"} {
		if !strings.Contains(u, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
}
