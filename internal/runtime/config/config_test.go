package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadMissingFileGivesDefaults(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "none.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != "/run/quantykube/runtime.sock" {
		t.Fatalf("socket = %q", c.Socket)
	}
}

func TestLoadOverridesAndMirrors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "runtime.toml")
	os.WriteFile(p, []byte(`
state_dir = "/tmp/qk"
log_level = "debug"
[mirrors."docker.io"]
endpoints = ["http://127.0.0.1:5000"]
`), 0o644)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != "/tmp/qk" || c.LogLevel != "debug" || c.Mirrors["docker.io"].Endpoints[0] != "http://127.0.0.1:5000" {
		t.Fatalf("got %+v", c)
	}
	if c.RuncPath != "runc" {
		t.Fatalf("default lost: %q", c.RuncPath)
	}
}

func TestUnknownKeyAndBadValues(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`stat_dir = "/x"`, "unknown key"},
		{`log_level = "loud"`, "log_level"},
		{`state_dir = "rel"`, "absolute"},
		{"[mirrors.\"docker.io\"]\nendpoints = [\"127.0.0.1:5000\"]", "http://"},
	} {
		c := Default()
		err := Parse([]byte(tc.in), &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.in, err, tc.want)
		}
	}
}
