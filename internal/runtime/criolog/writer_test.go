package criolog

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRecords(t *testing.T) {
	var out bytes.Buffer
	s := NewSink(&out)
	s.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }
	w := s.Stream("stdout")
	w.Write([]byte("hello\nwor"))
	w.Write([]byte("ld\nlast"))
	w.Close()
	want := "2026-01-02T03:04:05.000000006Z stdout F hello\n" +
		"2026-01-02T03:04:05.000000006Z stdout F world\n" +
		"2026-01-02T03:04:05.000000006Z stdout F last\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestLongLineSplitsIntoPartials(t *testing.T) {
	var out bytes.Buffer
	s := NewSink(&out)
	w := s.Stream("stderr")
	w.Write([]byte(strings.Repeat("x", MaxLine+10) + "\n"))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || strings.Fields(lines[0])[2] != "P" || strings.Fields(lines[1])[2] != "F" {
		t.Fatalf("got %d lines: %q", len(lines), out.String()[:80])
	}
}
