package store

import (
	"log/slog"
	"strings"
	"testing"
)

func TestMemoryFlagsAreValidatedAndReachTheEngine(t *testing.T) {
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
		{"negative limit", func(c *Config) { c.MemoryLimitBytes = -1 }, "--memory-limit-bytes -1 is negative"},
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
				if o.CacheSize != c.CacheBytes || o.MemTableSize != c.MemTableBytes {
					t.Fatalf("options cache %d memtable %d, flags %d %d", o.CacheSize, o.MemTableSize, c.CacheBytes, c.MemTableBytes)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Validate = %v, want one line with %q", err, tc.wantErr)
			}
		})
	}
}
