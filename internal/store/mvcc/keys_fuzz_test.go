package mvcc

import (
	"bytes"
	"cmp"
	"math"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The pebble keyspace encodes user keys and revisions (keys.go). These fuzz
// tests check the properties reads rely on: the encoding round-trips, it
// keeps the order of user keys and of revisions, and every etcd key range —
// one key, [key, end), a prefix, or everything from key — is one contiguous
// run of encoded keys between the bounds range.go iterates with.
//
//	go test -run '^$' -fuzz FuzzKeyEncoding -fuzztime 2m ./internal/store/mvcc
//	go test -run '^$' -fuzz FuzzKeyRanges -fuzztime 2m ./internal/store/mvcc

// keySeeds are user keys that sit on the edges of the escaping: the bytes it
// rewrites (0x00), the terminator's bytes (0x00 0x01), the escape's second
// byte (0xFF), prefixes of each other, and kube-apiserver's layout.
var keySeeds = [][]byte{
	{}, {0}, {0, 0}, {0, 1}, {0, 0xFF}, {1}, {0xFF}, {0xFF, 0xFF}, {0xFF, 0},
	[]byte("a"), []byte("a\x00"), []byte("a\x00\x01"), []byte("a\x00b"), []byte("a\x01"), []byte("ab"),
	[]byte("/registry/pods/default/p"), []byte("/registry/pods/default/p\x00"), []byte("/registry/pods0"),
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

func FuzzKeyEncoding(f *testing.F) {
	for i, a := range keySeeds {
		b := keySeeds[(i+1)%len(keySeeds)]
		f.Add(a, b, int64(i), int64(len(keySeeds)-i))
		f.Add(a, a, int64(1), int64(2))
	}
	f.Add([]byte("k"), []byte("k"), int64(0), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, a, b []byte, ra, rb int64) {
		ra, rb = ra&math.MaxInt64, rb&math.MaxInt64 // revisions are never negative
		checkHistoryRoundTrip(t, a, ra)
		checkHistoryRoundTrip(t, b, rb)
		checkKeyOrder(t, a, b, ra, rb)
		checkEventOrder(t, ra, rb, int64(len(a)), int64(len(b)))
	})
}

// checkHistoryRoundTrip: decodeHistoryKey(historyKey(k, rev)) gives k, its
// history prefix and rev back.
func checkHistoryRoundTrip(t *testing.T, k []byte, rev int64) {
	t.Helper()
	hk := historyKey(k, rev)
	key, prefix, got, err := decodeHistoryKey(hk)
	if err != nil || !bytes.Equal(key, k) || !bytes.Equal(prefix, historyPrefix(k)) || got != rev {
		t.Fatalf("decodeHistoryKey(historyKey(%q, %d)) = %q, %q, %d, %v", k, rev, key, prefix, got, err)
	}
	if !bytes.HasPrefix(hk, prefix) {
		t.Fatalf("historyKey(%q, %d) = %x does not start with its prefix %x", k, rev, hk, prefix)
	}
	if len(hk) != historyKeyLen(k) || !bytes.Equal(appendHistoryKey([]byte("x"), k, rev)[1:], hk) {
		t.Fatalf("appendHistoryKey/historyKeyLen(%q, %d) disagree with historyKey %x (len %d)", k, rev, hk, historyKeyLen(k))
	}
	kv := &mvccpb.KeyValue{Key: k, Value: k, CreateRevision: rev, ModRevision: -rev, Version: rev / 3, Lease: rev >> 7}
	for _, withValue := range []bool{false, true} {
		if got := appendRecord(nil, recordPut, kv, withValue); len(got) != recordLen(kv, withValue) {
			t.Fatalf("recordLen(%v, %v) = %d, appendRecord wrote %d bytes", kv, withValue, recordLen(kv, withValue), len(got))
		}
	}
}

// checkKeyOrder: escapeKey, liveKey and historyKey order user keys as
// bytes.Compare does; no escaped key is a prefix of another; a key's history
// entries are newest first and never interleave with another key's.
func checkKeyOrder(t *testing.T, a, b []byte, ra, rb int64) {
	t.Helper()
	want := sign(bytes.Compare(a, b))
	ea, eb := escapeKey(nil, a), escapeKey(nil, b)
	if got := sign(bytes.Compare(ea, eb)); got != want {
		t.Fatalf("escape order: compare(%q, %q) = %d but compare(%x, %x) = %d", a, b, want, ea, eb, got)
	}
	if want != 0 && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
		t.Fatalf("escaped %q = %x and %q = %x: one is a prefix of the other", a, ea, b, eb)
	}
	if got := sign(bytes.Compare(liveKey(a), liveKey(b))); got != want {
		t.Fatalf("live order: compare(%q, %q) = %d but the live keys compare %d", a, b, want, got)
	}
	ha, hb := historyKey(a, ra), historyKey(b, rb)
	got := sign(bytes.Compare(ha, hb))
	switch {
	case want != 0 && got != want:
		t.Fatalf("history order: compare(%q, %q) = %d but history keys at %d, %d compare %d", a, b, want, ra, rb, got)
	case want == 0 && got != cmp.Compare(rb, ra):
		t.Fatalf("history of %q: entries at %d and %d compare %d, want newest first", a, ra, rb, got)
	}
}

