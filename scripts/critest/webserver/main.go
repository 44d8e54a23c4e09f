// Command webserver stands in for the nginx and httpd images critest runs. It behaves as
// critest checks those servers: it serves -root on -port, logs a startup line naming
// itself (critest looks for "httpd" in the httpd container's log), writes its pid to
// /var/run/<name>.pid, and runs as "<name>: master process" (critest greps
// /proc/1/cmdline for "master process"; pidof finds it by its file name).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	name := filepath.Base(os.Args[0])
	if !strings.Contains(os.Args[0], "master process") {
		// Re-exec under the title nginx uses for its master; the file name (comm) stays.
		exe, err := os.Executable()
		if err == nil {
			err = syscall.Exec(exe, append([]string{name + ": master process"}, os.Args[1:]...), os.Environ())
		}
		log.Printf("%s: cannot set process title: %v", name, err)
	} else {
		exe, _ := os.Executable()
		name = filepath.Base(exe)
	}
	port := flag.Int("port", 80, "TCP port")
	root := flag.String("root", "/www", "document root")
	flag.Parse()
	pidFile := "/var/run/" + name + ".pid"
	os.MkdirAll(filepath.Dir(pidFile), 0o755)
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
		log.Printf("%s: write pid file: %v", name, err)
	}
	srv := &http.Server{Addr: fmt.Sprintf(":%d", *port), Handler: http.FileServer(http.Dir(*root))}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
		<-sig
		srv.Shutdown(context.Background())
	}()
	fmt.Fprintf(os.Stderr, "%s: serving %s on :%d\n", name, *root, *port)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
