// Command infercrane-gpu-device-plugin advertises fake GPUs to the kubelet (see
// internal/deviceplugin) until SIGTERM or SIGINT, then removes its socket and exits 0.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"infercrane/hack/tools/infercrane-node/internal/deviceplugin"
	"infercrane/hack/tools/infercrane-node/internal/version"
)

// pollInterval is how soon a kubelet restart is noticed.
const pollInterval = time.Second

func main() {
	config, err := deviceplugin.ParseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "infercrane-gpu-device-plugin: error: %v\n", err)
		os.Exit(2)
	}
	if config.ShowVersion {
		fmt.Printf("infercrane-gpu-device-plugin %s\n", version.Version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	deviceplugin.Run(ctx, config, os.Stdout, pollInterval)
}
