package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/quantyroot/quantykube/internal/install"
)

// runCLI runs the command line args through the command tree main builds and
// returns what it printed and the error main turns into exit status 1.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "quantykube", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newInstallCommand(), newUndoCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// treeSum is every path under dir with its mode and its content's hash: what
// "changes nothing" compares.
func treeSum(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v", p, info.Mode())
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// installedJournal records a finished install of a subject in stateDir, as
// if install had run there.
func installedJournal(t *testing.T, stateDir string) {
	t.Helper()
	j, err := install.OpenJournal(filepath.Join(stateDir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{install.EventStart, install.EventDone} {
		if err := j.Append(install.Record{Op: install.OpInstall, Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDryRunRefusedByPreflightExitsNonZero: on a host that is not the node
// the command moves (every path of the commands points into an empty or
// made-up directory), --dry-run of install and undo of both subjects prints
// the plan, fails with the preflight's one line, and changes nothing. An
// undo that would have nothing to do is not a refusal.
func TestDryRunRefusedByPreflightExitsNonZero(t *testing.T) {
	root := t.TempDir()
	dir := func(name string) string { return filepath.Join(root, name) }
	for _, d := range []string{"manifests", "pki", "store-state", "runtime-state", "store-installed", "runtime-installed", "manifests-on-store"} {
		if err := os.MkdirAll(dir(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	installedJournal(t, dir("store-installed"))
	installedJournal(t, dir("runtime-installed"))
	// The API server already on the store (so the installed journal stands),
	// but the manifest install saved is gone: undo cannot go back safely.
	onStore := "spec:\n  containers:\n  - command:\n    - kube-apiserver\n    - --etcd-servers=https://127.0.0.1:2479\n"
	if err := os.WriteFile(filepath.Join(dir("manifests-on-store"), "kube-apiserver.yaml"), []byte(onStore), 0o644); err != nil {
		t.Fatal(err)
	}
	store := func(state, manifests string) []string {
		return []string{"--manifests", dir(manifests), "--pki", dir("pki"), "--state-dir", dir(state),
			"--data-dir", dir("store-data"), "--kubeconfig", dir("admin.conf"), "--binary", dir("quantykube"), "--ha-state-dir", dir("ha-state")}
	}
	runtime := func(state string) []string {
		return []string{"--kubelet-config", dir("kubelet/config.yaml"), "--kubelet-flags", dir("kubelet/flags.env"),
			"--kubelet-kubeconfig", dir("kubelet.conf"), "--state-dir", dir(state), "--binary", dir("quantykube"), "--runtime-config", dir("runtime.toml")}
	}
	cases := []struct {
		name string
		args []string
		want string // in the error; "" for a dry run that must pass
	}{
		{"install store, not a control-plane node", append([]string{"install", "store", "--dry-run"}, store("store-state", "manifests")...), "not a kubeadm control-plane node"},
		{"undo store, the saved manifest gone", append([]string{"undo", "store", "--dry-run"}, store("store-installed", "manifests-on-store")...), "cannot go back to etcd safely"},
		{"undo store, never installed", append([]string{"undo", "store", "--dry-run"}, store("store-state", "manifests")...), ""},
		{"install runtime, not a kubeadm node", append([]string{"install", "runtime", "--dry-run"}, runtime("runtime-state")...), "install runtime must run as root|this is not a kubeadm node"},
		{"undo runtime, the install's record gone", append([]string{"undo", "runtime", "--dry-run"}, runtime("runtime-installed")...), "the install's record is gone"},
		{"undo runtime, never installed", append([]string{"undo", "runtime", "--dry-run"}, runtime("runtime-state")...), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := treeSum(t, root)
			out, err := runCLI(t, tc.args...)
			if after := treeSum(t, root); after != before {
				t.Fatalf("a dry run changed the host:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want success (nothing to do), got %v:\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("a dry run refused by its preflight exited 0:\n%s", out)
			}
			if !containsAny(err.Error(), strings.Split(tc.want, "|")) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want one line containing %q, got %q", tc.want, err)
			}
			if !strings.Contains(out, "plan (nothing was changed)") {
				t.Fatalf("the plan is not printed:\n%s", out)
			}
			t.Logf("quantykube: %v", err)
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
