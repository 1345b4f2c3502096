package standin

// The lifecycle a kubelet sees: refuse a bad argv before listening (exit 2), listen, turn
// ready after the load delay, and on SIGTERM go unready at once, drain, leave a termination
// message and exit 0 well inside the Pod's grace period.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"infercrane/hack/tools/infercrane-node/internal/version"
)

// closeTimeout bounds how long in-flight requests may hold the exit once draining is over.
const closeTimeout = 5 * time.Second

// Main runs the stand-in and returns its exit code.
func Main(argv []string, stdout, stderr io.Writer) int {
	launch, err := Parse(argv, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	say := func(format string, a ...any) {
		fmt.Fprintf(stdout, "infercrane-standin: "+format+"\n", a...)
	}
	address := net.JoinHostPort(launch.Host, strconv.Itoa(launch.Port))
	listener, err := net.Listen("tcp", address)
	if err != nil {
		fmt.Fprintf(stderr, "infercrane-standin: cannot listen on %s: %v\n", address, err)
		return 1
	}
	// Registered before anything can be ready, so no SIGTERM is lost to the default action.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)

	server := NewServer(launch, argv, Observe(os.LookupEnv), time.Now())
	httpServer := &http.Server{Handler: server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- httpServer.Serve(listener) }()
	say("listening on %s (%s, model %s, version %s)", address, launch.Form, launch.Model, version.Version)

	load := time.AfterFunc(seconds(launch.LoadSeconds), func() {
		server.loaded.Store(true)
		say("loaded %s", launch.Model)
	})

	select {
	case err := <-served:
		fmt.Fprintf(stderr, "infercrane-standin: serving stopped: %v\n", err)
		return 1
	case received := <-signals:
		load.Stop()
		server.draining.Store(true)
		say("%s received; not ready, draining for %gs", signalName(received), launch.ShutdownSeconds)
		time.Sleep(seconds(launch.ShutdownSeconds))
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := httpServer.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(stderr, "infercrane-standin: shutdown: %v\n", err)
		}
		writeTerminationMessage(launch.TerminationLog, signalName(received), time.Now())
		say("exiting 0")
		return 0
	}
}

// writeTerminationMessage fills the file the kubelet mounts for it. It never creates one: run
// on a host, the default /dev/termination-log is not ours to make.
func writeTerminationMessage(path, signal string, at time.Time) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = fmt.Fprintf(f, "received %s at %s\n", signal, at.UTC().Format(time.RFC3339))
}

func signalName(s os.Signal) string {
	if s == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
