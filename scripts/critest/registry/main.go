// Command registry serves critest's images offline: it builds stand-ins from local files
// (package standin), pushes them into an in-memory registry (go-containerregistry's
// pkg/registry) under the repository paths critest pulls, and serves them on -addr until
// killed. The runtime reaches it through registry mirrors, so the images keep their
// upstream names.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/quantyroot/quantykube/scripts/critest/standin"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "listen address")
	root := flag.String("busybox-root", "", "directory with the busybox root filesystem (required)")
	nnp := flag.String("nonewprivs", "", "nonewprivs probe binary (required)")
	pause := flag.String("pause", "", "pause binary (required)")
	web := flag.String("webserver", "", "nginx/httpd stand-in binary (required)")
	ready := flag.String("ready-file", "", "file written once every image is pushed")
	flag.Parse()
	if *root == "" || *nnp == "" || *pause == "" || *web == "" {
		fmt.Fprintln(os.Stderr, "registry: -busybox-root, -nonewprivs, -pause and -webserver are required (scripts/critest.sh passes them)")
		os.Exit(2)
	}
	files := standin.Files{BusyboxRoot: *root, NonewPrivs: *nnp, Pause: *pause, Webserver: *web}
	if err := run(*addr, files, *ready); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(addr string, files standin.Files, ready string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	n, err := standin.Push(addr, files)
	if err != nil {
		return err
	}
	slog.Info("stand-in images pushed", "addr", addr, "repositories", n)
	if ready != "" {
		if err := os.WriteFile(ready, []byte(addr+"\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
	}
	select {}
}
