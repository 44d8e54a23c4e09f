package server

import (
	"net"
	"os"
	"testing"
)

func TestListensFindsOwnSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	own, err := Listens(os.Getpid(), port)
	if err != nil || !own {
		t.Fatalf("Listens(self, %d) = %v, %v; want true", port, own, err)
	}
	free, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if own, err := Listens(os.Getpid(), free); err != nil || own {
		t.Fatalf("Listens(self, free port %d) = %v, %v; want false", free, own, err)
	}
}

func TestCPUTimeAndRSSOfSelf(t *testing.T) {
	if _, err := CPUTime(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if rss, err := RSS(os.Getpid()); err != nil || rss <= 0 {
		t.Fatalf("RSS(self) = %d, %v", rss, err)
	}
}
