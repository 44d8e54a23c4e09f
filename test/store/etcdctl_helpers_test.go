package storee2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// ctl runs etcdctl against one server with one identity.
type ctl struct {
	t    *testing.T
	bin  string
	base []string
}

// newCtl is etcdctl trusting caFile and presenting pair (none when nil).
func newCtl(t *testing.T, bin, endpoint, caFile string, pair *keyPair) *ctl {
	base := []string{"--endpoints", endpoint, "--cacert", caFile, "--dial-timeout=5s", "--command-timeout=20s"}
	if pair != nil {
		base = append(base, "--cert", pair.Cert, "--key", pair.Key)
	}
	return &ctl{t: t, bin: bin, base: base}
}

// with is the same etcdctl reporting to another test.
func (c *ctl) with(t *testing.T) *ctl { return &ctl{t: t, bin: c.bin, base: c.base} }

func (c *ctl) run(stdin string, args ...string) cmdResult {
	start := time.Now()
	r := runCmd(stdin, c.bin, nil, append(append([]string{}, c.base...), args...)...)
	if d := time.Since(start); d > time.Second {
		c.t.Logf("slow: etcdctl %s took %v", strings.Join(args, " "), d.Round(time.Millisecond))
	}
	return r
}

// ok runs etcdctl and fails the test unless it succeeds; it returns stdout.
func (c *ctl) ok(args ...string) string {
	c.t.Helper()
	return c.okIn("", args...)
}

func (c *ctl) okIn(stdin string, args ...string) string {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.Err != nil {
		c.t.Fatalf("etcdctl %s failed:\n%s", strings.Join(args, " "), r)
	}
	return r.Stdout
}

// fails runs etcdctl, fails the test if it succeeds, and returns its stderr.
func (c *ctl) fails(args ...string) string {
	c.t.Helper()
	r := c.run("", args...)
	if r.Err == nil {
		c.t.Fatalf("etcdctl %s succeeded but must fail:\n%s", strings.Join(args, " "), r)
	}
	return r.Stderr
}

// expect runs etcdctl and compares stdout with want exactly.
func (c *ctl) expect(want string, args ...string) {
	c.t.Helper()
	if got := c.ok(args...); got != want {
		c.t.Fatalf("etcdctl %s:\n got %q\nwant %q", strings.Join(args, " "), got, want)
	}
}

// jsonOut runs etcdctl -w json and decodes stdout into v.
func (c *ctl) jsonOut(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "-w", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("decode etcdctl %s -w json output %q: %v", strings.Join(args, " "), out, err)
	}
}

// put writes key=val and returns the revision of the write.
func (c *ctl) put(key, val string, extra ...string) int64 {
	c.t.Helper()
	var r jsonResp
	c.jsonOut(&r, append([]string{"put", key, val}, extra...)...)
	if r.Header.Revision == 0 {
		c.t.Fatalf("put %s: response header has no revision", key)
	}
	return r.Header.Revision
}

// get reads with -w json.
func (c *ctl) get(args ...string) jsonResp {
	c.t.Helper()
	var r jsonResp
	c.jsonOut(&r, append([]string{"get"}, args...)...)
	return r
}

// JSON shapes of etcdctl -w json (protobuf JSON of etcdserverpb; bytes are base64).
type jsonHeader struct {
	ClusterID uint64 `json:"cluster_id"`
	MemberID  uint64 `json:"member_id"`
	Revision  int64  `json:"revision"`
	RaftTerm  uint64 `json:"raft_term"`
}

type jsonKV struct {
	Key            []byte `json:"key"`
	Value          []byte `json:"value"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
	Lease          int64  `json:"lease"`
}

func (kv jsonKV) String() string {
	return fmt.Sprintf("%s=%q(create=%d mod=%d ver=%d lease=%d)", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
}

type jsonResp struct {
	Header jsonHeader `json:"header"`
	Kvs    []jsonKV   `json:"kvs"`
	More   bool       `json:"more"`
	Count  int64      `json:"count"`
}

// keys lists the keys of a range response in order.
func (r jsonResp) keys() []string {
	var ks []string
	for _, kv := range r.Kvs {
		ks = append(ks, string(kv.Key))
	}
	return ks
}

// jsonEvent: type 0 is PUT (omitted in JSON), 1 is DELETE.
type jsonEvent struct {
	Type   int     `json:"type"`
	Kv     jsonKV  `json:"kv"`
	PrevKv *jsonKV `json:"prev_kv"`
}

func (e jsonEvent) String() string {
	typ := "PUT"
	if e.Type == 1 {
		typ = "DELETE"
	}
	s := typ + " " + e.Kv.String()
	if e.PrevKv != nil {
		s += " prev " + e.PrevKv.String()
	}
	return s
}

type jsonWatch struct {
	Header          jsonHeader  `json:"Header"`
	Events          []jsonEvent `json:"Events"`
	CompactRevision int64       `json:"CompactRevision"`
	Canceled        bool        `json:"Canceled"`
	Created         bool        `json:"Created"`
}

// watchStream decodes the JSON watch responses etcdctl prints, one per
// line, into a channel that is closed at EOF.
func watchStream(r io.Reader) <-chan jsonWatch {
	ch := make(chan jsonWatch, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "{") {
				continue // etcdctl's own messages
			}
			var w jsonWatch
			if err := json.Unmarshal([]byte(line), &w); err != nil {
				continue
			}
			ch <- w
		}
	}()
	return ch
}

// nextEvents collects n events (flattening responses) or fails after timeout.
func nextEvents(t *testing.T, ch <-chan jsonWatch, n int, timeout time.Duration, skip func(jsonEvent) bool) []jsonEvent {
	t.Helper()
	var evs []jsonEvent
	deadline := time.After(timeout)
	for len(evs) < n {
		select {
		case w, ok := <-ch:
			if !ok {
				t.Fatalf("watch output ended after %d of %d events: %v", len(evs), n, evs)
			}
			if w.Canceled {
				t.Fatalf("watch canceled (compact revision %d) after %d of %d events: %v", w.CompactRevision, len(evs), n, evs)
			}
			for _, e := range w.Events {
				if skip == nil || !skip(e) {
					evs = append(evs, e)
				}
			}
		case <-deadline:
			t.Fatalf("watch: %d of %d events after %v: %v", len(evs), n, timeout, evs)
		}
	}
	return evs
}

// checkEvent compares one watch event with what is expected.
func checkEvent(t *testing.T, e jsonEvent, del bool, key, val string, modRev int64, prevVal *string) {
	t.Helper()
	if (e.Type == 1) != del || string(e.Kv.Key) != key || e.Kv.ModRevision != modRev {
		t.Fatalf("event %v: want delete=%v key=%s mod_revision=%d", e, del, key, modRev)
	}
	if !del && string(e.Kv.Value) != val {
		t.Fatalf("event %v: want value %q", e, val)
	}
	switch {
	case prevVal == nil && e.PrevKv != nil:
		t.Fatalf("event %v: want no prev_kv", e)
	case prevVal != nil && (e.PrevKv == nil || string(e.PrevKv.Value) != *prevVal):
		t.Fatalf("event %v: want prev_kv value %q", e, *prevVal)
	}
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
