package store

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestEngineFlagsAreValidatedAndReachTheEngine(t *testing.T) {
	base := func() Config {
		return Config{DataDir: t.TempDir(), ListenClientURLs: []string{"http://127.0.0.1:0"}}
	}
	for _, tc := range []struct {
		name    string
		set     func(*Config)
		wantErr string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"sizes", func(c *Config) { c.CacheBytes, c.MemTableBytes, c.MemoryLimitBytes = 8<<20, 4<<20, 256<<20 }, ""},
		{"tiny cache", func(c *Config) { c.CacheBytes = 4096 }, "--cache-bytes 4096 is below 1 MiB"},
		{"tiny memtable", func(c *Config) { c.MemTableBytes = 1 }, "--memtable-bytes 1 is out of range"},
		{"huge memtable", func(c *Config) { c.MemTableBytes = 4 << 30 }, "--memtable-bytes 4294967296 is out of range"},
		{"l0 threshold", func(c *Config) { c.L0CompactionThreshold = 4 }, ""},
		{"l0 threshold too low", func(c *Config) { c.L0CompactionThreshold = 1 }, "--l0-compaction-threshold 1 is out of range"},
		{"l0 threshold too high", func(c *Config) { c.L0CompactionThreshold = 65 }, "--l0-compaction-threshold 65 is out of range"},
		{"negative limit", func(c *Config) { c.MemoryLimitBytes = -1 }, "--memory-limit-bytes -1 is negative"},
		{"negative busy window", func(c *Config) { c.GCBusyWindow = -time.Second }, "--gc-busy-window -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.set(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				o := c.storeOptions(slog.Default())
				if o.CacheSize != c.CacheBytes || o.MemTableSize != c.MemTableBytes || o.L0CompactionThreshold != c.L0CompactionThreshold {
					t.Fatalf("options cache %d memtable %d l0 %d, flags %d %d %d", o.CacheSize, o.MemTableSize, o.L0CompactionThreshold, c.CacheBytes, c.MemTableBytes, c.L0CompactionThreshold)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Validate = %v, want one line with %q", err, tc.wantErr)
			}
		})
	}
}