// checkEventOrder: event keys order by (rev, sub) and round-trip.
func checkEventOrder(t *testing.T, ra, rb, sa, sb int64) {
	t.Helper()
	want := cmp.Or(cmp.Compare(ra, rb), cmp.Compare(sa, sb))
	ka, kb := eventKey(ra, sa), eventKey(rb, sb)
	if got := sign(bytes.Compare(ka, kb)); got != want {
		t.Fatalf("event order: (%d,%d) vs (%d,%d) want %d, keys compare %d", ra, sa, rb, sb, want, got)
	}
	if r, s := decodeEventKey(ka); r != ra || s != sa {
		t.Fatalf("decodeEventKey(eventKey(%d, %d)) = %d, %d", ra, sa, r, s)
	}
}

func FuzzKeyRanges(f *testing.F) {
	for i, x := range keySeeds {
		for j, lo := range keySeeds {
			if (i+j)%3 == 0 {
				f.Add(x, lo, keySeeds[(i*j+1)%len(keySeeds)], uint8(i+j), int64(i))
			}
		}
	}
	f.Fuzz(func(t *testing.T, x, key, end []byte, mode uint8, rev int64) {
		rev &= math.MaxInt64
		switch mode % 4 {
		case 0: // one key
			end = nil
		case 1: // a prefix, as clientv3.WithPrefix sends it
			end = prefixEnd(key)
			if end == nil {
				end = []byte{0}
			}
		case 2: // everything from key on
			end = []byte{0}
		}
		in := inRange(x, key, end)
		if mode%4 == 1 && in != bytes.HasPrefix(x, key) {
			t.Fatalf("prefix %q: %q in range %v but has prefix %v", key, x, in, !in)
		}
		lo, hi := liveBounds(key, end)
		if got := within(liveKey(x), lo, hi); got != in {
			t.Fatalf("live: %q in [%q, %q) is %v, but its key %x within [%x, %x) is %v", x, key, end, in, liveKey(x), lo, hi, got)
		}
		lo, hi = historyBounds(key, end)
		if got := within(historyKey(x, rev), lo, hi); got != in {
			t.Fatalf("history: %q in [%q, %q) is %v, but its key at %d %x within [%x, %x) is %v", x, key, end, in, rev, historyKey(x, rev), lo, hi, got)
		}
	})
}

// inRange is etcd's meaning of a key range: end empty is the one key, end
// "\x00" is every key from key on, else [key, end).
func inRange(x, key, end []byte) bool {
	switch {
	case len(end) == 0:
		return bytes.Equal(x, key)
	case len(end) == 1 && end[0] == 0:
		return bytes.Compare(x, key) >= 0
	}
	return bytes.Compare(x, key) >= 0 && bytes.Compare(x, end) < 0
}

// within reports lo <= k < hi (hi nil: no upper bound).
func within(k, lo, hi []byte) bool {
	return bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0)
}
