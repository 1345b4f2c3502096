// Command infercrane-pause holds a Pod sandbox's namespaces open: it blocks until SIGINT or
// SIGTERM and exits 0, and as PID 1 of the sandbox it reaps the zombies reparented to it.
// The upstream pause image cannot be pulled here (no registry), so the node runs this one.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"infercrane/hack/tools/infercrane-node/internal/version"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Printf("infercrane-pause %s\n", version.Version)
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "infercrane-pause: warning: not PID 1, so orphans are not reparented to it")
	}
	reap() // whatever exited before SIGCHLD was ours to catch
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		reap()
	}
}

// reap collects every exited child; one SIGCHLD may stand for several exits.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
