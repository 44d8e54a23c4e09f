// Command pause is the infrastructure ("sandbox") process of a pod: it holds
// the pod's namespaces open and does nothing else.
//
// It stands in for registry.k8s.io/pause, which cannot be pulled here. Like
// the upstream one it exits 0 on SIGINT or SIGTERM, reaps any child that is
// re-parented to it (it is PID 1 of the pod's PID namespace when that is
// shared), and with -v prints a version and exits 0: kubeadm upgrade's
// health check runs the pause image with -v as a Job that must complete.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (quantykube stand-in for registry.k8s.io/pause)")
		os.Exit(0)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
