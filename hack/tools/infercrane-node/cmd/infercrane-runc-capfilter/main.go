// Command infercrane-runc-capfilter is the OCI runtime dockerd is given for Kind's nodes: it
// drops from the spec runc is about to read every capability this process's bounding set
// lacks (internal/capfilter says why), then execs the real runc with the same arguments.
// The real runc is Debian's /usr/sbin/runc (hack/host-packages.sh), or $INFERCRANE_RUNC.
package main

import (
	"fmt"
	"os"
	"syscall"

	"infercrane/hack/tools/infercrane-node/internal/capfilter"
)

const defaultRunc = "/usr/sbin/runc"

func main() {
	runc := os.Getenv("INFERCRANE_RUNC")
	if runc == "" {
		runc = defaultRunc
	}
	if err := filter(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "infercrane-runc-capfilter: %v\n", err)
		os.Exit(1)
	}
	err := syscall.Exec(runc, append([]string{runc}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "infercrane-runc-capfilter: exec %s: %v\n", runc, err)
	os.Exit(1)
}

func filter(args []string) error {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	bounding, err := capfilter.Bounding(string(status))
	if err != nil {
		return err
	}
	return capfilter.Apply(args, bounding)
}
