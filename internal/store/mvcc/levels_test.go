package mvcc

import (
	"fmt"
	"testing"
	"time"
)

// L0 is compacted at the threshold given, not at pebble's default of 4
// sublevels: 8 flushes of the same keys stay 8 sublevels under the default
// threshold (16) and are compacted at a threshold of 4.
func TestL0CompactionThreshold(t *testing.T) {
	for _, tc := range []struct {
		threshold int
		compacted bool
	}{{0, false}, {4, true}} {
		t.Run(fmt.Sprint(tc.threshold), func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{NoSync: true, L0CompactionThreshold: tc.threshold})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for round := 0; round < 8; round++ {
				for i := 0; i < 100; i++ {
					put(t, s, fmt.Sprintf("/k/%03d", i), fmt.Sprint(round))
				}
				if err := s.db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			// A compaction picked after the last flush runs in the
			// background; wait for it when one is expected.
			deadline := time.Now().Add(30 * time.Second)
			for {
				n := s.db.Metrics().Levels[0].Sublevels
				if (n == 8) != tc.compacted {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("L0 has %d sublevels after 8 flushes at threshold %d; compacted: %v", n, tc.threshold, tc.compacted)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
