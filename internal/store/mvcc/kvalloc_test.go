package mvcc

import (
	"bytes"
	"fmt"
	"testing"
)

// TestKVAllocOwnsItsBytes: the KeyValues of one read are copies that
// nothing changes later — not the reader reusing its buffers, not an
// append through one of them, not the next chunk — across chunk boundaries
// and for values too large to share a chunk.
func TestKVAllocOwnsItsBytes(t *testing.T) {
	var a kvAlloc
	keyBuf, valBuf := make([]byte, 0, 64), make([]byte, 0, kvAllocMaxBytes)
	type want struct{ key, value []byte }
	var wants []want
	var got [][2][]byte
	for i := range 3000 {
		size := i % 700
		if i%997 == 0 {
			size = kvAllocMaxBytes/4 + 1 // its own allocation
		}
		keyBuf = fmt.Appendf(keyBuf[:0], "k/%05d", i)
		valBuf = append(valBuf[:0], bytes.Repeat([]byte{byte(i)}, size)...)
		e := entry{key: keyBuf, typ: recordPut, create: int64(i), mod: int64(i + 1), version: 1, value: valBuf}
		kv := a.keyValue(&e, false)
		wants = append(wants, want{bytes.Clone(keyBuf), bytes.Clone(valBuf)})
		got = append(got, [2][]byte{kv.Key, kv.Value})
		if kv.CreateRevision != int64(i) || kv.ModRevision != int64(i+1) || kv.Version != 1 {
			t.Fatalf("kv %d metadata %v", i, kv)
		}
		_ = append(kv.Key, 'x') // must not reach the next copy
		_ = append(kv.Value, 'y')
		for j := range keyBuf { // the reader reuses its buffers
			keyBuf[j] = '!'
		}
		for j := range valBuf {
			valBuf[j] = '!'
		}
	}
	for i, w := range wants {
		if !bytes.Equal(got[i][0], w.key) || len(got[i][1]) != len(w.value) || !bytes.Equal(got[i][1], w.value) {
			t.Fatalf("kv %d changed after it was made: key %q want %q, value of %d bytes", i, got[i][0], w.key, len(got[i][1]))
		}
	}
	keysOnly := a.keyValue(&entry{key: []byte("k"), typ: recordPut, value: []byte("v")}, true)
	if keysOnly.Value != nil || string(keysOnly.Key) != "k" {
		t.Fatalf("keys only: %v", keysOnly)
	}
}
