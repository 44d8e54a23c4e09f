// Package criolog writes the CRI container log format kubelet reads:
//
//	<RFC3339Nano time> <stdout|stderr> <F|P> <content>\n
//
// One output line becomes one record tagged F (full). A line longer than MaxLine is cut
// into P (partial) records followed by a final F record. Content never contains '\n'.
package criolog

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// MaxLine is the longest content of one record; longer lines are split into partials.
const MaxLine = 16 * 1024

// Sink is where records go. It may be swapped (log reopen) while streams write.
type Sink struct {
	mu sync.Mutex
	w  io.Writer
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// NewSink writes records to w.
func NewSink(w io.Writer) *Sink { return &Sink{w: w, Now: time.Now} }

// Swap replaces the destination and returns the old one.
func (s *Sink) Swap(w io.Writer) io.Writer {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.w
	s.w = w
	return old
}

func (s *Sink) record(stream string, tag byte, content []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return
	}
	var b bytes.Buffer
	b.Grow(len(content) + 48)
	b.WriteString(s.Now().UTC().Format(time.RFC3339Nano))
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteByte(' ')
	b.WriteByte(tag)
	b.WriteByte(' ')
	b.Write(content)
	b.WriteByte('\n')
	_, _ = s.w.Write(b.Bytes())
}

// Stream returns a writer for one stream ("stdout" or "stderr"). Call Close on it at
// EOF to flush a last line that had no newline (as a F record).
func (s *Sink) Stream(name string) *StreamWriter { return &StreamWriter{sink: s, name: name} }

// StreamWriter splits a byte stream into records.
type StreamWriter struct {
	sink *Sink
	name string
	buf  []byte
}

// Write consumes p; it never fails.
func (w *StreamWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			p = nil
		} else {
			w.buf = append(w.buf, p[:i]...)
			p = p[i+1:]
			w.emitFull()
		}
		for len(w.buf) > MaxLine {
			w.sink.record(w.name, 'P', w.buf[:MaxLine])
			w.buf = append(w.buf[:0], w.buf[MaxLine:]...)
		}
	}
	return n, nil
}

func (w *StreamWriter) emitFull() {
	for len(w.buf) > MaxLine {
		w.sink.record(w.name, 'P', w.buf[:MaxLine])
		w.buf = w.buf[MaxLine:]
	}
	w.sink.record(w.name, 'F', bytes.TrimSuffix(w.buf, []byte{'\r'}))
	w.buf = w.buf[:0]
}

// Close flushes a pending unterminated line.
func (w *StreamWriter) Close() error {
	if len(w.buf) > 0 {
		w.emitFull()
	}
	return nil
}
